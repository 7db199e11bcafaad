"""Whole-tree git commands for the write guard: `git stash`, `git reset --hard`, `git checkout .`,
`git checkout -f`, `git restore .`, `git clean`.

They name no path inside `.leslie/`, yet rewrite it when it holds uncommitted work. The guard asks git what
would change there (`git status`, or a dry run `git clean -n` with the same options) and denies when that
is inside `.leslie/` outside the current thread's own assets: another thread's uncommitted or untracked
files, and outside git's own folder leslie's state (`-x`/`--all` reach an ignored `.leslie/state/`; in a git
work tree the machine state is in `.git/leslie/`, which git never cleans). With nothing of that kind to lose,
the command is left alone: a `git stash` in a repository whose `.leslie/` is committed is never denied.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from leslie.guard.paths import DENY, NO_OPINION, REMOVE, WRITE, Scope, Verdict, normalize

if TYPE_CHECKING:
    from leslie.guard.shell.calls import TreeCheck

GIT_TIMEOUT = 5.0  # seconds; a git that does not answer leaves the command to the after-the-fact check


def _git(directory: str, args: list[str]) -> str | None:
    """git's stdout in `directory`, or None when git is missing, fails or hangs. Never takes git's optional
    locks (the agent's own command is about to run) and never starts an fsmonitor."""
    import subprocess

    try:
        proc = subprocess.run(["git", "--no-optional-locks", "-c", "core.fsmonitor=false", *args], cwd=directory,
                              capture_output=True, timeout=GIT_TIMEOUT, check=False,
                              env={**os.environ, "GIT_OPTIONAL_LOCKS": "0", "GIT_TERMINAL_PROMPT": "0"})
    except (OSError, subprocess.SubprocessError):
        return None
    return proc.stdout.decode("utf-8", "surrogateescape") if proc.returncode == 0 else None


def _leslie_root(scope: Scope, directory: str) -> str | None:
    here = normalize(directory)
    while True:
        if os.path.isdir(os.path.join(here, ".leslie")):
            return here if scope.thread(here) is not None else None
        parent = os.path.dirname(here)
        if parent == here:
            return None
        here = parent


def tree_verdict(scope: Scope, tree: TreeCheck) -> Verdict:
    """Deny `tree` (a whole-tree git command) when git says it would change `.leslie/` outside the current
    thread's assets; otherwise no opinion."""
    if any(c in tree.directory for c in "\x00\x01\x02\x03\x04\x05\x06\x07\x08"):
        return NO_OPINION
    root = _leslie_root(scope, tree.directory)
    if root is None or not os.path.isdir(tree.directory):
        return NO_OPINION
    if tree.clean is not None:
        output = _git(tree.directory, ["clean", "-n", *tree.clean])
        for line in (output or "").splitlines():
            if line.startswith("Would remove "):
                verdict = scope.judge(os.path.join(tree.directory, line[len("Would remove "):]), REMOVE)
                if verdict.decision == DENY:
                    return _denied(tree, verdict)
        return NO_OPINION
    untracked = "all" if tree.untracked or tree.ignored else "no"
    output = _git(root, ["status", "--porcelain", "-z", f"--untracked-files={untracked}",
                         *(["--ignored=matching"] if tree.ignored else []), "--", ".leslie"])
    fields = (output or "").split("\0")
    skip = False
    for field in fields:
        if skip or len(field) < 4:
            skip = False
            continue
        status, path = field[:2], field[3:]
        skip = "R" in status or "C" in status  # a rename's next field is its old path
        if (status == "??" and not tree.untracked) or (status == "!!" and not tree.ignored):
            continue
        parts = path.split("/")
        folded = [p.casefold() for p in parts]
        if ".leslie" not in folded:
            continue
        rest = parts[folded.index(".leslie") + 1:]
        verdict = scope.below(root, [p for p in rest if p], WRITE, os.path.join(root, ".leslie", *rest))
        if verdict.decision == DENY:
            return _denied(tree, verdict)
    return NO_OPINION


def _denied(tree: TreeCheck, verdict: Verdict) -> Verdict:
    return Verdict(DENY, f"`{tree.shown}` would change what is not yet committed in .leslie/: {verdict.reason}. "
                         f"Name the paths to change instead (e.g. `git stash push -- src/`)", verdict.path)
