"""`leslie find TEXT`: case-insensitive search over objectives, thread titles and intents, and thread assets.

The assets are the files in a thread's folder (plan, progress, design/, artifacts/, anything else there but
`thread.json`, whose fields are searched as fields), less the lines of leslie's scaffold in a plan or progress
(`context.scaffold`: the heading spawn wrote repeats the title, which is searched as a field). The folder comes
from a repository that may be hostile: links are never followed (neither a linked file nor a linked folder is
read), only regular files are opened (a FIFO would block), and a file is skipped when it is over
`MAX_FILE_BYTES` or looks binary (a NUL byte early).

Which files may hold the text is decided from a full-text index of what each held when last read
(`find_index.py`, in the derived store), for every file whose signature is unchanged; each hit in a file is
then read from the file itself, and a thread's title and intent come from what the store parsed of the same
`thread.json` (its signature unchanged since), else from the file: the output is the same with a current, stale
or missing index.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from leslie.context.scaffold import scaffold_lines
from leslie.errors import UsageError
from leslie.ops.find_index import MAX_DEPTH, MAX_FILE_BYTES, RACY_NS, read_text, to_search
from leslie.ops.watched import Ask
from leslie.store.derived import rows_where_in, with_index_table
from leslie.store.drawings import mirrored_index
from leslie.store.fsio import LESLIE_DIR, refuse_links
from leslie.store.model import Thread
from leslie.store.repository import Repository

__all__ = ["MAX_DEPTH", "MAX_FILE_BYTES", "Hit", "find"]

_SHOWN_CHARS = 160  # a longer matching line is shown as a window around the match


@dataclass(frozen=True)
class Hit:
    """One matching line: in an objective's or a thread's field, or in one of a thread's files."""

    kind: str  # "objective" or "thread"
    id: str
    title: str
    where: str  # a field (`title`, `intent`, `description`) or a path in the thread's folder (`design/api.md`)
    line: int  # 1-based, within the field or file
    text: str  # the matching line, trimmed (and windowed around the match when long)
    path: str | None = None  # the file, relative to the repository root; None for a field

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "id": self.id, "title": self.title, "where": self.where, "line": self.line,
                "text": self.text, "path": self.path}


def _trim(line: str, at: int, length: int) -> str:
    """`line` without surrounding blanks; when long, the `_SHOWN_CHARS` around the match at `at`."""
    stripped = line.strip()
    at -= len(line) - len(line.lstrip())
    if len(stripped) <= _SHOWN_CHARS:
        return stripped
    start = max(0, min(at - (_SHOWN_CHARS - length) // 2, len(stripped) - _SHOWN_CHARS))
    window = stripped[start:start + _SHOWN_CHARS]
    return ("…" if start else "") + window + ("…" if start + _SHOWN_CHARS < len(stripped) else "")


def _matches(text: str, needle: str) -> Iterator[tuple[int, str]]:
    """(line number, trimmed line) for every line of `text` that holds `needle` (already casefolded)."""
    if needle not in text.casefold():  # most fields and files hold no match: one scan, no line split
        return
    for number, line in enumerate(text.splitlines(), 1):
        folded = line.casefold()
        at = folded.find(needle)
        if at >= 0:
            # `at` indexes the casefolded line; for the rare letters casefolding lengthens (ß → ss) the window
            # may sit a few characters off, which trimming tolerates.
            yield number, _trim(line, min(at, len(line)), len(needle))


def find(repo: Repository, text: str, ask: Ask | None = None) -> list[Hit]:
    """Every line holding `text` (case-insensitive): objectives (title, description), then each live thread by
    ID (title, intent, then its files by path). A thread folder that is a link has its fields searched only.

    Which files may hold `text` comes from the full-text index (`ops/find_index.py`) for every file whose
    signature is unchanged, from the file otherwise; each hit in a file comes from the file read now. `ask`
    is the resident watcher's (`ops/watched.py`): with its answer, only the threads it saw change are checked.
    """
    needle = text.casefold()
    if not needle.strip():
        raise UsageError("find needs some text to search for")
    hits: list[Hit] = []
    for objective in repo.objectives():
        for where, value in (("title", objective.title), ("description", objective.description or "")):
            hits += [Hit("objective", objective.id, objective.title, where, number, line)
                     for number, line in _matches(value, needle)]
    threads_dir = str(repo.layout.threads_dir)
    refuse_links(threads_dir)  # a linked `.leslie/threads` fails as every other read does (exit 4)
    live, index = with_index_table(repo, lambda db: (
        [row[0] for row in db.execute("SELECT id FROM threads ORDER BY id")], mirrored_index(db)))
    todo = to_search(repo, threads_dir, live, needle, time.time_ns() - RACY_NS, ask, index)
    titles = _titles(repo, sorted(todo))
    with repo.threads_folder() as threads:
        for thread_id in sorted(todo):
            title = titles.get(thread_id, thread_id)  # gone from the index meanwhile: shown by its ID
            found = todo[thread_id]
            needs_folder = found.files or (found.fields and found.known is None)
            folder = threads.open_thread(thread_id) if needs_folder else None
            try:
                if found.fields:
                    own, intent = found.known or _title_and_intent(threads.read_in(folder, thread_id))
                    for where, value in (("title", own), ("intent", intent)):
                        hits += [Hit("thread", thread_id, own, where, number, line)
                                 for number, line in _matches(value, needle)]
                shown_folder = f"{LESLIE_DIR}/threads/{thread_id}"
                for rel in found.files:
                    content = None if folder is None else read_text(folder, rel)
                    if content is None:
                        continue
                    scaffold = scaffold_lines(rel, content)  # spawn's heading is no hit (the title is searched)
                    hits += [Hit("thread", thread_id, title, rel, number, line, f"{shown_folder}/{rel}")
                             for number, line in _matches(content, needle) if number not in scaffold]
            finally:
                if folder is not None:
                    os.close(folder)
    return hits


def _title_and_intent(thread: Thread) -> tuple[str, str]:
    return thread.title, thread.intent


def _titles(repo: Repository, thread_ids: list[str]) -> dict[str, str]:
    """The titles of `thread_ids` in the index (a thread gone from it meanwhile has none)."""
    if not thread_ids:
        return {}
    return with_index_table(repo, lambda db: dict(rows_where_in(
        db, "SELECT id, title FROM threads WHERE id IN ({})", thread_ids)))
