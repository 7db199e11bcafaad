"""Issue 14: the block says who and what, inlines content under `[context] budget_tokens`, marks changes."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lxml import etree

from conftest import run_leslie
from leslie.context.block import build_context, render_context
from leslie.context.files import MAX_INLINE_BYTES, cut_head, cut_tail, lines_of
from leslie.context.scaffold import is_scaffold
from leslie.inject import injector
from leslie.inject.policy import tokens_of
from leslie.ops.objectives import create_objective
from leslie.ops.threads import RefSpec, set_status, spawn
from leslie.store.repository import Repository
from test_context import parse_valid

OWN = "thread-own"
API = "thread-api"
DOCS = "thread-docs"
DEEP = "thread-deep"


def configure(repo: Repository, budget: int) -> None:
    (repo.root / ".leslie" / "config.toml").write_text(f"[context]\nbudget_tokens = {budget}\n", encoding="utf-8")


def folder(repo: Repository, thread: str) -> Path:
    return repo.root / ".leslie" / "threads" / thread


def write(repo: Repository, thread: str, rel: str, data: str | bytes, age: float = 0.0) -> Path:
    path = folder(repo, thread) / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(data, str):
        path.write_bytes(data.encode("utf-8"))
    else:
        path.write_bytes(data)
    if age:
        stamp = time.time() - age
        os.utime(path, (stamp, stamp))
    return path


@pytest.fixture
def state(repo: Repository) -> Repository:
    """OWN (objective "Login") references all of API and only design/ of DOCS; DOCS references DEEP."""
    create_objective(repo, "Login", objective_id="obj-login")
    spawn(repo, "Deep background", thread_id=DEEP, title="Deep")
    spawn(repo, "Design the API", thread_id=API, title="API design", objective="obj-login")
    spawn(repo, "Write docs", thread_id=DOCS, title="Docs", refs=[RefSpec(DEEP)])
    spawn(repo, "Fix the login bug\nwith a second line", thread_id=OWN, objective="obj-login",
          title="Login fix", refs=[RefSpec(API), RefSpec.parse(f"{DOCS}:design")])
    set_status(repo, API, "done")
    return repo


def element(root: etree._Element, path: str) -> etree._Element | None:
    found = [e for e in root.iter("asset", "file") if e.get("path") == path]
    return found[0] if found else None


def inlined(root: etree._Element) -> dict[str, str]:
    return {e.get("path"): e.text or "" for e in root.iter("asset", "file") if e.get("tokens") is not None}


def test_who_and_what(state: Repository) -> None:
    configure(state, 0)
    root = parse_valid(render_context(state, OWN))
    assert (root.get("title"), root.get("status"), root.get("objective_title")) == ("Login fix", "active", "Login")
    assert root.get("intent") == "Fix the login bug\nwith a second line"
    refs = {r.get("thread"): (r.get("title"), r.get("status")) for r in root.findall("ref")}
    assert refs == {API: ("API design", "done"), DOCS: ("Docs", "active")}
    assert inlined(root) == {}  # budget 0: paths only
    document = json.loads(render_context(state, OWN, fmt="json"))
    assert document["objective_title"] == "Login" and document["refs"][0]["status"] == "done"


HOSTILE = ("a ]]> b & <c> \"d\" 'e'\r\nTAB\there\r\n<![CDATA[x]]>\n&amp; \u2028 \U0001f600 \x85\n"
           "last line without newline")


def test_inline_content_is_exact_and_within_budget(state: Repository) -> None:
    configure(state, 100_000)
    write(state, API, "design/api.md", HOSTILE)
    write(state, DOCS, "design/spec.md", "spec\n")
    write(state, OWN, "plan.md", "# My plan\n- [ ] one\n")
    text = render_context(state, OWN)
    root = parse_valid(text)
    shown = inlined(root)
    assert shown[f".leslie/threads/{API}/design/api.md"] == HOSTILE
    assert shown[f".leslie/threads/{DOCS}/design/spec.md"] == "spec\n"
    assert shown[f".leslie/threads/{OWN}/plan.md"] == "# My plan\n- [ ] one\n"
    for path, content in shown.items():
        assert int(element(root, path).get("tokens")) == tokens_of(len(content.encode()))
    assert sum(int(e.get("tokens")) for e in root.iter() if e.get("tokens")) == int(root.get("inlined_tokens"))
    # Never outside a scope, never a second level: DOCS is scoped to design/, DEEP is not referenced.
    assert not any(p.startswith(f".leslie/threads/{DOCS}/plan") or DEEP in p for p in shown)
    via_cli = run_leslie("context", "--thread", OWN, "--format", "json", cwd=state.root)
    assert via_cli.code == 0, via_cli.stderr
    ref = json.loads(via_cli.stdout)["refs"][0]
    files = next(a for a in ref["assets"] if a["type"] == "design")["files"]
    assert files[0]["content"]["text"] == HOSTILE


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=300))
def test_any_carriable_text_round_trips_or_is_not_inlined(state: Repository, text: str) -> None:
    configure(state, 100_000)
    path = write(state, API, "plan.md", text)
    root = parse_valid(render_context(state, OWN, cache=False))
    got = element(root, f".leslie/threads/{API}/plan.md")
    assert got is not None
    if got.get("tokens") is not None:
        assert (got.text or "") == text
    elif got.get("empty") == "true":  # spawn's scaffold, or blanks, carry nothing (issue 33): never inlined
        assert is_scaffold("plan.md", text)
    else:
        carriable = all(c in "\t\n\r" or " " <= c not in "\ufffe\uffff" for c in text)
        assert got.get("not_inlined") == "binary" and not carriable
    path.unlink()


def test_binary_oversized_and_linked_files_are_never_inlined(state: Repository, tmp_path: Path) -> None:
    configure(state, 1_000_000)
    write(state, API, "plan.md", b"text\x00with NUL\n")
    write(state, API, "progress.md", b"\xff\xfe not UTF-8\n")
    write(state, API, "design/big.md", "x" * 79 + "\n" * (MAX_INLINE_BYTES // 80 + 1) * 80)
    secret = tmp_path / "secret.txt"
    secret.write_text("SECRET outside the repository\n", encoding="utf-8")
    (folder(state, API) / "design" / "link.md").symlink_to(secret)
    (folder(state, API) / "artifacts").symlink_to(tmp_path)
    text = render_context(state, OWN)
    root = parse_valid(text)
    assert "SECRET" not in text and "NUL" not in text and "not UTF-8" not in text
    assert element(root, f".leslie/threads/{API}/plan.md").get("not_inlined") == "binary"
    assert element(root, f".leslie/threads/{API}/progress.md").get("not_inlined") == "binary"
    assert not any("big.md" in p for p in inlined(root))


def test_cut_at_line_boundaries_with_a_marker(state: Repository) -> None:
    plan = "".join(f"step {i}\n" for i in range(1, 201))  # 200 lines
    progress = "".join(f"- entry {i}\n" for i in range(1, 101))
    write(state, OWN, "plan.md", plan)
    write(state, OWN, "progress.md", progress)
    configure(state, 100)  # 400 bytes: part of the plan only
    root = parse_valid(render_context(state, OWN))
    got = element(root, f".leslie/threads/{OWN}/plan.md")
    assert plan.startswith(got.text) and got.text.endswith("\n")
    shown = len(lines_of(got.text))
    assert got.get("lines") == f"1-{shown}" and got.get("total_lines") == "200"
    assert f"read this file from line {shown + 1}" in got.get("omitted")
    assert int(got.get("tokens")) <= 100 and int(root.get("inlined_tokens")) <= 100
    assert element(root, f".leslie/threads/{OWN}/progress.md").get("tokens") is None  # budget spent
    # The plan fits, the progress keeps its newest entries (from its end).
    configure(state, tokens_of(len(plan.encode())) + 50)
    root = parse_valid(render_context(Repository(state.root), OWN))
    assert element(root, f".leslie/threads/{OWN}/plan.md").text == plan
    got = element(root, f".leslie/threads/{OWN}/progress.md")
    assert progress.endswith(got.text) and got.text.startswith("- entry ")
    assert got.get("lines").endswith("-100") and "read lines 1-" in got.get("omitted")


def test_referenced_files_most_recently_changed_first(state: Repository) -> None:
    write(state, OWN, "plan.md", "")
    write(state, OWN, "progress.md", "")
    write(state, API, "plan.md", "p" * 299 + "\n")  # 75 tokens of real content; the progress is scaffold
    for i, age in enumerate((30, -100, -50)):  # d1 newest (the API plan, progress: now)
        write(state, API, f"design/d{i}.md", f"design {i}\n" * 20, age=age)
    budget = tokens_of(len(("design 1\n" * 20).encode()))
    root = parse_valid(render_context(state, OWN, budget=budget + tokens_of(300)))
    shown = inlined(root)
    newest = f".leslie/threads/{API}/design/d1.md"
    assert shown[newest] == "design 1\n" * 20
    assert f".leslie/threads/{API}/design/d0.md" not in shown  # the oldest: no budget left


def test_cut_helpers_keep_whole_lines() -> None:
    assert cut_head("ab\ncd\nef", 5) == ("ab\n", 1)
    assert cut_tail("ab\ncd\nef", 5) == ("cd\nef", 2)
    assert cut_head("é\n", 2) == ("", 0)


def test_budget_preview_and_config_validation(state: Repository) -> None:
    configure(state, 0)
    preview = run_leslie("context", "--thread", OWN, "--budget", "5000", cwd=state.root)
    assert preview.code == 0 and 'budget_tokens="5000"' in preview.stdout
    plain = run_leslie("context", "--thread", OWN, cwd=state.root)
    assert ' tokens="' not in plain.stdout
    for bad in ("-1", '"many"', "2000000", "1.5"):
        (state.root / ".leslie" / "config.toml").write_text(f"[context]\nbudget_tokens = {bad}\n", encoding="utf-8")
        result = run_leslie("context", "--thread", OWN, cwd=state.root)
        assert result.code == 4, (bad, result.stdout)
        assert "budget_tokens" in result.stderr


def message(repo: Repository, session: str = "s1") -> injector.Injection:
    return injector.on_user_message(injector.RepoHandle.of(repo), agent="inject", session_id=session, thread_id=OWN,
                                    message="go")


def test_a_changed_referenced_file_is_marked_and_reinjected(state: Repository) -> None:
    configure(state, 2000)
    api = write(state, API, "design/api.md", "v1\n", age=50)
    assert message(state).reason == "start"
    assert message(state).reason is None
    api.write_text("v2: the API moved\n", encoding="utf-8")
    again = message(state)
    assert again.reason == "changed" and again.text is not None
    root = parse_valid(again.text)
    assert element(root, f".leslie/threads/{API}/design/").get("changed") == "true"
    assert element(root, f".leslie/threads/{API}/design/api.md").get("changed") == "true"
    assert element(root, f".leslie/threads/{API}/plan.md").get("changed") is None
    assert message(state).reason is None  # seen now
    # Another session that never saw v1 gets no marker.
    fresh = message(state, "s2")
    assert fresh.reason == "start" and 'changed="true"' not in (fresh.text or "")
    # An out-of-scope file of a scoped reference is no change.
    write(state, DOCS, "plan.md", "not in scope\n")
    assert message(state).reason is None


def test_own_progress_updates_do_not_reinject_but_are_fresh_at_the_next_injection(state: Repository) -> None:
    configure(state, 2000)
    assert message(state).reason == "start"
    write(state, OWN, "progress.md", "- did step 1\n")
    assert message(state).reason is None
    injector.on_compaction(injector.RepoHandle.of(state), agent="inject", session_id="s1", thread_id=OWN)
    after = message(state)
    assert after.reason == "compacted"
    assert element(parse_valid(after.text or ""), f".leslie/threads/{OWN}/progress.md").text == "- did step 1\n"


def test_stats_show_tokens_per_level(state: Repository) -> None:
    configure(state, 2000)
    write(state, API, "design/api.md", "api\n" * 10)
    write(state, OWN, "plan.md", "# Plan\n- [ ] a real step\n")  # a scaffold would not count (issue 33)
    message(state)
    result = run_leslie("stats", "--json", cwd=state.root)
    levels = json.loads(result.stdout)["tokens_by_level"]
    assert levels["own"] > 0 and levels["refs"] > 0 and levels["paths"] > 0
    assert "referenced files" in run_leslie("stats", cwd=state.root).stdout


def test_build_context_one_level_only(state: Repository) -> None:
    write(state, DEEP, "plan.md", "deep plan\n")
    data = build_context(state, OWN, budget=100_000)
    assert [r.thread for r in data.refs] == [API, DOCS]
    assert all(DEEP not in a.path for r in data.refs for a in r.assets)
