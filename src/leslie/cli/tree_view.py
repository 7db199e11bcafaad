"""Drawing `leslie list --tree`: objectives → threads → references, one fact per line; a thread in the order
(SPEC §14) gets `⋯` lines: ready or blocked, then `after`/`before` each thread around it.

On a terminal the lines are fitted to its width (titles cut with "…", never an ID) and coloured with the
terminal's own codes (SGR), written here in a few string operations per line, as `list`'s table is (Rich
printed them a line at a time: ~0.6 s at 1,000 threads, 5 s at 10,000), and kept by the derived store per width
and colours, like the piped drawings. Piped, they are plain text at full length, so `leslie list --tree | grep`
finds whole titles.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Iterable, Iterator

from leslie.cli.text import cut as _cut
from leslie.cli.text import styled, terminal_width
from leslie.ops.tree import Group, RefNode, ThreadNode, Tree
from leslie.store.names import short_id
from leslie.terminal import visible, visible_json

Segment = tuple[str, str]  # (text, style: one of `SGR`'s names, or "" for none)
Line = list[Segment]
Piece = Callable[[ThreadNode], str]  # a thread's text in one drawing (kept by the derived store, `plain_piece`)

STATUS_STYLES = {"active": "green", "paused": "yellow", "done": "blue", "archived": "dim", "deleted": "red"}
SGR = {"bold": "1", "dim": "2", "red": "31", "green": "32", "yellow": "33", "blue": "34", "magenta": "35",
       "cyan": "36"}  # each style's Select Graphic Rendition code, as terminals (and Rich) write it
_OPEN = {style: f"\x1b[{code}m" for style, code in SGR.items()}
_CLOSE = "\x1b[0m"
_STATUS_WIDTH = 8  # "archived"
_MIN_TITLE = 12  # below this a title is not worth showing; the line then runs past the width instead


def _header(group: Group, width: int | None) -> Line:
    if group.objective_id is None:
        return [("No objective", "bold")]
    sid = short_id(group.objective_id)
    if group.missing:
        return [(group.objective_id, "bold"), ("  objective not found", "red")]
    count = len(group.threads)
    tail = f"  {sid} · {group.status} · {count} threads"
    room = None if width is None else max(width - len(tail), _MIN_TITLE)
    return [(_cut(group.title or "", room), "bold"), ("  ", ""), (sid, "cyan"), (" · ", "dim"),
            (group.status or "", STATUS_STYLES.get(group.status or "", "")), (" · ", "dim"),
            (f"{count} thread{'s' if count != 1 else ''}", "dim")]


def _thread_line(node: ThreadNode, branch: str, width: int | None) -> Line:
    sid = short_id(node.id)
    fixed = len(branch) + _STATUS_WIDTH + 1 + 2 + len(sid)
    room = None if width is None else max(width - fixed, _MIN_TITLE)
    title = _cut(node.title, room)
    pad = " " * (room - len(title)) if room is not None else ""
    return [(branch, "dim"), (f"{node.status:<{_STATUS_WIDTH}}", STATUS_STYLES.get(node.status, "")),
            (" ", ""), (title, "bold" if node.status == "active" else ""), (pad + "  ", ""), (sid, "cyan")]


def _scope_text(ref: RefNode) -> str:
    # Paths from the repository: a scope holds no control character (`store.model.normalize_scope`), but may
    # hold a bidi override.
    return visible(", ".join(ref.scope)) if ref.scope else "whole thread"


def _ref_line(ref: RefNode, stem: str, width: int | None) -> Line:
    lead = stem + "    → "
    sid = short_id(ref.target)
    scope = "[" + _scope_text(ref) + "]"
    title = ref.title if ref.title is not None else "(missing thread)"
    room = None
    if width is not None:
        fixed = len(lead) + len(sid) + 4  # two gaps of two spaces
        if width - fixed - len(scope) < _MIN_TITLE:  # a long scope list: cut it, the title keeps a little
            scope = _cut(scope, max(width - fixed - _MIN_TITLE, 8))
        room = max(width - fixed - len(scope), _MIN_TITLE)
    return [(stem, "dim"), ("    → ", "dim"), (sid, "cyan"), ("  ", ""),
            (_cut(title, room), "" if ref.title is not None else "red"), ("  ", ""),
            (scope, "magenta" if ref.scope else "dim")]


def _order_texts(node: ThreadNode) -> Iterator[tuple[str, str, str]]:
    """The order lines of a thread (SPEC §14), as (label, text, style): its state, then each thread it comes
    after and each that comes after it; drawn with "after"/"before" words, apart from the references' arrows."""
    state = node.order_state
    if state == "blocked":
        yield "", "blocked: waits for " + ", ".join(short_id(t) for t in node.waiting_for), "red"
    elif state == "ready":
        yield "", "ready", "green"
    for label, edges in (("after ", node.after), ("before", node.before)):
        for tid, title, status in edges:
            yield label, f"{short_id(tid)}  {visible(title)}  ({status})", STATUS_STYLES.get(status, "")


def tree_lines(tree: Tree, width: int | None = None) -> Iterator[Line]:
    """The tree as styled lines, one at a time (at 100,000 threads, all of them at once would hold hundreds of
    megabytes); `width` fits thread and reference lines to that many columns."""
    for number, group in enumerate(tree.groups):
        if number:
            yield []
        yield _header(group, width)
        if not group.threads:
            yield [("└── ", "dim"), ("(no threads)", "dim")]
        for position, node in enumerate(group.threads):
            yield from _node_lines(node, position == len(group.threads) - 1, width)
    if not tree.groups:
        yield [("no threads", "dim")]


def _node_lines(node: ThreadNode, last: bool, width: int | None) -> Iterator[Line]:
    """A thread's lines in its group (`last`: the group's last thread): its own, its references', its order's."""
    yield _thread_line(node, "└── " if last else "├── ", width)
    stem = "    " if last else "│   "
    for ref in node.references:
        yield _ref_line(ref, stem, width)
    for label, text, style in _order_texts(node):
        yield [(stem + "    ⋯ ", "dim"), (label + (" " if label else ""), "dim"), (text, style)]


def plain_piece(node: ThreadNode) -> str:
    """A thread's plain lines as drawn above the last thread of its group (`├──`, and `│` below it): the piece
    of `plain_lines` that the derived store keeps (`ops.tree_drawing.TreeDrawing`)."""
    lines = [f"├── {node.status:<{_STATUS_WIDTH}} {visible(node.title)}  {short_id(node.id)}\n"]
    for ref in node.references:
        title = visible(ref.title) if ref.title is not None else "(missing thread)"
        lines.append(f"│       → {short_id(ref.target)}  {title}  [{_scope_text(ref)}]\n")
    if node.after or node.before:  # in the order (most threads are not: no lines to make)
        for label, text, _style in _order_texts(node):
            lines.append(f"│       ⋯ {label + ' ' if label else ''}{text}\n")
    return "".join(lines)


def _as_last(piece: str) -> str:
    """A piece of `plain_piece` as drawn for the last thread of its group: `└──`, and nothing below it. Every line
    of a piece is whole (titles and scopes are made `visible`: no line feed in them)."""
    return "└── " + piece[4:].replace("\n│   ", "\n    ")


def plain_lines(tree: Tree, piece: Piece = plain_piece) -> Iterator[str]:
    """The lines of `tree_lines(tree)`, unfitted, as plain text with their line feeds: what a pipe gets; each
    thread's lines are its `piece` (`plain_piece`, or a kept one). Made directly, not by joining the styled
    segments: three times faster, at 1,000 threads 9 -> 3 ms (`tests/test_tree.py` holds the two equal)."""
    for number, group in enumerate(tree.groups):
        if number:
            yield "\n"
        yield "".join(text for text, _ in _header(group, None)) + "\n"
        if not group.threads:
            yield "└── (no threads)\n"
            continue
        *above, last = group.threads
        yield from map(piece, above)
        yield _as_last(piece(last))
    if not tree.groups:
        yield "no threads\n"


def json_piece(node: ThreadNode) -> str:
    """A thread's object in the one line of JSON a pipe gets of the tree (`json_lines`)."""
    return visible_json(json.dumps(node.to_json(), sort_keys=True, ensure_ascii=False))


def json_lines(tree: Tree, piece: Piece = json_piece) -> Iterator[str]:
    """`tree.to_json()` as `cli.common.json_line` writes it (one line, keys sorted), made of each thread's `piece`
    (`json_piece`, or a kept one): `tests/test_tree.py` holds the two equal."""
    yield '{"groups": ['
    for number, group in enumerate(tree.groups):
        objective = visible_json(json.dumps(group.objective_json(), sort_keys=True, ensure_ascii=False))
        yield f'{", " if number else ""}{{"objective": {objective}, "threads": ['
        yield ", ".join(map(piece, group.threads))
        yield "]}"
    yield "]}\n"


def terminal_piece(node: ThreadNode, width: int, colour: bool) -> str:
    """A thread's lines on a terminal `width` columns wide (`_on_terminal`), as drawn above the last thread of
    its group: the piece of `terminal_lines` that the derived store keeps, per width and colours
    (`ops.tree_drawing.TreeDrawing`)."""
    return "".join([_on_terminal(line, width, colour) for line in _node_lines(node, False, width)])


def terminal_lines(tree: Tree, width: int, *, colour: bool = True, piece: Piece | None = None) -> Iterator[str]:
    """The lines of `tree_lines(tree, width)` as a terminal `width` columns wide shows them (`_on_terminal`), what
    the README's screenshot records; each thread's lines are its `piece` (`terminal_piece`, or a kept one)."""
    if piece is None:
        piece = functools.partial(terminal_piece, width=width, colour=colour)
    for number, group in enumerate(tree.groups):
        if number:
            yield "\n"
        yield _on_terminal(_header(group, width), width, colour)
        if not group.threads:
            yield _on_terminal([("└── ", "dim"), ("(no threads)", "dim")], width, colour)
            continue
        *above, last = group.threads
        yield from map(piece, above)
        yield _as_last_on_terminal(piece(last), colour)
    if not tree.groups:
        yield _on_terminal([("no threads", "dim")], width, colour)


def _on_terminal(line: Line, width: int, colour: bool) -> str:
    """`line` as a terminal `width` columns wide shows it, with its line feed: cut to the width with "…" where the
    fitting could not bring it under (a title kept at its minimum), its segments in their styles' codes when
    `colour`."""
    if sum([len(text) for text, _ in line]) > width:
        line = _cropped(line, width)
    if colour:
        return "".join([_OPEN[style] + text + _CLOSE if style in _OPEN and text else text
                        for text, style in line]) + "\n"
    return "".join([text for text, _ in line]) + "\n"


def _as_last_on_terminal(piece: str, colour: bool) -> str:
    """A piece of `terminal_piece` as drawn for the last thread of its group: `└──`, and no `│` below it. The
    branch and the stems are each line's first segment, dim, four columns that a cut never reaches (no terminal
    is drawn for narrower than `text.MIN_WIDTH`); no text in a piece holds a line feed or an escape
    (`visible`)."""
    dim = _OPEN["dim"] if colour else ""
    return piece.replace("├── ", "└── ", 1).replace(f"\n{dim}│   ", f"\n{dim}    ")


def _cropped(line: Line, width: int) -> Line:
    """`line` cut to `width` characters, the last of them "…" (in the style of the segment it ends)."""
    room = max(width - 1, 0)
    cropped: Line = []
    for text, style in line:
        if len(text) >= room:
            cropped.append((text[:room] + "…", style))
            break
        cropped.append((text, style))
        room -= len(text)
    return cropped


def terminal_form() -> tuple[str, Piece, Callable[[Tree, Piece], Iterable[str]]]:
    """The drawing this terminal gets (fitted to its width, coloured unless NO_COLOR or a dumb terminal): its
    name in the derived store (a form and its variant, `store.drawings.keep_pieces`), its pieces and its lines."""
    width, colour = terminal_width(), styled()
    return (f"terminal {width} {'colour' if colour else 'plain'}",
            functools.partial(terminal_piece, width=width, colour=colour),
            lambda tree, piece: terminal_lines(tree, width, colour=colour, piece=piece))
