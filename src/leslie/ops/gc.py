"""`leslie gc`: prune old tombstones explicitly.

A tombstone (`thread.json` with status `deleted`) is what stops a merge from resurrecting a deleted
thread: the driver and `doctor` see the deletion. Pruning it deletes the folder, and with it that memory — a
later merge of a branch that still has the live thread brings the thread back. So pruning is never
automatic, only tombstones older than a threshold go, and never one that a live thread still references.
"""

from __future__ import annotations

import errno
import os
import secrets
import shutil
import time
from dataclasses import dataclass, field
from datetime import datetime

from leslie.errors import StorageError, UsageError
from leslie.store.files import acquire_index_lock
from leslie.store.fsio import refuse_links
from leslie.store.model import Thread
from leslie.store.repository import Repository

DEFAULT_OLDER_THAN_DAYS = 30.0
DAY = 86400.0


@dataclass(frozen=True)
class Tombstone:
    """A deleted thread, when it was deleted (epoch seconds), and why it is kept (None: prunable)."""

    id: str
    deleted_at: float
    kept_because: str | None = None

    def to_json(self) -> dict[str, object]:
        """The tombstone for `--json` output."""
        return {"id": self.id, "deleted_at": _iso(self.deleted_at), "kept_because": self.kept_because}


@dataclass
class GcResult:
    """Tombstones pruned (or that would be, with `dry_run`) and tombstones kept, with the reason."""

    pruned: list[Tombstone] = field(default_factory=list)
    kept: list[Tombstone] = field(default_factory=list)
    dry_run: bool = False


def _iso(epoch: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))


def deletion_time(repo: Repository, thread: Thread) -> float:
    """When `thread` was deleted: the earliest of its `deleted_at` field and its `thread.json`'s mtime.

    `deleted_at` is written by `leslie rm`; older tombstones have only the mtime, which a checkout resets
    to the checkout time — later than the deletion, so the threshold only ever errs towards keeping.
    """
    mtime = os.stat(repo.layout.thread_file(thread.id)).st_mtime
    raw = thread.extra.get("deleted_at")
    if isinstance(raw, str):
        try:
            stamped = datetime.fromisoformat(raw.replace("Z", "+00:00")).timestamp()
        except ValueError:
            return mtime
        return min(stamped, mtime)
    return mtime


def _prune(repo: Repository, thread_id: str) -> None:
    # Renamed out of threads/ first (one atomic step), then deleted: a failure half-way through leaves
    # debris in the machine state, never a half-deleted thread folder.
    trash = repo.layout.state_dir / "gc-trash" / f"{thread_id}-{secrets.token_hex(4)}"
    # Neither the thread folder nor the trash may lie behind a link: the rename and the rmtree that follow
    # would then move or delete files outside `.leslie/` (a `threads/thread-x -> ~` say).
    refuse_links(repo.layout.thread_dir(thread_id))
    refuse_links(trash)
    try:
        trash.parent.mkdir(parents=True, exist_ok=True)
        os.rename(repo.layout.thread_dir(thread_id), trash)
    except OSError as exc:
        if exc.errno == errno.EXDEV:  # the machine state is on another file system (a linked work tree)
            shutil.rmtree(repo.layout.thread_dir(thread_id), ignore_errors=True)
            return
        raise StorageError(f"cannot prune {thread_id}: {exc.strerror or exc}") from None
    shutil.rmtree(trash, ignore_errors=True)


def collect_garbage(repo: Repository, *, older_than_days: float = DEFAULT_OLDER_THAN_DAYS,
                    dry_run: bool = False, now: float | None = None) -> GcResult:
    """Delete the folders of tombstones deleted more than `older_than_days` ago that no live thread references.

    Runs under the index lock; every `thread.json` must read cleanly (a corrupt one could hide a reference).
    """
    if older_than_days < 0:
        raise UsageError(f"--older-than must be 0 or more days, not {older_than_days:g}")
    now = time.time() if now is None else now
    result = GcResult(dry_run=dry_run)
    with acquire_index_lock(repo.layout):
        threads = list(repo.read_threads(repo.thread_ids()))
        referrers: dict[str, list[str]] = {}
        for thread in threads:
            if not thread.is_tombstone:
                for target in thread.references:
                    referrers.setdefault(target, []).append(thread.id)
        for thread in threads:
            if not thread.is_tombstone:
                continue
            deleted = deletion_time(repo, thread)
            reason = None
            if thread.id in referrers:
                reason = (f"still referenced by {', '.join(sorted(referrers[thread.id]))} "
                          "(run `leslie doctor --fix` to drop those references)")
            elif now - deleted < older_than_days * DAY:
                reason = f"deleted less than {older_than_days:g} days ago"
            tombstone = Tombstone(thread.id, deleted, reason)
            if reason is not None:
                result.kept.append(tombstone)
                continue
            if not dry_run:
                _prune(repo, thread.id)
            result.pruned.append(tombstone)
    return result
