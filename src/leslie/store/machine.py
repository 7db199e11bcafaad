"""Where leslie keeps what belongs to this machine, not to the repository.

Sessions, the current thread, the write guard's manifests and snapshots, the index lock and its queue, and
the caches are this machine's. A folder inside the work tree can be committed (`git add -f`), so a clone
could plant every one of them; git never checks out anything into its own folder. So, in a git work tree:

- per work tree (the current thread, sessions, the guard, the lock, caches): `<git dir>/leslie/`, that is
  `.git/leslie/` in the main work tree and `.git/worktrees/<name>/leslie/` in a linked one;
- shared by every work tree of the clone (presence and claims, SPEC §13): `<git common dir>/leslie/shared/`.

A `.leslie/` below the work tree's top (a monorepo's `services/api/.leslie/`) gets a folder of its own:
`<git dir>/leslie/roots/<its path, quoted>/`. A folder that is not in a git work tree keeps
`.leslie/state/`: no clone put it there.

The git folders are found as git finds them (gitrepository-layout(5)): the nearest `.git` at or above the
root, a folder or a `gitdir: PATH` file (linked work trees, submodules), and the `commondir` file in a linked
work tree's git folder. Reading those files costs two `stat` calls; running `git rev-parse` on every hook
call would cost milliseconds. tests/test_machine.py checks the answers against `git rev-parse`.

The first call in a git work tree whose machine folder does not exist yet carries an existing `.leslie/state/`
over, once (`store.migration`).
"""

from __future__ import annotations

import contextlib
import os
import stat

from leslie.store.fsio import LESLIE_DIR

MACHINE_DIR = "leslie"  # in the git folder
LEGACY_STATE = "state"  # `.leslie/state/`: the old place, and the place outside git
SHARED = "shared"
INDEX_LOCK = "index.lock"
_GITFILE_CAP = 4096
USER_CACHE = "leslie"  # the folder's name in the user's cache folder
_found: dict[str, tuple[str, str | None, str]] = {}  # root -> (state dir, git dir, its place below `leslie/`)


def state_dir(root: str | os.PathLike[str]) -> str:
    """The folder of this work tree's machine state (see the module); not created here."""
    return _resolve(os.fspath(root))[0]


def shared_dir(root: str | os.PathLike[str]) -> str:
    """The folder of state shared by every work tree of the clone: `<git common dir>/leslie/shared/` (for a
    `.leslie/` below the top, in its own `roots/` folder there), or `.leslie/state/shared/` outside git; not
    created here."""
    state, git_dir, place = _resolve(os.fspath(root))
    if git_dir is None:
        return os.path.join(state, SHARED)
    return os.path.join(_common_dir(git_dir), MACHINE_DIR, place, SHARED)


def shared_records(root: str | os.PathLike[str], kind: str) -> list[str]:
    """The names (without `.json`) of the records in the folder `kind` of the shared machine folder
    (`claims`, `worktrees`...), sorted; none when it cannot be listed."""
    try:
        with os.scandir(os.path.join(shared_dir(root), kind)) as listing:
            return sorted(entry.name[:-len(".json")] for entry in listing if entry.name.endswith(".json"))
    except OSError:
        return []


def index_lock_path(root: str | os.PathLike[str]) -> str:
    """The index lock's file: every writer of this work tree's `.leslie/` takes it (`store.files`)."""
    return os.path.join(state_dir(root), INDEX_LOCK)


def in_git(root: str | os.PathLike[str]) -> bool:
    """Whether `root` lies in a git work tree (its machine state is then in the git folder)."""
    return _resolve(os.fspath(root))[1] is not None


def same_clone(root: str | os.PathLike[str], other: str | os.PathLike[str]) -> bool:
    """Whether `root` and `other` are work trees of one clone (the same git common folder): their threads are
    then one set, each thread's files checked out in each (SPEC §13)."""
    mine, theirs = _resolve(os.fspath(root))[1], _resolve(os.fspath(other))[1]
    return mine is not None and theirs is not None and (
        os.path.realpath(_common_dir(mine)) == os.path.realpath(_common_dir(theirs)))


def head_branch(root: str | os.PathLike[str]) -> str | None:
    """The branch checked out in the work tree holding `root` (what its `HEAD` names under `refs/heads/`), None
    outside git or on a detached `HEAD`. One small read, as git keeps it (gitrepository-layout(5))."""
    git_dir = _resolve(os.fspath(root))[1]
    if git_dir is None:
        return None
    try:
        with open(os.path.join(git_dir, "HEAD"), "rb") as handle:
            line = handle.read(_GITFILE_CAP).decode("utf-8", "replace").strip()
    except OSError:
        return None
    prefix = "ref: refs/heads/"
    return line[len(prefix):] if line.startswith(prefix) and len(line) > len(prefix) else None


def legacy_dir(root: str | os.PathLike[str]) -> str:
    """`.leslie/state/` of `root`: machine state outside git, and what a git work tree never reads again."""
    return os.path.join(os.fspath(root), LESLIE_DIR, LEGACY_STATE)


def _resolve(root: str) -> tuple[str, str | None, str]:
    root = os.path.abspath(root)
    found = _found.get(root)
    if found is None:
        located = git_dirs(root)
        if located is None:
            found = (legacy_dir(root), None, "")
        else:
            git_dir, top = located
            rel = os.path.relpath(root, top)
            place = ""
            if rel != os.curdir:
                from urllib.parse import quote

                place = os.path.join("roots", quote(rel.replace(os.sep, "/"), safe=""))
            state = os.path.join(git_dir, MACHINE_DIR, place) if place else os.path.join(git_dir, MACHINE_DIR)
            found = (state, git_dir, place)
            if not os.path.lexists(state) and _real_folder(legacy_dir(root)):
                from leslie.store.migration import migrate

                migrate(root, state)
        _found[root] = found
    return found


def _real_folder(path: str) -> bool:
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


def git_dirs(root: str) -> tuple[str, str] | None:
    """(the git folder, the work tree's top) of the work tree holding `root`, None outside git."""
    here = root
    while True:
        dot_git = os.path.join(here, ".git")
        try:
            mode = os.stat(dot_git).st_mode
        except OSError:
            mode = 0
        if stat.S_ISDIR(mode):
            return dot_git, here
        if stat.S_ISREG(mode):
            # A `.git` file that names no folder (a linked work tree whose git folder was removed) is a broken
            # work tree, as git says too: never the repository above it.
            target = _gitfile(dot_git)
            return (target, here) if target is not None else None
        parent = os.path.dirname(here)
        if parent == here:
            return None
        here = parent


def _gitfile(path: str) -> str | None:
    """The folder a `.git` file names (`gitdir: PATH`, relative to the file's folder), None when it names
    no folder."""
    try:
        with open(path, "rb") as handle:
            text = handle.read(_GITFILE_CAP).decode("utf-8", "replace")
    except OSError:
        return None
    line = text.splitlines()[0] if text else ""
    if not line.startswith("gitdir:"):
        return None
    target = os.path.join(os.path.dirname(path), line[len("gitdir:"):].strip())
    return os.path.normpath(target) if os.path.isdir(target) else None


def _common_dir(git_dir: str) -> str:
    """The clone's common git folder: what `<git dir>/commondir` names (linked work trees), else git dir."""
    try:
        with open(os.path.join(git_dir, "commondir"), "rb") as handle:
            line = handle.read(_GITFILE_CAP).decode("utf-8", "replace").strip()
    except OSError:
        return git_dir
    common = os.path.normpath(os.path.join(git_dir, line)) if line else git_dir
    return common if os.path.isdir(common) else git_dir


def cache_folder() -> str | None:
    """This user's cache folder for leslie, shared by every repository (derived stores, compiled templates):
    `$XDG_CACHE_HOME/leslie`, else `~/.cache/leslie` (None when there is no home to put it in)."""
    base = os.environ.get("XDG_CACHE_HOME", "")
    if not os.path.isabs(base):  # unset, empty or relative: the XDG spec says to ignore it
        home = os.path.expanduser("~")
        if not os.path.isabs(home):
            return None
        base = os.path.join(home, ".cache")
    return os.path.join(base, USER_CACHE)


def private_folder(folder: str) -> bool:
    """Make `folder` (0700) if needed; whether it is a folder of this user's that only they may enter."""
    try:
        os.makedirs(os.path.dirname(folder), exist_ok=True)
        with contextlib.suppress(FileExistsError):
            os.mkdir(folder, 0o700)
        info = os.stat(folder)
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid():
            return False
        if info.st_mode & 0o077:  # made by hand, or by mkdir -p with a looser umask: ours, so tightened
            os.chmod(folder, 0o700)
        return True
    except OSError:
        return False
