"""Which files `leslie find` must read: each thread's files checked against the cache, shard by shard.

A thread's cache record lists every entry `find` looks at in its folder (the folder and its subfolders, its
`thread.json`, each searched file), with the signature each had when last read and, for files, where their
casefolded text sits in the shard's text. While every signature still matches (one `lstat` each, relative to
the threads folder's descriptor, compared in one go), the record stands for the folder and a needle is
looked up in the shard's text, once for all its threads; otherwise the folder is listed and its changed
files read again (`_walk`), and the shard is rewritten. Only the files that may hold the needle are then
read for their hits (`ops/find.py`), so a stale record can cost a read, never a hit.
"""

from __future__ import annotations

import os
import stat
from typing import Any

from leslie.ops.find_cache import Cache, Signature, shard_of, signature

MAX_FILE_BYTES = 1024 * 1024  # a bigger asset is not a note a person wrote: skipped, not searched
MAX_DEPTH = 16  # folders nested deeper than this inside a thread are not searched
_BINARY_SNIFF = 8192  # a NUL byte in the first 8 KiB marks a file as binary, as git and grep decide
_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC

# A record as stored: (paths relative to the threads folder, their signatures, their kinds ("d" a folder, "j"
# thread.json, "f" a searched file), text starts and ends in the shard's text (-1: none), whether the
# thread's fields must be parsed whatever the needle (thread.json unusual, or spelling letters as \u escapes)).
# An entry as `_walk` builds it: (path, signature, kind, text: (start, end) in the old text, new bytes, None).
_Text = tuple[int, int] | bytes | None
_Entry = tuple[str, Signature, str, _Text]


def read_text(path: str) -> str | None:
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



def _json_may_escape(needle: str) -> bool:
    """Whether `needle` holds a character JSON escapes (quote, backslash, control): a field holding it then
    need not hold it verbatim in the raw `thread.json`, so every thread's fields are parsed."""
    return any(c in needle for c in '"\\') or any(ord(c) < 0x20 for c in needle)


def _segment(text: str) -> bytes:
    """What the cache keeps of a file's text: casefolded UTF-8, NUL bytes (the separator) replaced.

    A needle is casefolded text without NUL (else no shortcut is used), so `needle in text.casefold()` holds
    exactly when its UTF-8 bytes are in these bytes: UTF-8 is self-synchronising, and a replaced NUL can only
    add a match (a file read again), never hide one.
    """
    return text.casefold().encode("utf-8", "surrogatepass").replace(b"\0", b"\1")


def _holding(text: bytes, needle: bytes | None) -> set[int] | None:
    """The start offsets of the NUL-separated segments of `text` holding `needle` (None: treat all as holding).

    One `find` per matching segment over the whole shard, in C, instead of one test per file in Python.
    """
    if needle is None:
        return None
    found = set()
    at = text.find(needle)
    while at >= 0:
        found.add(text.rfind(b"\0", 0, at) + 1)
        end = text.find(b"\0", at)
        if end < 0:
            break
        at = text.find(needle, end + 1)
    return found


def _sig_now(st: os.stat_result) -> Signature:
    return (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


class _Shard:
    """One cache shard: its threads checked against the disk, what to search in each, the shard kept fresh."""

    def __init__(self, cache: Cache, number: int, threads_fd: int, threads_dir: str, limit_ns: int,
                 needle: bytes | None, fields_always: bool) -> None:
        self.cache, self.name, self.fd, self.dir = cache, f"{number:02x}", threads_fd, threads_dir
        self.limit, self.needle, self.fields_always = limit_ns, needle, fields_always
        loaded = cache.load(self.name)
        self.old: dict[str, Any] = loaded[0] if loaded is not None and isinstance(loaded[0], dict) else {}
        self.text = loaded[1] if loaded is not None else b""
        self.found = _holding(self.text, needle)
        self.new: dict[str, Any] = {}  # a stored record (unchanged) or a list of `_Entry` (walked now)
        self.changed = loaded is None

    def thread(self, thread_id: str) -> tuple[bool, list[str]] | None:
        """(whether to parse its thread.json, its files that may hold the needle); None when nothing may."""
        record = self.old.get(thread_id)
        if record is not None:
            lstat, fd = os.lstat, self.fd
            try:
                now = [lstat(path, dir_fd=fd) for path in record[0]]
            except OSError:
                now = None
            if now is not None and [(s.st_ino, s.st_size, s.st_mtime_ns, s.st_ctime_ns) for s in now] == record[1]:
                self.new[thread_id] = record
                return self._recorded(thread_id, record)
        self.changed = True
        try:
            st = os.lstat(thread_id, dir_fd=self.fd)
        except OSError:
            st = None
        if st is None or not stat.S_ISDIR(st.st_mode):
            return True, []  # not a folder: its fields are read (and fail as they always did), no files
        entries, always = self._walk(thread_id, st, record)
        self.new[thread_id] = (entries, always)
        skip = len(thread_id) + 1
        fields = always or self.fields_always
        files = []
        for path, _sig, kind, text in entries:
            if kind == "d" or text is None:
                continue
            holds = (self.needle is None or (text[0] in self.found if isinstance(text, tuple) and self.found is not None
                                             else self.needle in text if isinstance(text, bytes) else True))
            if kind == "j":
                fields = fields or holds
            elif holds:
                files.append(path[skip:])
        return (fields, files) if fields or files else None

    def _recorded(self, thread_id: str, record: Any) -> tuple[bool, list[str]] | None:
        """What may hold the needle in an unchanged thread, from its record and the shard's text."""
        found = self.found
        fields = self.fields_always or record[5]
        if found is not None and not found:  # the needle is nowhere in this shard: the common case
            return (True, []) if fields else None
        files = []
        skip = len(thread_id) + 1
        for path, kind, start in zip(record[0], record[2], record[3], strict=True):
            if start < 0 or not (found is None or start in found):
                continue
            if kind == "j":
                fields = True
            else:
                files.append(path[skip:])
        return (fields, files) if fields or files else None

    def _read(self, path: str) -> bytes | None:
        content = read_text(os.path.join(self.dir, path))
        return None if content is None else _segment(content)

    def _walk(self, thread_id: str, st: os.stat_result, record: Any) -> tuple[list[_Entry], bool]:
        """A thread folder listed anew, as `find` always listed it (sorted, links never followed, MAX_DEPTH),
        each file's text reused from `record` when its signature matches, else read. Returns the entries and
        whether its fields must be parsed whatever the needle."""
        old: dict[str, tuple[Signature, int, int]] = {}
        if record is not None:
            old = {path: (sig, start, end) for path, sig, start, end
                   in zip(record[0], record[1], record[3], record[4], strict=True)}
        # Each signature is taken before the folder is listed or the file read: a change after it shows.
        entries: list[_Entry] = [(thread_id, signature(st, self.limit), "d", None)]

        def text_of(path: str, now: os.stat_result) -> tuple[Signature, _Text]:
            known = old.get(path)
            if known is not None and known[0] == _sig_now(now):
                return known[0], (known[1], known[2]) if known[1] >= 0 else None
            return signature(now, self.limit), self._read(path)

        always = True
        try:
            json_st = os.lstat(f"{thread_id}/thread.json", dir_fd=self.fd)
        except OSError:
            json_st = None
        if json_st is not None and stat.S_ISREG(json_st.st_mode):
            path = f"{thread_id}/thread.json"
            sig, text = text_of(path, json_st)
            raw = self.text[text[0]:text[1]] if isinstance(text, tuple) else text
            # Outside its escapes JSON text is the text itself; a `\u` escape may spell a letter another way.
            always = raw is None or b"\\u" in raw
            entries.append((path, sig, "j", text))

        def visit(folder: str, rel: str, depth: int) -> None:
            try:
                listed = sorted(os.scandir(os.path.join(self.dir, folder)), key=lambda e: e.name)
            except OSError:
                return
            for entry in listed:
                name = rel + entry.name
                path = f"{folder}/{entry.name}"
                try:
                    if entry.is_symlink():
                        continue
                    if entry.is_dir(follow_symlinks=False):
                        if depth < MAX_DEPTH:
                            entries.append((path, signature(entry.stat(follow_symlinks=False), self.limit), "d",
                                            None))
                            visit(path, name + "/", depth + 1)
                    elif entry.is_file(follow_symlinks=False) and name != "thread.json":
                        sig, text = text_of(path, entry.stat(follow_symlinks=False))
                        entries.append((path, sig, "f", text))
                except OSError:  # gone meanwhile: not searched, as a file that cannot be opened
                    continue

        visit(thread_id, "", 0)
        return entries, always

    def save(self) -> None:
        """Rewrite the shard when anything in it changed (threads gone included); silent on failure."""
        if not self.changed and self.old.keys() == self.new.keys():
            return
        pieces: list[bytes] = []
        at = 0

        def place(text: _Text) -> tuple[int, int]:
            nonlocal at
            if text is None:
                return -1, -1
            piece = self.text[text[0]:text[1]] if isinstance(text, tuple) else text
            pieces.append(piece)
            pieces.append(b"\0")
            start, at = at, at + len(piece) + 1
            return start, start + len(piece)

        records = {}
        for thread_id, value in self.new.items():
            if len(value) == 2:  # walked now: (entries, always)
                entries, always = value
                spans = [place(text) for _path, _sig, _kind, text in entries]
                records[thread_id] = (tuple(e[0] for e in entries), [e[1] for e in entries],
                                      "".join(e[2] for e in entries), tuple(s[0] for s in spans),
                                      tuple(s[1] for s in spans), always)
            else:  # unchanged: its texts move to their new places
                paths, sigs, kinds, starts, ends, always = value
                spans = [place((s, e) if s >= 0 else None) for s, e in zip(starts, ends, strict=True)]
                records[thread_id] = (paths, sigs, kinds, tuple(s[0] for s in spans), tuple(s[1] for s in spans),
                                      always)
        self.cache.save(self.name, records, b"".join(pieces))


def to_search(cache: Cache, threads_dir: str, thread_ids: list[str], needle: str,
              limit_ns: int) -> dict[str, tuple[bool, list[str]]]:
    """For each thread that may hold `needle`: whether to parse its fields, and which of its files to read."""
    try:
        encoded: bytes | None = needle.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate (undecodable argv): no shortcut, every file is read
        encoded = None
    if encoded is not None and b"\0" in encoded:
        encoded = None
    try:
        fd = os.open(threads_dir, _DIR_FLAGS)
    except OSError:  # no threads folder: every thread's fields are read (and fail as they would)
        return {thread_id: (True, []) for thread_id in thread_ids}
    by_shard: dict[int, list[str]] = {}
    for thread_id in thread_ids:
        by_shard.setdefault(shard_of(thread_id), []).append(thread_id)
    todo: dict[str, tuple[bool, list[str]]] = {}
    try:
        fields_always = _json_may_escape(needle)
        for number, ids in sorted(by_shard.items()):
            shard = _Shard(cache, number, fd, threads_dir, limit_ns, encoded, fields_always)
            for thread_id in ids:
                what = shard.thread(thread_id)
                if what is not None:
                    todo[thread_id] = what
            shard.save()
    finally:
        os.close(fd)
    return todo
