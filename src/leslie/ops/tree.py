"""The work at a glance: objectives → threads → references, as data (`list --tree`, the labelled graphs).

`build_tree` is a pure function over threads and objectives already loaded; `ops.tree_drawing.load_tree`
loads them from the derived store and the files, and `ops.tree_drawing.TreeDrawing` keeps what is drawn of
them.

The drawing lives elsewhere: the terminal tree in `cli`, the Mermaid and Graphviz text in `ops.graphs`. The
nodes are named tuples, made once per thread and per reference: at 10,000 threads a frozen dataclass's
slower construction showed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

from leslie.store.model import TOMBSTONE, Objective, Thread


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

    def objective_json(self) -> dict[str, Any] | None:
        return None if self.objective_id is None else {
            "id": self.objective_id, "title": self.title, "status": self.status, "missing": self.missing}

    def to_json(self) -> dict[str, Any]:
        return {"objective": self.objective_json(), "threads": [t.to_json() for t in self.threads]}


@dataclass(frozen=True)
class Tree:
    """Every group in display order: objectives by title (then ID), the missing ones, then no objective."""

    groups: tuple[Group, ...]

    def to_json(self) -> dict[str, Any]:
        return {"groups": [g.to_json() for g in self.groups]}

    def threads(self) -> list[ThreadNode]:
        """Every thread of the tree, in display order."""
        return [t for g in self.groups for t in g.threads]


def thread_order(thread: Thread | Entry) -> tuple[str, str, str]:
    """Where a thread stands in its group: by creation time, then title (case folded), then ID."""
    return (thread.created_at, thread.title.casefold(), thread.id)


Wanted = str | frozenset[str] | None  # one value, any of several (`list --status a --status b`), or any


def wanted(value: Wanted) -> frozenset[str] | None:
    """The values a filter keeps (None: any)."""
    return frozenset((value,)) if isinstance(value, str) else (value or None)


def build_tree(threads: Iterable[Thread | Entry], objectives: Iterable[Objective], *,
               objective: Wanted = None, status: Wanted = None, keep_empty: bool = True,
               after: Mapping[str, Iterable[str]] | None = None) -> Tree:
    """The tree of `threads` (tombstones dropped) grouped under `objectives`.

    `objective` and `status` keep only matching threads (and only those objectives' groups); `keep_empty`
    keeps objectives without threads, which a filter drops. Pure: no I/O, the order is total and stable.
    """
    live: dict[str, Thread | Entry] = {t.id: t for t in threads if not t.is_tombstone}
    order = order_of(live, after)
    objectives_wanted, statuses_wanted = wanted(objective), wanted(status)
    members: dict[str | None, list[Thread | Entry]] = {}
    for thread in live.values():
        if ((objectives_wanted is None or thread.objective in objectives_wanted)
                and (statuses_wanted is None or thread.status in statuses_wanted)):
            members.setdefault(thread.objective, []).append(thread)
    return grouped(objectives, {oid: thread_nodes(sorted(found, key=thread_order), live, order)
                                 for oid, found in members.items()}, objective, status, keep_empty)


def grouped(objectives: Iterable[Objective], members: Mapping[str | None, tuple[ThreadNode, ...]],
             objective: Wanted, status: Wanted, keep_empty: bool) -> Tree:
    """The tree of the threads' nodes `members` (by objective, each group in display order): see `build_tree`."""
    known = {o.id: o for o in objectives}
    objectives_wanted = wanted(objective)
    filtered = objectives_wanted is not None or wanted(status) is not None
    groups: list[Group] = []
    for obj in sorted(known.values(), key=lambda o: (o.title.casefold(), o.id)):
        if (objectives_wanted is not None and obj.id not in objectives_wanted) or (not members.get(obj.id) and
                                                              (filtered or not keep_empty)):
            continue
        groups.append(Group(obj.id, obj.title, obj.status, False, members.get(obj.id, ())))
    for oid in sorted(k for k in members if k is not None and k not in known):
        groups.append(Group(oid, None, None, True, members[oid]))
    if members.get(None):
        groups.append(Group(None, None, None, False, members[None]))
    return Tree(tuple(groups))


Order = dict[str, tuple[set[str], set[str]]]


def order_of(live: Mapping[str, Thread | Entry], after: Mapping[str, Iterable[str]] | None) -> Order:
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


def thread_nodes(threads: list[Thread | Entry], live: Mapping[str, Thread | Entry],
                 order: Order) -> tuple[ThreadNode, ...]:
    """The nodes of `threads` (in that order); `live`: every live thread they reference or are in order with."""
    nodes = []
    for thread in threads:
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


def _around(ids: set[str], live: Mapping[str, Thread | Entry]) -> tuple[tuple[str, str, str], ...]:
    return tuple((tid, live[tid].title, live[tid].status) for tid in sorted(ids))
