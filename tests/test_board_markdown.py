"""The board's Markdown budget (leslie.board.markdown): what is rendered, what is shown as plain text and why.
Timings are left to benchmarks/bench_markdown.py; these check the rules, with hostile text."""

from __future__ import annotations

import re
from collections.abc import Callable

from board_server import slow_markdown, table_bomb
from leslie.board.markdown import (
    MAX_FILE_BYTES,
    MAX_FILE_MARKS,
    MAX_TABLE_CELLS,
    PAGE_BYTES,
    PageBudget,
    marks,
    render_markdown,
)


def _cells(html: str) -> int:
    return len(re.findall(r"<t[dh][ >]", html))


def test_a_table_bomb_stops_at_the_cell_budget() -> None:
    # 2 KB that markdown-it would fill in to 65,536 cells (seconds of work) without the budget.
    bomb = table_bomb()
    assert len(bomb) < 3000
    html = render_markdown(bomb)
    assert 0 < _cells(html) <= MAX_TABLE_CELLS
    assert "x\nx\nx" in html  # the rows past the budget are text
    twice = render_markdown(bomb + "\n" + bomb)  # the budget is the file's, not each table's
    assert _cells(twice) <= MAX_TABLE_CELLS


def test_ordinary_tables_are_still_tables() -> None:
    table = "| step | who | done |\n|---|:-:|--:|\n" + "".join(f"| s{i} | me | **yes** |\n" for i in range(200))
    html = render_markdown(table + "\nAfter.\n\n" + table)
    assert _cells(html) == 2 * 3 * 201
    long = "| a | b |\n|---|---|\n" + "| 1 | 2 |\n" * (MAX_TABLE_CELLS // 2 - 1)  # exactly the budget
    assert _cells(render_markdown(long)) == MAX_TABLE_CELLS
    assert _cells(render_markdown(long + "| 1 | 2 |\n")) == MAX_TABLE_CELLS  # one row more is text
    assert "<strong>yes</strong>" in html and "<p>After.</p>" in html


def test_a_table_too_wide_for_the_budget_is_text() -> None:
    wide = "|" + "a|" * MAX_TABLE_CELLS + "\n|" + "-|" * MAX_TABLE_CELLS + "\n"
    html = render_markdown(wide)
    assert _cells(html) == 0 and "<p>|a|a|" in html


def test_a_file_over_the_size_cap_is_plain_text() -> None:
    budget = PageBudget()
    shown = budget.show("word " * (MAX_FILE_BYTES // 5 + 1))
    assert shown.html is None and shown.note == "larger than 128 KB"
    assert budget.show("# Still\n").html == "<h1>Still</h1>\n"  # the next file is rendered


def test_a_file_dense_with_markup_is_plain_text() -> None:
    for kind in ("images", "refdefs", "list_items", "links_and_emphasis", "tables"):
        text = slow_markdown(kind, 64_000)  # under the size cap, far over the marks cap
        assert len(text.encode()) < MAX_FILE_BYTES and marks(text) > MAX_FILE_MARKS, kind
        shown = PageBudget().show(text)
        assert shown.html is None and shown.note == "more than 12,000 lines and Markdown marks", kind
    prose = ("A plan that says what it will do, and why, at some length. " * 20 + "\n\n") * 100  # 120 KB
    assert PageBudget().show(prose).html is not None


def test_the_page_renders_until_its_size_budget_is_spent() -> None:
    budget = PageBudget()
    big = ("prose " * 20 + "\n\n") * 900  # 108 KB, a few marks
    shown = [budget.show(big) for _ in range(6)]
    rendered = PAGE_BYTES // len(big.encode())
    assert all(s.html is not None for s in shown[:rendered])
    assert all(s.html is None and s.note == "the page's 512 KB of rendered Markdown were spent"
               for s in shown[rendered:])
    assert budget.show("# small\n").html is not None  # what still fits is rendered


def _clock(step: float) -> Callable[[], float]:
    now = [0.0]

    def tick() -> float:
        now[0] += step
        return now[0]

    return tick


def test_the_page_renders_until_its_time_budget_is_spent() -> None:
    # The time is checked between files: a render cannot be stopped. Each file "takes" 0.3 s here.
    budget = PageBudget(seconds=1.0, clock=_clock(0.3))
    shown = [budget.show(f"# File {n}\n") for n in range(6)]
    assert [s.html is not None for s in shown] == [True, True, True, False, False, False]
    assert shown[3].note == "the page's rendering budget (1 s) was spent"


def test_task_list_items_are_disabled_checkboxes_and_nothing_else_is_an_input() -> None:
    html = render_markdown("- [ ] open\n- [x] done\n- [X] Done\n- [ ]glued\n- plain\n\n[ ] not in a list\n\n"
                           '<input type="text" onfocus="alert(1)" autofocus>\n\n1. [x] ordered\n\n'
                           "```\n- [ ] in code\n```\n")
    boxes = [sorted(attrs.split()) for attrs in re.findall(r"<input ([^>]*)>", html)]
    box = ['disabled="disabled"', 'type="checkbox"']
    assert boxes == [box, ['checked="checked"', *box], ['checked="checked"', *box], ['checked="checked"', *box]]
    assert re.search(r"<li><input [^>]*> open</li>", html)
    assert "<li>[ ]glued</li>" in html and "<p>[ ] not in a list</p>" in html and "- [ ] in code" in html
    assert "&lt;input" in html and "onfocus=" not in html.replace('onfocus="alert(1)"', "").replace(
        "onfocus=&quot;", "")
