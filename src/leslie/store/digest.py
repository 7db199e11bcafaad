"""The index digest: what `list`, `status` and `objective list` need from the index, without decoding it.

At 10,000 threads the index is a 4 MB pretty-printed JSON document (40 MB at 100,000); decoding it in full is
most of what those commands cost. The digest `.leslie/state/index-digest` holds, per thread, exactly the
fields they read (ID, title, status, objective, created_at, intent, the sorted references both ways), and
whether SPEC §2 invariants 1-3 hold, in columns (one list per field: a few large objects instead of a million
small ones). It is private, local and derived (`.leslie/state/` is git-ignored): any reader that finds it
missing or stale decodes the index as before and writes a new one.

It is keyed by the index file's **signature** (st_dev, st_ino, st_size, st_mtime_ns, st_ctime_ns): every
write of the index is a fresh file renamed into place (`atomic_write`), so its inode and times change with
every write, and a digest of an older index is never taken for the current one (docs/design.md, "Reads at
scale").

It is **untrusted input** (docs/security.md): a hostile repository can commit a file there anyway. It is read
through `read_regular` (no link, no FIFO, capped at the index's own size) and parsed with nothing but a UTF-8
decode and `str.split` after its first line has matched the current index's signature, which no checkout can
forge (st_ino and st_ctime_ns are set by the file system when the file is written here). No `marshal`,
`pickle` or `eval`: measured, `marshal.loads` was slower than a split anyway (200 ms against ~40 ms at
100,000 threads), and it may crash the interpreter on crafted bytes. Anything that does not check out — a
foreign format, a stale signature, a wrong count, a truncated file — is ignored and rebuilt, silently.

The layout: one header line `leslie-index-digest/2 DEV INO SIZE MTIME_NS CTIME_NS COUNT INVARIANTS L1 .. L8\n`,
then the eight columns of COUNT values each (column n is Ln characters), every value followed by a NUL (no
value leslie indexes can hold one: IDs, statuses and times are patterns; titles and intents are XML text).
`\x01` stands for an absent value (an objective-less thread; `created_at`/`intent` of an entry written by
an older leslie).
"""

from __future__ import annotations

import os
from itertools import chain, pairwise, repeat, starmap
from operator import itemgetter, lt
from typing import Any

from leslie.errors import LeslieError
from leslie.store.fsio import atomic_write, read_regular

DIGEST_NAME = "index-digest"
_MAGIC = "leslie-index-digest/2"  # the format: a new layout gets a new number
_FIELDS = 8  # ids, titles, statuses, objectives, created, intents, references_to, referenced_by
_MAYBE_ABSENT = (3, 4, 5)  # objectives, created, intents
_ABSENT = "\x01"  # a control character: no indexed value can be one (titles and intents are XML text)
_HEADER_CAP = 512
# Bytes an index spends on a thread at the least (over 100 even written compactly): bounds a digest's count by
# the index's size, so a forged count cannot make a split allocate without end.
_MIN_ENTRY = 64


class Digest:
    """The index's entries in columns (row i of every column is thread `ids[i]`, IDs ascending).

    `objectives` holds None for a thread without one; `created` and `intents` hold None for an entry written
    by a leslie older than those keys; `references_to` and `referenced_by` hold each thread's IDs sorted and
    joined by commas ("" for none). A digest read from its file splits a column only when it is first asked
    for (`objective list` needs one of the eight).
    """

    __slots__ = ("_columns", "_spans", "_text", "invariants_hold")

    def __init__(self, columns: list[list[Any] | None], invariants_hold: bool | None, text: str = "",
                 spans: tuple[tuple[int, int], ...] = ()) -> None:
        self._columns = columns
        self.invariants_hold = invariants_hold  # None: not checked (only `status` asks, see `read_digest`)
        self._text = text  # the columns' text, NUL after every value (a file's, until every column is split)
        self._spans = spans  # where each column lies in `_text`

    def column(self, n: int) -> list[Any]:
        """The `n`th column (see `columns`), split from the file's text on first use."""
        found = self._columns[n]
        if found is None:
            start, stop = self._spans[n]
            found = self._text[start:stop - 1].split("\0") if stop > start else []
            if n in _MAYBE_ABSENT and _ABSENT in found:
                found = [None if value == _ABSENT else value for value in found]
            self._columns[n] = found
            if all(column is not None for column in self._columns):
                self._text = ""
        return found

    def columns(self) -> list[list[Any]]:
        """ids, titles, statuses, objectives, created, intents, references_to, referenced_by."""
        return [self.column(n) for n in range(_FIELDS)]

    @property
    def ids(self) -> list[str]:
        return self.column(0)

    @property
    def titles(self) -> list[str]:
        return self.column(1)

    @property
    def statuses(self) -> list[str]:
        return self.column(2)

    @property
    def objectives(self) -> list[str | None]:
        return self.column(3)

    @property
    def references_to(self) -> list[str]:
        return self.column(6)

    def thread_counts(self) -> dict[str, int]:
        """How many threads each objective has."""
        counts: dict[str, int] = {}
        get = counts.get
        for objective in self.objectives:
            if objective is not None:
                counts[objective] = get(objective, 0) + 1
        return counts


def signature(index_path: str) -> tuple[int, int, int, int, int] | None:
    """The index file's identity and version as the file system keeps them; None when it is not a plain file."""
    try:
        info = os.lstat(index_path)
    except OSError:
        return None
    if (info.st_mode & 0o170000) != 0o100000:  # a link or anything but a regular file: no digest of it
        return None
    return (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)


def digest_of(index: Any, *, invariants: bool = True) -> Digest:
    """The digest of a decoded `store.relations.Index` (its threads in ID order); `invariants=False` leaves
    the invariants' verdict unchecked (None), which saves a third of the work on a canonical file."""
    from leslie.store.bulk import paused_gc

    with paused_gc():  # a million small objects at 100,000 threads, none in a cycle
        text = index.canonical_text()
        if text is not None:
            return _digest_of_document(text, invariants)
        from leslie.store.relations import invariant_problems

        threads, references_to, referenced_by = index.threads, index.references_to, index.referenced_by
        ids = sorted(threads)
        entries = [threads[tid] for tid in ids]
        none: set[str] = set()
        columns: list[list[Any] | None] = [
            ids,
            [entry.get("title", "") for entry in entries],
            [entry.get("status", "") for entry in entries],
            [entry.get("objective") for entry in entries],
            [entry["created_at"] if "created_at" in entry and "intent" in entry else None for entry in entries],
            [entry["intent"] if "created_at" in entry and "intent" in entry else None for entry in entries],
            [",".join(sorted(references_to.get(tid, none))) for tid in ids],
            [",".join(sorted(referenced_by.get(tid, none))) for tid in ids],
        ]
        return Digest(columns, not invariant_problems(index) if invariants else None)


def _digest_of_document(text: str, invariants: bool) -> Digest:
    """The digest of an index file verified canonical (`relations._CanonicalText`): its threads and relations
    sections hold the same IDs in ascending order, every entry has its keys (`created_at` and `intent` both or
    neither), so the columns are read straight off the document, without the sets `Index` builds.

    The invariants' verdict is `invariant_problems(index) == []` computed on edge pairs: no self reference, no
    reference to a thread not indexed, and every edge of `references_to` mirrored in `referenced_by` and back.
    """
    import json

    # Measured in instructions at 10,000 threads: the columns through map/itemgetter (in C) cost ~10 M, the
    # ID lists checked strictly ascending in one C pass ~45 M (then joined as they are; sorting each list
    # cost ~70 M), the edge pairs of the invariants ~65 M, against ~245 M for `json.loads` itself.
    document = json.loads(text)
    threads: dict[str, dict[str, Any]] = document["threads"]
    relations = list(document["relations"].values())
    ids = list(threads)
    entries = list(threads.values())
    targets = list(map(itemgetter("references_to"), relations))
    sources = list(map(itemgetter("referenced_by"), relations))
    holds: bool | None = None
    if invariants:
        edges = {(source, target) for source, listed in zip(ids, targets, strict=True) for target in listed}
        mirrored = {(source, target) for target, listed in zip(ids, sources, strict=True) for source in listed}
        # Every target of `mirrored` is an indexed thread (its key), so equal sets also mean no dangling edge.
        holds = edges == mirrored and edges.isdisjoint(zip(ids, ids, strict=True))
    return Digest([
        ids,
        list(map(itemgetter("title"), entries)),
        list(map(itemgetter("status"), entries)),
        list(map(itemgetter("objective"), entries)),
        list(map(dict.get, entries, repeat("created_at"))),
        list(map(dict.get, entries, repeat("intent"))),
        _joined(targets),
        _joined(sources),
    ], holds)


def _joined(lists: list[list[str]]) -> list[str]:
    """Each ID list joined by commas, sorted and each ID once (as the index's sets make them): as they are when
    every list is strictly ascending (what leslie writes), else each sorted."""
    if all(starmap(lt, chain.from_iterable(map(pairwise, lists)))):
        return list(map(",".join, lists))
    return [",".join(sorted(set(listed))) for listed in lists]


def load(state_dir: str, index_signature: tuple[int, ...]) -> Digest | None:
    """The digest in `state_dir` if it was written for the index of `index_signature`, else None.

    Never raises: whatever the file is (missing, a link, a FIFO, huge, truncated, forged, of an older index),
    the answer is None and the caller decodes the index.
    """
    index_size = index_signature[2]
    try:
        data = read_regular(os.path.join(state_dir, DIGEST_NAME), index_size + _HEADER_CAP)  # < the index
    except (OSError, LeslieError):
        return None
    end = data.find(b"\n", 0, _HEADER_CAP)
    if end < 0:
        return None
    head = data[:end].split(b" ")
    expected = [_MAGIC.encode(), *(str(n).encode() for n in index_signature)]
    if len(head) != len(expected) + 2 + _FIELDS or head[:len(expected)] != expected:
        return None  # another format, or the digest of another index
    count_text, verdict, *lengths = head[len(expected):]
    if (not count_text.isdigit() or len(count_text) > 9 or verdict not in (b"0", b"1", b"-")
            or not all(length.isdigit() and len(length) <= 10 for length in lengths)):
        return None
    count = int(count_text)
    if count * _MIN_ENTRY > index_size:  # more threads than the index has room for
        return None
    try:  # decoded in place, the bytes then dropped: one copy beside the text, not two (a slice)
        with memoryview(data) as view:
            text = str(view[end + 1:], "utf-8")
    except UnicodeDecodeError:
        return None
    del data
    spans = []
    start = 0
    for length in lengths:
        stop = start + int(length)
        # Each column's values counted before anything is split: a forged count cannot make a split allocate
        # without end, nor a column run into the next.
        if stop > len(text) or text.count("\0", start, stop) != count or (count and text[stop - 1] != "\0"):
            return None
        spans.append((start, stop))
        start = stop
    if start != len(text):
        return None
    return Digest([None] * _FIELDS, None if verdict == b"-" else verdict == b"1", text, tuple(spans))


def encode(index_signature: tuple[int, ...], digest: Digest) -> bytes:
    """The digest file's bytes for the index of `index_signature` (see the module's docstring)."""
    blocks = []
    for column in digest.columns():
        if None in column:
            column = [_ABSENT if value is None else value for value in column]  # noqa: PLW2901
        blocks.append("\0".join(column) + "\0" if column else "")
    header = " ".join([_MAGIC, *(str(n) for n in index_signature), str(len(digest.ids)),
                       {True: "1", False: "0", None: "-"}[digest.invariants_hold],
                       *(str(len(block)) for block in blocks)])
    return (header + "\n" + "".join(blocks)).encode("utf-8")


def store(state_dir: str, index_signature: tuple[int, ...], digest: Digest) -> None:
    """Write `digest` for the index of `index_signature`; any failure is silent and changes nothing else.

    Not durable (no fsync): a digest lost in a crash is rebuilt by the next reader. Never under the index
    lock: readers write it, and a reader must not wait for writers.
    """
    try:
        atomic_write(os.path.join(state_dir, DIGEST_NAME), encode(index_signature, digest), durable=False)
    except (OSError, LeslieError, ValueError):  # ValueError: a lone surrogate cannot be UTF-8 (none can be indexed)
        return


def drop_stale(index_path: str | os.PathLike[str], state_dir: str | os.PathLike[str]) -> bool:
    """Remove the digest when it is a plain file that is not the current index's (for `doctor --fix`; a
    link or special file there is the scan's to report, and left alone). Whether one was removed."""
    path = os.path.join(state_dir, DIGEST_NAME)
    try:
        if (os.lstat(path).st_mode & 0o170000) != 0o100000:
            return False
    except OSError:
        return False
    sig = signature(os.fspath(index_path))
    if sig is not None and load(os.fspath(state_dir), sig) is not None:
        return False
    try:
        os.unlink(path)
    except OSError:
        return False
    return True


def read_digest(repo: Any, *, invariants: bool = False) -> Digest:
    """The digest of `repo`'s index (a `store.repository.Repository`): the stored one when it is current, else
    made from the index (decoded as `repo.read_index()` does, with the same errors) and stored for the next
    reader — unless the index changed while it was read, or is missing (rebuilt from the threads).

    `invariants=True` (`status`) also wants the invariants' verdict: a current digest without one (written by
    `list` or `objective list`, which skip that check) is made again, with it.
    """
    index_path = os.fspath(repo.layout.index_path)
    state_dir = os.fspath(repo.layout.state_dir)
    before = signature(index_path)
    if before is not None:
        found = load(state_dir, before)
        if found is not None and (found.invariants_hold is not None or not invariants):
            return found
    digest = digest_of(repo.read_index(), invariants=invariants)
    if before is not None and signature(index_path) == before:
        store(state_dir, before, digest)
    return digest
