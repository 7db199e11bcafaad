"""Threads bound to a worktree of the clone (SPEC §13, `leslie worktree add`): the records, and where a
referenced thread's files are read from.

A binding is `worktrees/<thread-id>.json` in the clone's shared machine folder (`store.machine.shared_dir`):
`{"thread", "path", "branch", "since"}`, `path` the root of the worktree (where its `.leslie/` is). Written by
`ops.worktrees`; read here, by the block of every thread that references a bound one: in another worktree, a
referenced thread bound to worktree A is shown as it is in A now (`live_roots`).
"""

from __future__ import annotations

import os
from typing import Any, NamedTuple

from leslie.errors import CorruptStateError, UsageError
from leslie.store.fsio import LESLIE_DIR, read_regular
from leslie.store.jsonio import StrictJSONError, loads_strict
from leslie.store.machine import shared_dir, shared_records

WORKTREES = "worktrees"
RECORD_CAP = 64 * 1024


class Binding(NamedTuple):
    """A thread bound to a worktree of the clone."""

    thread: str
    path: str
    branch: str
    since: str

    def to_json(self) -> dict[str, Any]:
        return self._asdict()


def record_path(root: str | os.PathLike[str], thread_id: str) -> str:
    """Where the binding of `thread_id` is kept. UsageError for a name that is not a plain `thread-...` file
    name (callers pass validated IDs; this keeps the path inside the folder whatever they pass)."""
    if not thread_id.startswith("thread-") or os.path.basename(thread_id) != thread_id or "\0" in thread_id:
        raise UsageError(f"invalid thread ID {thread_id!r}")
    return os.path.join(shared_dir(root), WORKTREES, thread_id + ".json")


def binding(root: str | os.PathLike[str], thread_id: str) -> Binding | None:
    """The worktree `thread_id` is bound to, if any (a record that is not one counts as none)."""
    try:
        data = loads_strict(read_regular(record_path(root, thread_id), RECORD_CAP))
    except (OSError, CorruptStateError, StrictJSONError, UsageError):
        return None
    if not isinstance(data, dict) or not all(isinstance(data.get(k), str) for k in Binding._fields):
        return None
    found = Binding(data["thread"], data["path"], data["branch"], data["since"])
    return found if found.thread == thread_id else None


def bindings(root: str | os.PathLike[str]) -> list[Binding]:
    """Every binding of the clone, by thread ID."""
    return [bound for name in shared_records(root, WORKTREES) if (bound := binding(root, name)) is not None]


def live_roots(root: str | os.PathLike[str]) -> dict[str, str]:
    """For each thread bound to another worktree of the clone whose thread folder is there, that worktree's
    root: its files are read from it, uncommitted edits included. A thread not bound, bound to this worktree,
    or whose worktree is gone, is not in it. One listing of the bindings (`shared_records`; none: one failed
    `scandir`), so a reader with many references looks them up at no cost each."""
    here = os.path.realpath(root)
    found = {}
    for thread_id in shared_records(root, WORKTREES):
        bound = binding(root, thread_id)
        if bound is None or not os.path.isabs(bound.path) or os.path.realpath(bound.path) == here:
            continue
        if os.path.isfile(os.path.join(bound.path, LESLIE_DIR, "threads", thread_id, "thread.json")):
            found[thread_id] = bound.path
    return found
