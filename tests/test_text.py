"""cli/text.py: the Rich-free columns and field lists (IDs whole, lines within the width, no control character)."""

from __future__ import annotations

import string

from hypothesis import given
from hypothesis import strategies as st

from leslie.cli.text import columns, cut, fields
from leslie.terminal import visible

IDS = st.text(alphabet=string.ascii_lowercase + string.digits, min_size=1, max_size=12).map("thread-{}".format)
CELLS = st.text(max_size=60)


def _controls(text: str) -> bool:
    return not text.isprintable()


@given(st.text(), st.integers(min_value=1, max_value=40))
def test_cut_fits_its_room(text: str, room: int) -> None:
    out = cut(text, room)
    assert len(out) <= room
    assert out == visible(text) or out.endswith("…")


@given(st.lists(st.tuples(IDS, CELLS, CELLS), min_size=1, max_size=8), st.integers(min_value=40, max_value=120))
def test_columns_fit_the_width_and_keep_ids_whole(rows: list[tuple[str, str, str]], width: int) -> None:
    out = columns(["ID", "Status", "Title"], [list(r) for r in rows], width=width)
    lines = out.splitlines()
    assert len(lines) == len(rows) + 1  # never wrapped
    for line, (tid, _, _) in zip(lines[1:], rows, strict=True):
        assert line.startswith(tid + " ") or line == tid  # the ID whole, first
        assert len(line) <= width  # 40 columns leave room for a 19-character ID and two cut columns
        assert not _controls(line)


def test_columns_cut_the_widest_column_first() -> None:
    out = columns(["ID", "Status", "Title"], [["thread-a", "active", "x" * 100]], width=40)
    line = out.splitlines()[1]
    assert line.startswith("thread-a  active  xxx") and line.endswith("…") and len(line) == 40


def test_fields_indent_further_lines() -> None:
    out = fields([("id", "thread-a"), ("intent", "first\nsecond\x1b[31m")])
    assert out == "id      thread-a\nintent  first\n        second\\x1b[31m\n"
