"""The write guard's quarantine: what a sweep (`leslie.guard.tripwire`) took out of the way, kept until a
person brings it back.

A sweep that undoes a change moves what it found there (a created file or folder, or the replaced version
of a file) to `<guard dir>/quarantine/<batch>/<path below .leslie/>`, one batch per sweep
(`<UTC time>-<pid>`). Nothing there is ever deleted by leslie. `leslie status` counts the entries and
`leslie quarantine list` shows them; `leslie quarantine restore PATH` brings the newest one of PATH back:

- what is at PATH now (the version the guard wrote back, perhaps edited since) is moved to the quarantine in
  its turn, so a restore loses nothing and can itself be undone the same way;
- the restore is **not** recorded as a leslie write (`store.mutations.record_leslie_write`): the next sweep
  judges it by its time like any edit. Run by a person, outside every agent's shell call, it is a person's
  edit and stays. Run by an agent's shell command into another thread's folder, it falls inside that call's
  window and is undone again, so the command cannot be used to launder a write the guard refused.

Only files and folders holding files are brought back: a link or a special file that an agent left in a
thread folder stays in the quarantine (it could point anywhere). The quarantine lies in this work tree's
machine state; outside git that is `.leslie/state/`, which a copied folder can bring, so every entry is
read as untrusted: no link is followed, and a name that is not a protected path is skipped.
"""

from __future__ import annotations

import os
import stat
import time
from typing import NamedTuple

from leslie.errors import NotFoundError, StorageError, UsageError
from leslie.guard import snapshots
from leslie.store import mutations

QUARANTINE = "quarantine"
LISTED = 10_000  # entries listed, and folders walked, at most: a planted tree must not cost a `status` its second


class Kept(NamedTuple):
    """One entry in the quarantine: `rel` (below `.leslie/`) as the sweep found it, in `batch`."""

    rel: str
    batch: str
    kind: str  # "file", "folder", "link" or "special"
    where: str  # its path now, as messages show it (`snapshots.shown`)

    @property
    def path(self) -> str:
        return ".leslie/" + self.rel

    @property
    def when(self) -> str:
        """The batch's time (UTC, ISO 8601), or the batch name when it is not one leslie made."""
        try:
            return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.strptime(self.batch[:15], "%Y%m%dT%H%M%S"))
        except ValueError:
            return self.batch

    def to_json(self) -> dict[str, str]:
        return {"path": self.path, "kind": self.kind, "when": self.when, "kept": self.where,
                "batch": self.batch}


def folder(root: str) -> str:
    """The quarantine folder (not created here)."""
    return os.path.join(mutations.guard_dir(root), QUARANTINE)


def put_aside(root: str, rel: str, batch: str) -> str:
    """Move the entry at `rel` (a link is moved as itself) to batch `batch` of the quarantine; its new path,
    as messages show it. A second entry for `rel` in one batch goes to `<batch>.2`, `<batch>.3`..."""
    source = snapshots.protected_path(root, rel)  # and so `rel` cannot climb out of the quarantine either
    snapshots.guard_dir(root)
    base = snapshots.real_folder(folder(root))
    name, number = batch, 1
    while os.path.lexists(os.path.join(base, name, *rel.split("/"))):
        number += 1
        name = f"{batch}.{number}"
    target = os.path.join(base, name, *rel.split("/"))
    os.makedirs(os.path.dirname(target), exist_ok=True)
    os.rename(source, target)
    return snapshots.shown(root, target)


def _kind(mode: int) -> str:
    if stat.S_ISREG(mode):
        return "file"
    if stat.S_ISDIR(mode):
        return "folder"
    return "link" if stat.S_ISLNK(mode) else "special"


def listed(root: str) -> list[Kept]:
    """What the quarantine holds, newest batch first, each batch in path order: its files, links and special
    files, and its empty folders (a created folder's files are listed one by one)."""
    found: list[Kept] = []
    base = folder(root)
    walked = 0
    for batch in sorted(_names(base), reverse=True):
        path = os.path.join(base, batch)
        if not _is_folder(path):
            continue
        for dirpath, dirnames, filenames in os.walk(path):  # os.walk never follows a link to a folder
            walked += 1
            if walked > LISTED:
                return found
            below = os.path.relpath(dirpath, path).replace(os.sep, "/")
            for name in sorted(filenames + [d for d in dirnames if not _is_folder(os.path.join(dirpath, d))]):
                _add(found, root, batch, os.path.join(dirpath, name), name if below == "." else f"{below}/{name}")
            if not dirnames and not filenames and below != ".":
                _add(found, root, batch, dirpath, below)
            dirnames.sort()
            if len(found) >= LISTED:
                return found
    return found


def _names(path: str) -> list[str]:
    try:
        return os.listdir(path) if _is_folder(path) else []
    except OSError:
        return []


def _is_folder(path: str) -> bool:
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


def _add(found: list[Kept], root: str, batch: str, path: str, rel: str) -> None:
    if not snapshots.is_protected_rel(rel):
        return  # not something a sweep put here: never a name to restore to
    try:
        mode = os.lstat(path).st_mode
    except OSError:
        return
    found.append(Kept(rel, batch, _kind(mode), snapshots.shown(root, path)))


def find(root: str, name: str) -> Kept:
    """The entry `name` names: a path in the quarantine (`kept` as listed), or a path below `.leslie/` (as
    `.leslie/...`, relative to the working folder, or absolute), whose newest entry is meant. NotFoundError
    when the quarantine holds none."""
    entries = listed(root)
    absolute = os.path.abspath(name)
    for entry in entries:
        if name == entry.where or absolute == os.path.abspath(os.path.join(root, entry.where)):
            return entry
    leslie = snapshots.leslie_dir(root)
    rel = os.path.relpath(absolute, leslie).replace(os.sep, "/")
    if rel.startswith(".."):
        rel = name.removeprefix("./").removeprefix(".leslie/")
    for entry in entries:
        if entry.rel == rel:
            return entry
    raise NotFoundError(f"the quarantine holds nothing for {name} (`leslie quarantine list` shows what it holds)")


class Restored(NamedTuple):
    """What `restore` did: the entry brought back, and where the version it replaced went (None: none)."""

    entry: Kept
    replaced: str | None

    def to_json(self) -> dict[str, object]:
        return {"path": self.entry.path, "from": self.entry.where, "replaced_kept": self.replaced}


def restore(root: str, entry: Kept) -> Restored:
    """Bring `entry` back to its place; what is there now goes to the quarantine. The caller holds the
    index lock as a sweep takes it (`tripwire.index_lock`), so that no mutation and no sweep runs meanwhile,
    and this write is not one of leslie's own (see the module)."""
    source = os.path.join(folder(root), entry.batch, *entry.rel.split("/"))
    if entry.kind in ("link", "special") or not _only_files(source):
        raise UsageError(f"{entry.where} is (or holds) a link or a special file: leslie does not bring it back "
                         "into .leslie/; look at it there")
    target = snapshots.protected_path(root, entry.rel)
    if not snapshots.real_folders_to(root, entry.rel, create=True):
        raise StorageError(f"a folder on the way to {entry.path} is not a real folder; nothing was changed")
    replaced = None
    if os.path.lexists(target):
        if entry.kind == "file" and _same_bytes(source, target):
            os.unlink(source)
            _prune(root, entry)
            return Restored(entry, None)
        replaced = put_aside(root, entry.rel, time.strftime("%Y%m%dT%H%M%S", time.gmtime()) + f"-{os.getpid()}")
    try:
        os.rename(source, target)
    except OSError as exc:
        raise StorageError(f"could not move {entry.where} back to {entry.path}: {exc.strerror}") from None
    _prune(root, entry)
    return Restored(entry, replaced)


def _only_files(path: str) -> bool:
    """True when `path` is a file, or a folder holding only folders and files."""
    if not _is_folder(path):
        return stat.S_ISREG(os.lstat(path).st_mode)
    for dirpath, dirnames, filenames in os.walk(path):
        for name in dirnames + filenames:
            mode = os.lstat(os.path.join(dirpath, name)).st_mode
            if not (stat.S_ISDIR(mode) or stat.S_ISREG(mode)):
                return False
    return True


def _same_bytes(one: str, other: str) -> bool:
    first, second = snapshots.read_regular(one), snapshots.read_regular(other)
    return first is not None and first == second


def _prune(root: str, entry: Kept) -> None:
    """Remove the folders of `entry`'s batch that it leaves empty."""
    base = os.path.join(folder(root), entry.batch)
    path = os.path.dirname(os.path.join(base, *entry.rel.split("/")))
    while len(path) >= len(base):
        try:
            os.rmdir(path)
        except OSError:
            return
        path = os.path.dirname(path)
