"""The work at a glance: objectives → threads → references, as data (`list --tree`, the labelled graphs).

`build_tree` is a pure function over threads and objectives already loaded; `load_tree` loads them. The
drawing lives elsewhere: the terminal tree in `cli`, the Mermaid and Graphviz text in `ops.graphs`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from leslie.store.model import Objective, Thread
from leslie.store.repository import Repository


@dataclass(frozen=True)
class RefNode:
    """One reference of a thread: its target (title and status when the target is known) and its scope."""

    target: str
    title: str | None  # None: the target is not a live thread (a dangling reference)
    status: str | None
    scope: tuple[str, ...]  # empty: the whole thread

    def to_json(self) -> dict[str, Any]:
        return {"target": self.target, "title": self.title, "status": self.status, "scope": list(self.scope)}


@dataclass(frozen=True)
class ThreadNode:
    """A live thread in the tree."""

    id: str
    title: str
    status: str
    created_at: str
    references: tuple[RefNode, ...]

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "title": self.title, "status": self.status, "created_at": self.created_at,
                "references": [ref.to_json() for ref in self.references]}


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


def _thread_order(thread: Thread) -> tuple[str, str, str]:
    return (thread.created_at, thread.title.casefold(), thread.id)


Wanted = str | frozenset[str] | None  # one value, any of several (`list --status a --status b`), or any


def _wanted(value: Wanted) -> frozenset[str] | None:
    return frozenset((value,)) if isinstance(value, str) else (value or None)


def build_tree(threads: Iterable[Thread], objectives: Iterable[Objective], *,
               objective: Wanted = None, status: Wanted = None, keep_empty: bool = True) -> Tree:
    """The tree of `threads` (tombstones dropped) grouped under `objectives`.

    `objective` and `status` keep only matching threads (and only those objectives' groups); `keep_empty`
    keeps objectives without threads, which a filter drops. Pure: no I/O, the order is total and stable.
    """
    live = {t.id: t for t in threads if not t.is_tombstone}
    known = {o.id: o for o in objectives}
    objectives_wanted, statuses_wanted = _wanted(objective), _wanted(status)
    shown = [t for t in live.values()
             if (objectives_wanted is None or t.objective in objectives_wanted)
             and (statuses_wanted is None or t.status in statuses_wanted)]
    members: dict[str | None, list[Thread]] = {}
    for thread in shown:
        members.setdefault(thread.objective, []).append(thread)
    filtered = objectives_wanted is not None or statuses_wanted is not None
    groups: list[Group] = []
    for obj in sorted(known.values(), key=lambda o: (o.title.casefold(), o.id)):
        if (objectives_wanted is not None and obj.id not in objectives_wanted) or (not members.get(obj.id) and
                                                              (filtered or not keep_empty)):
            continue
        groups.append(Group(obj.id, obj.title, obj.status, False, _nodes(members.get(obj.id, []), live)))
    for oid in sorted(k for k in members if k is not None and k not in known):
        groups.append(Group(oid, None, None, True, _nodes(members[oid], live)))
    if members.get(None):
        groups.append(Group(None, None, None, False, _nodes(members[None], live)))
    return Tree(tuple(groups))


def _nodes(threads: list[Thread], live: dict[str, Thread]) -> tuple[ThreadNode, ...]:
    nodes = []
    for thread in sorted(threads, key=_thread_order):
        refs = []
        for target, scope in sorted(thread.references.items()):
            other = live.get(target)
            refs.append(RefNode(target, other.title if other else None, other.status if other else None,
                                tuple(sorted(scope))))
        nodes.append(ThreadNode(thread.id, thread.title, thread.status, thread.created_at, tuple(refs)))
    return tuple(nodes)


def load_tree(repo: Repository, *, objective: Wanted = None, status: Wanted = None) -> Tree:
    """The repository's tree, read from every thread named by the index and every objective.

    The index says which threads are live; each `thread.json` (the source of truth) gives the creation time
    and the scopes, which the index does not hold. A corrupt file fails the command naming it (exit 4).
    """
    index = repo.read_index()
    threads = [repo.read_thread(tid) for tid in sorted(index.threads)]
    return build_tree(threads, repo.objectives(), objective=objective, status=status)
