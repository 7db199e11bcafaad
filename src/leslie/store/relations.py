"""The index `.leslie/thread_relations.json`: built from the threads, kept by deltas, checked, merged."""

from __future__ import annotations

import sys
from collections.abc import Container, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, NamedTuple

from leslie.errors import CorruptStateError, UsageError
from leslie.store.canonical import INDEX_VERSION, CanonicalText, LazyEntries, encode_index, relation_entry
from leslie.store.model import OBJECTIVE_ID_RE, THREAD_ID_RE, THREAD_STATUSES, TOMBSTONE, Thread, check_xml_text

_CanonicalText = CanonicalText  # the name tests and older callers know


class ThreadFacts(NamedTuple):
    """What the index holds of a thread: its entry's fields and the IDs it references (their scopes left out).

    `doctor` keeps one per `thread.json` it reads instead of the whole `Thread`, so that 100,000 of them fit in
    a few tens of megabytes; the statuses, objectives and IDs are interned (a handful of distinct objectives
    for 100,000 threads, each referenced ID one string)."""

    id: str
    title: str
    intent: str
    objective: str | None
    status: str
    created_at: str
    references: tuple[str, ...]
    after: tuple[str, ...] = ()

    @classmethod
    def of(cls, thread: Thread) -> ThreadFacts:
        objective = thread.objective
        return cls(sys.intern(thread.id), thread.title, thread.intent,
                   None if objective is None else sys.intern(objective), sys.intern(thread.status),
                   thread.created_at, tuple(map(sys.intern, thread.references)),
                   tuple(map(sys.intern, thread.after)))

    @property
    def is_tombstone(self) -> bool:
        return self.status == TOMBSTONE


Indexed = Thread | ThreadFacts  # what the index is built from


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
                 referenced_by: dict[str, set[str]], after: dict[str, set[str]] | None = None,
                 before: dict[str, set[str]] | None = None) -> None:
        self._threads = threads
        self._references_to = references_to
        self._referenced_by = referenced_by
        # The order edges (SPEC §14): the threads each comes after, and those that come after it; a thread
        # without any may be absent from either.
        self._after = after if after is not None else {}
        self._before = before if before is not None else {}
        self._lazy: LazyEntries | None = None
        self.origin: str | None = None  # the signature of the index file read (`Repository.read_index`)

    @classmethod
    def empty(cls) -> Index:
        return cls({}, {}, {})

    @classmethod
    def _from_canonical(cls, text: CanonicalText) -> Index:
        index = cls({}, {}, {})
        index._lazy = LazyEntries(text)
        return index

    # -- the three mappings (decoding a lazy index in full on first use) --------------------------------
    def _materialize(self) -> None:
        lazy = self._lazy
        if lazy is None:
            return
        self._lazy = None
        self._threads, self._references_to, self._referenced_by, self._after, self._before = lazy.decode_all()

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

    @property
    def after(self) -> dict[str, set[str]]:
        """The threads each thread comes after (SPEC §14); a thread without any may have no key."""
        self._materialize()
        return self._after

    @property
    def before(self) -> dict[str, set[str]]:
        """The threads that come after each thread (the mirror of `after`)."""
        self._materialize()
        return self._before

    def _order_maps(self) -> tuple[dict[str, set[str]], dict[str, set[str]]]:
        return ({k: v for k, v in self.after.items() if v}, {k: v for k, v in self.before.items() if v})

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Index):
            return NotImplemented
        return (self.threads, self.references_to, self.referenced_by, self._order_maps()) == (
            other.threads, other.references_to, other.referenced_by, other._order_maps())

    __hash__ = None  # type: ignore[assignment]  # mutable, like the dataclass it replaced

    def __repr__(self) -> str:
        return (f"Index(threads={self.threads!r}, references_to={self.references_to!r}, "
                f"referenced_by={self.referenced_by!r})")

    # -- reads that do not need the whole index ---------------------------------------------------------
    def has_thread(self, thread_id: str) -> bool:
        """Whether the index has an entry for `thread_id`."""
        lazy = self._lazy
        return lazy.live(thread_id) if lazy is not None else thread_id in self._threads

    def has_order(self) -> bool:
        """Whether any thread has an order edge (SPEC §14); an unedited canonical file answers without a decode:
        an order list is a key no other part of the file holds."""
        if self.streams():
            return b'"after": [' in self._stored_text().data
        return any(self.after.values())

    def entry(self, thread_id: str) -> dict[str, Any] | None:
        """The `threads` entry of `thread_id` (None when it has none), without decoding the whole index."""
        lazy = self._lazy
        return lazy.entry(thread_id) if lazy is not None else self._threads.get(thread_id)

    def order(self, thread_id: str) -> tuple[set[str], set[str]]:
        """(after, before) of `thread_id` (copies): the threads it comes after, and those that come after it."""
        lazy = self._lazy
        if lazy is not None:
            return tuple(set(s) for s in lazy.order(thread_id)) if lazy.live(thread_id) else (set(), set())  # type: ignore[return-value]
        return set(self._after.get(thread_id, ())), set(self._before.get(thread_id, ()))

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
                tid: relation_entry(self.references_to.get(tid, ()), self.referenced_by.get(tid, ()),
                                    self.after.get(tid, ()), self.before.get(tid, ()))
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

    def stored_bytes(self, *, lists_sorted: bool = False) -> bytes | None:
        """The file's own bytes when they are exactly `to_bytes()` of an unedited index, else None.

        True of a canonical file whose ID lists are strictly sorted (the layout check leaves their order to
        this test): `leslie relations` then prints the file as it is instead of decoding and re-encoding it.
        `lists_sorted`: as `is_stored_encoding`'s.
        """
        return self._stored_text().data if self.is_stored_encoding(lists_sorted=lists_sorted) else None

    def is_stored_encoding(self, *, lists_sorted: bool = False) -> bool:
        """Whether the file this index was read from is exactly its `to_bytes()` (see `stored_bytes`).
        `lists_sorted`: its ID lists were already found sorted in these bytes (`doctor` checks that early)."""
        lazy = self._lazy
        return lazy is not None and not lazy.dirty and (lists_sorted or lazy.text.lists_sorted())

    def streams(self) -> bool:
        """Whether `stored_entries` can read this index: read from a canonical file and not edited since."""
        lazy = self._lazy
        return lazy is not None and not lazy.dirty

    def edited_entries(self) -> Iterator[tuple[str, dict[str, Any] | None, set[str], set[str], set[str]]]:
        """Each thread whose entry or edges were edited since this index was read from its canonical file, by
        ID: (ID, its entry or None when it was dropped, its references_to, its referenced_by, the threads it
        comes after)."""
        lazy = self._lazy
        if lazy is None:
            raise ValueError("the index was not read from a canonical file")
        for thread_id in sorted(lazy.dirty):
            entry = lazy.entry(thread_id) if lazy.live(thread_id) else None
            if entry is None:
                yield thread_id, None, set(), set(), set()
            else:
                targets, sources = lazy.edges(thread_id)
                yield thread_id, entry, targets, sources, lazy.order(thread_id)[0]

    def canonical_text(self) -> str | None:
        """The file's text when this index was read from a canonical file and not edited since, else None."""
        lazy = self._lazy
        return lazy.text.text if lazy is not None and not lazy.dirty else None

    def stored_entries(self, section: str) -> Iterator[dict[str, Any]]:
        """The entries of `section` ("threads" or "relations") of an unedited lazy index, decoded a slice of
        about a megabyte at a time: the whole index compared in bounded memory (doctor at 100,000 threads)."""
        yield from self._stored_text().slices(section)

    def equals_rebuild(self, threads: Mapping[str, Indexed]) -> bool:
        """Whether this unedited lazy index is exactly `build_index(threads.values())` (`threads` keyed by ID),
        compared a stored slice at a time without building the rebuild (~65 MB at 100,000 threads, the largest
        part of doctor's peak). Each ID listed as a referrer must be a live thread referencing this one; with
        no list holding an ID twice, equal totals of listed referrers and of edges then make every list the
        rebuild's."""
        live = {tid for tid, thread in threads.items() if not thread.is_tombstone}
        seen = 0
        for chunk in self.stored_entries("threads"):
            seen += len(chunk)
            for tid, entry in chunk.items():
                if tid not in live or thread_entry(threads[tid]) != entry:
                    return False
        if seen != len(live):
            return False
        seen = edges = listed = order_edges = order_listed = 0
        for chunk in self.stored_entries("relations"):
            seen += len(chunk)
            for tid, relation in chunk.items():
                if tid not in live:
                    return False
                targets = _targets(threads[tid], live)
                if set(relation["references_to"]) != targets:
                    return False
                referrers = set(relation["referenced_by"])
                if any(source == tid or source not in live or tid not in threads[source].references
                       for source in referrers):
                    return False
                edges += len(targets)
                listed += len(referrers)
                first = _predecessors(threads[tid], live)
                if set(relation.get("after", ())) != first:
                    return False
                then = set(relation.get("before", ()))
                if any(other == tid or other not in live or tid not in threads[other].after for other in then):
                    return False
                order_edges += len(first)
                order_listed += len(then)
        return seen == len(live) and edges == listed and order_edges == order_listed

    def _stored_text(self) -> CanonicalText:
        lazy = self._lazy
        if lazy is None or lazy.dirty:
            raise ValueError("the index was not read from a canonical file, or was edited since")
        return lazy.text

    def source(self) -> CanonicalText | None:
        """The canonical text this index was read from while it is lazy (its edits then splice into it)."""
        return self._lazy.text if self._lazy is not None else None

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
            lazy.put(thread.id, thread_entry(thread), thread.references, thread.after)
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
        first = {t for t in thread.after if t != thread.id and t in self._threads}
        old = self._after.get(thread.id, set())
        for gone in old - first:
            self._before.get(gone, set()).discard(thread.id)
        for new in first - old:
            self._before.setdefault(new, set()).add(thread.id)
        self._after[thread.id] = first

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
        for first in self._after.pop(thread_id, set()):
            self._before.get(first, set()).discard(thread_id)
        for then in self._before.pop(thread_id, set()):
            self._after.get(then, set()).discard(thread_id)


def decode_index(data: bytes, path: Path, shown: Path, *, known: bool = False) -> Index:
    """Decode the index file's bytes strictly; `path` names it in JSON errors, `shown` in shape errors.

    A canonical file (what leslie always writes) gives a lazy index without a full decode; anything else
    goes through `loads_strict` and `index_from_json`, which accept or reject it and say why. `known`: the
    bytes match the fingerprint leslie recorded when it wrote them (`canonical.fingerprint`), so their entries are not
    checked again.
    """
    text = CanonicalText.parse(data, known=known)
    if text is not None:
        return Index._from_canonical(text)
    from leslie.store.jsonio import StrictJSONError, loads_strict

    try:
        document = loads_strict(data)
    except StrictJSONError as exc:
        raise CorruptStateError(path, str(exc)) from None
    return index_from_json(document, shown)


def thread_entry(thread: Indexed) -> dict[str, Any]:
    """A thread's entry in the index: what `leslie list` shows without opening every `thread.json`.

    `created_at` and `intent` never change on their own, so carrying them costs merges nothing new; the
    time of a thread's last activity is not stored at all (it is the files' mtimes, `ops.listing`).
    """
    return {"created_at": thread.created_at, "intent": thread.intent, "objective": thread.objective,
            "status": thread.status, "title": thread.title}


ENTRY_KEYS = ("created_at", "intent")  # the keys an index written by leslie before `list`'s rework lacks


def _targets(thread: Indexed, live: Container[str]) -> set[str]:
    """The threads `thread` references in the index: live ones, itself never (dangling and self edges dropped)."""
    return {t for t in thread.references if t != thread.id and t in live}


def _predecessors(thread: Indexed, live: Container[str]) -> set[str]:
    """The threads `thread` comes after in the index: live ones, itself never (as `_targets`)."""
    return {t for t in thread.after if t != thread.id and t in live}


def build_index(threads: Iterable[Indexed]) -> Index:
    """Rebuild the index from `thread.json` documents: tombstones out, dangling and self edges dropped."""
    live = {t.id: t for t in threads if not t.is_tombstone}
    index = Index.empty()
    for thread_id in sorted(live):
        thread = live[thread_id]
        index.threads[thread_id] = thread_entry(thread)
        index.references_to[thread_id] = _targets(thread, live)
        index.referenced_by.setdefault(thread_id, set())
        if first := _predecessors(thread, live):
            index.after[thread_id] = first
    for source, targets in index.references_to.items():
        for target in targets:
            index.referenced_by[target].add(source)
    for successor, predecessors in index.after.items():
        for predecessor in predecessors:
            index.before.setdefault(predecessor, set()).add(successor)
    return index


def rebuilt_bytes(threads: Iterable[Indexed]) -> bytes:
    """`build_index(threads).to_bytes()`, encoded an entry at a time: no Index (its dicts and sets were ~65 MB
    at 100,000 threads) and no document beside the bytes."""
    live = {thread.id: thread for thread in threads if not thread.is_tombstone}
    ids = sorted(live)
    targets = {thread_id: sorted(_targets(live[thread_id], live)) for thread_id in ids}
    referenced_by: dict[str, list[str]] = {}
    for source in ids:  # in ID order: each list comes out sorted
        for target in targets[source]:
            referenced_by.setdefault(target, []).append(source)
    after = {thread_id: _predecessors(live[thread_id], live) for thread_id in ids}
    before: dict[str, list[str]] = {}
    for then in ids:
        for first in after[then]:
            before.setdefault(first, []).append(then)
    relations = ((tid, relation_entry(targets[tid], referenced_by.get(tid, []), after[tid], before.get(tid, ())))
                 for tid in ids)
    return encode_index(relations, ((tid, thread_entry(live[tid])) for tid in ids))


def _bad(path: Path, problem: str) -> CorruptStateError:
    return CorruptStateError(path, problem)


_LIVE_STATUSES = frozenset(s for s in THREAD_STATUSES if s != TOMBSTONE)  # tombstones are never indexed
_SCALARS = (str, int, float, bool, type(None))


def _entry_problem(entry: Any) -> str | None:
    """What is wrong with one `threads` entry of the index, None when it is well-formed."""
    if not isinstance(entry, dict):
        return "is not an object"
    status = entry.get("status")
    if not isinstance(status, str) or status not in _LIVE_STATUSES:  # a list or object is no set member
        return f"has status {status!r} (expected one of {', '.join(sorted(_LIVE_STATUSES))})"
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
        for key, edges in (("after", index.after), ("before", index.before)):
            if key not in rel:
                continue
            value = rel[key]
            if not isinstance(value, list) or not all(isinstance(v, str) and THREAD_ID_RE.match(v) for v in value):
                raise _bad(path, f"relations[{tid!r}].{key} is not a list of thread IDs")
            if value:  # an empty list is not written by leslie, but means no edge: doctor then rewrites the file
                edges[tid] = set(value)
    return index


def invariant_problems(index: Index) -> list[str]:
    """Breaches of SPEC §2 invariants 1–3 within the index itself (4 needs the sources)."""
    if _invariants_hold(index):  # the usual answer, found without sorting 100,000s of sets
        return []
    problems = []
    for tid in sorted(index.threads):
        if tid not in index.references_to or tid not in index.referenced_by:
            problems.append(f"{tid} has no relations entry")
    problems += _edge_problems(index, index.references_to, index.referenced_by, "references",
                               ("references_to", "referenced_by"))
    problems += _edge_problems(index, index.after, index.before, "comes after", ("after", "before"))
    return problems


def _edge_problems(index: Index, forward: Mapping[str, set[str]], backward: Mapping[str, set[str]], verb: str,
                   names: tuple[str, str]) -> list[str]:
    """Breaches within one kind of edge (references, order) and its mirror: a thread's edge to itself or to a
    missing thread, and an edge one side has and the other lacks."""
    problems = []
    for one in sorted(forward):
        for other in sorted(forward[one]):
            if other == one:
                problems.append(f"{one} {verb} itself")
            elif other not in index.threads:
                problems.append(f"{one} {verb} missing thread {other}")
            elif one not in backward.get(other, set()):
                problems.append(f"{other}.{names[1]} lacks {one} (mirror broken)")
    for other in sorted(backward):
        for one in sorted(backward[other]):
            if other not in forward.get(one, set()):
                problems.append(f"{one}.{names[0]} lacks {other} (mirror broken)")
    return problems


class MirrorCheck:
    """SPEC §2 invariants 1-3 of a canonical index, checked from its relations entries as they stream by: no
    self-reference, and every edge of `references_to` mirrored in `referenced_by` and back (every ID of a
    canonical file is a key of both sections, so that also means no edge to a thread not indexed).

    Each edge is seen once from each side (each list taken as a set), so the edges seen from one side only are
    kept, and an edge is dropped when its other side comes: at the end, none may be left."""

    def __init__(self) -> None:
        self.unmatched: set[tuple[str, str]] = set()
        self.self_reference = False

    def add(self, thread_id: str, relation: dict[str, Any]) -> None:
        unmatched = self.unmatched
        # An order edge (then, first) is told from a reference edge by a leading "<" on its first end.
        for edge in [(thread_id, target) for target in set(relation["references_to"])] + [
                (source, thread_id) for source in set(relation["referenced_by"])] + [
                (thread_id, "<" + first) for first in set(relation.get("after", ()))] + [
                (then, "<" + thread_id) for then in set(relation.get("before", ()))]:
            if edge in unmatched:
                unmatched.remove(edge)
            else:
                unmatched.add(edge)
        self.self_reference = (self.self_reference or thread_id in relation["references_to"]
                               or thread_id in relation.get("after", ()))

    @property
    def holds(self) -> bool:
        return not self.unmatched and not self.self_reference


def invariants_hold(index: Index) -> bool:
    """Whether `invariant_problems(index)` is empty; an index read from a canonical file is checked a slice at
    a time (bounded memory: doctor at 100,000 threads) instead of decoded whole."""
    if not index.streams():
        return _invariants_hold(index)
    check = MirrorCheck()
    for chunk in index.stored_entries("relations"):
        for thread_id, relation in chunk.items():
            check.add(thread_id, relation)
    return check.holds


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
    after, before = index.after, index.before
    for then, firsts in after.items():
        if then in firsts or then not in known or not firsts <= known:
            return False
        for first in firsts:
            if then not in before.get(first, none):
                return False
    # Every edge of references_to is mirrored in referenced_by; with as many edges there, there is no other.
    return (sum(map(len, references_to.values())) == sum(map(len, referenced_by.values()))
            and sum(map(len, after.values())) == sum(map(len, before.values())))


def format_relations(index: Index, *, as_stored: bool | None = None) -> str:
    """The index document as `leslie relations` prints it (the labelled graphs are `ops.graphs`). `as_stored`:
    whether the file's own bytes are that document (`Index.is_stored_encoding`), when the caller knows it
    (`store.derived.printable_as_stored`); None: found here."""
    if as_stored is None:
        as_stored = index.is_stored_encoding()
    stored = index.stored_bytes(lists_sorted=True) if as_stored else None
    if stored is not None:  # at 100,000 threads decoding and re-encoding took seconds
        return stored.decode("utf-8")
    from leslie.store.jsonio import dumps_canonical

    return dumps_canonical(index.to_json()).decode("utf-8")
