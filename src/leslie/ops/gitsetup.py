"""`leslie git setup`: register leslie's merge drivers and the hooks that keep the index exact after git.

What it installs (idempotent, never overwriting anything of the user's):
- `.gitattributes` lines sending the index (and each `thread.json`) to leslie's merge drivers;
- `merge.leslie-relations.*` and `merge.leslie-thread.*` in the repository's git config (shared by every
  worktree);
- a marked block in the `post-merge`, `post-checkout` and `post-rewrite` hooks of the hooks folder git
  really uses (`core.hooksPath` respected; worktrees share it) that runs `leslie doctor --fix --quiet`.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import stat
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from leslie.errors import StorageError, UsageError
from leslie.ops.bootstrap import GITATTRIBUTES_LINE, ensure_line
from leslie.store.files import read_repository_file, repository_target
from leslie.store.fsio import atomic_write

INDEX_DRIVER = "leslie-relations"
THREAD_DRIVER = "leslie-thread"
THREAD_GITATTRIBUTES_LINE = f".leslie/threads/*/thread.json merge={THREAD_DRIVER}"
DRIVER_NAMES = {
    INDEX_DRIVER: "leslie: semantic merge of .leslie/thread_relations.json",
    THREAD_DRIVER: "leslie: semantic merge of .leslie/threads/*/thread.json",
}
HOOK_NAMES = ("post-merge", "post-checkout", "post-rewrite")
BLOCK_BEGIN = "# >>> leslie >>>"
BLOCK_END = "# <<< leslie <<<"
_BLOCK_RE = re.compile(rf"^{re.escape(BLOCK_BEGIN)}.*?^{re.escape(BLOCK_END)}[^\n]*\n?", re.S | re.M)
_SHELLS = {"sh", "bash", "dash", "zsh", "ksh", "ash", "mksh", "busybox"}


@dataclass(frozen=True)
class GitLocation:
    """Where git keeps things for the working tree holding a leslie root."""

    toplevel: Path
    hooks_dir: Path
    root_from_top: str  # the leslie root relative to the working tree's top ("" when they coincide)
    git_dir: Path | None = None  # the repository's (common) git folder

    @property
    def hooks_area(self) -> Path:
        """The folder a hook's real path must lie in: the git folder for `.git/hooks`; the working tree for a
        `core.hooksPath` inside it (husky's `.husky`: committed, so its links are the repository's); else the
        configured folder itself (the user's own choice, e.g. `~/.githooks`), never out of it through a link."""
        for area in (self.git_dir, self.toplevel):
            if area is not None and self.hooks_dir.is_relative_to(area):
                return area
        return self.hooks_dir


@dataclass
class GitSetupReport:
    """What `setup` changed, what `check` found missing, and notes worth telling the user."""

    changed: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def leslie_executable() -> str:
    """Absolute path of the running leslie executable when it can be found, else `leslie` (from PATH)."""
    argv0 = Path(sys.argv[0]) if sys.argv and sys.argv[0] else None
    candidates = []
    if argv0 is not None and argv0.name == "leslie":
        candidates.append(argv0.absolute())
    candidates.append(Path(sys.executable).with_name("leslie"))
    which = shutil.which("leslie")
    if which:
        candidates.append(Path(which).absolute())
    for candidate in candidates:
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return "leslie"


def _git(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, check=False, timeout=30)
    except (OSError, subprocess.SubprocessError) as exc:
        raise StorageError(f"cannot run git in {root}: {exc}") from None


def locate_git(root: Path) -> GitLocation:
    """The working tree and hooks folder for `root`; UsageError when `root` is not inside a git work tree."""
    top = _git(root, "rev-parse", "--show-toplevel")
    if top.returncode != 0 or not top.stdout.strip():
        raise UsageError(f"{root} is not inside a git working tree (run `git init` first)")
    toplevel = Path(top.stdout.strip())
    hooks = _git(root, "rev-parse", "--path-format=absolute", "--git-path", "hooks")
    if hooks.returncode != 0 or not hooks.stdout.strip():
        raise StorageError(f"git cannot tell where the hooks of {toplevel} live: {hooks.stderr.strip()}")
    rel = os.path.relpath(root.resolve(), toplevel.resolve())
    common = _git(root, "rev-parse", "--path-format=absolute", "--git-common-dir")
    git_dir = Path(common.stdout.strip()) if common.returncode == 0 and common.stdout.strip() else None
    return GitLocation(toplevel, Path(hooks.stdout.strip()), "" if rel == "." else Path(rel).as_posix(), git_dir)


def driver_command(executable: str, kind: str) -> str:
    """The shell command git runs for a merge driver (`%O %A %B`: base, ours/result, theirs; `%P`, the
    file's path, lets the thread driver check that a thread.json's id is its folder's)."""
    extra = " --kind thread --path %P" if kind == THREAD_DRIVER else ""
    return f"{shlex.quote(executable)} merge-relations{extra} %O %A %B"


def _driver_works(value: str, kind: str = INDEX_DRIVER) -> bool:
    """A configured driver is usable when it is leslie's, current, and its executable still exists."""
    if "merge-relations" not in value or "%O %A %B" not in value:
        return False
    if kind == THREAD_DRIVER and "--path %P" not in value:
        return False  # set up by an older leslie: the id of a thread.json could not be checked
    try:
        program = shlex.split(value)[0]
    except (ValueError, IndexError):
        return False
    if os.sep in program:
        return os.access(program, os.X_OK)
    return shutil.which(program) is not None


def hook_block(executable: str, root_from_top: str, hook: str) -> str:
    """The shell block leslie keeps in `hook`: never fails the git operation, skips without leslie."""
    leslie_dir = f"{root_from_top}/.leslie" if root_from_top else ".leslie"
    root_arg = f" --root {shlex.quote(root_from_top)}" if root_from_top else ""
    exe = shlex.quote(executable)
    # A checkout in the middle of a rebase must leave the tree alone: a repair would dirty it and stop the
    # next pick. post-rewrite runs once the rebase is over and repairs then.
    guard = ("" if hook != "post-checkout" else
             ' && [ ! -d "$(git rev-parse --git-path rebase-merge 2>/dev/null)" ] \\\n'
             '    && [ ! -d "$(git rev-parse --git-path rebase-apply 2>/dev/null)" ]')
    return f"""{BLOCK_BEGIN} keeps .leslie/thread_relations.json exact after git changes the tree
# runs `leslie doctor --fix --quiet` (managed by `leslie git setup`; edit outside these markers)
if [ -d {shlex.quote(leslie_dir)} ]{guard}; then
  leslie_exe={exe}
  [ -x "$leslie_exe" ] || leslie_exe=$(command -v leslie 2>/dev/null) || leslie_exe=
  if [ -n "$leslie_exe" ]; then
    "$leslie_exe" doctor --fix --quiet{root_arg} </dev/null \\
      || echo "leslie: 'leslie doctor --fix' left problems (see above); the git operation itself succeeded" >&2
  fi
fi
{BLOCK_END}
"""


def _is_shell_script(text: str) -> bool:
    first = text.split("\n", 1)[0]
    if not first.startswith("#!"):
        return False
    words = first[2:].split()
    if not words:
        return False
    program = Path(words[0]).name
    if program == "env" and len(words) > 1:
        program = Path(words[-1] if words[1].startswith("-") else words[1]).name
    return program in _SHELLS


def _read_hook(location: GitLocation, path: Path) -> str | None:
    """A hook's text, None when there is none; read only where its links stay in `location.hooks_area`."""
    data = read_repository_file(location.toplevel, path, within=location.hooks_area)
    return None if data is None else data.decode("utf-8")


def _hook_plan(location: GitLocation, path: Path, block: str) -> tuple[str | None, str | None]:
    """(new text or None when up to date, note or None) for the hook at `path`."""
    try:
        text = _read_hook(location, path)
    except (OSError, UnicodeDecodeError, StorageError) as exc:
        return None, f"{path}: cannot read it ({exc}); add `leslie doctor --fix --quiet` to it by hand"
    if text is None:
        return "#!/bin/sh\n" + block, None
    if not text.strip():
        return "#!/bin/sh\n" + block, None
    if _BLOCK_RE.search(text):
        updated = _BLOCK_RE.sub(lambda _m: block, text, count=1)
        return (None if updated == text else updated), None
    if not _is_shell_script(text):
        return None, (f"{path} is not a shell script; leslie left it untouched: make it run "
                      "`leslie doctor --fix --quiet` too")
    if not os.access(path, os.X_OK):
        return None, (f"{path} is not executable, so git ignores it; leslie left it untouched: make it "
                      "executable and run `leslie git setup` again")
    # Right after the shebang, not at the end: an existing hook that ends with `exit` or `exec` would
    # otherwise never reach leslie's block. The block itself never exits and never fails.
    shebang, _, rest = text.partition("\n")
    return shebang + "\n" + block + rest, None


def _install_hook(location: GitLocation, path: Path, text: str) -> None:
    target = repository_target(location.toplevel, path, within=location.hooks_area)
    existed = target.exists()
    mode = stat.S_IMODE(target.stat().st_mode) if existed else 0o755
    atomic_write(target, text.encode("utf-8"))
    try:
        os.chmod(target, mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    except OSError as exc:
        raise StorageError(f"cannot make {path} executable: {exc.strerror}") from None


def _display(path: Path, root: Path) -> str:
    try:
        return path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return str(path)


def _attribute_lines() -> tuple[str, ...]:
    return (GITATTRIBUTES_LINE, THREAD_GITATTRIBUTES_LINE)


def _missing_attributes(root: Path) -> list[str]:
    data = read_repository_file(root, root / ".gitattributes")
    lines = (data or b"").decode("utf-8", "surrogateescape").splitlines()
    return [line for line in _attribute_lines() if line not in lines]


def _refuse_hostile_targets(root: Path, location: GitLocation) -> None:
    """Every file `setup` may write, checked before it writes any: `.gitattributes` inside the repository,
    each hook inside its area (see `GitLocation.hooks_area`): a committed link must not steer a write out."""
    repository_target(root, root / ".gitattributes")
    for hook in HOOK_NAMES:
        repository_target(location.toplevel, location.hooks_dir / hook, within=location.hooks_area)


def inspect_git(root: Path, *, fix: bool) -> GitSetupReport:
    """Check (and with `fix`, install) the attributes, drivers and hooks; the report says what changed."""
    location = locate_git(root)
    _refuse_hostile_targets(root, location)
    report = GitSetupReport()
    executable = leslie_executable()
    if missing_lines := _missing_attributes(root):
        if fix:
            for line in missing_lines:
                ensure_line(root, root / ".gitattributes", line)
            report.changed.append(".gitattributes")
        else:
            report.missing += [f".gitattributes line: {line}" for line in missing_lines]
    for driver, name in DRIVER_NAMES.items():
        current = _git(root, "config", "--get", f"merge.{driver}.driver").stdout.strip()
        if not _driver_works(current, driver):
            if fix:
                _set_config(root, f"merge.{driver}.driver", driver_command(executable, driver))
                report.changed.append(f"git config merge.{driver}.driver")
            else:
                report.missing.append(f"git config merge.{driver}.driver" + (
                    f" (set to {current!r}, which does not run leslie)" if current else ""))
        if _git(root, "config", "--get", f"merge.{driver}.name").stdout.strip() != name and fix:
            _set_config(root, f"merge.{driver}.name", name)
    for hook in HOOK_NAMES:
        path = location.hooks_dir / hook
        block = hook_block(executable, location.root_from_top, hook)
        new_text, note = _hook_plan(location, path, block)
        if note is not None:
            report.notes.append(note)
            if not fix:
                report.missing.append(f"{hook} hook ({_display(path, root)}) does not run leslie")
            continue
        if not fix:
            if not _hook_ready(location, path):
                report.missing.append(f"{hook} hook ({_display(path, root)})")
            continue
        if new_text is None and not _hook_ready(location, path):
            new_text = _read_hook(location, path)  # ours but not executable: make git run it again
        if new_text is not None:
            _install_hook(location, path, new_text)
            report.changed.append(_display(path, root))
    return report


def _hook_ready(location: GitLocation, path: Path) -> bool:
    """Installed means: the block is there and git will run the file."""
    try:
        text = _read_hook(location, path)
    except (OSError, UnicodeDecodeError, StorageError):
        return False
    return text is not None and bool(_BLOCK_RE.search(text)) and os.access(path, os.X_OK)


def _set_config(root: Path, key: str, value: str) -> None:
    done = _git(root, "config", "--local", key, value)
    if done.returncode != 0:
        raise StorageError(f"git config {key} failed: {done.stderr.strip()}")


def prepare_git_setup(root: Path) -> None:
    """What `setup_git` checks before it writes (a git work tree, no link steering a write out), writing
    nothing: `init --git` runs it before `init` writes, so a rejected command leaves the tree as it was."""
    _refuse_hostile_targets(root, locate_git(root))


def setup_git(root: Path) -> list[str]:
    """Register the merge drivers and install the hooks for the leslie root `root`; returns what changed."""
    report = inspect_git(root, fix=True)
    return report.changed + [f"note: {note}" for note in report.notes]


def check_git(root: Path) -> GitSetupReport:
    """What `setup_git` would still have to do (`report.missing` empty: all in place)."""
    return inspect_git(root, fix=False)
