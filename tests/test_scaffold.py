"""Issue 33: a block worth its tokens. Scaffold-only assets are `empty="true"` and never inlined, element text
carries only the entities XML needs, and the budget goes to real content first."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lxml import etree

from conftest import run_leslie
from leslie.context.block import CommandOutput, render_context
from leslie.context.render import xml_element_text
from leslie.context.scaffold import LEGACY_TEMPLATES, comment_lines, is_scaffold, scaffold_lines
from leslie.inject.policy import tokens_of
from leslie.ops.threads import RefSpec, retitle, spawn
from leslie.store.repository import Repository
from test_context import parse_valid

OWN = "thread-own"
REAL_PLAN = "# Plan: rotate the keys\n\n- [ ] write the rotation job\n- [x] decide the cadence: 90 days\n"


def thread_file(repo: Repository, thread: str, name: str) -> Path:
    return repo.root / ".leslie" / "threads" / thread / name


def asset(root: etree._Element, path: str) -> etree._Element:
    found = [e for e in root.iter("asset") if e.get("path") == path]
    assert found, path
    return found[0]


def legacy(name: str, title: str, thread: str, intent: str) -> str:
    return (LEGACY_TEMPLATES[name].replace("$title", title).replace("$thread", thread)
            .replace("$intent_line", intent))


@pytest.fixture
def fresh(repo: Repository) -> Repository:
    """OWN references one freshly spawned thread, `thread-ref`."""
    spawn(repo, "Background work", thread_id="thread-ref", title="Key rotation")
    spawn(repo, "Own work\nsecond line", thread_id=OWN, refs=[RefSpec("thread-ref")])
    return repo


def test_spawned_assets_are_empty_and_never_inlined(fresh: Repository) -> None:
    root = parse_valid(render_context(fresh, OWN, budget=100_000))
    for thread in (OWN, "thread-ref"):
        for name in ("plan.md", "progress.md"):
            element = asset(root, f".leslie/threads/{thread}/{name}")
            assert element.get("empty") == "true"
            assert element.get("tokens") is None and not (element.text or "").strip()
    assert root.get("inlined_tokens") == "0"
    doc = json.loads(render_context(fresh, OWN, fmt="json", budget=100_000))
    assert all(a.get("empty") is True for a in doc["assets"][:2])


def test_new_templates_carry_no_instruction_comment(fresh: Repository) -> None:
    for name in ("plan.md", "progress.md"):
        text = thread_file(fresh, OWN, name).read_text(encoding="utf-8")
        assert "<!--" not in text and text.startswith(("# Plan: Own work", "# Progress: Own work"))


@pytest.mark.parametrize("name", ["plan.md", "progress.md"])
def test_old_style_scaffold_with_whitespace_changes_is_empty(fresh: Repository, name: str) -> None:
    old = legacy(name, "Key rotation", "thread-ref", "Background work")
    variants = [old, old.replace("\n", "  \n").replace(" -->", "   -->") + "\n\n\n", "\n" + old.rstrip() + "\t",
                old.replace("\n", "\r\n")]
    for text in variants:
        thread_file(fresh, "thread-ref", name).write_text(text, encoding="utf-8", newline="")
        root = parse_valid(render_context(fresh, OWN, cache=False, budget=100_000))
        element = asset(root, f".leslie/threads/thread-ref/{name}")
        assert element.get("empty") == "true", repr(text)
        assert element.get("tokens") is None


@pytest.mark.parametrize("name", ["plan.md", "progress.md"])
def test_one_real_line_added_is_inlined_exactly(fresh: Repository, name: str) -> None:
    for scaffold in (thread_file(fresh, "thread-ref", name).read_text(encoding="utf-8"),
                     legacy(name, "Key rotation", "thread-ref", "Background work")):
        text = scaffold + "- 2026-11-02: the rotation job runs nightly\n"
        thread_file(fresh, "thread-ref", name).write_text(text, encoding="utf-8")
        root = parse_valid(render_context(fresh, OWN, cache=False, budget=100_000))
        element = asset(root, f".leslie/threads/thread-ref/{name}")
        assert element.get("empty") is None
        assert element.text == text and int(element.get("tokens")) == tokens_of(len(text.encode()))


def test_a_retitled_thread_keeps_an_empty_scaffold(fresh: Repository) -> None:
    retitle(fresh, "thread-ref", "Rotate signing keys")
    root = parse_valid(render_context(fresh, OWN, cache=False, budget=100_000))
    assert asset(root, ".leslie/threads/thread-ref/plan.md").get("empty") == "true"


def test_a_repository_template_override_is_scaffold_too(repo: Repository) -> None:
    templates = repo.root / ".leslie" / "templates"
    templates.mkdir(parents=True, exist_ok=True)
    (templates / "plan.md").write_text("# $title\n\n## Goal\n\n## Steps\n- [ ] \n\nOwner: $thread\n", encoding="utf-8")
    spawn(repo, "Own work", thread_id=OWN)
    assert "## Goal" in thread_file(repo, OWN, "plan.md").read_text(encoding="utf-8")
    root = parse_valid(render_context(repo, OWN, cache=False, budget=100_000))
    assert asset(root, f".leslie/threads/{OWN}/plan.md").get("empty") == "true"


def test_the_budget_goes_to_real_content_first(repo: Repository) -> None:
    """40 freshly spawned references (half of them in the old form) and one real plan: the plan is inlined."""
    refs = []
    for i in range(40):
        target = f"thread-fresh{i:02d}"
        spawn(repo, f"Fresh work {i}", thread_id=target)
        if i % 2:
            for name in ("plan.md", "progress.md"):
                thread_file(repo, target, name).write_text(legacy(name, f"Fresh work {i}", target, f"Fresh work {i}"),
                                                           encoding="utf-8")
        refs.append(RefSpec(target))
    spawn(repo, "Real work", thread_id="thread-real")
    real = REAL_PLAN * 3  # 60 tokens and more
    thread_file(repo, "thread-real", "plan.md").write_text(real, encoding="utf-8")
    spawn(repo, "Own work", thread_id=OWN, refs=[*refs, RefSpec("thread-real")])
    for budget in (100, 1000, 4000):
        root = parse_valid(render_context(repo, OWN, cache=False, budget=budget))
        plan = asset(root, ".leslie/threads/thread-real/plan.md")
        assert plan.text == real and plan.get("omitted") is None
        assert int(root.get("inlined_tokens")) == int(plan.get("tokens"))
        empties = [e for e in root.iter("asset") if e.get("empty") == "true"]
        assert len(empties) == 2 * 41 + 1  # own plan and progress, the 40 fresh threads', the real progress
        assert "<!--" not in etree.tostring(root, encoding="unicode")


# Entities an element's text may hold (issue 33): `&amp;`, `&lt;`, `]]&gt;` and the CR reference.
ENTITY = re.compile(r"&(#\d+|#x[0-9a-fA-F]+|[a-zA-Z]+);")


def test_element_text_carries_only_the_entities_xml_needs(fresh: Repository) -> None:
    text = 'key_ids=["2025", \'x\'] a > b\nvite build && vite preview\n<b> ]]> ]]]> tab\there\r\nend\n'
    thread_file(fresh, "thread-ref", "plan.md").write_text(text, encoding="utf-8", newline="")
    block = render_context(fresh, OWN, cache=False, budget=100_000)
    start = block.index('plan.md" tokens=')
    body = block[block.index(">", start) + 1:block.index("</asset>", start)]
    assert 'key_ids=["2025", \'x\'] a > b' in body
    assert "vite build &amp;&amp; vite preview" in body
    assert sorted(set(ENTITY.findall(body))) == ["#13", "amp", "gt", "lt"]
    assert body.count("&gt;") == 2 and body.count("]]&gt;") == 2  # only where `]]>` would close a CDATA
    assert asset(parse_valid(block), ".leslie/threads/thread-ref/plan.md").text == text
    # Attribute values keep their full escaping.
    spawn(fresh, 'Quote " and \' and > in an intent', thread_id="thread-quote", title='A "quoted" title')
    head = render_context(fresh, "thread-quote", cache=False).split("\n", 1)[0]
    assert 'title="A &#34;quoted&#34; title"' in head and "&gt;" in head


XML_CHAR = st.characters(codec="utf-8", exclude_categories=("Cs",))


@settings(max_examples=200, deadline=None)
@given(st.text(XML_CHAR) | st.sampled_from(["]]>", "]]]]>>", "a]]", "]", "\r\r\n", "&lt;", "<![CDATA[x]]>"]))
def test_minimal_escaping_decodes_to_the_same_text(text: str) -> None:
    carriable = "".join(c for c in text if c in "\t\n\r" or (c >= " " and c not in "\ufffe\uffff"))
    encoded = xml_element_text(carriable)
    assert "]]>" not in encoded and "\r" not in encoded
    parser = etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False)
    assert (etree.fromstring(f"<a>{encoded}</a>".encode(), parser).text or "") == carriable


HOSTILE = st.lists(st.text(st.characters(codec="utf-8", exclude_categories=()), max_size=8) | st.sampled_from(
    ["]]>", "\x00", "\x1b[31m", "\u202e", "\u2066", "\ufffe", "\ud800", "\r", "&", "<", "<!--", "-->"]),
    max_size=25).map("".join)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(HOSTILE)
def test_hostile_text_is_exact_or_not_inlined_and_the_block_stays_valid(fresh: Repository, text: str) -> None:
    data = text.encode("utf-8", "surrogatepass")  # a lone surrogate becomes bytes no UTF-8 reader accepts
    path = thread_file(fresh, "thread-ref", "plan.md")
    path.write_bytes(data)
    commands = [CommandOutput("hostile", 0, text.encode("utf-8", "replace").decode("utf-8"))]
    root = parse_valid(render_context(fresh, OWN, cache=False, budget=100_000, commands=commands))
    element = asset(root, ".leslie/threads/thread-ref/plan.md")
    if element.get("tokens") is not None:
        assert (element.text or "").encode("utf-8") == data  # decoded text equals the file, byte for byte
    elif element.get("empty") == "true":
        assert is_scaffold("plan.md", text)
    else:
        assert element.get("not_inlined") == "binary"
        assert any(c in text for c in "\x00\ufffe\uffff") or any(
            "\ud800" <= c <= "\udfff" or (c < " " and c not in "\t\n\r") for c in text)


def test_hostile_text_in_the_own_plan_through_the_cli(fresh: Repository) -> None:
    hostile = "]]> <script>alert(1)</script> \u202eevil\u202c & done\n"
    thread_file(fresh, OWN, "plan.md").write_text(hostile, encoding="utf-8")
    result = run_leslie("context", "--thread", OWN, "--budget", "4000", cwd=fresh.root)
    assert result.code == 0, result.stderr
    assert "]]&gt; &lt;script>alert(1)&lt;/script>" in result.stdout
    assert asset(parse_valid(result.stdout), f".leslie/threads/{OWN}/plan.md").text == hostile


def test_scaffold_lines_and_comment_lines() -> None:
    old = legacy("progress.md", "T", "thread-x", "i")
    text = old + "\n## 2026-11-02\n- # Progress: not the heading\n"
    assert scaffold_lines("progress.md", text) == {1, 3, 4}
    assert comment_lines("progress.md", text) == {3, 4}
    assert not is_scaffold("progress.md", text)
    assert is_scaffold("progress.md", "# Progress: Anything at all\n") and is_scaffold("plan.md", " \n\n")
    assert not is_scaffold("design.md", "")
    assert not is_scaffold("plan.md", "# Plan: x\n- [ ] a step\n")


def test_text_that_escaping_makes_longer_never_stops_the_render(fresh: Repository) -> None:
    """A file at the inline cap made of `&` escapes to five times its size, over what the template's sandbox
    lets one value be: it is cut (at a line, with its marker) so that the block still renders."""
    from leslie.context.files import MAX_INLINE_BYTES
    from leslie.context.loading import MAX_TEXT_CHARS, escaped_chars

    text = ("&" * 1023 + "\n") * (MAX_INLINE_BYTES // 1024)
    thread_file(fresh, "thread-ref", "plan.md").write_text(text, encoding="utf-8")
    root = parse_valid(render_context(fresh, OWN, cache=False, budget=1_000_000))
    element = asset(root, ".leslie/threads/thread-ref/plan.md")
    assert element.get("omitted") is not None and text.startswith(element.text or "x")
    assert MAX_TEXT_CHARS - 5 * 1024 < escaped_chars(element.text or "") <= MAX_TEXT_CHARS


def test_scaffold_is_marked_empty_after_the_budget_is_spent(repo: Repository) -> None:
    """Real content spends the budget first; the fresh references after it are still marked, never inlined."""
    spawn(repo, "Real work", thread_id="thread-aaa")
    thread_file(repo, "thread-aaa", "plan.md").write_text(REAL_PLAN * 40, encoding="utf-8")
    for i in range(3):
        spawn(repo, f"Fresh {i}", thread_id=f"thread-fresh{i}")
        for name in ("plan.md", "progress.md"):  # older than the real plan: after it in the budget's order
            os.utime(thread_file(repo, f"thread-fresh{i}", name), (1_000_000_000, 1_000_000_000))
    spawn(repo, "Own work", thread_id=OWN, refs=[RefSpec(t) for t in ("thread-aaa", "thread-fresh0",
                                                                       "thread-fresh1", "thread-fresh2")])
    root = parse_valid(render_context(repo, OWN, cache=False, budget=200))
    assert asset(root, ".leslie/threads/thread-aaa/plan.md").get("omitted") is not None
    for i in range(3):
        for name in ("plan.md", "progress.md"):
            element = asset(root, f".leslie/threads/thread-fresh{i}/{name}")
            assert element.get("empty") == "true" and element.get("tokens") is None
    assert int(root.get("inlined_tokens")) <= 200


def test_tokens_by_level_counts_markup_only_now_that_quotes_are_literal(fresh: Repository) -> None:
    from leslie.context.files import tokens_by_level

    thread_file(fresh, OWN, "plan.md").write_text('# Plan\nx tokens="99999" y > z tokens="5"\n', encoding="utf-8")
    block = render_context(fresh, OWN, cache=False, budget=4000)
    assert ' tokens="99999"' in block  # literal in the element text
    own = int(asset(parse_valid(block), f".leslie/threads/{OWN}/plan.md").get("tokens"))
    assert tokens_by_level(block)["own"] == own and tokens_by_level(block)["refs"] == 0


def test_a_scaffold_reflowed_across_lines_is_empty_for_its_own_thread(fresh: Repository) -> None:
    """Whitespace aside, line breaks included: compared with what spawn wrote for that thread."""
    path = thread_file(fresh, "thread-ref", "plan.md")
    old = legacy("plan.md", "Key rotation", "thread-ref", "Background work")
    path.write_text(" ".join(old.split()) + "\n", encoding="utf-8")  # the whole scaffold on one line
    root = parse_valid(render_context(fresh, OWN, cache=False, budget=100_000))
    assert asset(root, ".leslie/threads/thread-ref/plan.md").get("empty") == "true"
    path.write_text(" ".join(old.split()) + " rotate nightly\n", encoding="utf-8")
    root = parse_valid(render_context(fresh, OWN, cache=False, budget=100_000))
    assert asset(root, ".leslie/threads/thread-ref/plan.md").get("tokens") is not None
    reflowed = old.replace("\n     ", " ").replace("Background work", "another intent")  # not this thread's
    path.write_text(reflowed, encoding="utf-8")
    root = parse_valid(render_context(fresh, OWN, cache=False, budget=100_000))
    assert asset(root, ".leslie/threads/thread-ref/plan.md").get("tokens") is not None
