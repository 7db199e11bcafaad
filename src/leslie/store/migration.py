"""Carrying an existing `.leslie/state/` over to the git folder, once (`store.machine`).

Before machine state moved to `<git dir>/leslie/`, a user's sessions, current thread, guard snapshots and
quarantine, backups and caches lived in `.leslie/state/`. The first leslie command in a work tree whose new
folder does not exist yet moves them there, so nothing is lost. Only what this machine made is carried:
files git tracks under `.leslie/state/` came with the repository (a clone can commit them with
`git add -f`), so they are left where they are, never read, and reported by `leslie doctor`. The lock file
and the lock queue are left too: they hold nothing.

The move is staged in a sibling folder and renamed into place whole, under a lock of its own, so concurrent
first commands see either no folder (and wait for the lock) or the whole of it.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import stat
import subprocess

from leslie.errors import LeslieError, StorageError
from leslie.store.fsio import FileLock

LEFT_BEHIND = ("index.lock", "lock-queue")  # nothing in them to carry: the lock is taken anew
GIT_TIMEOUT = 10.0


def tracked_state(root: str) -> set[str] | None:
    """The paths under `.leslie/state/` that git tracks, relative to that folder; None when git cannot say."""
    try:
        out = subprocess.run(["git", "ls-files", "-z", "--", ".leslie/state"], cwd=root, capture_output=True,
                             timeout=GIT_TIMEOUT, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    if out.returncode != 0:
        return None
    prefix = ".leslie/state/"
    names = out.stdout.decode("utf-8", "surrogateescape").split("\0")
    return {name[len(prefix):] for name in names if name.startswith(prefix)}


def untrack_state(root: str) -> int:
    """Remove `.leslie/state/` from git's index (the files stay, git-ignored, never read); the count removed.

    StorageError when git refuses."""
    tracked = tracked_state(root)
    if not tracked:
        return 0
    try:
        out = subprocess.run(["git", "rm", "-r", "-q", "--cached", "--", ".leslie/state"], cwd=root,
                             capture_output=True, timeout=GIT_TIMEOUT, check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        raise StorageError(f"cannot run git rm --cached .leslie/state: {exc}") from None
    if out.returncode != 0:
        why = out.stderr.decode("utf-8", "replace").strip().splitlines()
        raise StorageError(f"git rm --cached .leslie/state failed: {why[0] if why else out.returncode}")
    return len(tracked)


def migrate(root: str, target: str) -> None:
    """Create `target` with what `.leslie/state/` of `root` holds that this machine made (see the module).

    Best effort for what cannot be moved: it stays in `.leslie/state/`, where `leslie doctor` names it.
    """
    legacy = os.path.join(root, ".leslie", "state")
    parent = os.path.dirname(target)
    try:
        os.makedirs(parent, exist_ok=True)
        with FileLock(target + ".migrating.lock", 30.0):
            if os.path.lexists(target):
                return  # another command carried it over while we waited
            tracked = tracked_state(root)
            staging = f"{target}.migrating-{os.getpid()}"
            shutil.rmtree(staging, ignore_errors=True)
            os.mkdir(staging, 0o700)
            if tracked is not None:
                holding = {"/".join(path.split("/")[:n]) for path in tracked for n in range(1, path.count("/") + 1)}
                _carry(legacy, staging, "", tracked, holding)
            os.rename(staging, target)
    except (OSError, LeslieError):
        return  # the state is then made afresh where it belongs; `.leslie/state/` keeps what it held
    _tidy(legacy)


def _carry(source: str, dest: str, rel: str, tracked: set[str], holding: set[str]) -> None:
    """Move every entry of `source` to `dest` but tracked files; a folder `holding` some is walked into
    (links are moved as links)."""
    with os.scandir(source) as entries:
        found = list(entries)
    for entry in found:
        name = rel + entry.name
        if not rel and entry.name in LEFT_BEHIND:
            continue
        if name in tracked:
            continue
        if name in holding and entry.is_dir(follow_symlinks=False):
            os.makedirs(os.path.join(dest, entry.name), exist_ok=True)
            _carry(entry.path, os.path.join(dest, entry.name), name + "/", tracked, holding)
            continue
        _move(entry.path, os.path.join(dest, entry.name))


def _move(source: str, dest: str) -> None:
    try:
        os.rename(source, dest)
    except OSError as exc:
        if exc.errno != errno.EXDEV:
            raise
        # another file system (a linked work tree whose git folder is elsewhere): copied, then removed
        if stat.S_ISDIR(os.lstat(source).st_mode):
            shutil.copytree(source, dest, symlinks=True)
            shutil.rmtree(source)
        else:
            shutil.copy2(source, dest, follow_symlinks=False)
            os.unlink(source)


def _tidy(legacy: str) -> None:
    """Remove the lock file, an empty lock queue and then `.leslie/state/` itself, when nothing else is left."""
    for name in LEFT_BEHIND:
        path = os.path.join(legacy, name)
        try:
            if stat.S_ISDIR(os.lstat(path).st_mode):
                os.rmdir(path)
            else:
                os.unlink(path)
        except OSError:
            pass
    with contextlib.suppress(OSError):  # tracked files (doctor reports them), or a file an older leslie wrote meanwhile
        os.rmdir(legacy)
