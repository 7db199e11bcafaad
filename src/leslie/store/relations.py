"""The index `.leslie/thread_relations.json`: built from the threads, kept by deltas, checked, merged."""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable, Iterator
from itertools import pairwise
from pathlib import Path
from typing import Any

from leslie.errors import CorruptStateError, UsageError
from leslie.store.model import OBJECTIVE_ID_RE, THREAD_ID_RE, THREAD_STATUSES, TOMBSTONE, Thread, check_xml_text

INDEX_VERSION = "1.0"


class Index:
    """The decoded index: per-thread entries and the mirrored reference graph.

    An index read from a canonical file (`decode_index`) starts *lazy*: it keeps the file's text split
    into per-thread entries and decodes only the entries a mutation touches, then writes by splicing the
    re-encoded entries into the old text (`to_bytes`). With 10,000 threads that is the difference between
    a few milliseconds and a few hundred for every `spawn` or `reference`. Reading `threads`,
    `references_to` or `referenced_by` decodes everything once and the index becomes an ordinary one
    (written by a full encode), so code that edits those dicts directly stays correct.
    """

    def __init__(self, threads: dict[str, dict[str, Any]], references_to: dict[str, set[str]],
                 referenced_by: dict[str, set[str]]) -> None:
        self._threads = threads
        self._references_to = references_to
        self._referenced_by = referenced_by
        self._lazy: _LazyEntries | None = None

    @classmethod
    def empty(cls) -> Index:
        return cls({}, {}, {})

    @classmethod
    def _from_canonical(cls, text: _CanonicalText) -> Index:
        index = cls({}, {}, {})
        index._lazy = _LazyEntries(text)
        return index

    # -- the three mappings (decoding a lazy index in full on first use) --------------------------------
    def _materialize(self) -> None:
        lazy = self._lazy
        if lazy is None:
            return
        self._lazy = None
        self._threads, self._references_to, self._referenced_by = lazy.decode_all()

    @property
    def threads(self) -> dict[str, dict[str, Any]]:
        self._materialize()
        return self._threads

    @property
    def references_to(self) -> dict[str, set[str]]:
        self._materialize()
        return self._references_to

    @property
    def referenced_by(self) -> dict[str, set[str]]:
        self._materialize()
        return self._referenced_by

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Index):
            return NotImplemented
        return (self.threads, self.references_to, self.referenced_by) == (
            other.threads, other.references_to, other.referenced_by)

    __hash__ = None  # type: ignore[assignment]  # mutable, like the dataclass it replaced

    def __repr__(self) -> str:
        return (f"Index(threads={self.threads!r}, references_to={self.references_to!r}, "
                f"referenced_by={self.referenced_by!r})")

    # -- reads that do not need the whole index ---------------------------------------------------------
    def has_thread(self, thread_id: str) -> bool:
        """Whether the index has an entry for `thread_id`."""
        lazy = self._lazy
        return lazy.live(thread_id) if lazy is not None else thread_id in self._threads

    def referrers(self, thread_id: str) -> set[str]:
        """The threads that reference `thread_id` (a copy)."""
        lazy = self._lazy
        if lazy is not None:
            return set(lazy.edges(thread_id)[1]) if lazy.live(thread_id) else set()
        return set(self._referenced_by.get(thread_id, ()))

    # -- serialisation ------------------------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        """The document exactly in the SPEC §2 shape, lists sorted."""
        return {
            "relations": {
                tid: {
                    "referenced_by": sorted(self.referenced_by.get(tid, ())),
                    "references_to": sorted(self.references_to.get(tid, ())),
                }
                for tid in self.threads
            },
            "threads": self.threads,
            "version": INDEX_VERSION,
        }

    def to_bytes(self) -> bytes:
        """The canonical file content: `dumps_canonical(self.to_json())`, spliced when the index is lazy."""
        lazy = self._lazy
        if lazy is not None:
            return lazy.splice()
        from leslie.store.jsonio import dumps_canonical

        return dumps_canonical(self.to_json())

    def stored_bytes(self) -> bytes | None:
        """The file's own bytes when they are exactly `to_bytes()` of an unedited index, else None.

        True of a canonical file whose ID lists are strictly sorted (the layout check leaves their order to
        this test): `leslie relations` then prints the file as it is instead of decoding and re-encoding it.
        """
        return self._stored_text().text.encode("utf-8") if self.is_stored_encoding() else None

    def is_stored_encoding(self) -> bool:
        """Whether the file this index was read from is exactly its `to_bytes()` (see `stored_bytes`)."""
        lazy = self._lazy
        return lazy is not None and not lazy.dirty and lazy.text.lists_sorted()

    def canonical_text(self) -> str | None:
        """The file's text when this index was read from a canonical file and not edited since, else None."""
        lazy = self._lazy
        return lazy.text.text if lazy is not None and not lazy.dirty else None

    def stored_entries(self, section: str) -> Iterator[dict[str, Any]]:
        """The entries of `section` ("threads" or "relations") of an unedited lazy index, decoded a slice of
        about a megabyte at a time: the whole index compared in bounded memory (doctor at 100,000 threads)."""
        yield from self._stored_text().slices(section)

    def _stored_text(self) -> _CanonicalText:
        lazy = self._lazy
        if lazy is None or lazy.dirty:
            raise ValueError("the index was not read from a canonical file, or was edited since")
        return lazy.text

    # -- deltas ----------------------------------------------------------------------------------------------
    def put_thread(self, thread: Thread) -> None:
        """Add or update `thread`'s entry and outgoing edges; a tombstone is removed with all its edges.

        Edges to threads absent from the index are left out, as a rebuild would.
        """
        if thread.is_tombstone:
            self.drop_thread(thread.id)
            return
        lazy = self._lazy
        if lazy is not None:
            lazy.put(thread)
            return
        entry = dict(self._threads.get(thread.id, {}))
        entry.update(thread_entry(thread))
        self._threads[thread.id] = entry
        self._referenced_by.setdefault(thread.id, set())
        wanted = {t for t in thread.references if t != thread.id and t in self._threads}
        current = self._references_to.setdefault(thread.id, set())
        for gone in current - wanted:
            self._referenced_by.get(gone, set()).discard(thread.id)
        for new in wanted - current:
            self._referenced_by.setdefault(new, set()).add(thread.id)
        self._references_to[thread.id] = wanted

    def drop_thread(self, thread_id: str) -> None:
        """Remove a thread's entry and every edge touching it."""
        lazy = self._lazy
        if lazy is not None:
            lazy.drop(thread_id)
            return
        self._threads.pop(thread_id, None)
        for target in self._references_to.pop(thread_id, set()):
            self._referenced_by.get(target, set()).discard(thread_id)
        for source in self._referenced_by.pop(thread_id, set()):
            self._references_to.get(source, set()).discard(thread_id)


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
_RELATION_ENTRY = rf'    "{_ID}": \{{\n      "referenced_by": {_ID_LIST},\n      "references_to": {_ID_LIST}\n    \}}'
_HEAD = '{\n  "relations": '
_MIDDLE = ',\n  "threads": '
_TAIL = f',\n  "version": "{INDEX_VERSION}"\n}}\n'
_ENTRY_END = "\n    }"
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


class _CanonicalText:
    """An index file verified to be in canonical layout: its text, section bounds and sorted thread IDs."""

    def __init__(self, text: str, relations: tuple[int, int], threads: tuple[int, int], keys: list[str]) -> None:
        self.text = text
        self.sections = {"relations": relations, "threads": threads}
        self.keys = keys

    @classmethod
    def parse(cls, data: bytes) -> _CanonicalText | None:
        """The verified text, or None when `data` is not exactly canonical (the strict reader decides then)."""
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            return None
        if not text.startswith(_HEAD) or not text.endswith(_TAIL):
            return None
        middle = text.find(_MIDDLE)
        if middle < 0:
            return None
        relations = (len(_HEAD), middle)
        threads = (middle + len(_MIDDLE), len(text) - len(_TAIL))
        threads_re, relations_re, key_re = _section_patterns()
        if threads_re.fullmatch(text, *threads) is None or relations_re.fullmatch(text, *relations) is None:
            return None
        keys = key_re.findall(text, *threads)
        if keys != key_re.findall(text, *relations):
            return None
        if any(a >= b for a, b in pairwise(keys)):  # sorted, no duplicate
            return None
        return cls(text, relations, threads, keys)

    def lists_sorted(self) -> bool:
        """Whether every ID list of the relations section is strictly ascending (as the encoder sorts a set).

        List items are the lines indented by eight spaces; a quote sorts below every character of an ID, so
        comparing the quoted lines compares the IDs.
        """
        low, high = self.sections["relations"]
        text = self.text
        previous = ""
        while low < high:  # a megabyte of lines at a time: split whole, the lines took 60 MB at 100,000 threads
            cut = text.find("\n", min(low + (1 << 20), high), high)
            cut = high if cut < 0 else cut
            for line in text[low:cut].split("\n"):
                if line.startswith('        "'):
                    item = line.rstrip(",")
                    if item <= previous:
                        return False
                    previous = item
                else:
                    previous = ""
            low = cut + 1
        return True

    def slices(self, section: str, size: int = 1 << 20) -> Iterator[dict[str, Any]]:
        """The entries of `section`, decoded about `size` characters at a time (see `Index.stored_entries`).

        An entry starts after ",\n" with a line of exactly four spaces and a quote: a cut there is a cut
        between entries (deeper lines are indented further; strings hold no raw newline).
        """
        import json

        low, high = self.sections[section]
        start, end = low + 2, high - 4  # inside "{\n" ... "\n  }"
        while start < end:
            cut = self.text.find(',\n    "', min(start + size, end), end)
            if cut < 0:
                cut = end
            yield json.loads("{" + self.text[start:cut] + "}")
            start = cut + 2

    def _newline_before(self, section: str, thread_id: str) -> int:
        """Offset of the newline that starts the first entry of `section` whose ID is >= `thread_id`.

        A binary search over the text itself (entries are sorted and each starts with a recognisable line),
        so finding an entry costs a few microseconds, not a scan of megabytes. The section's end if none.
        """
        text = self.text
        low, high = self.sections[section]
        end = high
        found = end
        while low < high:
            middle = (low + high) // 2
            line = text.find('\n    "', middle, end)
            if line < 0 or line >= high:
                high = middle
                continue
            if text[line + 6:text.index('"', line + 6)] >= thread_id:
                found = line
                high = middle
            else:
                low = line + 1
        return found

    def entry_span(self, section: str, thread_id: str) -> tuple[int, int]:
        """Where the entry of `thread_id` (present) lies in `section`: from its first line to its closing brace."""
        line = self._newline_before(section, thread_id) + 1
        return line, self.text.index(_ENTRY_END, line) + len(_ENTRY_END)

    def entry(self, section: str, thread_id: str) -> Any:
        """The decoded entry of `thread_id` (present) in `section`."""
        import json

        line, close = self.entry_span(section, thread_id)
        return json.loads("{" + self.text[line:close] + "}")[thread_id]

    def has(self, thread_id: str) -> bool:
        i = bisect_left(self.keys, thread_id)
        return i < len(self.keys) and self.keys[i] == thread_id

    def spliced(self, section: str, changes: dict[str, str | None]) -> str:
        """`section` with the entries of `changes` replaced, inserted or (None) removed, the rest copied."""
        parts: list[str] = []
        resume = 0  # index in `keys` of the first original entry not yet copied
        for thread_id in sorted(changes):
            i = bisect_left(self.keys, thread_id)
            if resume < i:
                parts.append(self._run(section, resume, i))
            replacement = changes[thread_id]
            if replacement is not None:
                parts.append(replacement)
            resume = i + 1 if i < len(self.keys) and self.keys[i] == thread_id else i
        if resume < len(self.keys):
            parts.append(self._run(section, resume, len(self.keys)))
        return "{\n" + ",\n".join(parts) + "\n  }" if parts else "{}"

    def _run(self, section: str, first: int, stop: int) -> str:
        """The text of the original entries `first` to `stop - 1`, with the separators between them."""
        start = self._newline_before(section, self.keys[first]) + 1
        if stop < len(self.keys):
            end = self._newline_before(section, self.keys[stop]) - 1  # before the ",\n" separator
        else:
            end = self.sections[section][1] - 4  # before the section's closing "\n  }"
        return self.text[start:end]


class _LazyEntries:
    """Edits of a lazy index: entries decoded on demand, changed ones re-encoded into the old text."""

    def __init__(self, text: _CanonicalText) -> None:
        self.text = text
        self.entries: dict[str, dict[str, Any] | None] = {}  # changed thread entries; None: dropped
        self.edge_cache: dict[str, tuple[set[str], set[str]]] = {}  # (references_to, referenced_by)
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

    def edges(self, thread_id: str) -> tuple[set[str], set[str]]:
        """The (references_to, referenced_by) sets of a live thread, cached so edits stick."""
        cached = self.edge_cache.get(thread_id)
        if cached is None:
            if thread_id in self.entries or not self.text.has(thread_id):
                cached = (set(), set())
            else:
                rel = self.text.entry("relations", thread_id)
                cached = (set(rel["references_to"]), set(rel["referenced_by"]))
            self.edge_cache[thread_id] = cached
        return cached

    def put(self, thread: Thread) -> None:
        entry = dict(self.entry(thread.id) or {})
        entry.update(thread_entry(thread))
        current, _referrers = self.edges(thread.id)
        self.entries[thread.id] = entry
        self.dirty.add(thread.id)
        wanted = {t for t in thread.references if t != thread.id and self.live(t)}
        for gone in current - wanted:
            if self.live(gone):
                self.edges(gone)[1].discard(thread.id)
                self.dirty.add(gone)
        for new in wanted - current:
            self.edges(new)[1].add(thread.id)
            self.dirty.add(new)
        current.clear()
        current.update(wanted)

    def drop(self, thread_id: str) -> None:
        if not self.live(thread_id):
            return
        targets, sources = self.edges(thread_id)
        for target in targets:
            if self.live(target):
                self.edges(target)[1].discard(thread_id)
                self.dirty.add(target)
        for source in sources:
            if self.live(source):
                self.edges(source)[0].discard(thread_id)
                self.dirty.add(source)
        self.entries[thread_id] = None
        self.edge_cache.pop(thread_id, None)
        self.dirty.add(thread_id)

    def decode_all(self) -> tuple[dict[str, dict[str, Any]], dict[str, set[str]], dict[str, set[str]]]:
        """The three mappings of the whole index, edits applied."""
        import json

        from leslie.store.bulk import paused_gc

        with paused_gc():  # a million small objects, none in a cycle: no collection while they are built
            document = json.loads(self.text.text)  # verified canonical: the strict checks already hold
            threads: dict[str, dict[str, Any]] = document["threads"]
            relations = document["relations"]
            references_to = {tid: set(rel["references_to"]) for tid, rel in relations.items()}
            referenced_by = {tid: set(rel["referenced_by"]) for tid, rel in relations.items()}
        for tid in self.dirty:
            entry = self.entry(tid)
            if entry is None or not self.live(tid):
                threads.pop(tid, None)
                references_to.pop(tid, None)
                referenced_by.pop(tid, None)
                continue
            threads[tid] = entry
            references_to[tid], referenced_by[tid] = (set(s) for s in self.edges(tid))
        return threads, references_to, referenced_by

    def splice(self) -> bytes:
        """The canonical bytes of the edited index: changed entries re-encoded, the rest copied as is."""
        from leslie.store.jsonio import encode_canonical

        if not self.dirty:
            return self.text.text.encode("utf-8")
        thread_changes: dict[str, str | None] = {}
        relation_changes: dict[str, str | None] = {}
        for tid in self.dirty:
            entry = self.entry(tid)
            if entry is None or not self.live(tid):
                thread_changes[tid] = relation_changes[tid] = None
                continue
            to, by = self.edges(tid)
            thread_changes[tid] = f'    "{tid}": ' + encode_canonical(entry, "    ")
            relation_changes[tid] = f'    "{tid}": ' + encode_canonical(
                {"referenced_by": sorted(by), "references_to": sorted(to)}, "    ")
        text = (_HEAD + self.text.spliced("relations", relation_changes) + _MIDDLE
                + self.text.spliced("threads", thread_changes) + _TAIL)
        return text.encode("utf-8", "surrogatepass")


def decode_index(data: bytes, path: Path, shown: Path) -> Index:
    """Decode the index file's bytes strictly; `path` names it in JSON errors, `shown` in shape errors.

    A canonical file (what leslie always writes) gives a lazy index without a full decode; anything else
    goes through `loads_strict` and `index_from_json`, which accept or reject it and say why.
    """
    text = _CanonicalText.parse(data)
    if text is not None:
        return Index._from_canonical(text)
    from leslie.store.bulk import paused_gc
    from leslie.store.jsonio import StrictJSONError, loads_strict

    with paused_gc():
        try:
            document = loads_strict(data)
        except StrictJSONError as exc:
            raise CorruptStateError(path, str(exc)) from None
        return index_from_json(document, shown)


def thread_entry(thread: Thread) -> dict[str, Any]:
    """A thread's entry in the index: what `leslie list` shows without opening every `thread.json`.

    `created_at` and `intent` never change on their own, so carrying them costs merges nothing new; the
    time of a thread's last activity is not stored at all (it is the files' mtimes, `ops.listing`).
    """
    return {"created_at": thread.created_at, "intent": thread.intent, "objective": thread.objective,
            "status": thread.status, "title": thread.title}


ENTRY_KEYS = ("created_at", "intent")  # the keys an index written by leslie before `list`'s rework lacks


def build_index(threads: Iterable[Thread]) -> Index:
    """Rebuild the index from `thread.json` documents: tombstones out, dangling and self edges dropped."""
    live = {t.id: t for t in threads if not t.is_tombstone}
    index = Index.empty()
    for thread_id in sorted(live):
        thread = live[thread_id]
        index.threads[thread_id] = thread_entry(thread)
        index.references_to[thread_id] = {t for t in thread.references if t != thread_id and t in live}
        index.referenced_by.setdefault(thread_id, set())
    for source, targets in index.references_to.items():
        for target in targets:
            index.referenced_by[target].add(source)
    return index


def _bad(path: Path, problem: str) -> CorruptStateError:
    return CorruptStateError(path, problem)


_LIVE_STATUSES = frozenset(s for s in THREAD_STATUSES if s != TOMBSTONE)  # tombstones are never indexed
_SCALARS = (str, int, float, bool, type(None))


def _entry_problem(entry: Any) -> str | None:
    """What is wrong with one `threads` entry of the index, None when it is well-formed."""
    if not isinstance(entry, dict):
        return "is not an object"
    if entry.get("status") not in _LIVE_STATUSES:
        return f"has status {entry.get('status')!r} (expected one of {', '.join(sorted(_LIVE_STATUSES))})"
    title = entry.get("title")
    if not isinstance(title, str):
        return "has no title string"
    try:
        check_xml_text(title, "title")
    except UsageError as exc:
        return f"is malformed ({exc})"
    for key in ENTRY_KEYS:
        if key in entry:
            if not isinstance(entry[key], str):
                return f"has a {key} that is not a string"
            try:
                check_xml_text(entry[key], key)
            except UsageError as exc:
                return f"is malformed ({exc})"
    objective = entry.get("objective")
    if objective is not None and not (isinstance(objective, str) and OBJECTIVE_ID_RE.match(objective)):
        return f"has objective {objective!r}, which is not an objective ID"
    # Only scalars beside them: a big index skips the depth check of `loads_strict`, and an entry is kept and
    # written back as it is.
    if not all(isinstance(value, _SCALARS) for value in entry.values()):
        return "holds a nested value"
    return None


def index_from_json(data: Any, path: Path) -> Index:
    """Decode and shape-check an index document; any defect raises CorruptStateError naming `path`."""
    if not isinstance(data, dict) or set(data) != {"version", "threads", "relations"}:
        raise _bad(path, "is not an index (expected exactly the keys version, threads, relations)")
    if data["version"] != INDEX_VERSION:
        raise _bad(path, f"has unknown index version {data['version']!r}")
    threads, relations = data["threads"], data["relations"]
    if not isinstance(threads, dict) or not isinstance(relations, dict):
        raise _bad(path, "'threads' and 'relations' must be objects")
    index = Index.empty()
    for tid, entry in threads.items():
        if not THREAD_ID_RE.match(tid):
            raise _bad(path, f"threads entry {tid!r} is not a thread ID")
        problem = _entry_problem(entry)
        if problem is not None:
            raise _bad(path, f"threads entry {tid!r} {problem}")
        index.threads[tid] = entry
    for tid, rel in relations.items():
        if tid not in threads or not isinstance(rel, dict):
            raise _bad(path, f"relations entry {tid!r} is malformed or has no threads entry")
        for key in ("references_to", "referenced_by"):
            value = rel.get(key)
            if not isinstance(value, list) or not all(isinstance(v, str) and THREAD_ID_RE.match(v) for v in value):
                raise _bad(path, f"relations[{tid!r}].{key} is not a list of thread IDs")
        index.references_to[tid] = set(rel["references_to"])
        index.referenced_by[tid] = set(rel["referenced_by"])
    return index


def invariant_problems(index: Index) -> list[str]:
    """Breaches of SPEC §2 invariants 1–3 within the index itself (4 needs the sources)."""
    if _invariants_hold(index):  # the usual answer, found without sorting 100,000s of sets
        return []
    problems = []
    for tid in sorted(index.threads):
        if tid not in index.references_to or tid not in index.referenced_by:
            problems.append(f"{tid} has no relations entry")
    for source in sorted(index.references_to):
        for target in sorted(index.references_to[source]):
            if target == source:
                problems.append(f"{source} references itself")
            elif target not in index.threads:
                problems.append(f"{source} references missing thread {target}")
            elif source not in index.referenced_by.get(target, set()):
                problems.append(f"{target}.referenced_by lacks {source} (mirror broken)")
    for target in sorted(index.referenced_by):
        for source in sorted(index.referenced_by[target]):
            if target not in index.references_to.get(source, set()):
                problems.append(f"{source}.references_to lacks {target} (mirror broken)")
    return problems


def _invariants_hold(index: Index) -> bool:
    """Whether `invariant_problems(index)` is empty: the same checks in one unsorted pass over the edges."""
    threads, references_to, referenced_by = index.threads, index.references_to, index.referenced_by
    if not (threads.keys() <= references_to.keys() and threads.keys() <= referenced_by.keys()):
        return False
    none: frozenset[str] = frozenset()
    known = threads.keys()
    for source, targets in references_to.items():
        if source in targets or not targets <= known:  # set operations, in C
            return False
        for target in targets:
            if source not in referenced_by.get(target, none):
                return False
    # Every edge of references_to is mirrored in referenced_by; with as many edges there, there is no other.
    return sum(map(len, references_to.values())) == sum(map(len, referenced_by.values()))


def format_relations(index: Index) -> str:
    """The index document as `leslie relations` prints it (the labelled graphs are `ops.graphs`)."""
    stored = index.stored_bytes()  # at 100,000 threads decoding and re-encoding took seconds
    if stored is not None:
        return stored.decode("utf-8")
    from leslie.store.jsonio import dumps_canonical

    return dumps_canonical(index.to_json()).decode("utf-8")
