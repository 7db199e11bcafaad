"""leslie's scaffold: the text `spawn` writes into a new thread's `plan.md` and `progress.md`, and how to tell it
from what an agent or a person wrote.

An asset that holds only its scaffold carries nothing: the block shows it as `empty="true"` and never inlines
it (so the token budget goes to real content first), `leslie find` does not match its lines, and the board does
not show its old instruction comment. The instructions themselves live once in the AGENTS.md block.

A text is matched against every scaffold form a thread may hold: the packaged templates of this version, those
of older versions (with an HTML comment of instructions), and the repository's own `.leslie/templates/`
override when it has one. Whitespace is aside: line by line (runs of blanks folded, blank lines skipped, a
placeholder `$title`, `$thread` or `$intent_line` matching any text of its line, as a thread's title may have
changed since it was spawned), or, for a thread whose title, ID and intent are known, every blank and line break
aside against what spawn wrote for it.

Cheap: the comparison runs on text the caller
already read (the block's inlining, find's hits, a board page), never on a file read for it; the one exception
is a small plan or progress the block's loader reads, once its budget is spent, to mark it empty.
"""

from __future__ import annotations

import os
import re
import string
from collections.abc import Iterable, Sequence
from functools import lru_cache

from leslie.context import TEMPLATES

ASSET_TEMPLATES = ("plan.md", "progress.md")  # the files spawn writes from a template, by name
PLACEHOLDERS = ("title", "thread", "intent_line")
# A placeholder's value in a line-by-line match: any text, but not the start or end of the comment nor a checklist
# item, so a scaffold whose lines were joined into one is no match (it is then compared whole, for its thread).
_ANY_VALUE = r"(?:(?!<!--|-->|- \[).)*"

# The forms older leslie versions wrote (before issue 33): the heading, then an HTML comment of instructions.
LEGACY_TEMPLATES = {
    "plan.md": (
        "# Plan: $title\n\n<!-- Thread $thread. Intent: $intent_line\n"
        "     Write the steps you will take to fulfil the intent, as a checklist. Keep it current:\n"
        "     tick steps off, add new ones, strike what no longer applies. -->\n\n- [ ] \n"
    ),
    "progress.md": (
        "# Progress: $title\n\n<!-- Thread $thread. Append a dated entry after each significant step: what you did,\n"
        "     what you found, what is next. Newest last; never rewrite history. -->\n"
    ),
}


def render(template: str, title: str, thread_id: str, intent: str) -> str:
    """`template` as spawn writes it for a thread of this title, ID and intent (`string.Template`)."""
    intent_line = intent.strip().splitlines()[0] if intent.strip() else ""
    values = {"title": title, "thread": thread_id, "intent_line": intent_line.replace("--", "- -")}
    return string.Template(template).safe_substitute(values)


@lru_cache(maxsize=len(ASSET_TEMPLATES))
def packaged_template(name: str) -> str:
    """The packaged template `name` (`plan.md` or `progress.md`) of this version, as spawn copies it."""
    with open(os.path.join(TEMPLATES, name), encoding="utf-8") as handle:
        return handle.read()


def _folded(line: str) -> str:
    return " ".join(line.split())


@lru_cache(maxsize=64)
def _line_patterns(template: str) -> tuple[re.Pattern[str], ...]:
    """One pattern per non-blank line of `template` (blanks folded), each placeholder matching any text."""
    patterns = []
    for line in template.splitlines():
        folded = _folded(line)
        if not folded:
            continue
        parts: list[str] = []
        last = 0
        for match in string.Template.pattern.finditer(folded):
            parts.append(re.escape(folded[last:match.start()]))
            named = match.group("named") or match.group("braced")
            if match.group("escaped") is not None:
                parts.append(re.escape("$"))
            elif named in PLACEHOLDERS:
                parts.append(_ANY_VALUE)
            else:  # safe_substitute leaves an unknown name, or a lone `$`, as it is
                parts.append(re.escape(match.group(0)))
            last = match.end()
        parts.append(re.escape(folded[last:]))
        patterns.append(re.compile("".join(parts), re.DOTALL))
    return tuple(patterns)


def forms(name: str, override: str | None = None) -> tuple[str, ...]:
    """Every scaffold form of asset `name` a thread may hold: this version's, older versions', the override."""
    found = [packaged_template(name)]
    if name in LEGACY_TEMPLATES:
        found.append(LEGACY_TEMPLATES[name])
    if override is not None:
        found.append(override)
    return tuple(found)


def _prefix(patterns: Sequence[re.Pattern[str]], lines: Sequence[str]) -> list[int]:
    """Indexes of the lines of `lines` that the template's lines match, in order from the start, blank lines
    skipped; the first line that does not match ends the scaffold."""
    matched: list[int] = []
    at = 0
    for index, line in enumerate(lines):
        folded = _folded(line)
        if not folded:
            continue
        if at >= len(patterns) or patterns[at].fullmatch(folded) is None:
            break
        matched.append(index)
        at += 1
    return matched


def scaffold_lines(name: str, text: str, override: str | None = None) -> set[int]:
    """The 1-based numbers of the lines at the start of `text` that are the scaffold of asset `name` (its
    heading, the old instruction comment, the empty checklist item), in the form that matches most of them;
    empty for a file that is not one of `ASSET_TEMPLATES`."""
    if name not in ASSET_TEMPLATES:
        return set()
    lines = text.splitlines()
    best: list[int] = []
    for form in forms(name, override):
        matched = _prefix(_line_patterns(form), lines)
        if len(matched) > len(best):
            best = matched
    return {index + 1 for index in best}


def is_scaffold(name: str, text: str, override: str | None = None,
                thread: tuple[str, str, str] | None = None) -> bool:
    """True when `text` holds nothing but (a part of) the scaffold of asset `name`, whitespace aside: a file
    with only blanks counts, a file with one line of its own does not.

    Line by line (any title); and, given the thread's `(title, ID, intent)`, also as spawn would have written it
    for that thread with every blank (line breaks too) aside."""
    if name not in ASSET_TEMPLATES:
        return False
    lines = text.splitlines()
    written = sum(1 for line in lines if line.strip())
    if written == len(scaffold_lines(name, text, override)):
        return True
    if thread is None:
        return False
    bare = "".join(text.split())
    return any(bare == "".join(render(form, *thread).split()) for form in forms(name, override))


def comment_lines(name: str, text: str, override: str | None = None) -> set[int]:
    """Of `scaffold_lines`, those of an HTML comment (the old instructions), which a reader need not see."""
    lines = text.splitlines()
    inside = False
    found = set()
    for number in sorted(scaffold_lines(name, text, override)):
        line = lines[number - 1].strip()
        if line.startswith("<!--"):
            inside = True
        if inside:
            found.add(number)
        if line.endswith("-->"):
            inside = False
    return found


def without_lines(text: str, numbers: Iterable[int]) -> str:
    """`text` without the lines numbered in `numbers` (1-based), line endings of the others kept."""
    drop = set(numbers)
    if not drop:
        return text
    return "".join(line for number, line in enumerate(text.splitlines(keepends=True), 1) if number not in drop)
