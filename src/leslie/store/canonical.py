"""The index file's canonical text, checked once and edited in place: the lazy index's splicing.

An index read from a canonical file keeps its text and decodes only the entries a mutation touches
(`leslie.store.relations.Index`); this module finds those entries in the text and splices the re-encoded
ones back, copying the rest as it is.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from itertools import pairwise
from typing import Any

INDEX_VERSION = "1.0"


# -- the canonical text of the index, edited in place ------------------------------------------------------
#
# `dumps_canonical` lays the index out as
#   {\n  "relations": {\n    "<id>": {...},\n    ...\n  },\n  "threads": {\n    "<id>": {...}, ...\n  },
#   \n  "version": "1.0"\n}\n
# Every entry of a section starts a line with exactly four spaces and a quote and ends with a line "    }";
# nothing inside an entry does (deeper lines are indented further; strings cannot hold a raw newline). Each
# section is matched in one pass against the exact canonical shape of the entries leslie writes (a regular
# expression, run in C): a text that passes is valid JSON with no duplicate key, no NaN and the right types,
# i.e. everything the strict reader checks. Anything else — hand-formatted, extra keys, corrupt — takes the
# strict path (`loads_strict` + `index_from_json`). Entries are then found by searching for their first line
# and copied or replaced as slices of the old text, so a mutation allocates next to nothing per thread.

_ID = r"thread-[a-z0-9][a-z0-9-]{0,47}"
# A title as leslie writes it: text XML 1.0 can carry (no control character but TAB/LF/CR, no U+FFFE/U+FFFF;
# a lone surrogate cannot be UTF-8 at all) and only the escapes the canonical encoder produces for it. A
# `\u` escape sends the file to the strict reader, which checks what it decodes to.
_TITLE = r'"[^"\\\x00-\x1f\ufffe\uffff]*+(?:\\["\\nrt][^"\\\x00-\x1f\ufffe\uffff]*+)*+"'
_ID_LIST = rf'(?:\[\]|\[\n        "{_ID}"(?:,\n        "{_ID}")*+\n      \])'
# `created_at` and `intent` (for `leslie list`) are optional: an index written before they were added stays
# canonical, so it is still read fast; `leslie doctor` reports it and `--fix` adds them.
_THREAD_ENTRY = (rf'    "{_ID}": \{{\n(?:      "created_at": {_TITLE},\n      "intent": {_TITLE},\n)?'
                 rf'      "objective": (?:null|"obj-[a-z0-9][a-z0-9-]{{0,47}}"),\n'
                 rf'      "status": "(?:active|paused|done|archived)",\n      "title": {_TITLE}\n    \}}')
_SOME_IDS = rf'\[\n        "{_ID}"(?:,\n        "{_ID}")*+\n      \]'  # order lists are present only when not empty
_RELATION_ENTRY = (rf'    "{_ID}": \{{\n(?:      "after": {_SOME_IDS},\n)?(?:      "before": {_SOME_IDS},\n)?'
                   rf'      "referenced_by": {_ID_LIST},\n      "references_to": {_ID_LIST}\n    \}}')
_HEAD = '{\n  "relations": '
_MIDDLE = ',\n  "threads": '
_TAIL = f',\n  "version": "{INDEX_VERSION}"\n}}\n'
_ENTRY_END_B = b"\n    }"
_HEAD_B, _MIDDLE_B, _TAIL_B = _HEAD.encode(), _MIDDLE.encode(), _TAIL.encode()
_patterns: tuple[Any, Any, Any] | None = None


def _section_patterns() -> tuple[Any, Any, Any]:
    """(threads section, relations section, entry key); compiled on first use, so importing stays cheap."""
    global _patterns
    if _patterns is None:
        import re

        def section(entry: str) -> Any:
            return re.compile(rf"\{{\n{entry}(?:,\n{entry})*+\n  \}}|\{{\}}")

        _patterns = (section(_THREAD_ENTRY), section(_RELATION_ENTRY), re.compile(r'\n    "([^"]*)": \{'))
    return _patterns


def fingerprint(data: bytes, st: os.stat_result) -> bytes:
    """What leslie records of index bytes it wrote or verified, to know them again: length and CRC-32 of the
    bytes, and the identity of the file that held them (device, inode, status-change time in ns).

    The identity is what a repository cannot forge: a checkout, a clone or a merge writes the index as a new
    file, whose inode and ctime no committed `state/index.checked` can know, so a forged record never lets a
    hand-made index skip the layout check. The CRC tells leslie's own bytes from a file changed in place (an
    editor keeping the inode, a disk error), in 2 ms at 10,000 threads.
    """
    import zlib

    return b"%d %08x %d %d %d\n" % (len(data), zlib.crc32(data), st.st_dev, st.st_ino, st.st_ctime_ns)


class CanonicalText:
    """An index file in canonical layout: its bytes and its sections' bounds in them.

    Either verified here (`parse`), or vouched for by its `fingerprint` (`parse(..., known=True)`): the bytes are
    exactly those leslie last wrote or verified, so the checks would pass again (see `Repository.read_index`).
    Everything after the check works on the bytes (what it looks for is ASCII, which UTF-8 never holds inside
    another character): a mutation neither decodes nor encodes the megabytes it copies.
    """

    def __init__(self, data: bytes, relations: tuple[int, int], threads: tuple[int, int], known: bool) -> None:
        self.data = data
        self.known = known  # vouched for by its fingerprint rather than checked here
        self.sections = {"relations": relations, "threads": threads}

    @property
    def text(self) -> str:
        """The file as text."""
        return self.data.decode("utf-8")

    @classmethod
    def parse(cls, data: bytes, *, known: bool = False) -> CanonicalText | None:
        """The verified text, or None when `data` is not exactly canonical (the strict reader decides then).

        `known=True` skips the checks of the entries (a third of a mutation's time at 10,000 threads): only
        for bytes whose `fingerprint` leslie recorded when it wrote them.
        """
        if not data.startswith(_HEAD_B) or not data.endswith(_TAIL_B):
            return None
        middle = data.find(_MIDDLE_B)
        if middle < 0:
            return None
        relations = (len(_HEAD_B), middle)
        threads = (middle + len(_MIDDLE_B), len(data) - len(_TAIL_B))
        if not known and not _checked(data):
            return None
        return cls(data, relations, threads, known)

    def lists_sorted(self) -> bool:
        """Whether every ID list of the relations section is strictly ascending (as the encoder sorts a set).

        List items are the lines indented by eight spaces; a quote sorts below every character of an ID, so
        comparing the quoted lines compares the IDs.
        """
        low, high = self.sections["relations"]
        data = self.data
        previous = b""
        while low < high:  # a megabyte of lines at a time: split whole, the lines took 60 MB at 100,000 threads
            cut = data.find(b"\n", min(low + (1 << 20), high), high)
            cut = high if cut < 0 else cut
            for line in data[low:cut].split(b"\n"):
                if line.startswith(b'        "'):
                    item = line.rstrip(b",")
                    if item <= previous:
                        return False
                    previous = item
                else:
                    previous = b""
            low = cut + 1
        return True

    def slices(self, section: str, size: int = 1 << 20) -> Iterator[dict[str, Any]]:
        """The entries of `section`, decoded about `size` bytes at a time (see `Index.stored_entries`).

        An entry starts after ",\n" with a line of exactly four spaces and a quote: a cut there is a cut
        between entries (deeper lines are indented further; strings hold no raw newline).
        """
        import json

        low, high = self.sections[section]
        start, end = low + 2, high - 4  # inside "{\n" ... "\n  }"
        while start < end:
            cut = self.data.find(b',\n    "', min(start + size, end), end)
            if cut < 0:
                cut = end
            yield json.loads(b"{" + self.data[start:cut] + b"}")
            start = cut + 2

    def _newline_before(self, section: str, key: bytes) -> int:
        """Offset of the newline that starts the first entry of `section` whose ID is >= `key`.

        A binary search over the bytes themselves (entries are sorted and each starts with a recognisable
        line), so finding an entry costs a few microseconds, not a scan of megabytes. The section's end if none.
        """
        data = self.data
        low, high = self.sections[section]
        end = high
        found = end
        while low < high:
            middle = (low + high) // 2
            line = data.find(b'\n    "', middle, end)
            if line < 0 or line >= high:
                high = middle
                continue
            if data[line + 6:data.index(b'"', line + 6)] >= key:
                found = line
                high = middle
            else:
                low = line + 1
        return found

    def _key_at(self, line: int) -> bytes:
        """The ID of the entry whose first line follows the newline at `line`."""
        return self.data[line + 6:self.data.index(b'"', line + 6)]

    def entry_span(self, section: str, thread_id: str) -> tuple[int, int]:
        """Where the entry of `thread_id` (present) lies in `section`: from its first line to its closing brace."""
        line = self._newline_before(section, thread_id.encode()) + 1
        return line, self.data.index(_ENTRY_END_B, line) + len(_ENTRY_END_B)

    def entry(self, section: str, thread_id: str) -> Any:
        """The decoded entry of `thread_id` (present) in `section`."""
        import json

        line, close = self.entry_span(section, thread_id)
        return json.loads(b"{" + self.data[line:close] + b"}")[thread_id]

    def has(self, thread_id: str) -> bool:
        """Whether `thread_id` has an entry (the sections have the same keys: the threads one is searched)."""
        key = thread_id.encode()
        line = self._newline_before("threads", key)
        return line < self.sections["threads"][1] and self._key_at(line) == key

    def spliced(self, section: str, changes: dict[str, bytes | None]) -> list[bytes | memoryview]:
        """The parts of `section` with the entries of `changes` replaced, inserted or (None) removed, the rest
        copied: joined, they are the section's bytes.

        Offsets, not a list of the keys: a run of untouched entries is one slice of the old bytes, found by the
        binary search of `_newline_before`.
        """
        data = self.data
        view = memoryview(data)  # runs of old entries are views: the file is copied once, by `splice`'s join
        low, high = self.sections[section]
        stop = high - 3 if high - low > 2 else high  # the end of the entries; "{}" has none
        parts: list[bytes | memoryview] = []
        resume = low + 2  # where the first original entry not yet copied starts (`stop`: none left)
        for thread_id in sorted(changes):
            key = thread_id.encode()
            line = self._newline_before(section, key)
            start = line + 1 if line < high else stop
            if resume < start:
                parts.append(view[resume:start - 2 if start < stop else high - 4])  # without the ",\n" after
            replacement = changes[thread_id]
            if replacement is not None:
                parts.append(replacement)
            if start < stop and self._key_at(line) == key:
                close = data.index(_ENTRY_END_B, start) + len(_ENTRY_END_B)
                resume = close + 2 if close < high - 4 else stop
            else:
                resume = start
        if resume < stop:
            parts.append(view[resume:high - 4])
        if not parts:
            return [b"{}"]
        joined: list[bytes | memoryview] = [b"{\n"]
        for part in parts:  # the separators as parts of their own: the whole file is joined once, in `splice`
            joined += (part, b",\n")
        joined[-1] = b"\n  }"
        return joined


def _checked(data: bytes) -> bool:
    """Whether the sections of `data` (head and tail already checked) match the canonical shape exactly."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    middle = text.find(_MIDDLE)
    relations = (len(_HEAD), middle)
    threads = (middle + len(_MIDDLE), len(text) - len(_TAIL))
    threads_re, relations_re, key_re = _section_patterns()
    if threads_re.fullmatch(text, *threads) is None or relations_re.fullmatch(text, *relations) is None:
        return False
    keys = key_re.findall(text, *threads)
    if keys != key_re.findall(text, *relations):
        return False
    return all(a < b for a, b in pairwise(keys))  # sorted, no duplicate


class LazyEntries:
    """Edits of a lazy index: entries decoded on demand, changed ones re-encoded into the old text."""

    def __init__(self, text: CanonicalText) -> None:
        self.text = text
        self.entries: dict[str, dict[str, Any] | None] = {}  # changed thread entries; None: dropped
        # (references_to, referenced_by, after, before): the reference edges and the order edges (SPEC §14)
        self.edge_cache: dict[str, tuple[set[str], set[str], set[str], set[str]]] = {}
        self.dirty: set[str] = set()

    def live(self, thread_id: str) -> bool:
        if thread_id in self.entries:
            return self.entries[thread_id] is not None
        return self.text.has(thread_id)

    def entry(self, thread_id: str) -> dict[str, Any] | None:
        if thread_id in self.entries:
            return self.entries[thread_id]
        if not self.text.has(thread_id):
            return None
        decoded: dict[str, Any] = self.text.entry("threads", thread_id)
        return decoded

    def all_edges(self, thread_id: str) -> tuple[set[str], set[str], set[str], set[str]]:
        """The (references_to, referenced_by, after, before) sets of a live thread, cached so edits stick."""
        cached = self.edge_cache.get(thread_id)
        if cached is None:
            if thread_id in self.entries or not self.text.has(thread_id):
                cached = (set(), set(), set(), set())
            else:
                rel = self.text.entry("relations", thread_id)
                cached = (set(rel["references_to"]), set(rel["referenced_by"]), set(rel.get("after", ())),
                          set(rel.get("before", ())))
            self.edge_cache[thread_id] = cached
        return cached

    def edges(self, thread_id: str) -> tuple[set[str], set[str]]:
        """The (references_to, referenced_by) sets of a live thread, cached so edits stick."""
        cached = self.all_edges(thread_id)
        return cached[0], cached[1]

    def order(self, thread_id: str) -> tuple[set[str], set[str]]:
        """The (after, before) sets of a live thread, cached so edits stick."""
        cached = self.all_edges(thread_id)
        return cached[2], cached[3]

    def _retarget(self, thread_id: str, current: set[str], wanted: set[str], mirror: int) -> None:
        """Set the outgoing edges `current` (of one kind) to `wanted`, keeping the mirror set `mirror` of each
        other end (1: referenced_by, 3: before) in step."""
        for gone in current - wanted:
            if self.live(gone):
                self.all_edges(gone)[mirror].discard(thread_id)
                self.dirty.add(gone)
        for new in wanted - current:
            self.all_edges(new)[mirror].add(thread_id)
            self.dirty.add(new)
        current.clear()
        current.update(wanted)

    def put(self, thread_id: str, fields: dict[str, Any], references: Iterable[str],
            after: Iterable[str] = ()) -> None:
        """Set `thread_id`'s entry (its old keys updated by `fields`) and its outgoing edges."""
        entry = dict(self.entry(thread_id) or {})
        entry.update(fields)
        edges = self.all_edges(thread_id)
        self.entries[thread_id] = entry
        self.dirty.add(thread_id)
        self._retarget(thread_id, edges[0], {t for t in references if t != thread_id and self.live(t)}, 1)
        self._retarget(thread_id, edges[2], {t for t in after if t != thread_id and self.live(t)}, 3)

    def drop(self, thread_id: str) -> None:
        if not self.live(thread_id):
            return
        targets, sources, after, before = self.all_edges(thread_id)
        for kind, ends in ((1, targets), (0, sources), (3, after), (2, before)):
            for end in ends:
                if self.live(end):
                    self.all_edges(end)[kind].discard(thread_id)
                    self.dirty.add(end)
        self.entries[thread_id] = None
        self.edge_cache.pop(thread_id, None)
        self.dirty.add(thread_id)

    def decode_all(self) -> tuple[dict[str, dict[str, Any]], dict[str, set[str]], dict[str, set[str]],
                                  dict[str, set[str]], dict[str, set[str]]]:
        """The five mappings of the whole index, edits applied: threads, references_to, referenced_by, and the
        order edges after and before (only threads that have some)."""
        import json

        document = json.loads(self.text.data)  # verified canonical: the strict checks already hold
        threads: dict[str, dict[str, Any]] = document["threads"]
        relations = document["relations"]
        references_to = {tid: set(rel["references_to"]) for tid, rel in relations.items()}
        referenced_by = {tid: set(rel["referenced_by"]) for tid, rel in relations.items()}
        after = {tid: set(rel["after"]) for tid, rel in relations.items() if rel.get("after")}
        before = {tid: set(rel["before"]) for tid, rel in relations.items() if rel.get("before")}
        for tid in self.dirty:
            entry = self.entry(tid)
            after.pop(tid, None)
            before.pop(tid, None)
            if entry is None or not self.live(tid):
                threads.pop(tid, None)
                references_to.pop(tid, None)
                referenced_by.pop(tid, None)
                continue
            threads[tid] = entry
            to, by, first, then = (set(s) for s in self.all_edges(tid))
            references_to[tid], referenced_by[tid] = to, by
            if first:
                after[tid] = first
            if then:
                before[tid] = then
        return threads, references_to, referenced_by, after, before

    def splice(self) -> bytes:
        """The canonical bytes of the edited index: changed entries re-encoded, the rest copied as is."""
        from leslie.store.jsonio import encode_canonical

        if not self.dirty:
            return self.text.data
        thread_changes: dict[str, bytes | None] = {}
        relation_changes: dict[str, bytes | None] = {}
        for tid in self.dirty:
            entry = self.entry(tid)
            if entry is None or not self.live(tid):
                thread_changes[tid] = relation_changes[tid] = None
                continue
            to, by, after, before = self.all_edges(tid)
            thread_changes[tid] = _encoded(tid, encode_canonical(entry, "    "))
            relation_changes[tid] = _encoded(tid, encode_canonical(relation_entry(to, by, after, before), "    "))
        return b"".join([_HEAD_B, *self.text.spliced("relations", relation_changes), _MIDDLE_B,
                         *self.text.spliced("threads", thread_changes), _TAIL_B])


def relation_entry(references_to: Iterable[str], referenced_by: Iterable[str], after: Iterable[str] = (),
                   before: Iterable[str] = ()) -> dict[str, list[str]]:
    """A thread's `relations` entry: its reference edges, and its order edges only when it has some (SPEC §14),
    so an index without order keeps the exact shape of SPEC §2."""
    entry = {"referenced_by": sorted(referenced_by), "references_to": sorted(references_to)}
    if first := sorted(after):
        entry["after"] = first
    if then := sorted(before):
        entry["before"] = then
    return entry


def encode_index(relations: Iterable[tuple[str, Any]], threads: Iterable[tuple[str, Any]]) -> bytes:
    """The canonical bytes of an index given its sections' (ID, entry) pairs in ascending ID order: what
    `dumps_canonical` gives for the whole document, encoded an entry at a time (no document is built)."""
    from leslie.store.jsonio import encode_canonical

    def section(entries: Iterable[tuple[str, Any]]) -> bytes:
        encoded = [_encoded(thread_id, encode_canonical(entry, "    ")) for thread_id, entry in entries]
        return b"{\n" + b",\n".join(encoded) + b"\n  }" if encoded else b"{}"

    return b"".join([_HEAD_B, section(relations), _MIDDLE_B, section(threads), _TAIL_B])


def _encoded(thread_id: str, value: str) -> bytes:
    return f'    "{thread_id}": {value}'.encode("utf-8", "surrogatepass")
