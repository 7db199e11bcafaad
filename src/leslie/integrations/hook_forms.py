"""The two forms of leslie's hook command, what `hooks status` may learn of one without running it, and keeping
a personal hook file out of git.

- personal: `/abs/path/to/leslie hook AGENT` (the leslie that installed it). Right for one machine, wrong in a
  committed file: a teammate whose leslie is elsewhere, or who has none, gets a hook that cannot start (Claude
  Code's fail-closed guard then blocks every Write, Edit and Bash call; Copilot denies the call).
- shared: `sh -c '<script>'` that runs the `leslie` on PATH and, when there is none, prints one line on stderr
  and exits 0 (Gemini CLI, which reads stderr when stdout is empty, also gets `{}` on stdout). A missing leslie
  costs a teammate that line, never a tool call.

Nothing here runs a command a repository names: `running_leslie_is` compares paths (`os.path.samefile`).
"""

from __future__ import annotations

import os
import re
import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from leslie.store.fsio import atomic_write

if TYPE_CHECKING:
    import subprocess

# No backquote, `$`, `'` or `"` in it: it sits inside a double-quoted word of a single-quoted `sh -c` script.
MISSING = "not installed (no leslie on PATH), so the {agent} hooks of this repository do nothing"
EMPTY_ANSWER = {"gemini": "{}"}  # agents that read stderr as the answer when stdout is empty
_SHARED = re.compile(r"^sh -c '(?P<script>[^']*)'$")


def shared_script(agent: str, tail: str) -> str:
    """The shell script of the shared form: find leslie on PATH or say once that it is missing; then `tail`."""
    answer = EMPTY_ANSWER.get(agent)
    missing = f'echo "leslie: {MISSING.format(agent=agent)}" >&2; ' + (f'echo "{answer}"; ' if answer else "")
    return f"command -v leslie >/dev/null 2>&1 || {{ {missing}exit 0; }}; exec {tail}"


def shared_command(agent: str, event: str | None = None) -> str:
    """The shared form of the hook command for `agent` (and `event`, for an agent whose payloads lack it)."""
    tail = f"leslie hook {agent}" + (f" {event}" if event is not None else "")
    return f"sh -c {shlex.quote(shared_script(agent, tail))}"


def shared_plugin_argv(agent: str) -> list[str]:
    """The shared form for a plugin, which appends `hook AGENT` itself (they arrive as `$@`)."""
    return ["sh", "-c", shared_script(agent, 'leslie "$@"'), "leslie"]


def is_shared(command: str, agent: str) -> bool:
    """True for a shared-form command of leslie's for `agent`, of this leslie or an older one: `sh -c '...'`
    whose script ends by running `leslie hook AGENT` (and an event name, for Copilot)."""
    found = _SHARED.match(command.strip())
    event = r"( [A-Za-z]+)?" if agent == "copilot" else ""
    return found is not None and re.search(rf"(^|;\s*)exec leslie hook {re.escape(agent)}{event}$",
                                           found.group("script")) is not None


def running_leslie() -> list[str]:
    """The argv prefix of the leslie running now: its script (`sys.argv[0]`), or this interpreter `-m leslie`."""
    started_as = os.path.abspath(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    if os.path.basename(started_as) in ("leslie", "leslie.exe"):
        return [started_as]
    return [sys.executable, "-m", "leslie"]


def running_leslie_is(executable: str, rest: list[str]) -> bool:
    """Whether `executable` with the arguments `rest` (before `hook AGENT`) is the leslie running now, by the
    files themselves: the check never starts it."""
    mine = running_leslie()
    if rest != mine[1:]:
        return False
    try:
        return os.path.samefile(executable, mine[0])
    except OSError:
        return False


# -- keeping a personal hook file out of git ------------------------------------------------------------------

def _git(root: Path, *args: str) -> subprocess.CompletedProcess[str] | None:
    import subprocess  # here: `leslie status` imports this module and never calls git through it

    try:
        return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, check=False,
                              stdin=subprocess.DEVNULL, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None


def tracked(root: Path, relative: str) -> bool:
    """Whether git tracks `relative` (a committed file: an exclude rule does nothing for it)."""
    done = _git(root, "ls-files", "--error-unmatch", "--", relative)
    return done is not None and done.returncode == 0


def _exclude_file(root: Path) -> Path | None:
    done = _git(root, "rev-parse", "--git-path", "info/exclude")
    if done is None or done.returncode != 0 or not done.stdout.strip():
        return None  # not a git repository: nothing to keep out
    return root / done.stdout.strip()  # relative paths are relative to `root` (git -C)


def _line(relative: str) -> str:
    return "/" + relative


def exclude(root: Path, relative: str) -> str | None:
    """Keep the personal file `relative` out of git: a line in `.git/info/exclude` (this clone's, never
    committed) unless git ignores it already. A warning when git tracks it: committed, it reaches teammates."""
    if tracked(root, relative):
        return (f"warning: git tracks {relative}, so the machine path in it reaches your teammates when committed: "
                f"`git rm --cached {relative}`, or install with --shared")
    ignored = _git(root, "check-ignore", "-q", "--", relative)
    if ignored is None or ignored.returncode != 1:
        return None  # ignored already (0), or git cannot say (128)
    path = _exclude_file(root)
    if path is None:
        return None
    try:
        text = path.read_text(encoding="utf-8") if path.is_file() else ""
        if _line(relative) not in text.splitlines():
            path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write(path, (text + ("" if not text or text.endswith("\n") else "\n")
                                + _line(relative) + "\n").encode("utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        return f"warning: could not add {relative} to {path} ({exc}); keep it out of your commits"
    return None


def include(root: Path, relative: str) -> None:
    """Undo `exclude` (a shared file is meant to be committed); other lines stay."""
    path = _exclude_file(root)
    try:
        if path is None or not path.is_file():
            return
        lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
        kept = [line for line in lines if line.rstrip("\r\n") != _line(relative)]
        if kept != lines:
            atomic_write(path, "".join(kept).encode("utf-8"))
    except (OSError, UnicodeDecodeError):
        return
