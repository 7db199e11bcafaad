"""A hostile clone: a real git repository built to hurt whoever runs leslie in it, cloned into a fresh folder.

git stores symbolic links, so a clone really has the links the attacker committed (to `/dev/zero`, to the
user's `~/.ssh/authorized_keys`, to `.git/hooks/`, to `../..`). FIFOs and devices cannot be committed:
`Hostile.fifo` makes one after cloning, as a second local process could.

Usage (see tests/test_hostile.py): `hostile = make_hostile(tmp_path, plant)` where `plant(origin)` edits the
attacker's repository before the commit; then run leslie in `hostile.root` and check with `hostile.intact()`
that nothing outside the repository changed, and with `hostile.leslie_digest()` that `.leslie/` did not.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from conftest import Result, git, run_leslie, state_dir
from leslie.ops.bootstrap import init_repository
from leslie.ops.threads import reference, spawn
from leslie.store.repository import Repository

SESSION = "s1"


def _file_digest(path: Path) -> str:
    """What `path` is, never following a link or opening a FIFO: its content digest and mode for a file."""
    import hashlib

    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return "missing"
    if stat.S_ISLNK(info.st_mode):
        return "link:" + os.readlink(path)
    if stat.S_ISDIR(info.st_mode):
        return "dir"
    if not stat.S_ISREG(info.st_mode):
        return f"special:{stat.S_IFMT(info.st_mode):o}"
    return hashlib.sha256(path.read_bytes()).hexdigest() + f":{stat.S_IMODE(info.st_mode):o}"


def tree(folder: Path, skip: tuple[str, ...] = ()) -> dict[str, str]:
    """`_file_digest` of every entry under `folder` (not descending into links), by relative path; `skip`
    leaves out these top-level entries and everything under them."""
    found: dict[str, str] = {}
    for top, dirs, files in os.walk(folder):
        for name in dirs + files:
            path = Path(top, name)
            rel = path.relative_to(folder).as_posix()
            if not any(rel == top_name or rel.startswith(top_name + "/") for top_name in skip):
                found[rel] = _file_digest(path)
    return found


@dataclass
class Hostile:
    """The clone (`root`), the fake home holding the victim files, and digests to prove nothing changed."""

    root: Path
    home: Path
    victims: list[Path] = field(default_factory=list)
    before: dict[str, str] = field(default_factory=dict)

    def snapshot(self) -> None:
        """Record the victims, the clone's `.git` and its `.leslie` as they are now."""
        self.before = self.digest()

    def digest(self) -> dict[str, str]:
        found = {str(path): _file_digest(path) for path in self.victims}
        found.update({f"home/{k}": v for k, v in tree(self.home, skip=(".config", ".local", ".cache")).items()})
        if (self.root / ".git").is_dir():  # its own machine state (`.git/leslie/`) is leslie's to write
            inside = tree(self.root / ".git", skip=("index", "logs", "leslie"))
            found.update({f".git/{k}": v for k, v in inside.items()})
        found.update({f"tree/{k}": v for k, v in tree(self.root, skip=(".git", ".leslie")).items()})
        return found

    def intact(self) -> None:
        """Assert that no victim, nothing in the fake home, `.git` or the working tree (`.leslie/` aside)
        changed since `snapshot`."""
        after = self.digest()
        changed = sorted(k for k in set(self.before) | set(after) if self.before.get(k) != after.get(k))
        assert not changed, f"leslie changed files outside its own: {changed}"

    def leslie_digest(self) -> dict[str, str]:
        """Every entry under `.leslie/` (links as their target, never followed)."""
        return tree(self.root / ".leslie")

    def leslie(self, *args: str, input: str | None = None, timeout: float = 20,
               env: dict[str, str] | None = None) -> Result:
        """Run leslie in the clone with a short timeout: a hang fails the test instead of blocking it."""
        return run_leslie(*args, cwd=self.root, input=input, timeout=timeout, env=env)

    def fifo(self, relative: str) -> Path:
        """Replace `relative` (inside the clone) with a FIFO, which no clone can carry but a process can make."""
        path = self.root / relative
        if path.is_symlink() or path.is_file():
            path.unlink()
        path.parent.mkdir(parents=True, exist_ok=True)
        os.mkfifo(path)
        return path


def prompt_payload(root: Path, prompt: str = "hello") -> str:
    """A Claude Code `UserPromptSubmit` hook event in `root`."""
    return json.dumps({"hook_event_name": "UserPromptSubmit", "session_id": SESSION, "cwd": str(root),
                       "transcript_path": "", "prompt": prompt})


def link(path: Path, target: str | Path) -> None:
    """Make `path` a symbolic link to `target` (replacing a file or an empty folder there)."""
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.is_dir():
        import shutil

        shutil.rmtree(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.symlink_to(target)


def make_hostile(tmp_path: Path, plant: Callable[[Path, Path], None], *, git_clone: bool = True) -> Hostile:
    """Build the attacker's repository (threads thread-a → thread-b, plan.md scoped), let `plant(origin, home)`
    add the attack, commit everything (ignored files too), clone it, and snapshot the victims.

    `git_clone=False` gives the same files without `.git/` (a tarball, a copy): outside git, leslie keeps its
    machine state in `.leslie/state/`, so what the attacker planted there is read, and must be refused.

    The victims live in the fake home (`$HOME`, set per test by conftest): `.ssh/authorized_keys`,
    `victim.txt`, an executable `bin/tool` shell script.
    """
    home = Path(os.environ["HOME"])
    (home / ".ssh").mkdir(exist_ok=True)
    (home / ".ssh" / "authorized_keys").write_text("ssh-ed25519 AAAAC3victim user@host\n")
    (home / "victim.txt").write_text("precious\n")
    (home / "bin").mkdir(exist_ok=True)
    tool = home / "bin" / "tool"
    tool.write_text("#!/bin/sh\necho tool\n")
    tool.chmod(0o755)
    origin = tmp_path / "origin"
    origin.mkdir()
    git("init", "-q", "-b", "main", cwd=origin)
    init_repository(origin)
    repo = Repository(origin)
    spawn(repo, "thread a", thread_id="thread-a")
    spawn(repo, "thread b", thread_id="thread-b")
    reference(repo, "thread-a", "thread-b", ["plan.md"])
    import shutil

    shutil.rmtree(origin / ".leslie" / "state", ignore_errors=True)  # only planted machine state is committed
    plant(origin, home)
    git("add", "-A", "-f", ".", cwd=origin)
    git("commit", "-q", "-m", "innocent-looking commit", cwd=origin)
    clone = tmp_path / "clone"
    git("clone", "-q", str(origin), str(clone), cwd=tmp_path)
    if not git_clone:
        shutil.rmtree(clone / ".git")
    # As after any earlier leslie command in the clone: the lock file exists (unless the attack planted one),
    # so `.leslie/` staying unchanged is about what a rejected command writes, not about the lock's creation.
    state = state_dir(clone)
    if not os.path.lexists(state):
        state.mkdir()
    if state.is_dir() and not state.is_symlink() and not os.path.lexists(state / "index.lock"):
        (state / "index.lock").touch()
    hostile = Hostile(clone, home, victims=[home / ".ssh" / "authorized_keys", home / "victim.txt", tool])
    hostile.snapshot()
    return hostile
