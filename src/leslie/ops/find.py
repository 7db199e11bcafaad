"""`leslie find TEXT`: case-insensitive search over objectives, thread titles and intents, and thread assets.

The assets are the files in a thread's folder (plan, progress, design/, artifacts/, anything else there but
`thread.json`, whose fields are searched as fields). The folder comes from a repository that may be hostile:
links are never followed (neither a linked file nor a linked folder is read), only regular files are opened (a
FIFO would block), and a file is skipped when it is over `MAX_FILE_BYTES` or looks binary (a NUL byte early).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from typing import Any

from leslie.errors import UsageError
from leslie.store.files import LESLIE_DIR
from leslie.store.fsio import refuse_links
from leslie.store.record import dataclass
from leslie.store.repository import Repository

MAX_FILE_BYTES = 1024 * 1024  # a bigger asset is not a note a person wrote: skipped, not searched
MAX_DEPTH = 16  # folders nested deeper than this inside a thread are not searched
_BINARY_SNIFF = 8192  # a NUL byte in the first 8 KiB marks a file as binary, as git and grep decide
_SHOWN_CHARS = 160  # a longer matching line is shown as a window around the match
_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)


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


def _read_text(path: str) -> str | None:
    """A regular, small, non-binary file's text (UTF-8, undecodable bytes replaced); None to skip it."""
    try:
        fd = os.open(path, _OPEN_FLAGS)
    except OSError:  # a link (O_NOFOLLOW), gone, unreadable: not searched
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_FILE_BYTES:
            return None
        chunks, total = [], 0
        want = info.st_size + 1  # the whole file and a byte more: a short read is its end, one read call
        while total <= MAX_FILE_BYTES:  # never trust the size: the file may grow while it is read
            chunk = os.read(fd, want)
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
            if len(chunk) < want:  # a regular file reads short only at its end
                break
            want = MAX_FILE_BYTES + 1 - total
    except OSError:
        return None
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if len(data) > MAX_FILE_BYTES or b"\0" in data[:_BINARY_SNIFF]:
        return None
    return data.decode("utf-8", errors="replace")


def _may_hold(raw: str | None, needle: str) -> bool:
    """Whether a `thread.json` whose text is `raw` may hold `needle` in a field: False only when that is sure.

    Deciding on the raw text spares the strict parse of every thread (most of the time of a search): outside
    its escapes JSON text is the text itself, so a needle without a character JSON escapes (quote, backslash,
    control characters) that is in a field is in the raw text too, unless a `\\u` escape spells it another way.
    """
    if raw is None or "\\u" in raw or any(c in needle for c in '"\\') or any(ord(c) < 0x20 for c in needle):
        return True
    return needle in raw.casefold()


def _asset_files(folder: str, rel: str = "", depth: int = 0) -> Iterator[tuple[str, str]]:
    """(relative path, absolute path) of every regular file under `folder`, sorted, links never followed."""
    try:
        entries = sorted(os.scandir(folder), key=lambda e: e.name)
    except OSError:
        return
    for entry in entries:
        name = rel + entry.name
        if entry.is_symlink():
            continue
        if entry.is_dir(follow_symlinks=False):
            if depth < MAX_DEPTH:
                yield from _asset_files(entry.path, name + "/", depth + 1)
        elif entry.is_file(follow_symlinks=False) and name != "thread.json":
            yield name, entry.path


def find(repo: Repository, text: str) -> list[Hit]:
    """Every line holding `text` (case-insensitive): objectives (title, description), then each live thread by
    ID (title, intent, then its files by path). A thread folder that is a link has its fields searched only."""
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
    # Strings and os calls, not pathlib: at 10,000 threads path objects alone cost more than the reads.
    for thread_id, entry in sorted(repo.read_index().threads.items()):
        folder = os.path.join(threads_dir, thread_id)
        try:
            is_folder = stat.S_ISDIR(os.lstat(folder).st_mode)
        except OSError:
            is_folder = False
        if not is_folder or _may_hold(_read_text(os.path.join(folder, "thread.json")), needle):
            thread = repo.read_thread(thread_id)  # strict: a corrupt or linked thread fails naming its file
            for where, value in (("title", thread.title), ("intent", thread.intent)):
                hits += [Hit("thread", thread.id, thread.title, where, number, line)
                         for number, line in _matches(value, needle)]
        if not is_folder:
            continue
        title = entry["title"]  # the index holds the title: no parse needed for a hit in a file
        shown_folder = f"{LESLIE_DIR}/threads/{thread_id}"
        for rel, path in _asset_files(folder):
            content = _read_text(path)
            if content is None:
                continue
            hits += [Hit("thread", thread_id, title, rel, number, line, f"{shown_folder}/{rel}")
                     for number, line in _matches(content, needle)]
    return hits
