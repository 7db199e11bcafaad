"""The work at a glance: objectives → threads → references, as data (`list --tree`, the labelled graphs).

`build_tree` is a pure function over threads and objectives already loaded; `load_tree` loads them: the
threads the index names, each as its `thread.json` says (the source of truth: creation time and scopes are
only there). What the tree shows of each `thread.json` is kept in the derived store (`store.derived`, table
`tree`) with the file's signature, so a run reads only the files that changed since the last one: one `lstat`
per thread instead of a strict read and parse (at 10,000 threads, most of what `list --tree` cost). With the
warm process's watcher, not even that: only the threads it saw change are looked at (`ops/watched.py`).

The drawing lives elsewhere: the terminal tree in `cli`, the Mermaid and Graphviz text in `ops.graphs`. The
nodes are named tuples, made once per thread and per reference: at 10,000 threads a frozen dataclass's
slower construction showed.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import stat
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

from leslie.ops.find_index import RACY_NS, exact_signature, signature
from leslie.ops.watched import Ask, Vouched
from leslie.store.derived import contended, transaction, with_index_table, with_store
from leslie.store.fsio import FOLDER_FLAGS
from leslie.store.model import TOMBSTONE, Objective, Thread
from leslie.store.repository import Repository


class Entry(NamedTuple):
    """What the tree shows of one `thread.json` (a `Thread` has the same attributes)."""

    id: str
    title: str
    status: str
    objective: str | None
    created_at: str
    references: dict[str, Any]  # target → its scope (paths; empty: the whole thread)

    @property
    def is_tombstone(self) -> bool:
        return self.status == TOMBSTONE


class RefNode(NamedTuple):
    """One reference of a thread: its target (title and status when the target is known) and its scope."""

    target: str
    title: str | None  # None: the target is not a live thread (a dangling reference)
    status: str | None
    scope: tuple[str, ...]  # empty: the whole thread

    def to_json(self) -> dict[str, Any]:
        return {"target": self.target, "title": self.title, "status": self.status, "scope": list(self.scope)}


class ThreadNode(NamedTuple):
    """A live thread in the tree; `after`/`before`: the order around it (SPEC §14), as (ID, title, status)."""

    id: str
    title: str
    status: str
    created_at: str
    references: tuple[RefNode, ...]
    after: tuple[tuple[str, str, str], ...] = ()
    before: tuple[tuple[str, str, str], ...] = ()

    @property
    def waiting_for(self) -> tuple[str, ...]:
        """The threads it comes after that are not done."""
        return tuple(tid for tid, _title, status in self.after if status != "done")

    @property
    def order_state(self) -> str | None:
        """"blocked" or "ready" for an active thread in the order (with edges either way), else None. Claims
        are not looked at here: `leslie ready` does."""
        if self.status != "active" or not (self.after or self.before):
            return None
        return "blocked" if self.waiting_for else "ready"

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"id": self.id, "title": self.title, "status": self.status,
                                "created_at": self.created_at, "references": [ref.to_json() for ref in self.references]}
        if self.after or self.before:  # only in the order: a tree without order keeps its exact shape
            data["after"] = [{"thread": t, "title": title, "status": st} for t, title, st in self.after]
            data["before"] = [{"thread": t, "title": title, "status": st} for t, title, st in self.before]
            data["order"] = self.order_state
        return data


@dataclass(frozen=True)
class Group:
    """An objective and its threads; `objective_id` None is the group of threads without an objective.

    A thread naming an objective that does not exist gets a group of that ID, with `missing` set.
    """

    objective_id: str | None
    title: str | None
    status: str | None
    missing: bool
    threads: tuple[ThreadNode, ...]

    def to_json(self) -> dict[str, Any]:
        objective = None if self.objective_id is None else {
            "id": self.objective_id, "title": self.title, "status": self.status, "missing": self.missing}
        return {"objective": objective, "threads": [t.to_json() for t in self.threads]}


@dataclass(frozen=True)
class Tree:
    """Every group in display order: objectives by title (then ID), the missing ones, then no objective."""

    groups: tuple[Group, ...]

    def to_json(self) -> dict[str, Any]:
        return {"groups": [g.to_json() for g in self.groups]}

    def threads(self) -> list[ThreadNode]:
        """Every thread of the tree, in display order."""
        return [t for g in self.groups for t in g.threads]


def _thread_order(thread: Thread | Entry) -> tuple[str, str, str]:
    return (thread.created_at, thread.title.casefold(), thread.id)


Wanted = str | frozenset[str] | None  # one value, any of several (`list --status a --status b`), or any


def _wanted(value: Wanted) -> frozenset[str] | None:
    return frozenset((value,)) if isinstance(value, str) else (value or None)


def build_tree(threads: Iterable[Thread | Entry], objectives: Iterable[Objective], *,
               objective: Wanted = None, status: Wanted = None, keep_empty: bool = True,
               after: Mapping[str, Iterable[str]] | None = None) -> Tree:
    """The tree of `threads` (tombstones dropped) grouped under `objectives`.

    `objective` and `status` keep only matching threads (and only those objectives' groups); `keep_empty`
    keeps objectives without threads, which a filter drops. Pure: no I/O, the order is total and stable.
    """
    live: dict[str, Thread | Entry] = {t.id: t for t in threads if not t.is_tombstone}
    order = _order(live, after)
    known = {o.id: o for o in objectives}
    objectives_wanted, statuses_wanted = _wanted(objective), _wanted(status)
    shown = [t for t in live.values()
             if (objectives_wanted is None or t.objective in objectives_wanted)
             and (statuses_wanted is None or t.status in statuses_wanted)]
    members: dict[str | None, list[Thread | Entry]] = {}
    for thread in shown:
        members.setdefault(thread.objective, []).append(thread)
    filtered = objectives_wanted is not None or statuses_wanted is not None
    groups: list[Group] = []
    for obj in sorted(known.values(), key=lambda o: (o.title.casefold(), o.id)):
        if (objectives_wanted is not None and obj.id not in objectives_wanted) or (not members.get(obj.id) and
                                                              (filtered or not keep_empty)):
            continue
        groups.append(Group(obj.id, obj.title, obj.status, False, _nodes(members.get(obj.id, []), live, order)))
    for oid in sorted(k for k in members if k is not None and k not in known):
        groups.append(Group(oid, None, None, True, _nodes(members[oid], live, order)))
    if members.get(None):
        groups.append(Group(None, None, None, False, _nodes(members[None], live, order)))
    return Tree(tuple(groups))


Order = dict[str, tuple[set[str], set[str]]]


def _order(live: dict[str, Thread | Entry], after: Mapping[str, Iterable[str]] | None) -> Order:
    """(after, before) of each live thread in the order: from `after` (the index's), else from a `Thread`'s own
    `after` field; edges to threads not live left out."""
    if after is None:
        after = {t.id: t.after for t in live.values() if isinstance(t, Thread) and t.after}
    order: Order = {}
    for then, firsts in after.items():
        if then not in live:
            continue
        for first in firsts:
            if first in live and first != then:
                order.setdefault(then, (set(), set()))[0].add(first)
                order.setdefault(first, (set(), set()))[1].add(then)
    return order


def _nodes(threads: list[Thread | Entry], live: dict[str, Thread | Entry], order: Order) -> tuple[ThreadNode, ...]:
    nodes = []
    for thread in sorted(threads, key=_thread_order):
        refs = []
        for target, scope in sorted(thread.references.items()):
            other = live.get(target)
            refs.append(RefNode(target, other.title if other else None, other.status if other else None,
                                tuple(sorted(scope)) if scope else ()))
        edges = order.get(thread.id)
        if edges is None:  # most threads: no order around them
            nodes.append(ThreadNode(thread.id, thread.title, thread.status, thread.created_at, tuple(refs)))
        else:
            nodes.append(ThreadNode(thread.id, thread.title, thread.status, thread.created_at, tuple(refs),
                                    _around(edges[0], live), _around(edges[1], live)))
    return tuple(nodes)


def _around(ids: set[str], live: dict[str, Thread | Entry]) -> tuple[tuple[str, str, str], ...]:
    return tuple((tid, live[tid].title, live[tid].status) for tid in sorted(ids))


# Every thread the index names, with what the store keeps of its `thread.json` (NULLs: nothing kept).
_ROWS = ("SELECT t.id, r.sig, r.title, r.status, r.objective, r.created_at, r.targets, r.scopes "
         "FROM threads t LEFT JOIN tree r USING (id) ORDER BY t.id")
_FEW = 64  # up to this many threads to look at, one `lstat` of each folder rather than a listing of them all
_GONE = "SELECT id FROM tree WHERE id NOT IN (SELECT id FROM threads)"


def load_tree(repo: Repository, *, objective: Wanted = None, status: Wanted = None,
              ask: Ask | None = None) -> Tree:
    """The repository's tree: every thread the index names, as its `thread.json` says (see the module), and
    every objective. When the resident watcher answers `ask` (`ops/watched.py`), the stored rows of the threads
    it saw no change in are used without a look at their files. A corrupt `thread.json` fails the command
    naming it (exit 4), as a strict read does."""
    vouched = Vouched("tree", ask)

    def query(db: sqlite3.Connection) -> tuple[set[str] | None, list[Any], list[str]]:
        vouched.load(db)  # the stored rows' mark, before the rows; then the watcher's word
        changed = vouched.changed(repo.root)
        return changed, db.execute(_ROWS).fetchall(), [row[0] for row in db.execute(_GONE)]

    changed, rows, gone = with_index_table(repo, query)
    index = repo.read_index(record=False)  # the order edges (SPEC §14) are the index's: no thread.json read
    return build_tree(_entries(repo, rows, changed, gone, vouched), repo.objectives(), objective=objective,
                      status=status, after=index.after if index.has_order() else {})


def _entries(repo: Repository, rows: list[Any], changed: set[str] | None, gone: list[str],
             vouched: Vouched) -> list[Entry]:
    """The entries of the index's threads (`rows`: each with its stored row, if any): from the stored row when
    the watcher saw no change in the thread since the rows' mark, or (`changed` None: it was not asked, or
    could not say) when the `thread.json` has the signature stored with it (taken before the file is read,
    so a change after the read shows next time; one stored within the racy second never matches); else read
    strictly, and stored."""
    limit = time.time_ns() - RACY_NS
    infos = _stats(repo, [row[0] for row in rows if changed is None or row[1] is None or row[0] in changed])
    entries: list[Entry] = []
    fresh: list[tuple[Any, ...]] = []
    for tid, stored_sig, title, status, objective, created_at, targets, scopes in rows:
        info = infos.get(tid)
        if stored_sig is not None and ((changed is not None and tid not in changed) or
                                       (info is not None and exact_signature(info) == stored_sig)):
            entries.append(Entry(tid, title, status, objective, created_at, _references(targets, scopes)))
            continue
        thread = repo.read_thread(tid)
        entries.append(Entry(tid, thread.title, thread.status, thread.objective, thread.created_at,
                             thread.references))
        if info is not None:
            fresh.append((tid, signature(info, limit), thread.title, thread.status, thread.objective,
                          thread.created_at, *_stored_references(thread.references)))
    if fresh or gone or vouched.advances():
        with_store(repo.root, lambda db, _persistent: _keep(db, fresh, gone, vouched))
    return entries


def _stored_references(references: dict[str, tuple[str, ...]]) -> tuple[str, str | None]:
    """A thread's references as the store keeps them: the targets joined by commas, and the scopes as JSON
    only when one is not the whole thread (most are: no JSON to decode for them)."""
    if any(references.values()) or any("," in target for target in references):
        return "", json.dumps({target: list(scope) for target, scope in references.items()})
    return ",".join(references), None


def _references(targets: str, scopes: str | None) -> dict[str, Any]:
    if scopes is not None:
        found: dict[str, Any] = json.loads(scopes)
        return found
    return dict.fromkeys(targets.split(","), ()) if targets else {}


def _stats(repo: Repository, ids: list[str]) -> dict[str, os.stat_result]:
    """The `lstat` of each thread's `thread.json` now, for the threads whose folder is a folder (not a link:
    those are read strictly, and fail as every read does), relative to the threads folder. The folders are
    known from one listing of the threads folder, or, for the few threads a watcher saw change, from an
    `lstat` of each."""
    if not ids:
        return {}
    try:
        folder = os.open(repo.layout.threads_dir, FOLDER_FLAGS)
    except OSError:
        return {}
    try:
        if len(ids) <= _FEW:
            folders = {tid for tid in ids if _is_folder(tid, folder)}
        else:
            with os.scandir(folder) as listing:
                folders = {entry.name for entry in listing if entry.is_dir(follow_symlinks=False)}
        found: dict[str, os.stat_result] = {}
        lstat = os.lstat
        for tid in ids:
            if tid in folders:
                with contextlib.suppress(OSError):  # no thread.json: read strictly, and fail as a read does
                    found[tid] = lstat(tid + "/thread.json", dir_fd=folder)
        return found
    finally:
        os.close(folder)


def _is_folder(name: str, folder: int) -> bool:
    try:
        return stat.S_ISDIR(os.lstat(name, dir_fd=folder).st_mode)
    except OSError:
        return False


def _keep(db: sqlite3.Connection, fresh: list[tuple[Any, ...]], gone: Iterable[str], vouched: Vouched) -> None:
    """Store what was read now and forget the threads no longer in the index, under the watcher's new mark and
    only if the stored mark is still the one this run loaded (`ops/watched.py`). Best effort: a busy store is
    left as it is."""
    try:
        with transaction(db):
            if vouched.keep(db, final=True):
                db.executemany("DELETE FROM tree WHERE id = ?", [(tid,) for tid in gone])
                db.executemany("INSERT OR REPLACE INTO tree VALUES (?, ?, ?, ?, ?, ?, ?, ?)", fresh)
    except sqlite3.OperationalError as exc:
        if not contended(exc):
            raise
