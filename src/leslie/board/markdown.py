"""Markdown from a repository, as HTML that cannot run anything, within a budget.

Two locks, either enough on its own: markdown-it-py with raw HTML disabled (a `<script>` in plan.md is text),
then nh3 (the ammonia sanitizer) with an allow-list of tags and attributes and of URL schemes, so a
`javascript:` link or an `onerror` attribute cannot come through even if the parser let one by.

And a budget, because markdown-it-py cannot be stopped halfway through a file and some text costs it far more
than its size says (docs/security.md, "The board"; the figures: docs/benchmarks.md, "Hostile Markdown").
Dense punctuation costs up to ~20 µs per character (`![![![`, `[a[a[a`, a line per `[a`) where prose costs
under 1 µs, so a file is rendered only when it is small enough (MAX_FILE_BYTES) and has few enough marks,
lines and the punctuation markdown-it acts on (MAX_FILE_MARKS); and a GFM table costs per cell, cells a row
need not spell out included (a 500-column header over 131 one-character rows is 65,536 cells from 1.4 KB), so
a file's tables stop at MAX_TABLE_CELLS (the rows past that are text). A page renders files until it has spent
PAGE_SECONDS or PAGE_BYTES; whatever is left, or over a cap, is shown as plain text with the reason.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

TAGS = {"a", "blockquote", "br", "code", "del", "em", "h1", "h2", "h3", "h4", "h5", "h6", "hr", "input", "li", "ol",
        "p", "pre", "s", "strong", "table", "tbody", "td", "th", "thead", "tr", "ul"}
# No `style` (the page's Content-Security-Policy allows no inline style), no `img` (it would load from elsewhere).
ATTRIBUTES = {"a": {"href", "title"}, "ol": {"start"}}
# A task-list item's checkbox (`- [ ]`, `- [x]`) is the one `input`: only leslie's rule below makes one (raw
# HTML is text), and the sanitizer keeps nothing but a disabled checkbox of it whatever the HTML says.
INPUT_VALUES = {"input": {"checked": {"checked"}}}
INPUT_FORCED = {"input": {"type": "checkbox", "disabled": "disabled"}}
_TASK = {"[ ]": "", "[x]": ' checked="checked"', "[X]": ' checked="checked"'}
URL_SCHEMES = {"http", "https", "mailto"}

MAX_FILE_BYTES = 128 * 1024  # a larger file is plain text
MAX_FILE_MARKS = 12_000  # lines plus MARKS characters: the worst text found renders in ~0.3 s at this count
MAX_TABLE_CELLS = 4_096  # cells of all a file's tables (header rows and filled-in cells counted)
PAGE_BYTES = 512 * 1024  # Markdown rendered on one page; past it, plain text
PAGE_SECONDS = 1.0  # rendering time of one page; past it, plain text
# The characters markdown-it's inline parser stops at (markdown_it.parser_inline), the newline included.
MARKS = "\n!#$%&*+-:<=>@[\\]^_`{}~"
_CELLS = "leslie_table_cells"  # the key of the cells spent so far, in markdown-it's per-render `env`


@dataclass(frozen=True)
class Shown:
    """A file as its page shows it: sanitized HTML, or None and the reason it is shown as plain text."""

    html: str | None
    note: str | None = None


def marks(text: str) -> int:
    """What markdown-it's work grows with, beside the length: its lines and the punctuation it acts on."""
    return sum(text.count(mark) for mark in MARKS)


def _kib(size: int) -> str:
    return f"{size // 1024} KB"


class PageBudget:
    """One page's Markdown: `show(text)` renders while the page has time and room left, then plain text.

    The time is checked between files (a render cannot be stopped), so a page takes at most PAGE_SECONDS
    plus one file, and a file within the caps is quick whatever it holds."""

    def __init__(self, seconds: float = PAGE_SECONDS, size: int = PAGE_BYTES,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.deadline = clock() + seconds
        self.seconds = seconds
        self.size = size
        self.left = size

    def show(self, text: str) -> Shown:
        """`text` rendered (sanitized), or why it is shown as plain text."""
        size = len(text.encode("utf-8"))
        if size > MAX_FILE_BYTES:
            return Shown(None, f"larger than {_kib(MAX_FILE_BYTES)}")
        if marks(text) > MAX_FILE_MARKS:
            return Shown(None, f"more than {MAX_FILE_MARKS:,} lines and Markdown marks")
        if size > self.left:
            return Shown(None, f"the page's {_kib(self.size)} of rendered Markdown were spent")
        if self.clock() >= self.deadline:
            return Shown(None, f"the page's rendering budget ({self.seconds:g} s) was spent")
        self.left -= size
        return Shown(render_markdown(text))


def _table_within_budget(table: Any) -> Any:
    """markdown-it's table rule, stopped at MAX_TABLE_CELLS per render: the rows past it become text, and a
    table that would start past it is not one. Its own limit (65,536 filled-in cells per table) is far too
    much for a page, and is per table."""

    def rule(state: Any, start: int, end: int, silent: bool) -> bool:
        spent = int(state.env.get(_CELLS, 0))
        header = state.src[state.bMarks[start] + state.tShift[start]:state.eMarks[start]].strip()
        # At least the table's columns: each follows a `|` but the first (a leading and a trailing `|` open
        # and close no column; an escaped `\|` is counted too, which only overestimates).
        columns = header.removeprefix("|").removesuffix("|").count("|") + 1
        rows = (MAX_TABLE_CELLS - spent) // columns - 1  # body rows left, after the header's
        if rows < 1:
            return False
        found = bool(table(state, start, min(end, start + 2 + rows), silent))  # 2: the header, the delimiters
        if found and not silent:
            state.env[_CELLS] = spent + columns * (state.line - start - 1)
        return found

    return rule


@lru_cache(maxsize=1)
def _parser() -> Any:
    from markdown_it import MarkdownIt
    from markdown_it.rules_block import table

    # commonmark with tables and strikethrough; "html": False makes raw HTML literal text, linkify stays off
    parser = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False}).enable(
        ["table", "strikethrough"])
    parser.block.ruler.at("table", _table_within_budget(table), {"alt": ["paragraph", "reference"]})
    parser.core.ruler.push("task_lists", _task_lists)
    return parser


def _task_lists(state: Any) -> None:
    """A list item whose text starts with `[ ]` or `[x]` starts with a disabled checkbox instead (GFM's task
    lists): the first text of the item's first paragraph loses the marker, and an `html_inline` token, which
    only this rule makes (raw HTML is off), renders the box."""
    from markdown_it.token import Token

    tokens = state.tokens
    for index in range(2, len(tokens)):
        inline = tokens[index]
        if (inline.type != "inline" or tokens[index - 1].type != "paragraph_open"
                or tokens[index - 2].type != "list_item_open" or not inline.children):
            continue
        first = inline.children[0]
        marker = first.content[:3]
        if first.type != "text" or marker not in _TASK or first.content[3:4] not in ("", " "):
            continue
        first.content = first.content[4:]
        box = Token("html_inline", "", 0)
        box.content = f'<input type="checkbox" disabled="disabled"{_TASK[marker]}> '
        inline.children.insert(0, box)


def render_markdown(text: str) -> str:
    """Sanitized HTML for `text`: no raw HTML, no scripts or event handlers, links only to http(s)/mailto
    (opened without a referrer), images dropped (the page loads nothing from elsewhere). No size check: see
    PageBudget, which every page goes through."""
    import nh3

    html = _parser().render(text, {})
    return nh3.clean(html, tags=TAGS, attributes=ATTRIBUTES, url_schemes=URL_SCHEMES,
                     link_rel="noopener noreferrer", strip_comments=True, tag_attribute_values=INPUT_VALUES,
                     set_tag_attribute_values=INPUT_FORCED)
