"""The write guard (SPEC §3, §7.4, §11): may an agent working on one thread write a given path?

Inside a repository's `.leslie/` folder an agent writes only its own thread's assets:

- a path in its own thread's folder (`plan.md`, `progress.md`, `design/`, `artifacts/`, any other file):
  **allow**; except the folder's `thread.json`, and removing or replacing the folder itself (that removes
  its `thread.json`): **deny**;
- a path in another thread's folder (`.leslie/threads/<other>/...`): **deny**. References are read-only;
- anything else in `.leslie/` (the folder itself, `threads/`, `objectives/`, `thread_relations.json`,
  `config.toml`, `templates/`, `state/`): **deny**. Agents change leslie's state through leslie commands;
- removing, moving or replacing a folder that *holds* a repository's `.leslie/` (`rm -rf .`, `mv repo x`,
  `rsync --delete src/ .`): **deny**; a folder beside it (`rm -rf build/`) is none of the guard's business;
- anywhere else: **no opinion** (None): the agent's own permission rules apply.

Which repository: the one found from the working directory, and every one a written path leads into (a
`.leslie` component in the path, as written or with symlinks resolved), so an absolute path from outside the
repository is judged too; the thread there is `thread_of(root)` (what that repository records for the
session), never the working directory's repository's thread (`Scope.thread`). Names are compared
case-folded (`.Leslie/Threads/THREAD-x` is the same folder on macOS and Windows volumes). Paths are checked
both as written and with symlinks resolved: deny when either view denies, allow only when both allow.

Shell commands (`check_bash`) are read by `leslie.guard.shell.writes` (see there for what is understood). A
command longer than `SHELL_SIZE_CAP` is not read: it is denied when its text mentions `.leslie` anywhere but
the current thread's own assets. A command the guard cannot read (nested too deeply, a syntax error, an
internal error) is denied when it mentions leslie or runs inside `.leslie/`, and left alone otherwise. A
shell command is denied or left alone, never allowed outright: the rest of the line may do anything.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING

from leslie.guard.paths import (
    DENY,
    GIT,
    NO_OPINION,
    Scope,
    Verdict,
    is_inside_leslie,
    normalize,
    parts_of,
    patch_header_paths,
)

if TYPE_CHECKING:
    from leslie.guard.shell.calls import Target, TreeCheck

ThreadOf = Callable[[str], str | None]

SHELL_SIZE_CAP = 256 * 1024  # characters of a shell command read in full; past it, only mentions count
_SHELL_BUDGET = 4 * SHELL_SIZE_CAP  # characters read in all, nested `bash -c` strings and `eval` included
_UNQUOTE = {ord("'"): None, ord('"'): None, ord("\\"): None}


def mentions_leslie(text: str) -> bool:
    """True when `text` names leslie, quotes and backslashes ignored (`.les''lie`): where errors fail closed."""
    return "leslie" in text.casefold().translate(_UNQUOTE)


def patch_targets(text: str) -> list[str]:
    """The paths an `apply_patch` patch adds, updates, deletes or moves to."""
    return patch_header_paths(text)


# -- shell commands ---------------------------------------------------------------------------------------
def check_bash(root: str | None, thread_id: str | None, command: str, cwd: str | None = None, *,
               thread_of: ThreadOf | None = None) -> Verdict:
    """Deny a shell command that visibly writes into another thread's folder or leslie's state; otherwise
    no opinion. Fails closed (deny) for anything it cannot read in a command near leslie."""
    base = os.path.abspath(cwd or os.getcwd())
    scope = Scope(root, thread_id, thread_of)
    if len(command) > SHELL_SIZE_CAP:
        return _unread(scope, command, base, f"longer than {SHELL_SIZE_CAP // 1024} KiB")
    from leslie.guard.shell import writes as shell_writes
    from leslie.guard.shell.words import Budget, ShellSyntaxError, ShellTooComplex

    try:
        targets, trees = shell_writes.write_targets(command, base, Budget(_SHELL_BUDGET))
        return _judge_all(scope, targets, trees)
    except ShellTooComplex as exc:
        if "long" in str(exc):
            return _unread(scope, command, base, "too long to read in full")
        failure = str(exc)
    except ShellSyntaxError as exc:
        failure = f"a shell syntax error: {exc}"
    except Exception as exc:  # fail closed: a bug here must not open the guard
        failure = f"{type(exc).__name__}: {exc}"
    if mentions_leslie(command) or is_inside_leslie(base):
        return Verdict(DENY, f"could not check this command ({failure}) and it touches leslie's folder; "
                             f"denied to be safe")
    return NO_OPINION


def _judge_all(scope: Scope, targets: list[Target], trees: list[TreeCheck]) -> Verdict:
    from leslie.guard.shell.calls import TreeCheck

    trees = list(trees)
    for target in targets:
        verdict = scope.judge(target.path, target.kind)
        if verdict.decision == DENY:
            return verdict
        if target.kind == GIT:
            holder = scope.holds(target.path)  # a pathspec holding all of .leslie/: ask git what would change
            if holder is not None:
                trees.append(TreeCheck(holder, target.shown))
    from leslie.guard.git_rules import tree_verdict

    for tree in trees:
        verdict = tree_verdict(scope, tree)
        if verdict.decision == DENY:
            return verdict
    return NO_OPINION


def _unread(scope: Scope, command: str, cwd: str, why: str) -> Verdict:
    """The verdict on a command too long to read: deny when it mentions `.leslie` anywhere but the current
    thread's own assets (or runs inside `.leslie/` outside them)."""
    text = command.casefold().translate(_UNQUOTE)
    own = f".leslie/threads/{scope.thread_id}/".casefold() if scope.thread_id else None
    position = text.find(".leslie")
    while position >= 0:
        if own is None or not text.startswith(own, position):
            return _unread_denied(why)
        after = position + len(own)
        word_end = min((text.find(c, after) for c in " \t\n;&|<>()" if text.find(c, after) >= 0), default=len(text))
        if text.startswith("thread.json", after) or ".." in text[after:word_end]:
            return _unread_denied(why)
        position = text.find(".leslie", after)
    parts = [p.casefold() for p in parts_of(normalize(cwd))]
    if ".leslie" in parts:
        rest = parts[parts.index(".leslie") + 1:]
        if own is None or rest[:2] != ["threads", scope.thread_id] or ".." in text:
            return _unread_denied(why)
    return NO_OPINION


def _unread_denied(why: str) -> Verdict:
    return Verdict(DENY, f"this shell command is {why}, so it was not read; it mentions leslie's folder "
                         f"outside the current thread's own assets: denied to be safe")
