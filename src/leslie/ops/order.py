"""Order between threads (SPEC §14): which thread comes after which, what is ready, and `leslie next`.

A thread's `after` (in its `thread.json`) lists the threads it comes after; the index mirrors it as
`relations[T].after` and `relations[T].before`. An edge that would close a cycle is refused naming the cycle,
so the order stays a DAG as long as leslie writes it (a merge of two branches can still close one: `doctor`
reports it, and the threads on it are never ready until an edge is removed).

A thread is *ready* when it is active, every thread it comes after is done or deleted, and no live session
holds it (SPEC §13). `next` takes the first ready thread under the claims lock, so two concurrent calls never
get the same one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from leslie.errors import NotFoundError, UsageError
from leslie.store.files import acquire_index_lock
from leslie.store.model import validate_objective_id, validate_thread_id

if TYPE_CHECKING:
    from leslie.ops.claims import Holder
    from leslie.ops.threads import Outcome
    from leslie.store.relations import Index
    from leslie.store.repository import Repository

DONE = "done"


def cycle_through(after: Mapping[str, set[str]], thread_id: str, predecessor: str) -> list[str] | None:
    """The cycle that the edge "`thread_id` comes after `predecessor`" would close, as the chain of threads each
    coming after the next (`[t, p, ..., t]`), or None. `after`: the edges already there."""
    if predecessor == thread_id:
        return [thread_id, thread_id]
    # A path from `predecessor` back to `thread_id` along `after` edges closes the cycle.
    parents: dict[str, str] = {predecessor: thread_id}
    pending = [predecessor]
    while pending:
        current = pending.pop()
        for earlier in sorted(after.get(current, ())):
            if earlier in parents:
                continue
            parents[earlier] = current
            if earlier == thread_id:
                chain = [thread_id]
                step = current
                while step != thread_id:
                    chain.append(step)
                    step = parents[step]
                return [thread_id, *reversed(chain[1:]), thread_id]
            pending.append(earlier)
    return None


def describe_cycle(chain: Sequence[str]) -> str:
    return " → ".join(chain)


def _refuse_cycle(index: Index, thread_id: str, predecessor: str) -> None:
    chain = cycle_through(index.after, thread_id, predecessor)  # a self-edge is refused before this is asked
    if chain is None:
        return
    raise UsageError(f"{thread_id} cannot come after {predecessor}: that would close the cycle "
                     f"{describe_cycle(chain)} (each thread comes after the next)")


def add_after(repo: Repository, thread_id: str, predecessor: str) -> Outcome:
    """Make `thread_id` come after `predecessor`: exit 2 for a self-edge or a cycle, 3 for a missing thread."""
    from leslie.ops.threads import Outcome, commit_thread

    validate_thread_id(thread_id)
    validate_thread_id(predecessor, "predecessor thread ID")
    if thread_id == predecessor:
        raise UsageError(f"a thread cannot come after itself ({thread_id} → {thread_id})")
    with acquire_index_lock(repo.layout) as lock:
        thread = repo.read_live_thread(thread_id)
        repo.read_live_thread(predecessor)
        if predecessor in thread.after:
            return Outcome(thread, changed=False)
        index = repo.read_index()
        index.after  # noqa: B018 (decodes the whole index: the cycle check walks it)
        _refuse_cycle(index, thread_id, predecessor)
        updated = replace(thread, after=tuple(sorted({*thread.after, predecessor})))
        commit_thread(repo, lock, index, thread, updated)
    return Outcome(updated)


def remove_after(repo: Repository, thread_id: str, predecessor: str) -> Outcome:
    """Remove the edge "`thread_id` comes after `predecessor`" (none there: unchanged; a missing thread: 3)."""
    from leslie.ops.threads import Outcome, commit_thread

    validate_thread_id(thread_id)
    validate_thread_id(predecessor, "predecessor thread ID")
    with acquire_index_lock(repo.layout) as lock:
        thread = repo.read_live_thread(thread_id)
        if predecessor not in thread.after:
            if not repo.thread_exists(predecessor):
                raise NotFoundError(f"no such thread: {predecessor}")
            return Outcome(thread, changed=False)
        index = repo.read_index()
        updated = replace(thread, after=tuple(t for t in thread.after if t != predecessor))
        commit_thread(repo, lock, index, thread, updated)
    return Outcome(updated)


@dataclass(frozen=True)
class Standing:
    """Where a thread stands in the order: what it still waits for, and who holds it."""

    thread: str
    title: str
    status: str
    created_at: str
    objective: str | None
    waiting_for: tuple[str, ...]  # predecessors not done (deleted ones are gone from the index)
    held_by: str | None  # the session holding it

    @property
    def ready(self) -> bool:
        return self.status == "active" and not self.waiting_for and self.held_by is None

    def to_json(self) -> dict[str, Any]:
        return {"id": self.thread, "thread": self.thread, "title": self.title, "status": self.status,
                "created_at": self.created_at, "objective": self.objective,
                "waiting_for": list(self.waiting_for), "held_by": self.held_by, "ready": self.ready}


def waiting_for(index: Index, thread_id: str) -> tuple[str, ...]:
    """The threads `thread_id` comes after that are not done (deleted ones have left the index)."""
    first, _then = index.order(thread_id)
    threads = index.threads
    return tuple(sorted(t for t in first if threads.get(t, {}).get("status") != DONE))


def standings(repo: Repository, *, objective: str | None = None,
              held: Mapping[str, str] | None = None) -> list[Standing]:
    """Every active thread (of `objective`), oldest first, with what it waits for and who holds it. `held`:
    thread → holding session (default: the live claims)."""
    if objective is not None:
        validate_objective_id(objective)
        repo.read_objective(objective)  # exit 3 for a missing one
    index = repo.read_index()
    if held is None:
        from leslie.ops.claims import live_claims

        held = {h.claim.thread: h.claim.session for h in live_claims(repo)}
    found = []
    for thread_id, entry in index.threads.items():
        if entry.get("status") != "active" or (objective is not None and entry.get("objective") != objective):
            continue
        found.append(Standing(thread_id, entry.get("title", ""), entry["status"], entry.get("created_at", ""),
                              entry.get("objective"), waiting_for(index, thread_id), held.get(thread_id)))
    return sorted(found, key=lambda s: (s.created_at, s.thread))


def ready(repo: Repository, *, objective: str | None = None) -> list[Standing]:
    """The ready threads (SPEC §14), oldest first."""
    return [s for s in standings(repo, objective=objective) if s.ready]


def take_next(repo: Repository, *, session: str, agent: str = "cli", objective: str | None = None) -> Holder:
    """Claim the first ready thread for `session` and make it this working tree's current thread; NotFoundError
    (exit 3) when none is ready. The ready threads are listed under the claims lock, so concurrent calls never
    take the same one."""
    from leslie.ops.claims import take_first
    from leslie.ops.threads import switch

    if objective is not None:
        validate_objective_id(objective)
        repo.read_objective(objective)

    def candidates() -> list[str]:  # active threads that wait for none (`take_first` skips the held ones)
        return [s.thread for s in standings(repo, objective=objective, held={}) if not s.waiting_for]

    taken = take_first(repo, candidates, session=session, agent=agent)
    if taken is None:
        scope = f" in {objective}" if objective is not None else ""
        raise NotFoundError(f"no thread is ready{scope}: every active thread waits for another or is held")
    switch(repo, taken.claim.thread)
    return taken
