"""The write guard (SPEC §3, §7.4): may an agent working on one thread write a given path?

- a path inside another thread's folder (`.leslie/threads/<other>/...`): **deny**. References are
  read-only; an agent writes only its own thread's assets;
- a path inside its own thread's folder: **allow** (its `thread.json` included: SPEC §7.4 draws the line
  between threads, and `leslie doctor` repairs an index that a hand edit left behind);
- anything else inside `.leslie/threads/` (the folder itself, a name that is no thread ID): deny;
- anywhere else: **no opinion** (None): the agent's own permission rules apply.

Paths are resolved against the working directory, `~` expanded, and checked both as written and with
symlinks resolved: the stricter verdict wins, so a symlink cannot smuggle a write into another thread.

Shell commands are checked for writes that are *visible* in the command line: output redirections (`>`,
`>>`, `>|`, `&>`, `<>`), `tee`, in-place `sed -i`/`perl -i`, the destination of `cp`/`install`/`ln`/
`rsync`, every operand of `mv` (its sources disappear from their folder too), `rm`/`rmdir`/`unlink`/
`shred`/`touch`/`mkdir`/`truncate` operands (deleting another thread's file is a write to its folder),
`dd of=`, patch headers (`*** Update File: ...`), `cd` earlier in the same line, and `sh -c '...'`. A
command that writes through means the line does not show (a script, `xargs`, `find -delete`, an
interpreter) is not caught: the guard stops mistakes, not an adversary. A shell command is denied or left
alone, never allowed outright: the rest of the line may do anything.
"""

from __future__ import annotations

import os
import re

TYPE_CHECKING = False  # not `typing.TYPE_CHECKING`: importing typing costs milliseconds on the hook path
if TYPE_CHECKING:
    from collections.abc import Iterable

ALLOW = "allow"
DENY = "deny"
_RANK = {None: 0, ALLOW: 1, DENY: 2}
THREAD_ID = re.compile(r"thread-[a-z0-9][a-z0-9-]{0,47}\Z")
PATCH_HEADER = re.compile(r"^\*\*\* (?:(?:Add|Update|Delete) File|Move to): *(.+?) *$", re.MULTILINE)
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")
_WRAPPERS = {"sudo", "env", "command", "builtin", "nohup", "time", "nice", "exec", "xargs", "stdbuf", "ionice",
             "timeout", "doas"}
_WRAPPER_ARGS = {"timeout": 1, "nice": 0}  # positional arguments a wrapper takes before the command
_SHELLS = {"sh", "bash", "zsh", "dash", "ksh"}
_ALL_OPERANDS = {"rm", "rmdir", "unlink", "shred", "touch", "mkdir", "truncate", "mv"}
_DESTINATION = {"cp", "install", "ln", "rsync", "mv"}
_OPTION_ARGS = {"truncate": {"-s", "--size", "-r", "--reference"}, "mkdir": {"-m", "--mode"},
                "install": {"-m", "--mode", "-o", "--owner", "-g", "--group", "-S", "--suffix"},
                "cp": {"-S", "--suffix"}, "mv": {"-S", "--suffix"}, "ln": {"-S", "--suffix"},
                "shred": {"-n", "--iterations", "-s", "--size"}}


class Verdict:
    """The guard's answer: `decision` "allow", "deny" or None (no opinion), and why."""

    __slots__ = ("decision", "path", "reason")

    def __init__(self, decision: str | None, reason: str = "", path: str | None = None) -> None:
        self.decision = decision
        self.reason = reason
        self.path = path

    def __repr__(self) -> str:
        return f"Verdict({self.decision!r}, {self.reason!r}, path={self.path!r})"


NO_OPINION = Verdict(None)


def _threads_dir(root: str) -> str:
    return os.path.join(root, ".leslie", "threads")


def _inside(path: str, folder: str) -> list[str] | None:
    """The components of `path` below `folder`, [] for the folder itself, None when outside it."""
    rel = os.path.relpath(path, folder)
    if rel == ".":
        return []
    if rel == ".." or rel.startswith(".." + os.sep) or os.path.isabs(rel):
        return None
    return rel.split(os.sep)


def _verdict_below(parts: list[str], thread_id: str, shown: str) -> Verdict:
    if not parts:
        return Verdict(DENY, f"{shown} is leslie's threads folder: create threads with `leslie spawn`", shown)
    owner = parts[0]
    if owner == thread_id:
        return Verdict(ALLOW, f"{shown} is in the folder of thread {thread_id}, the current thread", shown)
    if THREAD_ID.match(owner):
        return Verdict(DENY, f"{shown} belongs to thread {owner}; thread {thread_id} may read another thread's "
                             f"assets but never write them (write in .leslie/threads/{thread_id}/ instead)", shown)
    return Verdict(DENY, f"{shown} is inside .leslie/threads/ but not in a thread's folder", shown)


def check_path(root: str, thread_id: str, path: str, cwd: str | None = None) -> Verdict:
    """May the agent of `thread_id` write `path` (relative to `cwd`, default the process's)?"""
    base = cwd or os.getcwd()
    absolute = os.path.normpath(os.path.join(base, os.path.expanduser(path)))
    root_abs = os.path.abspath(root)
    best = NO_OPINION
    for candidate, threads in ((absolute, _threads_dir(root_abs)),
                               (os.path.realpath(absolute), os.path.realpath(_threads_dir(root_abs)))):
        parts = _inside(candidate, threads)
        if parts is None:
            continue
        shown = "/".join([".leslie", "threads", *parts]) + ("/" if not parts else "")
        verdict = _verdict_below(parts, thread_id, shown)
        if _RANK[verdict.decision] > _RANK[best.decision]:
            best = verdict
    return best


def is_inside_threads(root: str, path: str, cwd: str | None = None) -> bool:
    """True when `path` lies in `.leslie/threads/` (as written or resolved): where the guard fails closed."""
    base = cwd or os.getcwd()
    absolute = os.path.normpath(os.path.join(base, os.path.expanduser(path)))
    threads = _threads_dir(os.path.abspath(root))
    return (_inside(absolute, threads) is not None
            or _inside(os.path.realpath(absolute), os.path.realpath(threads)) is not None
            or "/.leslie/threads/" in absolute.replace(os.sep, "/") + "/")


def check_paths(root: str, thread_id: str, paths: Iterable[str], cwd: str | None = None) -> Verdict:
    """The strictest verdict over `paths` (deny beats allow beats no opinion); allow only if all allow."""
    verdicts = [check_path(root, thread_id, p, cwd) for p in paths]
    if not verdicts:
        return NO_OPINION
    denied = [v for v in verdicts if v.decision == DENY]
    if denied:
        return denied[0]
    if all(v.decision == ALLOW for v in verdicts):
        return verdicts[0]
    return NO_OPINION


# -- shell commands ---------------------------------------------------------------------------------------

def _tokens(command: str) -> list[str]:
    import shlex

    lexer = shlex.shlex(command.replace("\r", " ").replace("\n", " ; "), posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    try:
        return list(lexer)
    except ValueError:  # unbalanced quotes: a rough split still shows the visible paths
        return command.split()


def _is_operator(token: str) -> bool:
    return bool(token) and all(ch in "();<>|&" for ch in token)


def _operands(name: str, args: list[str]) -> tuple[list[str], dict[str, list[str]]]:
    """Non-option arguments, and option values by option (`-t DIR`, `--target-directory=DIR`, `-e SCRIPT`)."""
    takes_value = _OPTION_ARGS.get(name, set()) | {"-t", "--target-directory", "-e", "--expression", "-f",
                                                   "--file", "-E"}
    operands: list[str] = []
    values: dict[str, list[str]] = {}
    i = 0
    options_done = False
    while i < len(args):
        arg = args[i]
        if options_done or not arg.startswith("-") or arg == "-":
            operands.append(arg)
        elif arg == "--":
            options_done = True
        elif "=" in arg and arg.startswith("--"):
            key, _, value = arg.partition("=")
            values.setdefault(key, []).append(value)
        elif arg in takes_value and i + 1 < len(args):
            values.setdefault(arg, []).append(args[i + 1])
            i += 1
        i += 1
    return operands, values


def _in_place(args: list[str]) -> bool:
    for arg in args:
        if arg == "--":
            break
        if arg.startswith("--in-place"):
            return True
        if arg.startswith("-") and not arg.startswith("--") and "i" in arg[1:]:
            return True
    return False


def _command_targets(args: list[str]) -> list[str]:
    """Paths one simple command (no redirections, wrappers removed) visibly writes."""
    name = os.path.basename(args[0])
    rest = args[1:]
    operands, values = _operands(name, rest)
    targets: list[str] = []
    if name == "tee":
        targets += operands
    elif name in ("sed", "perl"):
        if _in_place(rest):
            scripted = any(k in values for k in ("-e", "--expression", "-f", "--file", "-E"))
            targets += operands if scripted else operands[1:]
    elif name == "dd":
        targets += [a[3:] for a in rest if a.startswith("of=")]
    if name in _ALL_OPERANDS:
        targets += operands
    if name in _DESTINATION:
        targets += values.get("-t", []) + values.get("--target-directory", [])
        if name != "mv" and not values.get("-t") and not values.get("--target-directory") and len(operands) >= 2:
            targets.append(operands[-1])
    return targets


def _strip_wrappers(args: list[str]) -> list[str]:
    while args:
        if _ASSIGNMENT.match(args[0]):
            args = args[1:]
            continue
        name = os.path.basename(args[0])
        if name not in _WRAPPERS:
            break
        args = args[1:]
        while args and (args[0].startswith("-") or _ASSIGNMENT.match(args[0])):
            args = args[1:]
        args = args[_WRAPPER_ARGS.get(name, 0):]
    return args


def bash_write_targets(command: str, cwd: str, depth: int = 0) -> list[tuple[str, str]]:
    """`(directory, path)` pairs for every path `command` visibly writes, each to resolve in its directory."""
    found: list[tuple[str, str]] = [(cwd, m.group(1)) for m in PATCH_HEADER.finditer(command)]
    tokens = _tokens(command)
    here = cwd
    args: list[str] = []

    def finish() -> None:
        nonlocal here
        simple = _strip_wrappers(args)
        if not simple:
            return
        name = os.path.basename(simple[0])
        if name == "cd":
            target = next((a for a in simple[1:] if not a.startswith("-")), "~")
            here = os.path.normpath(os.path.join(here, os.path.expanduser(target)))
        elif name in _SHELLS and "-c" in simple[1:] and depth < 3:
            index = simple.index("-c", 1)
            if index + 1 < len(simple):
                found.extend(bash_write_targets(simple[index + 1], here, depth + 1))
        else:
            found.extend((here, t) for t in _command_targets(simple))

    i = 0
    while i < len(tokens):
        token = tokens[i]
        if _is_operator(token):
            if ">" in token or token == "<>":
                following = tokens[i + 1] if i + 1 < len(tokens) else None
                duplicates_fd = token.endswith("&") and following is not None and (
                    following.isdigit() or following == "-")
                if following is not None and not _is_operator(following):
                    if not duplicates_fd:
                        found.append((here, following))
                    i += 1
                if args and args[-1].isdigit():
                    args.pop()  # the descriptor number of `2>file`
            elif token.startswith("<"):
                i += 1  # an input file, a here-document delimiter or string: read, not written
            else:
                finish()
                args = []
        else:
            args.append(token)
        i += 1
    finish()
    return found


def check_bash(root: str, thread_id: str, command: str, cwd: str | None = None) -> Verdict:
    """Deny a shell command that visibly writes into another thread's folder; otherwise no opinion."""
    base = cwd or os.getcwd()
    for directory, target in bash_write_targets(command, base):
        verdict = check_path(root, thread_id, target, directory)
        if verdict.decision == DENY:
            return verdict
    return NO_OPINION


def patch_targets(text: str) -> list[str]:
    """The paths an `apply_patch` patch adds, updates, deletes or moves to."""
    return [m.group(1) for m in PATCH_HEADER.finditer(text)]
