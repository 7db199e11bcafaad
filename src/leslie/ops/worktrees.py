"""A git worktree per thread (SPEC §13): `leslie worktree add|list|remove`, `leslie spawn --worktree`.

`add` runs `git worktree add -b leslie/<thread-id> <repo>.worktrees/<thread-id> HEAD` (a sibling folder of the
work tree by default), makes the thread that worktree's current thread, and records the binding in the
clone's shared machine folder (`worktrees/<thread-id>.json`: thread, path, branch, since), where every
worktree of the clone sees it. A thread (or its objective) that HEAD does not have yet, one spawned and not
committed, is copied into the new worktree with its index entry, so the agent there finds its thread.

`remove` refuses a worktree with uncommitted changes unless `--force` (git's own check, `git status`), then
runs `git worktree remove` and forgets the binding; the branch stays, to be merged.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

from leslie.errors import NotFoundError, StorageError, UsageError
from leslie.store.bindings import Binding, binding, bindings, record_path
from leslie.store.files import acquire_index_lock
from leslie.store.fsio import atomic_write
from leslie.store.model import Thread
from leslie.store.repository import Repository
from leslie.store.sessions import utc_now

BRANCH_PREFIX = "leslie/"


def _git(cwd: str | os.PathLike[str], *args: str) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=False, timeout=120)
    except (OSError, subprocess.SubprocessError) as exc:
        raise StorageError(f"cannot run git in {cwd}: {exc}") from None


def _top(repo: Repository) -> Path:
    found = _git(repo.root, "rev-parse", "--show-toplevel")
    if found.returncode != 0 or not found.stdout.strip():
        raise UsageError(f"{repo.root} is not in a git work tree: a worktree needs git (`git init`, a commit)")
    return Path(found.stdout.strip())


def add(repo: Repository, thread_id: str, path: str | None = None, branch: str | None = None) -> Binding:
    """Make a worktree for `thread_id` (see the module); UsageError when the thread has one already, or when
    git refuses (its message given), NotFoundError when the thread is not live."""
    thread = repo.read_live_thread(thread_id)
    existing = binding(repo.root, thread_id)
    if existing is not None and os.path.isdir(existing.path):
        raise UsageError(f"{thread_id} has a worktree already: {existing.path} (branch {existing.branch})")
    top = _top(repo)
    where = Path(path).absolute() if path else top.parent / f"{top.name}.worktrees" / thread_id
    name = branch or BRANCH_PREFIX + thread_id
    made = _git(repo.root, "worktree", "add", "-b", name, str(where), "HEAD")
    if made.returncode != 0:
        raise UsageError(f"git could not add the worktree: {made.stderr.strip() or made.stdout.strip()}")
    new_root = where / repo.root.relative_to(top)
    try:
        target = Repository(new_root)
        _carry_thread(repo, target, thread)
        from leslie.ops.threads import switch

        switch(target, thread_id)
    except BaseException:
        _git(repo.root, "worktree", "remove", "--force", str(where))
        _git(repo.root, "branch", "-D", name)
        raise
    bound = Binding(thread_id, str(new_root), name, utc_now())
    text = json.dumps(bound.to_json(), ensure_ascii=False, sort_keys=True, indent=2) + "\n"
    atomic_write(record_path(repo.root, thread_id), text.encode("utf-8"))
    return bound


def _carry_thread(source: Repository, target: Repository, thread: Thread) -> None:
    """Give the new worktree the thread (and its objective) when HEAD does not have them: copied, with the
    thread's index entry, under the new worktree's lock."""
    thread_id, objective = thread.id, thread.objective
    if not target.layout.leslie_dir.is_dir():  # `.leslie/` itself was never committed: all of it, but state
        shutil.copytree(source.layout.leslie_dir, target.layout.leslie_dir, symlinks=True,
                        ignore=shutil.ignore_patterns("state"))
        return
    has_thread = target.thread_exists(thread_id)
    has_objective = objective is None or target.objective_exists(objective)
    if has_thread and has_objective:
        return
    with acquire_index_lock(target.layout) as lock:
        index = target.read_index()
        if not has_objective and objective is not None:  # objectives are not in the index
            target.write_objective(lock, source.read_objective(objective))
        if not has_thread:
            shutil.copytree(source.layout.thread_dir(thread_id), target.layout.thread_dir(thread_id), symlinks=True)
            target.write_thread(lock, thread)
            index.put_thread(thread)
        target.write_index(lock, index)


def listed(repo: Repository) -> list[dict[str, Any]]:
    """Every bound worktree: thread, path, branch, since, whether the folder is there, and its holder."""
    from leslie.ops.claims import holder

    rows = []
    for bound in bindings(repo.root):
        held = holder(repo, bound.thread)
        rows.append({**bound.to_json(), "present": os.path.isdir(bound.path),
                     "held_by": None if held is None else held.to_json()})
    return rows


def remove(repo: Repository, thread_id: str, *, force: bool = False) -> Binding:
    """Remove the worktree of `thread_id` (see the module). UsageError for uncommitted changes without
    `force`; NotFoundError when the thread has no worktree."""
    bound = binding(repo.root, thread_id)
    if bound is None:
        raise NotFoundError(f"{thread_id} has no worktree (`leslie worktree list`)")
    if os.path.isdir(bound.path):
        if not force:
            changes = _git(bound.path, "status", "--porcelain")
            if changes.returncode != 0 or changes.stdout.strip():
                raise UsageError(f"{bound.path} has uncommitted changes; commit them, or use --force to lose them")
        top = _git(bound.path, "rev-parse", "--show-toplevel").stdout.strip() or bound.path
        gone = _git(repo.root, "worktree", "remove", *(["--force"] if force else []), top)
        if gone.returncode != 0:
            raise UsageError(f"git could not remove the worktree: {gone.stderr.strip() or gone.stdout.strip()}")
    with contextlib.suppress(FileNotFoundError):
        os.unlink(record_path(repo.root, thread_id))
    return bound
