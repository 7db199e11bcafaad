"""Drawing `leslie list`: the table for a terminal and the plain lines for scripts (no Rich, no Typer).

The table is fitted to the terminal's width: every cell on one line, the title cut with "…" to what is left,
never an ID (columns are dropped before a title gets too short to read). It is drawn here, in a few string
operations per row, because Rich's table costs seconds at 10,000 threads, and kept by the derived store like the
piped forms (`table_form`: what else it depends on).

The plain form is one line per thread, tab-separated, no header, no truncation, in this column order:

    id  status  updated_at  objective  objective_title  references_to  title

`objective`, `objective_title` and `references_to` (IDs joined by commas) are `-` when empty. Inside a field
a backslash becomes `\\\\`, a tab `\\t`, a line feed `\\n`, a carriage return `\\r`, and every other character
`leslie.terminal.visible` escapes (C0, DEL, C1, bidi and zero-width characters, U+2028/U+2029, unusual spaces)
`\\xHH`, `\\uHHHH` or `\\UHHHHHHHH`: a line is always one thread, nothing in it acts on a terminal, and
`unescape_field` gives the text back.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from leslie.cli.text import cut as _cut
from leslie.cli.text import styled, terminal_width
from leslie.ops.listing import Group, RowFields, iso_time
from leslie.store.names import short_id
from leslie.terminal import visible, visible_json

PLAIN_COLUMNS = ("id", "status", "updated_at", "objective", "objective_title", "references_to", "title")
_NAMED = {"\\": "\\", "t": "\t", "n": "\n", "r": "\r"}
_CODE_SIZES = {"x": 2, "u": 4, "U": 8}


def escape_field(text: str) -> str:
    """`text` as one field of a plain line: no tab, no line break, no control character (see the module)."""
    return visible(text, backslashes=True)


def unescape_field(field: str) -> str:
    """The text `escape_field` was given (for scripts reading the plain form, and its test)."""
    if "\\" not in field:
        return field
    out: list[str] = []
    i = 0
    while i < len(field):
        char = field[i]
        kind = field[i + 1:i + 2] if char == "\\" else ""
        size = _CODE_SIZES.get(kind, 0)
        digits = field[i + 2:i + 2 + size]
        if kind in _NAMED:
            out.append(_NAMED[kind])
            i += 2
        elif size and len(digits) == size and all(d in "0123456789abcdefABCDEF" for d in digits):
            out.append(chr(int(digits, 16)))
            i += 2 + size
        else:  # not an escape `escape_field` writes: kept as it is
            out.append(char)
            i += 1
    return "".join(out)


_CHUNK = 2000  # rows per write: the output of 100,000 threads is never one string in memory


def plain_text(rows: Sequence[RowFields]) -> str:
    """The plain form: one tab-separated line per row (PLAIN_COLUMNS), each ending with a newline."""
    return "".join(plain_chunks(rows))


def plain_chunks(rows: Sequence[RowFields]) -> Iterator[str]:
    """`plain_text` in pieces of _CHUNK rows. `rows` are `Row`s, or the plain tuples `ops.listing.listed`
    gives (the same fields, without an object per thread)."""
    for start in range(0, len(rows), _CHUNK):
        yield _plain_lines(rows[start:start + _CHUNK])


def _plain_lines(rows: Sequence[RowFields]) -> str:
    escape = escape_field
    objectives: dict[str | None, str] = {}  # "objective\tits title", escaped once per objective
    lines = []
    for tid, title, status, objective, objective_title, _intent, _created, activity, targets, _sources in rows:
        shown = objectives.get(objective)
        if shown is None:
            shown = objectives[objective] = f"{objective or '-'}\t{escape(objective_title or '-')}"
        lines.append(f"{tid}\t{status}\t{iso_time(activity // 1_000_000_000)}\t{shown}\t{targets or '-'}\t"
                     f"{escape(title)}\n")
    return "".join(lines)


def json_text(rows: Sequence[RowFields]) -> str:
    """`list --json`: an array with one row a line, keys sorted, as `leslie.terminal.visible_json` shows the
    encoder's text (the C encoder: an indented dump runs in pure Python, several times slower at 100,000
    threads)."""
    return "".join(json_chunks(rows))


def json_chunks(rows: Sequence[RowFields], holders: Mapping[str, dict[str, Any]] | None = None) -> Iterator[str]:
    """`json_text` in pieces of _CHUNK rows (`rows` as for `plain_chunks`); `holders`: the live claims by thread
    (`ops.claims.Holder.to_json`), each row's `held_by` (null for the others)."""
    if not rows:
        yield "[]\n"
        return
    for start in range(0, len(rows), _CHUNK):
        lead = "[\n  " if start == 0 else ",\n  "
        yield lead + ",\n  ".join(_json_lines(rows[start:start + _CHUNK], holders or {}))
    yield "\n]\n"


def _json_lines(rows: Sequence[RowFields], holders: Mapping[str, dict[str, Any]]) -> list[str]:
    """Each row as `visible_json(json.JSONEncoder(sort_keys=True, ensure_ascii=False).encode(row.to_json()))`
    writes it (tests/test_listing.py holds the two side by side), with the keys laid out once instead of a dict
    built and sorted per row: at 100,000 threads that was most of `list --json`'s time. The strings go through
    the encoder's own C escaping; IDs, statuses and times are patterns with nothing to escape.

    `visible_json` runs only on a line that may need it: an ASCII line can hold no character it escapes but
    DEL (the encoder escapes every other ASCII control), and `isascii` is a flag, not a scan."""
    from json.encoder import encode_basestring as text

    objectives: dict[str | None, str] = {None: 'null, "objective_title": null'}
    lines = []
    for tid, title, status, objective, objective_title, intent, created_at, activity, targets, sources in rows:
        shown = objectives.get(objective)
        if shown is None:
            shown = objectives[objective] = (f'"{objective}", "objective_title": '
                                             f'{"null" if objective_title is None else text(objective_title)}')
        by = '["' + sources.replace(",", '", "') + '"]' if sources else "[]"
        to = '["' + targets.replace(",", '", "') + '"]' if targets else "[]"
        held = holders.get(tid)
        held_by = "null" if held is None else json.dumps(held, ensure_ascii=False, sort_keys=True)
        line = (f'{{"created_at": {text(created_at)}, "held_by": {held_by}, "id": "{tid}", "intent": {text(intent)}, '
                f'"objective": {shown}, "referenced_by": {by}, "references_to": {to}, '
                f'"status": "{status}", "title": {text(title)}, '
                f'"updated_at": "{iso_time(activity // 1_000_000_000)}"}}')
        lines.append(line if line.isascii() and "\x7f" not in line else visible_json(line))
    return lines


# -- the table --------------------------------------------------------------------------------------------
_INDENT = "  "
_GAP = "  "
_STATUS_WIDTH = 8  # "archived"
_WHEN_WIDTH = 10  # "2026-11-24" (or "14:05" today)
_REFS_WIDTH = 4
_MIN_TITLE = 16  # below this, columns are dropped (UPDATED, then REFS) to give the title room


def when(seconds: int, now: float, today: tuple[int, ...] | None = None) -> str:
    """A time as a person scans it: `HH:MM` on the same local day as `now`, else `YYYY-MM-DD` (`today`:
    `now`'s local date, when the caller has it already)."""
    moment = time.localtime(seconds)
    if (time.localtime(now)[:3] if today is None else today) == moment[:3]:
        return time.strftime("%H:%M", moment)
    return time.strftime("%Y-%m-%d", moment)


def _group_header(group: Group, width: int) -> str:
    """The line above a group's threads: the objective's title (cut to fit), short ID, status and count."""
    count = f"{len(group.rows)} thread{'s' if len(group.rows) != 1 else ''}"
    if group.objective is None:
        return _cut(f"No objective · {count}", width)
    if group.title is None:
        return _cut(f"{group.objective} (objective not found) · {count}", width)
    tail = f" · {short_id(group.objective)} · {group.status} · {count}"
    line = _cut(group.title, max(width - len(tail), _MIN_TITLE)) + tail
    return line if len(line) <= width else _cut(line, width)  # a very narrow terminal: the tail is cut too


def table_text(groups: list[Group], width: int, *, now: float | None = None, bold: bool = False,
               holders: Mapping[str, str] | None = None) -> str:
    """The table at `width` columns: a header, then each group's title line and its threads, one per line;
    `holders` (thread → "AGENT session ID") adds "[held by ...]" after a held thread's title."""
    if not groups:
        return "no threads\n"
    now = time.time() if now is None else now
    today = time.localtime(now)[:3]
    id_width = max(len(row.id) for group in groups for row in group.rows)
    columns = ["ID".ljust(id_width), "STATUS".ljust(_STATUS_WIDTH), "UPDATED".ljust(_WHEN_WIDTH),
               "REFS".rjust(_REFS_WIDTH)]
    show_when = show_refs = True
    room = width - len(_INDENT) - sum(len(c) + len(_GAP) for c in columns)
    if room < _MIN_TITLE:
        show_when, room = False, room + _WHEN_WIDTH + len(_GAP)
    if room < _MIN_TITLE:
        show_refs, room = False, room + _REFS_WIDTH + len(_GAP)
    room = max(room, len("TITLE"))
    shown = [columns[0], columns[1]] + ([columns[2]] if show_when else []) + ([columns[3]] if show_refs else [])
    lines = [_INDENT + _GAP.join([*shown, "TITLE"])]
    on, off = ("\x1b[1m", "\x1b[0m") if bold else ("", "")
    shown_times: dict[int, str] = {}  # each distinct second drawn once (a `localtime` + `strftime` per row)
    for group in groups:
        lines.append("")
        lines.append(on + _group_header(group, width) + off)
        for row in group.rows:
            cells = [row.id.ljust(id_width), row.status.ljust(_STATUS_WIDTH)]
            if show_when:
                seconds = row.activity // 1_000_000_000
                cell = shown_times.get(seconds)
                if cell is None:
                    cell = shown_times[seconds] = when(seconds, now, today).ljust(_WHEN_WIDTH)
                cells.append(cell)
            if show_refs:
                cells.append(str(row.targets.count(",") + 1 if row.targets else 0).rjust(_REFS_WIDTH))
            held = holders.get(row.id) if holders else None
            cells.append(_cut(row.title if held is None else f"{row.title}  [held by {held}]", room))
            lines.append(_INDENT + _GAP.join(cells))
    return "\n".join(lines) + "\n"


def table_form(holders: Mapping[str, str]) -> tuple[object, Callable[[list[Group]], str]]:
    """The table this terminal gets (fitted to its width, bold unless NO_COLOR or a dumb terminal, `holders` the
    claims it shows): what it depends on besides the rows (the `also` of `ops.listing.Listing`'s key: the local
    day and its offset too, since a time of today is shown as `HH:MM` and an older one as its date), and how it
    is drawn of the grouped rows."""
    width, bold = terminal_width(), styled()
    return ([width, bold, sorted(holders.items()), time.strftime("%Y-%m-%d %z")],
            lambda groups: table_text(groups, width, bold=bold, holders=holders))
