"""The reference graph as Mermaid or Graphviz text: threads labelled with title and status, grouped by objective;
order edges (SPEC §14) drawn thick from the earlier thread to the later, labelled "then", and a thread in the
order labelled ready or blocked.

Every label comes from a repository that may be hostile (a title can hold quotes, brackets, `-->`, `"]`,
backslashes, `%%{init}%%`, HTML-ish text, even newlines in a hand-edited `thread.json`), so each format has one
escaping function and every piece of text goes through it: whatever a title holds, it stays inside its label.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from leslie.ops.tree import Group, ThreadNode, Tree
from leslie.store.names import short_id

# Mermaid: anything but letters, digits and a few harmless marks becomes an entity code (`#34;`), which Mermaid
# renders as the character. That leaves no quote to end a label, no `#`/`;` to start an entity or a statement,
# no `%` for a `%%{init}%%` directive, no `<`/`>` for HTML or an arrow, no backtick for a Markdown string.
_MERMAID_UNSAFE = re.compile(r"[^\w .,:/()+!?@*'·…-]")
# Graphviz: inside a quoted string only `"` and `\` are special to the parser, and `\` followed by the closing
# quote swallows it. Graphviz then decodes HTML entities in every label, *before* its label escapes (`\N`,
# `\l`, `\\`): so `&` becomes `&amp;` to stay itself, `"` `&quot;`, and a backslash `&#92;&#92;` (decoded
# to `\\`, then shown as one `\`; no backslash is left for the parser to pair with a quote). Control
# characters (newlines included; C1 ones would be terminal escapes) become spaces.
_DOT_ENTITIES = {"&": "&amp;", '"': "&quot;", "\\": "&#92;&#92;", "<": "&lt;", ">": "&gt;"}
_DOT_UNSAFE = re.compile(r'[&"\\<>]|[\x00-\x1f\x7f-\x9f]')

STATUS_COLOURS = {"active": "#d7f5dd", "paused": "#fff3c4", "done": "#dbe7ff", "archived": "#eeeeee"}
_DOT_ORDER = 'style=bold, color="#b03a2e", arrowhead=empty'  # an order edge: apart from every reference
_MAX_LABEL = 60  # a longer title is cut with "…" in the graph (the full title is in `leslie show`)


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _MAX_LABEL else text[:_MAX_LABEL - 1] + "…"


def mermaid_text(text: str) -> str:
    """`text` made safe inside a Mermaid `"..."` label."""
    return _MERMAID_UNSAFE.sub(lambda m: f"#{ord(m.group())};", text)


def dot_text(text: str) -> str:
    """`text` made safe inside a Graphviz `"..."` string."""
    return _DOT_UNSAFE.sub(lambda m: _DOT_ENTITIES.get(m.group(), " "), text)


_NOT_IN_ID = re.compile(r"[^a-z0-9]")


def _node_id(thread_id: str) -> str:
    # IDs are `[a-z0-9-]` after validation; `-` is not allowed in a Mermaid ID and `_` is not in an ID, so
    # the mapping is one-to-one; the prefix keeps clear of Mermaid keywords (`end`, `graph`, ...).
    return "t_" + _NOT_IN_ID.sub("_", thread_id)


def _group_id(group: Group) -> str:
    return "o_none" if group.objective_id is None else "o_" + _NOT_IN_ID.sub("_", group.objective_id)


def _group_label(group: Group) -> str:
    if group.objective_id is None:
        return "No objective"
    if group.missing:
        return f"{group.objective_id} (objective not found)"
    return f"{_short(group.title or '')} ({group.status}, {short_id(group.objective_id)})"


def _order_edges(tree: Tree) -> list[tuple[str, str]]:
    """(first, then) for every order edge between live threads (SPEC §14): `then` comes after `first`."""
    return [(first, node.id) for node in sorted(tree.threads(), key=lambda n: n.id) for first, _t, _s in node.after]


def _state_text(node: ThreadNode) -> str:
    """The node's status line: status and short ID, and ready or blocked for a thread in the order."""
    state = node.order_state
    return f"{node.status} · {short_id(node.id)}" + (f" · {state}" if state else "")


def mermaid_piece(node: ThreadNode) -> str:
    """A thread's lines of the Mermaid graph (its piece, which the derived store keeps: `ops.tree_drawing.TreeDrawing`):
    its node, then a solid edge per whole-thread reference to a live thread and a dotted one, labelled with its
    paths, per scoped one. A label holds no line feed (`mermaid_text`)."""
    name = _node_id(node.id)
    lines = [f'    {name}["{mermaid_text(_short(node.title))}<br/>{mermaid_text(_state_text(node))}"]']
    for ref in node.references:
        if ref.title is None:  # not a live thread: no node to point at
            continue
        if ref.scope:
            lines.append(f'  {name} -.->|"{mermaid_text(", ".join(ref.scope))}"| {_node_id(ref.target)}')
        else:
            lines.append(f"  {name} --> {_node_id(ref.target)}")
    return "\n".join(lines)


def dot_piece(node: ThreadNode) -> str:
    """A thread's lines of the Graphviz graph (see `mermaid_piece`): its node, then its edges."""
    label = f"{dot_text(_short(node.title))}\\n{dot_text(_state_text(node))}"
    source = dot_text(node.id)
    lines = [f'    "{source}" [label="{label}", fillcolor="{STATUS_COLOURS.get(node.status, "#ffffff")}"];']
    for ref in node.references:
        if ref.title is None:
            continue
        if ref.scope:
            lines.append(f'  "{source}" -> "{dot_text(ref.target)}" [label="{dot_text(", ".join(ref.scope))}", '
                         'style=dashed];')
        else:
            lines.append(f'  "{source}" -> "{dot_text(ref.target)}";')
    return "\n".join(lines)


def _pieces(tree: Tree, piece: Callable[[ThreadNode], str]) -> dict[str, list[str]]:
    """Each thread's piece, split into its node's line and its edges' lines (absent when it has none)."""
    return {node.id: piece(node).split("\n", 1) for node in tree.threads()}


def render_mermaid(tree: Tree, piece: Callable[[ThreadNode], str] = mermaid_piece) -> str:
    """A Mermaid `graph LR`: a subgraph per objective, solid edges for whole-thread references, dotted ones
    labelled with their paths for scoped references, and a legend; each thread's node and edges are its `piece`
    (`mermaid_piece`, or a kept one). A graph is of the whole tree (`relations` has no filters): an edge goes to
    every live thread referenced."""
    drawn = _pieces(tree, piece)
    lines = ["graph LR"]
    for group in tree.groups:
        if not group.threads:
            continue
        lines.append(f'  subgraph {_group_id(group)}["{mermaid_text(_group_label(group))}"]')
        lines += [drawn[node.id][0] for node in group.threads]
        lines.append("  end")
    lines += [drawn[tid][1] for tid in sorted(drawn) if len(drawn[tid]) > 1]  # the edges, by source
    order = _order_edges(tree)
    for first, then in order:  # thick, and from the earlier thread to the later: apart from every reference
        lines.append(f'  {_node_id(first)} ==>|"then"| {_node_id(then)}')
    lines += [
        '  subgraph legend["Legend"]',
        '    legend_a["thread"] -->|"whole thread"| legend_b["referenced thread"]',
        '    legend_c["thread"] -.->|"scoped: the paths read"| legend_d["referenced thread"]',
        *(['    legend_e["thread"] ==>|"then"| legend_f["thread that comes after it"]'] if order else []),
        "  end",
    ]
    for status, colour in STATUS_COLOURS.items():
        members = [_node_id(n.id) for n in tree.threads() if n.status == status]
        lines.append(f"  classDef {status} fill:{colour},stroke:#555")
        if members:
            lines.append(f"  class {','.join(members)} {status}")
    return "\n".join(lines) + "\n"


def render_dot(tree: Tree, piece: Callable[[ThreadNode], str] = dot_piece) -> str:
    """A Graphviz `digraph`: a `cluster_` subgraph per objective, solid edges for whole-thread references,
    dashed ones labelled with their paths for scoped references, and a legend cluster; each thread's node and
    edges are its `piece` (`dot_piece`, or a kept one), as in `render_mermaid`."""
    drawn = _pieces(tree, piece)
    lines = ["digraph leslie {", "  rankdir=LR;",
             '  node [shape=box, style="rounded,filled", fillcolor="#ffffff", fontname="Helvetica"];',
             '  edge [fontname="Helvetica", fontsize=10];']
    for group in tree.groups:
        if not group.threads:
            continue
        lines.append(f'  subgraph "cluster_{_group_id(group)}" {{')
        lines.append(f'    label="{dot_text(_group_label(group))}";')
        lines += [drawn[node.id][0] for node in group.threads]
        lines.append("  }")
    lines += [drawn[tid][1] for tid in sorted(drawn) if len(drawn[tid]) > 1]
    order = _order_edges(tree)
    for first, then in order:
        lines.append(f'  "{dot_text(first)}" -> "{dot_text(then)}" [label="then", {_DOT_ORDER}];')
    lines += [
        '  subgraph "cluster_legend" {',
        '    label="Legend";',
        '    "legend_a" [label="thread"]; "legend_b" [label="referenced thread"];',
        '    "legend_c" [label="thread"]; "legend_d" [label="referenced thread"];',
        '    "legend_a" -> "legend_b" [label="whole thread"];',
        '    "legend_c" -> "legend_d" [label="scoped: the paths read", style=dashed];',
        *([ '    "legend_e" [label="thread"]; "legend_f" [label="thread that comes after it"];',
            f'    "legend_e" -> "legend_f" [label="then", {_DOT_ORDER}];'] if order else []),
        "  }",
        "}",
    ]
    return "\n".join(lines) + "\n"
