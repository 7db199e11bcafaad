"""The commands' edits of the index, as a model for the property tests of `test_relations` and
`test_canonical`: each operation changes the stored threads (`sources`) and the index the way `ops.threads`
does, so that the index can be compared with a rebuild from the threads."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from hypothesis import strategies as st

from leslie.store.model import Thread
from leslie.store.relations import Index

STATUSES = ("active", "paused", "done", "archived")


def ops(names: int, max_size: int) -> st.SearchStrategy[list[tuple[str, int, int]]]:
    """Lists of (operation, thread number, other thread number) over `names` threads."""
    return st.lists(st.tuples(st.sampled_from(["spawn", "ref", "unref", "status", "rm"]),
                              st.integers(0, names - 1), st.integers(0, names - 1)), max_size=max_size)


def apply_op(index: Index, sources: dict[str, Thread], op: str, a: str, b: str, status: str,
             make: Callable[[str, dict[str, tuple[str, ...]]], Thread]) -> None:
    """One command's edit: spawn `a` (referencing `b` when live), reference or unreference `b` from `a`, set
    `a`'s status to `status`, or remove `a` (`rm --force`: its referrers first, then the tombstone). An
    operation the command would refuse (a thread missing or deleted, a self reference) changes nothing."""
    live = {t for t, th in sources.items() if not th.is_tombstone}
    if op == "spawn" and a not in sources:
        sources[a] = make(a, {b: ()} if b in live else {})
        index.put_thread(sources[a])
    elif op == "ref" and a in live and b in live and a != b:
        sources[a] = replace(sources[a], references={**sources[a].references, b: ()})
        index.put_thread(sources[a])
    elif op == "unref" and a in live:
        sources[a] = replace(sources[a], references={k: v for k, v in sources[a].references.items() if k != b})
        index.put_thread(sources[a])
    elif op == "status" and a in live:
        sources[a] = replace(sources[a], status=status)
        index.put_thread(sources[a])
    elif op == "rm" and a in live:
        for other in sorted(live - {a}):
            if a in sources[other].references:
                refs = {k: v for k, v in sources[other].references.items() if k != a}
                sources[other] = replace(sources[other], references=refs)
                index.put_thread(sources[other])
        sources[a] = replace(sources[a], status="deleted", references={})
        index.drop_thread(a)
