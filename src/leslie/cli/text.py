"""Text for people, without Rich: aligned columns cut to the terminal, field lists, and `say`.

Rich cost ~50 ms to import and ~450 ms to draw 1,000 rows (issue 17); these views need neither its boxes nor
its wrapping. A cell is one line of text made `visible` (`leslie.terminal`: a line break, a control or a bidi
character is shown as an escape such as `\\n` or `\\x1b`), cut with "…" when the row would pass the width;
a column marked `keep` (IDs) is never cut, so an ID can always be copied or grepped whole. `say` and `say_err`
are how a command's human answer, warnings and questions reach the terminal: every line made `visible`.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

from leslie.terminal import visible

if TYPE_CHECKING:
    from collections.abc import Sequence

_GAP = "  "
MIN_WIDTH = 20  # a narrower terminal is drawn for as if it had 20 columns
_MIN_CUT = 8  # a cut column keeps at least this much (or its header)
def cut(text: str, room: int | None) -> str:
    """`text` on one visible line, cut to `room` characters with "…" (None: uncut)."""
    text = visible(text)
    if room is None or len(text) <= room:
        return text
    return text[:max(room - 1, 0)] + "…"


def terminal_width() -> int:
    """The width to fit: `COLUMNS`, else the terminal's, else 80 (a pipe, or a terminal that was given no size:
    `script`'s, a container's, say 0); at least `MIN_WIDTH`."""
    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and int(columns) > 0:
        return max(int(columns), MIN_WIDTH)
    try:
        return max(os.get_terminal_size(sys.stdout.fileno()).columns or 80, MIN_WIDTH)
    except (OSError, ValueError):
        return 80


def styled() -> bool:
    """Whether a terminal's text may carry colours and bold (not with NO_COLOR set, nor on a dumb terminal)."""
    return "NO_COLOR" not in os.environ and os.environ.get("TERM") != "dumb"


def columns(headers: Sequence[str], rows: Sequence[Sequence[str]], *, width: int | None = None,
            keep: Sequence[int] = (0,)) -> str:
    """`rows` under `headers`, aligned, each line at most `width` characters when the kept columns allow."""
    limit = terminal_width() if width is None else width
    cells = [[visible(cell) for cell in row] for row in rows]
    sizes = [max([len(h), *(len(row[i]) for row in cells)]) for i, h in enumerate(headers)]
    floors = [sizes[i] if i in keep else min(sizes[i], max(len(h), _MIN_CUT)) for i, h in enumerate(headers)]
    excess = sum(sizes) + len(_GAP) * (len(sizes) - 1) - limit
    while excess > 0:  # take from the widest column that can still give
        room = [(sizes[i] - floors[i], sizes[i], i) for i in range(len(sizes)) if sizes[i] > floors[i]]
        if not room:
            break
        _, _, widest = max(room)
        give = min(excess, sizes[widest] - floors[widest], max(1, sizes[widest] - sorted(sizes)[-2]))
        sizes[widest] -= give
        excess -= give
    lines = []
    for row in [list(headers), *cells]:
        line = _GAP.join(cut(cell, sizes[i]).ljust(sizes[i]) for i, cell in enumerate(row))
        lines.append(line.rstrip() + "\n")
    return "".join(lines)


def fields(pairs: Sequence[tuple[str, str]]) -> str:
    """`name  value` lines, names aligned; a value's further lines are indented under its first."""
    pad = max((len(name) for name, _ in pairs), default=0) + len(_GAP)
    out = []
    for name, value in pairs:
        lines = [visible(line) for line in value.split("\n")] or [""]
        out.append(f"{name.ljust(pad)}{lines[0]}".rstrip() + "\n")
        out.extend(f"{' ' * pad}{line}".rstrip() + "\n" for line in lines[1:])
    return "".join(out)


def say(text: str) -> None:
    """Write `text` for a person on stdout: every line `visible`, line breaks kept (the one way a command's
    human answer reaches the terminal; JSON, XML and graphs are written as they are)."""
    sys.stdout.write(visible(text, lines=True))


def say_err(text: str) -> None:
    """`say` on stderr: warnings, notes, errors and questions."""
    sys.stderr.write(visible(text, lines=True))
