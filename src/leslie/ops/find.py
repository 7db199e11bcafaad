"""`leslie find TEXT`: case-insensitive search over objectives, thread titles and intents, and thread assets.

The assets are the files in a thread's folder (plan, progress, design/, artifacts/, anything else there but
`thread.json`, whose fields are searched as fields). The folder comes from a repository that may be hostile:
links are never followed (neither a linked file nor a linked folder is read), only regular files are opened (a
FIFO would block), and a file is skipped when it is over `MAX_FILE_BYTES` or looks binary (a NUL byte early).

Which files may hold the text is decided from a private cache of what each held when last read
(`find_scan.py`, `find_cache.py`), for every file whose signature is unchanged; each hit is then read from the
file itself, so the output is the same with a warm, cold, stale or missing cache.
"""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from leslie.errors import UsageError
from leslie.ops.find_cache import RACY_NS, Cache, by_shard, shard_of, signature
from leslie.ops.find_scan import MAX_DEPTH, MAX_FILE_BYTES, read_text, to_search
from leslie.store.bulk import paused_gc
from leslie.store.files import LESLIE_DIR
from leslie.store.fsio import refuse_links
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


def _titled(entries: dict[str, Any], shards: tuple[tuple[str, ...], ...]) -> tuple[tuple[str, ...], ...]:
    """The titles of `shards`' IDs in the index's `entries`. The index may have changed since the IDs were
    read: a thread gone from it meanwhile is shown by its ID, as a search racing a removal may show it."""
    return tuple(tuple(entries[thread_id]["title"] if thread_id in entries else thread_id for thread_id in ids)
                 for ids in shards)


class _Live:
    """The live threads of the index: their IDs grouped by cache shard, which the scan needs first, and their
    titles, which only the hits need (`load_titles`, called while a forked child scans).

    Both are kept in the cache while the index is unchanged (decoding it strictly, and grouping 100,000 IDs by
    shard, was most of the cost before the first shard is checked), in two files: at 100,000 threads loading
    the titles too (a MAC and 100,000 strings) cost 10-15 ms more before the fork.
    """

    def __init__(self, repo: Repository, cache: Cache, limit_ns: int) -> None:
        self._repo, self._cache = repo, cache
        try:
            st: os.stat_result | None = os.lstat(repo.layout.index_path)
        except OSError:
            st = None
        # Kept only for a regular index whose ctime is out of the racy window (see `find_cache.RACY_NS`); the
        # signature is taken before the read: a later change shows.
        trusted = st is not None and stat.S_ISREG(st.st_mode) and st.st_ctime_ns < limit_ns
        self._sig = signature(st, limit_ns) if st is not None and trusted else b""
        self._titles: tuple[tuple[str, ...], ...] | None = None
        shards = self._cached("threads")
        if shards is None:
            shards, self._titles = self._decode()
        self.shards: tuple[tuple[str, ...], ...] = shards

    def _cached(self, name: str) -> Any:
        """What cache file `name` keeps for this index, or None."""
        if not self._sig:
            return None
        loaded = self._cache.load(name)
        if loaded is not None and isinstance(loaded[0], tuple) and len(loaded[0]) == 2 and loaded[0][0] == self._sig:
            return loaded[0][1]
        return None

    def _decode(self) -> tuple[tuple[tuple[str, ...], ...], tuple[tuple[str, ...], ...]]:
        """The IDs by shard and their titles, from the index itself; cached when it is trusted."""
        entries = self._repo.read_index().threads
        shards = by_shard(tuple(sorted(entries)))
        titles = _titled(entries, shards)
        self._keep("threads", shards)
        self._keep("titles", titles)
        return shards, titles

    def _keep(self, name: str, value: object) -> None:
        if self._sig:  # for this index only (a newer one has another signature)
            self._cache.save(name, (self._sig, value), b"")

    def load_titles(self) -> None:
        """Load the titles, from the cache or (its file lost) the index read again."""
        if self._titles is None:
            titles = self._cached("titles")
            if titles is None:
                titles = _titled(self._repo.read_index().threads, self.shards)
                self._keep("titles", titles)
            self._titles = titles

    def titles_of(self, thread_ids: Iterable[str]) -> dict[str, str]:
        """The titles of `thread_ids` (live threads)."""
        self.load_titles()
        assert self._titles is not None
        by_number: dict[int, dict[str, str]] = {}
        found = {}
        for thread_id in thread_ids:
            number = shard_of(thread_id)
            titled = by_number.get(number)
            if titled is None:
                titled = by_number[number] = dict(zip(self.shards[number], self._titles[number], strict=True))
            found[thread_id] = titled[thread_id]
        return found


def find(repo: Repository, text: str) -> list[Hit]:
    """Every line holding `text` (case-insensitive): objectives (title, description), then each live thread by
    ID (title, intent, then its files by path). A thread folder that is a link has its fields searched only.

    Which files may hold `text` comes from the cache (`ops/find_cache.py`) for every file whose signature is
    unchanged, from the file otherwise; each hit itself always comes from the file read now.
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
    limit_ns = time.time_ns() - RACY_NS
    cache = Cache(str(repo.layout.leslie_dir), str(repo.root))
    with paused_gc():
        live = _Live(repo, cache, limit_ns)
        todo = to_search(cache, threads_dir, live.shards, needle, limit_ns, meanwhile=live.load_titles)
        titles = live.titles_of(todo)
    # Strings and os calls, not pathlib: at 10,000 threads path objects alone cost more than the reads.
    for thread_id in sorted(todo):
        title = titles[thread_id]
        fields, files = todo[thread_id]
        if fields:
            thread = repo.read_thread(thread_id)  # strict: a corrupt or linked thread fails naming its file
            for where, value in (("title", thread.title), ("intent", thread.intent)):
                hits += [Hit("thread", thread.id, thread.title, where, number, line)
                         for number, line in _matches(value, needle)]
        shown_folder = f"{LESLIE_DIR}/threads/{thread_id}"
        for rel in files:
            content = read_text(os.path.join(threads_dir, thread_id, rel))
            if content is None:
                continue
            hits += [Hit("thread", thread_id, title, rel, number, line, f"{shown_folder}/{rel}")
                     for number, line in _matches(content, needle)]
    return hits
