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
from array import array
from collections.abc import Callable, Iterator, Sequence
from functools import partial
from itertools import accumulate, starmap
from operator import attrgetter
from typing import Any

from leslie.ops.find_cache import SIGNATURE, Cache, signature
from leslie.store import forked

MAX_FILE_BYTES = 1024 * 1024  # a bigger asset is not a note a person wrote: skipped, not searched
MAX_DEPTH = 16  # folders nested deeper than this inside a thread are not searched
_BINARY_SNIFF = 8192  # a NUL byte in the first 8 KiB marks a file as binary, as git and grep decide
_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_HOME_FLAGS = getattr(os, "O_PATH", os.O_RDONLY) | os.O_DIRECTORY | os.O_CLOEXEC  # enough to return to

_SIG_BYTES = SIGNATURE.size
# An entry as `_walk` builds it: (path relative to the threads folder, packed signature, kind, text: (start,
# end) in the old shard's text, new bytes, or None when the file is not searched).
_Text = tuple[int, int] | bytes | None
_Entry = tuple[str, bytes, str, _Text]


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


def _name(entry: os.DirEntry[str]) -> str:
    return entry.name


_SIGNED = attrgetter("st_ino", "st_size", "st_mtime_ns", "st_ctime_ns")


def signatures(fd: int | None, paths: Sequence[bytes]) -> bytes:
    """The packed signatures of `paths` (relative to folder `fd`, or to the working directory for None) now,
    one `lstat` each; OSError when one is gone. Iterated in C (`map`, `starmap`): at 100,000 threads the
    Python loop cost a quarter of the time."""
    lstat = os.lstat if fd is None else partial(os.lstat, dir_fd=fd)
    return b"".join(starmap(SIGNATURE.pack, map(_SIGNED, map(lstat, paths))))


def _enter(fd: int, *paths: str) -> int | None:
    """Make folder `fd` the working directory, for cheaper `lstat` calls (`dir_fd` passed through `partial`
    costs about a quarter of each call: 40,000 of them at 10,000 threads); the descriptor of the one to
    return to, or None when it was left as it was: another thread runs (it could be using relative paths),
    or `paths` (what the scan opens by name) are not all absolute. A forked child starts where this process
    is."""
    if not forked.single_threaded() or not all(map(os.path.isabs, paths)):
        return None
    try:
        home = os.open(".", _HOME_FLAGS)
    except OSError:
        return None
    try:
        os.fchdir(fd)
    except OSError:
        os.close(home)
        return None
    return home


def _leave(home: int) -> None:
    try:
        os.fchdir(home)
    finally:
        os.close(home)


class _Shard:
    """One cache shard: its threads checked against the disk, what to search in each, the shard kept fresh.

    Stored records are flat, so that loading a shard makes few objects (at 100,000 threads, one tuple per
    entry cost more than the checks): thread IDs, entries per thread, every entry's path (relative to the
    threads folder; bytes, as `lstat` takes them: a str is encoded on every call) and kind ("d" a folder,
    "j" thread.json, "f" a searched file), their packed signatures (`SIGNATURE`), their text spans in the
    shard's text (two int64 each, -1 for none), and per thread whether its fields must be parsed whatever
    the needle (its thread.json unusual, or holding a `\\u` escape).
    """

    def __init__(self, cache: Cache, number: int, threads_fd: int | None, threads_dir: str, limit_ns: int,
                 needle: bytes | None, fields_always: bool) -> None:
        self.cache, self.name, self.fd, self.dir = cache, f"{number:02x}", threads_fd, threads_dir
        self.limit, self.needle, self.fields_always = limit_ns, needle, fields_always
        loaded = cache.load(self.name)
        self.changed = loaded is None
        ids: tuple[str, ...] = ()
        self.paths: tuple[bytes, ...] = ()
        self.kinds = self.always = ""
        self.sigs = self.text = b""
        self.spans: Any = memoryview(b"").cast("q")
        if loaded is not None:
            (ids, counts, self.paths, self.kinds, self.sigs, spans, self.always), self.text = loaded
            self.spans = memoryview(spans).cast("q")
            self.offsets = list(accumulate(counts, initial=0))
        self.ids = ids
        self.index = dict(zip(ids, range(len(ids)), strict=True))
        self.found = _holding(self.text, needle)
        self.new: list[tuple[str, Any]] = []  # (ID, its index in the stored records, or what `_walk` found)
        self.unchanged = False  # every thread as recorded: nothing to write

    def threads(self, thread_ids: Sequence[str]) -> Iterator[tuple[str, tuple[bool, list[str]] | None]]:
        """Each thread's (whether to parse its thread.json, its files that may hold the needle), or None.

        The common case, the same threads as recorded and nothing changed, is checked for the whole shard at
        once: every entry's `lstat`, packed, compared with the stored signatures in one comparison.
        """
        now = b""
        if tuple(thread_ids) == self.ids:
            try:
                now = signatures(self.fd, self.paths)
            except OSError:  # something is gone: thread by thread
                now = b""
        if now and now == self.sigs:
            self.unchanged = True
            if self.found is not None and not self.found and not self.fields_always:
                # The needle is in no text here: only threads whose fields are always parsed are named.
                at = self.always.find("1")
                while at >= 0:
                    yield thread_ids[at], (True, [])
                    at = self.always.find("1", at + 1)
                return
            for k, thread_id in enumerate(thread_ids):
                yield thread_id, self._recorded(thread_id, k, self.offsets[k], self.offsets[k + 1])
            return
        for thread_id in thread_ids:
            yield thread_id, self.thread(thread_id, now)

    def thread(self, thread_id: str, checked: bytes = b"") -> tuple[bool, list[str]] | None:
        """(whether to parse its thread.json, its files that may hold the needle); None when nothing may.
        `checked`: every recorded entry's signature now, when the shard's were taken at once."""
        k = self.index.get(thread_id)
        if k is not None:
            first, end = self.offsets[k], self.offsets[k + 1]
            if checked:
                now = checked[first * _SIG_BYTES:end * _SIG_BYTES]
            else:
                try:
                    now = signatures(self.fd, self.paths[first:end])
                except OSError:
                    now = b""
            if now == self.sigs[first * _SIG_BYTES:end * _SIG_BYTES]:
                self.new.append((thread_id, k))
                return self._recorded(thread_id, k, first, end)
        self.changed = True
        try:
            st = os.lstat(thread_id, dir_fd=self.fd)
        except OSError:
            st = None
        if st is None or not stat.S_ISDIR(st.st_mode):
            return True, []  # not a folder: its fields are read (and fail as they always did), no files
        entries, always = self._walk(thread_id, st, k)
        self.new.append((thread_id, (entries, always)))
        skip = len(thread_id) + 1
        fields = always or self.fields_always
        files = []
        for path, _sig, kind, text in entries:
            if kind == "d" or text is None:
                continue
            if isinstance(text, tuple):
                holds = self.found is None or text[0] in self.found
            else:
                holds = self.needle is None or self.needle in text
            if kind == "j":
                fields = fields or holds
            elif holds:
                files.append(path[skip:])
        return (fields, files) if fields or files else None

    def _recorded(self, thread_id: str, k: int, first: int, end: int) -> tuple[bool, list[str]] | None:
        """What may hold the needle in an unchanged thread, from its record and the shard's text."""
        found = self.found
        fields = self.fields_always or self.always[k] == "1"
        if found is not None and not found:  # the needle is nowhere in this shard: the common case
            return (True, []) if fields else None
        files = []
        skip = len(thread_id) + 1
        for i in range(first, end):
            start = self.spans[2 * i]
            if start < 0 or not (found is None or start in found):
                continue
            if self.kinds[i] == "j":
                fields = True
            else:
                files.append(os.fsdecode(self.paths[i])[skip:])
        return (fields, files) if fields or files else None

    def _read(self, path: str) -> bytes | None:
        content = read_text(os.path.join(self.dir, path))
        return None if content is None else _segment(content)

    def _walk(self, thread_id: str, st: os.stat_result, k: int | None) -> tuple[list[_Entry], bool]:
        """A thread folder listed anew, as `find` always listed it (sorted, links never followed, MAX_DEPTH),
        each file's text reused from record `k` when its signature matches, else read. Returns the entries and
        whether its fields must be parsed whatever the needle."""
        old: dict[str, tuple[bytes, int, int]] = {}
        if k is not None:
            for i in range(self.offsets[k], self.offsets[k + 1]):
                old[os.fsdecode(self.paths[i])] = (self.sigs[i * _SIG_BYTES:(i + 1) * _SIG_BYTES],
                                                   self.spans[2 * i], self.spans[2 * i + 1])
        # Each signature is taken before the folder is listed or the file read: a change after it shows.
        entries: list[_Entry] = [(thread_id, signature(st, self.limit), "d", None)]

        always = True
        try:
            json_st = os.lstat(f"{thread_id}/thread.json", dir_fd=self.fd)
        except OSError:
            json_st = None
        if json_st is not None and stat.S_ISREG(json_st.st_mode):
            path = f"{thread_id}/thread.json"
            text: _Text
            known = old.get(path)
            if k is not None and known is not None and known[0] == SIGNATURE.pack(
                    json_st.st_ino, json_st.st_size, json_st.st_mtime_ns, json_st.st_ctime_ns):
                sig, text, always = known[0], (known[1], known[2]) if known[1] >= 0 else None, self.always[k] == "1"
            else:
                sig = signature(json_st, self.limit)
                raw = read_text(os.path.join(self.dir, path))
                # Outside its escapes JSON text is the text itself; a `\u` escape may spell a letter another
                # way. Decided on the text as written: casefolding turns an (invalid) `\U` into `\u`.
                always = raw is None or "\\u" in raw
                text = None if raw is None else _segment(raw)
            entries.append((path, sig, "j", text))

        self._visit(thread_id, "", 0, old, entries)
        return entries, always

    # Methods, not closures: a recursive closure is a reference cycle, and with the collector paused
    # (`paused_gc`) every walked folder's texts, and the shard through `self`, would stay until the end.
    def _text_of(self, path: str, now: os.stat_result, old: dict[str, tuple[bytes, int, int]]) -> tuple[bytes, _Text]:
        known = old.get(path)
        if known is not None and known[0] == SIGNATURE.pack(now.st_ino, now.st_size, now.st_mtime_ns,
                                                            now.st_ctime_ns):
            return known[0], (known[1], known[2]) if known[1] >= 0 else None
        return signature(now, self.limit), self._read(path)

    def _visit(self, folder: str, rel: str, depth: int, old: dict[str, tuple[bytes, int, int]],
               entries: list[_Entry]) -> None:
        try:
            listed = sorted(os.scandir(os.path.join(self.dir, folder)), key=_name)
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
                        entries.append((path, signature(entry.stat(follow_symlinks=False), self.limit), "d", None))
                        self._visit(path, name + "/", depth + 1, old, entries)
                elif entry.is_file(follow_symlinks=False) and name != "thread.json":
                    sig, text = self._text_of(path, entry.stat(follow_symlinks=False), old)
                    entries.append((path, sig, "f", text))
            except OSError:  # gone meanwhile: not searched, as a file that cannot be opened
                continue

    def save(self) -> None:
        """Rewrite the shard when anything in it changed (threads gone included); silent on failure."""
        if self.unchanged or (not self.changed and len(self.new) == len(self.index)):
            return
        pieces: list[bytes] = []
        at = 0
        ids, counts, paths, kinds, sigs, spans, always = [], [], [], [], [], array("q"), []
        for thread_id, value in self.new:
            ids.append(thread_id)
            if isinstance(value, int):  # unchanged: its entries as stored, its texts moved to their new places
                first, end = self.offsets[value], self.offsets[value + 1]
                entries: list[_Entry] = [
                    (os.fsdecode(self.paths[i]), self.sigs[i * _SIG_BYTES:(i + 1) * _SIG_BYTES], self.kinds[i],
                     (self.spans[2 * i], self.spans[2 * i + 1]) if self.spans[2 * i] >= 0 else None)
                    for i in range(first, end)]
                always.append(self.always[value])
            else:
                entries, fields = value
                always.append("1" if fields else "0")
            counts.append(len(entries))
            for path, sig, kind, text in entries:
                paths.append(os.fsencode(path))
                kinds.append(kind)
                sigs.append(sig)
                if text is None:
                    spans.extend((-1, -1))
                    continue
                piece = self.text[text[0]:text[1]] if isinstance(text, tuple) else text
                pieces.append(piece)
                pieces.append(b"\0")
                spans.extend((at, at + len(piece)))
                at += len(piece) + 1
        records = (tuple(ids), tuple(counts), tuple(paths), "".join(kinds), b"".join(sigs), spans.tobytes(),
                   "".join(always))
        self.cache.save(self.name, records, b"".join(pieces))


def to_search(cache: Cache, threads_dir: str, by_shard: Sequence[Sequence[str]], needle: str,
              limit_ns: int, meanwhile: Callable[[], object] | None = None) -> dict[str, tuple[bool, list[str]]]:
    """For each thread that may hold `needle`: whether to parse its fields, and which of its files to read.
    `by_shard`: the live thread IDs grouped by shard (`find_cache.by_shard`). `meanwhile`: work of the
    caller's to do while a forked child checks shards (at scale only; otherwise it is not called)."""
    try:
        encoded: bytes | None = needle.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate (undecodable argv): no shortcut, every file is read
        encoded = None
    if encoded is not None and b"\0" in encoded:
        encoded = None
    try:
        fd = os.open(threads_dir, _DIR_FLAGS)
    except OSError:  # no threads folder: every thread's fields are read (and fail as they would)
        return {thread_id: (True, []) for ids in by_shard for thread_id in ids}
    fields_always = _json_may_escape(needle)
    home = _enter(fd, threads_dir, cache.folder)
    base = fd if home is None else None  # what the scan's paths are relative to (None: the working directory)

    def scan(numbers: Sequence[int]) -> list[tuple[str, bool, list[str]]]:
        found = []
        for number in numbers:
            shard = _Shard(cache, number, base, threads_dir, limit_ns, encoded, fields_always)
            found += [(thread_id, *what) for thread_id, what in shard.threads(by_shard[number])
                      if what is not None]
            shard.save()
        return found

    numbers = [number for number, ids in enumerate(by_shard) if ids]
    # At scale a forked child (`store.forked`) checks and refreshes shards too, the two taking them in turn:
    # each shard is its own cache file, so the two never write the same one.
    enough = sum(map(len, by_shard)) >= forked.SPLIT_FROM
    try:
        found = (forked.split_map(scan, numbers, minimum=1, pieces=len(numbers), first=meanwhile) if enough
                 else scan(numbers))
    finally:
        try:
            if home is not None:
                _leave(home)
        finally:
            os.close(fd)
    return {thread_id: (fields, files) for thread_id, fields, files in found}
