"""Progressive loading: which file contents a `<thread_context>` block inlines under its token budget.

Levels, filled in order until the budget (`[context] budget_tokens`, tokens of inlined text) is spent:

1. the thread's own plan (from its start), then the newest entries of its own progress (from its end);
2. the in-scope files of referenced threads (one level: direct references only), most recently changed first;
3. everything else: paths only.

A file that does not fit whole is cut at a line boundary to fill what is left of the budget, and the budget
is then spent. Binary or oversized files are skipped (never inlined, never counted), and so is a plan or
progress that holds only leslie's scaffold (`leslie.context.scaffold`: shown as `empty="true"`), so the budget
goes to real content first. Tokens are estimated by `leslie.context.files.tokens_of` (UTF-8 bytes / 4, rounded
up), per inlined text.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from leslie.context import template_data
from leslie.context.files import BYTES_PER_TOKEN, cut_head, cut_tail, line_count, read_text, tokens_of
from leslie.context.scaffold import is_scaffold

LEVEL_OWN = "own"
LEVEL_REFS = "refs"
# What the template's sandbox lets one render build (`context.sandbox`: MAX_CHARS of one printed value, MAX_OUTPUT
# of the whole text), in characters of *escaped* text: inlined text never makes a block fail to render, so an
# agent gets the block whole at any budget (text heavy with `&` or `<` grows by up to five times when escaped).
MAX_TEXT_CHARS = 1 << 20  # one inlined text (the sandbox's MAX_CHARS)
MAX_BLOCK_CHARS = 3 << 20  # all inlined text: a MiB under the sandbox's MAX_OUTPUT left for the markup
SCAFFOLD_BYTES = 4096  # a plan or progress larger than this is not spawn's scaffold (about 300 bytes)


@template_data
class Inline(NamedTuple):
    """The inlined text of one file: lines `first_line`..`last_line` of its `total_lines` (1-based)."""

    text: str
    first_line: int
    last_line: int
    total_lines: int
    omitted_bytes: int
    tokens: int

    @property
    def complete(self) -> bool:
        """True when the whole file is inlined."""
        return self.omitted_bytes == 0

    @property
    def lines(self) -> str:
        """The shown lines as `first-last` (`0-0` for an empty text)."""
        return f"{self.first_line}-{self.last_line}" if self.last_line else "0-0"

    def omitted(self) -> str | None:
        """The cut marker: how much was left out and where to read it; None for a whole file."""
        if self.complete:
            return None
        left_out = self.total_lines - (self.last_line - self.first_line + 1 if self.last_line else 0)
        if self.first_line > 1:
            return (f"{left_out} earlier lines ({self.omitted_bytes} bytes) not shown: read lines "
                    f"1-{self.first_line - 1} of this file")
        start = self.last_line + 1
        return (f"{left_out} more lines ({self.omitted_bytes} bytes) not shown: read this file from line "
                f"{start}")


class Candidate(NamedTuple):
    """A file that may be inlined: its path from the repository root, on disk, and how to cut it."""

    path: str  # relative to the repository root
    disk_path: str
    level: str
    from_end: bool  # progress logs keep their newest entries: cut from the end
    template: str | None = None  # the asset template spawn wrote it from (`plan.md`, `progress.md`), if any
    thread: tuple[str, str, str] | None = None  # the thread's (title, ID, intent) the template was filled with


@dataclass
class Loaded:
    """What the budget bought: inlined texts by path, reasons for skipped files, tokens per level, and the
    paths of files that hold only their scaffold."""

    budget: int
    inlines: dict[str, Inline]
    skipped: dict[str, str]
    tokens: dict[str, int]
    empty: set[str] = field(default_factory=set)


def _inline(text: str, remaining_bytes: int, from_end: bool) -> Inline | None:
    data_size = len(text.encode("utf-8"))
    total = line_count(text)
    if data_size <= remaining_bytes:
        return Inline(text, 1 if total else 0, total, total, 0, tokens_of(data_size))
    shown, count = (cut_tail if from_end else cut_head)(text, remaining_bytes)
    if count == 0:
        return None
    first = total - count + 1 if from_end else 1
    size = len(shown.encode("utf-8"))
    return Inline(shown, first, first + count - 1, total, data_size - size, tokens_of(size))


def escaped_chars(text: str) -> int:
    """Characters of `text` once escaped as element text (`leslie.context.render.xml_element_text`)."""
    return len(text) + 4 * text.count("&") + 3 * text.count("<") + 4 * text.count("\r") + 3 * text.count("]]>")


def _fitting(text: str, max_bytes: int, from_end: bool, max_chars: int) -> Inline | None:
    """`_inline`, cut further while its escaped text is over `max_chars` characters."""
    inline = _inline(text, max_bytes, from_end)
    while inline is not None and (chars := escaped_chars(inline.text)) > max_chars:
        max_bytes = min(max_bytes - 1, len(inline.text.encode("utf-8")) * max_chars // chars)
        inline = _inline(text, max_bytes, from_end) if max_bytes > 0 else None
    return inline


def fill(candidates: Sequence[Candidate], budget: int, overrides: Mapping[str, str] | None = None) -> Loaded:
    """Inline candidates in order until `budget` tokens are spent (see the module's docstring). `overrides`:
    the repository's own asset templates by name (`.leslie/templates/plan.md`), also scaffold.

    Once the budget is spent, a plan or progress small enough to be scaffold (`SCAFFOLD_BYTES`) is still
    read, to be marked `empty` (it would never be inlined anyway); nothing else is read."""
    loaded = Loaded(budget, {}, {}, {LEVEL_OWN: 0, LEVEL_REFS: 0})
    remaining = budget
    room = MAX_BLOCK_CHARS
    for candidate in candidates:
        if remaining <= 0 and (candidate.template is None or not _small(candidate.disk_path)):
            continue
        text, reason = read_text(candidate.disk_path)
        if text is None:
            if reason not in (None, "missing"):
                loaded.skipped[candidate.path] = str(reason)
            continue
        if candidate.template is not None and is_scaffold(candidate.template, text,
                                                          (overrides or {}).get(candidate.template), candidate.thread):
            loaded.empty.add(candidate.path)  # compared on the text just read: no read of its own
            continue
        if remaining <= 0:
            continue
        inline = _fitting(text, remaining * BYTES_PER_TOKEN, candidate.from_end, min(MAX_TEXT_CHARS, room))
        if inline is None:
            remaining = 0  # not even one line fits: the budget is spent
            continue
        loaded.inlines[candidate.path] = inline
        loaded.tokens[candidate.level] += inline.tokens
        remaining = 0 if not inline.complete else remaining - inline.tokens
        room -= escaped_chars(inline.text)
    return loaded


def _small(path: str) -> bool:
    """True when `path` is a file of at most SCAFFOLD_BYTES (one `lstat`)."""
    try:
        return os.lstat(path).st_size <= SCAFFOLD_BYTES
    except (OSError, ValueError):
        return False
