"""`leslie relations --format mermaid|dot`: labelled, grouped graphs, golden on the example, and hostile titles
that must stay inside their labels (dot checked by a real parser, pydot; Mermaid by a strict line grammar)."""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
from pathlib import Path

import pydot
import pytest

from conftest import run_leslie
from leslie.ops.graphs import dot_text, mermaid_text
from leslie.ops.objectives import create_objective
from leslie.ops.threads import RefSpec, spawn
from leslie.store.repository import Repository
from test_context import assert_golden

EXAMPLE = Path(__file__).parents[1] / ".leslie.example"

HOSTILE = [
    'say "hi"] --> evil["pwned',
    "trailing \\",
    "\\N \\G \\l \\\\ label escapes",
    "back\\slash at the end\\",
    "<script>alert(1)</script> & <b>bold</b> &amp;",
    '%%{init: {"theme": "dark"}}%%',
    "end",
    "a;b #35; `code` |pipe| {curly} [square] (round)",
    "line\nbreak\ttab",
    '"]\n  x --> y\n  click x call alert()',
    "ünïcødé 中文 🚀 · …",
    "subgraph x\nend\n}",
]



@pytest.mark.parametrize("fmt", ["mermaid", "dot"])
def test_example_graph_matches_golden(example_root: Path, fmt: str) -> None:
    result = run_leslie("relations", "--format", fmt, cwd=example_root)
    assert result.code == 0, result.stderr
    assert_golden(f"graphs/example.{'mmd' if fmt == 'mermaid' else 'dot'}", result.stdout)


def test_json_format_unchanged(example_root: Path) -> None:
    result = run_leslie("relations", "--format", "json", cwd=example_root)
    assert result.stdout.encode() == (example_root / ".leslie/thread_relations.json").read_bytes()


@pytest.fixture
def hostile_root(repo: Repository) -> Path:
    """One objective and ten threads with hostile titles (newlines put in by hand), scoped and whole edges."""
    create_objective(repo, 'Objective "]; } %%{init}%% <i>x</i>\\', objective_id="obj-evil")
    for number, title in enumerate(HOSTILE):
        refs = [RefSpec(f"thread-h{number - 1}", ('design/a"]b|c;d.md',) if number % 2 else ())] if number else []
        spawn(repo, "intent", title=" ".join(title.split()), thread_id=f"thread-h{number}",
              objective="obj-evil" if number % 3 else None, refs=refs)
    for number, title in enumerate(HOSTILE):  # a hand edit puts back what `spawn` folds (newlines, tabs)
        path = repo.layout.thread_file(f"thread-h{number}")
        data = json.loads(path.read_text(encoding="utf-8"))
        data["title"] = title
        data["objective"] = data["objective"] if number % 3 else None
        path.write_text(json.dumps(data), encoding="utf-8")
    return repo.root


def _dot_decode(label: str) -> str:
    """What Graphviz shows for a label: HTML entities decoded first, then its escape `\\\\` (one backslash)."""
    return re.sub(r"\\(.)", r"\1", html.unescape(label))


def _expected_labels() -> dict[str, str]:
    return {f"thread-h{n}": " ".join(title.split()) for n, title in enumerate(HOSTILE)}


def test_hostile_titles_dot_parses_with_pydot(hostile_root: Path) -> None:
    result = run_leslie("relations", "--format", "dot", cwd=hostile_root)
    assert result.code == 0, result.stderr
    graphs = pydot.graph_from_dot_data(result.stdout)
    assert graphs is not None and len(graphs) == 1
    graph = graphs[0]
    nodes = {}
    subgraphs = graph.get_subgraphs()
    for sub in subgraphs:
        for node in sub.get_nodes():
            nodes[node.get_name().strip('"')] = node.get_attributes()["label"]
    assert {s.get_name().strip('"') for s in subgraphs} == {
        "cluster_o_obj_evil", "cluster_o_none", "cluster_legend"}
    for tid, title in _expected_labels().items():
        label = nodes[tid]
        assert label.startswith('"') and label.endswith('"')
        shown_title, status = label[1:-1].split("\\n")
        assert _dot_decode(shown_title) == title, tid
        assert status == f"active · {tid[len('thread-'):]}"
    edges = [(e.get_source().strip('"'), e.get_destination().strip('"'), e.get_attributes())
             for e in graph.get_edges()]
    for sub in subgraphs:
        edges += [(e.get_source().strip('"'), e.get_destination().strip('"'), e.get_attributes())
                  for e in sub.get_edges()]
    scoped = {(s, d): a for s, d, a in edges if a.get("style") == "dashed" and not s.startswith("legend")}
    assert set(scoped) == {(f"thread-h{n}", f"thread-h{n - 1}") for n in range(1, len(HOSTILE), 2)}
    assert all(_dot_decode(a["label"][1:-1]) == 'design/a"]b|c;d.md' for a in scoped.values())
    assert len([e for e in edges if not e[0].startswith("legend")]) == len(HOSTILE) - 1


# One regular expression per kind of line Mermaid gets from leslie: anything else is an injected line.
_LABEL = r'"(?P<label>[^"\n]*)"'
_NODE_ID = r"[a-z][a-z0-9_]*"
_MERMAID_LINES = [
    re.compile(r"graph LR"),
    re.compile(rf"  subgraph {_NODE_ID}\[{_LABEL}\]"),
    re.compile(rf"    {_NODE_ID}\[{_LABEL}\]"),
    re.compile(r"  end"),
    re.compile(rf"  {_NODE_ID} --> {_NODE_ID}"),
    re.compile(rf"  {_NODE_ID} -\.->\|{_LABEL}\| {_NODE_ID}"),
    re.compile(r"  classDef [a-z]+ fill:#[0-9a-f]{6},stroke:#555"),
    re.compile(rf"  class {_NODE_ID}(,{_NODE_ID})* [a-z]+"),
]
_LEGEND = {
    '    legend_a["thread"] -->|"whole thread"| legend_b["referenced thread"]',
    '    legend_c["thread"] -.->|"scoped: the paths read"| legend_d["referenced thread"]',
}
# What a label may hold: letters, digits, harmless marks, entity codes, and leslie's own line break.
_SAFE_LABEL = re.compile(r"(?:[\w .,:/()+!?@*'·…-]|#\d+;|<br/>)*")


def _mermaid_decode(label: str) -> str:
    return re.sub(r"#(\d+);", lambda m: chr(int(m.group(1))), label)


def test_hostile_titles_mermaid_structure(hostile_root: Path) -> None:
    result = run_leslie("relations", "--format", "mermaid", cwd=hostile_root)
    assert result.code == 0, result.stderr
    nodes: dict[str, str] = {}
    edge_labels = []
    for line in result.stdout.splitlines():
        if line in _LEGEND:
            continue
        match = next((m for m in (p.fullmatch(line) for p in _MERMAID_LINES) if m), None)
        assert match is not None, f"unexpected line: {line!r}"
        label = match.groupdict().get("label")
        if label is None:
            continue
        assert _SAFE_LABEL.fullmatch(label), label
        if line.startswith("    t_"):
            nodes[line.split("[", 1)[0].strip()] = label
        elif "-.->" in line:
            edge_labels.append(_mermaid_decode(label))
    assert "%%" not in result.stdout
    for tid, title in _expected_labels().items():
        shown_title, status = nodes["t_" + tid.replace("-", "_")].split("<br/>")
        assert _mermaid_decode(shown_title) == title, tid
        assert _mermaid_decode(status) == f"active · {tid[len('thread-'):]}"
    assert edge_labels == ['design/a"]b|c;d.md'] * (len(HOSTILE) // 2)
    assert result.stdout.count("\n  end\n") == 3  # two objectives and the legend: no subgraph was opened


def test_escapers_leave_nothing_special() -> None:
    for title in HOSTILE:
        escaped = mermaid_text(title)
        assert not set(escaped) & set('"[]{}<>|%`\n\t\\') and "-->" not in escaped
        assert _mermaid_decode(escaped) == title
        dotted = dot_text(title)
        assert '"' not in dotted and "\\" not in dotted and "\n" not in dotted
        assert _dot_decode(dotted) == re.sub(r"[\x00-\x1f]", " ", title)


def test_del_and_c1_controls_never_reach_the_output() -> None:
    assert dot_text("a\x7fb\x9b2Jc\x85") == "a b 2Jc "
    assert mermaid_text("a\x7fb\x9bc") == "a#127;b#155;c"


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz's dot is not installed (apt-get install graphviz)")
def test_hostile_titles_rendered_by_graphviz(hostile_root: Path) -> None:
    """The real thing: Graphviz lays out the graph and shows every title exactly, backslashes included."""
    source = run_leslie("relations", "--format", "dot", cwd=hostile_root).stdout
    svg = subprocess.run(["dot", "-Tsvg"], input=source, capture_output=True, text=True, check=False, timeout=60)
    assert svg.returncode == 0 and not svg.stderr, svg.stderr
    shown = {html.unescape(text) for text in re.findall(r"<text[^>]*>(.*?)</text>", svg.stdout)}
    for tid, title in _expected_labels().items():
        assert title in shown and f"active · {tid[len('thread-'):]}" in shown, title
    assert 'design/a"]b|c;d.md' in shown and 'Objective "]; } %%{init}%% <i>x</i>\\ (active, evil)' in shown
