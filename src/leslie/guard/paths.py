"""The write guard's path rules (SPEC §3, §7.4, §11): may an agent working on one thread write a given path?

See `leslie.guard.rules` for the rules themselves, and for shell commands. This module holds what every part
of the guard shares: the verdicts, path normalisation, and `Scope`, which judges one path.
"""

from __future__ import annotations

import fnmatch
import os
import re
from collections.abc import Callable, Iterable

from leslie.store.machine import same_clone
from leslie.store.model import is_thread_id

ThreadOf = Callable[[str], str | None]

ALLOW = "allow"
DENY = "deny"
WRITE, REMOVE, GIT, SWEEP = "write", "remove", "git", "sweep"  # as leslie.guard.shell.writes
_RANK = {None: 0, ALLOW: 1, DENY: 2}
_PATCH_HEADER = re.compile(r"^\*\*\* (?:(?:Add|Update|Delete) File|Move to): *(.+?) *$", re.MULTILINE)
_MARKERS = frozenset("\x00\x01\x02\x03\x04\x05\x06\x07\x08")  # leslie.guard.shell.words: unknowns, globs, braces
_GLOBS = frozenset("\x00\x03\x04\x05")
_STATE = "thread.json, objectives, the index, config.toml, templates/, state/"


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


def _stricter(a: Verdict, b: Verdict) -> Verdict:
    return b if _RANK[b.decision] > _RANK[a.decision] else a


def normalize(path: str) -> str:
    """Absolute `path` with `.`, `..` and doubled slashes resolved as text (`..` after an unknown part stays)."""
    parts: list[str] = []
    for part in path.split("/"):
        if part in ("", "."):
            continue
        if part == ".." and parts and parts[-1] != ".." and "\x00" not in parts[-1]:
            parts.pop()
        elif part != ".." or parts:
            parts.append(part)
    return "/" + "/".join(parts)


def parts_of(path: str) -> list[str]:
    """The components of a normalized absolute path (`[""]` for the root)."""
    return [""] if path == "/" else path.split("/")


def _literal(part: str) -> bool:
    return _MARKERS.isdisjoint(part)


def patch_header_paths(text: str) -> list[str]:
    """The paths of an `apply_patch` patch's `*** Add/Update/Delete File:` and `*** Move to:` lines."""
    return [m.group(1) for m in _PATCH_HEADER.finditer(text)]


def may_be(part: str, name: str) -> bool:
    """Can the path component `part` (case-folded, literal or a glob pattern) be the folded `name`? A part
    that is only an unknown value (`$X`) is undecidable here and answers False."""
    if _literal(part):
        return part == name
    if part == "\x00" or _GLOBS.isdisjoint(part):
        return False
    if name.startswith(".") and not part.startswith("."):
        return False  # `*` never matches a leading dot
    pattern = "".join({"\x00": "*", "\x03": "*", "\x04": "?", "\x05": "["}.get(c, "[" + c + "]" if c in "*?[" else c)
                      for c in part)
    return fnmatch.fnmatchcase(name, pattern)


def _machine_state(folded: list[str]) -> bool:
    """Whether the folded parts lie in a git folder's `leslie/` (`.git/leslie/...`,
    `.git/worktrees/NAME/leslie/...`): leslie's machine state (`store.machine`)."""
    for k in range(1, len(folded) - 1):
        if folded[k] == ".git":
            rest = folded[k + 1:]
            return rest[0] == "leslie" or (len(rest) > 2 and rest[0] == "worktrees" and rest[2] == "leslie")
    return False


class Scope:
    """Who writes: the repository found from the working directory (or None), its thread, and how to find the
    thread of another repository a path leads into. Caches what it looks up for one check."""

    def __init__(self, root: str | None, thread_id: str | None, thread_of: ThreadOf | None = None) -> None:
        self.root = os.path.abspath(root) if root else None
        self.thread_id = thread_id
        self.thread_of = thread_of
        self._threads: dict[str, str | None] = {}
        self._real: dict[str, str] = {}
        self._verdicts: dict[tuple[str, str], Verdict] = {}
        self.anchors: list[tuple[list[str], str]] = []  # (folded parts of a .leslie folder, its repository)
        self._own: set[str] = set()  # this repository's folder, as found and resolved (case-folded)
        if self.root is not None:
            leslie = os.path.join(self.root, ".leslie")
            for folder in dict.fromkeys((leslie, os.path.realpath(leslie))):
                self.anchors.append(([p.casefold() for p in parts_of(folder)], self.root))
                self._own.add(os.path.dirname(folder).casefold())

    def thread(self, root: str) -> str | None:
        """The current thread in the repository at `root` (None: not a leslie session there).

        In this repository (the working directory's), `thread_id`. In another one, only what `thread_of`
        says that repository records for the session: this repository's thread is never applied to another
        one's `.leslie/` (its `thread-b` is not ours), so without a thread of its own there, no opinion, unless
        it is another worktree of this clone, whose threads are this one's: a live reference's files there
        (`store.bindings`) are as read-only as here. With
        no repository here (`root` None), `thread_id` stands in for a repository that records none."""
        key = root.casefold()
        if key not in self._threads:
            if key in self._own or not _literal(root):
                self._threads[key] = self.thread_id
            elif self.root is not None:
                if same_clone(self.root, root):  # another worktree of this clone: the same threads (SPEC §13)
                    self._threads[key] = self.thread_id
                else:
                    self._threads[key] = self.thread_of(root) if self.thread_of is not None else None
            else:
                self._threads[key] = (self.thread_of(root) if self.thread_of is not None else None) or self.thread_id
        return self._threads[key]

    def _resolved(self, path: str) -> str:
        """`path` with symlinks resolved as far as it is literal (the rest appended as written)."""
        parts = parts_of(path)
        cut = next((k for k, part in enumerate(parts) if not _literal(part)), len(parts))
        head = "/".join(parts[:cut]) or "/"
        real = self._real.get(head)
        if real is None:
            real = self._real[head] = os.path.realpath(head)
        return normalize("/".join([real, *parts[cut:]]))

    def judge(self, path: str, kind: str = WRITE) -> Verdict:
        """The verdict on writing (`kind` WRITE) or removing (REMOVE, GIT) the absolute `path`."""
        key = (path, kind)
        if key not in self._verdicts:
            self._verdicts[key] = self._judge(path, kind)
        return self._verdicts[key]

    def _judge(self, path: str, kind: str) -> Verdict:
        """Both views of `path`, as written and with links resolved: deny when either denies, allow only when
        both allow (an allow skips the agent's own permission check, so a link from the own thread to
        anywhere must not carry it there), else no opinion."""
        views = []
        for candidate in dict.fromkeys((normalize(path), self._resolved(path))):
            verdict = self._inside(candidate, WRITE if kind == SWEEP else kind)
            if verdict.decision == DENY:
                return verdict
            views.append(verdict)
        best = views[0] if all(v.decision == ALLOW for v in views) else NO_OPINION
        if kind in (REMOVE, SWEEP):
            holder = self.holds(path)
            if holder is not None:
                what = ("removing or replacing it is denied" if kind == REMOVE else
                        "a command that deletes or changes files anywhere below it (with no filter keeping out "
                        ".leslie/, or one that leslie's own files match) is denied")
                return Verdict(DENY, f"{self.shown(normalize(path), holder)} holds leslie's folder "
                                     f"{os.path.join(holder, '.leslie')}/ (every thread's files and leslie's "
                                     f"state): {what}", path)
        return best

    def holds(self, path: str) -> str | None:
        """The repository whose `.leslie/` folder `path` (to be removed) holds, if any with a thread."""
        for candidate in dict.fromkeys((normalize(path), self._resolved(path))):
            folded = [p.casefold() for p in parts_of(candidate)]
            for anchor, root in self.anchors:
                if len(folded) < len(anchor) and all(may_be(folded[i], anchor[i]) for i in range(1, len(folded))):
                    return root if self.thread(root) is not None else None
            if _literal(candidate) and os.path.isdir(os.path.join(candidate, ".leslie")):
                return candidate if self.thread(candidate) is not None else None
        return None

    def _inside(self, candidate: str, kind: str) -> Verdict:
        parts = parts_of(candidate)
        folded = [p.casefold() for p in parts]
        best = NO_OPINION
        textual = set()
        for k in range(1, len(parts)):
            if may_be(folded[k], ".leslie"):
                textual.add(k)
                best = _stricter(best, self.below("/".join(parts[:k]) or "/", parts[k + 1:], kind, candidate))
        for anchor, root in self.anchors:
            n = len(anchor)
            if n - 1 not in textual and folded[:n] == anchor:
                best = _stricter(best, self.below(root, parts[n:], kind, candidate))
        if self.root is not None and best.decision != DENY and _machine_state(folded):
            best = Verdict(DENY, f"{candidate} is leslie's machine state (the current thread, sessions, the write "
                                 "guard's records, the lock: docs/security.md, \"Machine state\"): agents change it "
                                 "through leslie commands, never by writing it", candidate)
        return best

    def shown(self, path: str, root: str) -> str:
        """`path` as the agent knows it: relative to the repository when inside it."""
        rel = path[len(root):].lstrip("/") if path.casefold().startswith(root.casefold().rstrip("/") + "/") else ""
        return rel.translate({0: "*", 1: "$", 2: None, 3: "*", 4: "?", 5: "[", 6: "{", 7: ",", 8: "}"}) or path

    def below(self, root: str, rest: list[str], kind: str, candidate: str) -> Verdict:
        """The rule for a path `rest` below the `.leslie` folder of the repository at `root`."""
        thread = self.thread(root)
        if thread is None:
            return NO_OPINION
        shown = self.shown(candidate, root)
        if not rest:
            return Verdict(DENY, f"{shown} is leslie's own folder: agents change leslie's state through leslie "
                                 f"commands, and write only their thread's assets (.leslie/threads/{thread}/)",
                           candidate)
        head = rest[0].casefold()
        if head != "threads":
            what = "is part of" if _literal(rest[0]) else "may be part of"
            return Verdict(DENY, f"{shown} {what} leslie's own state ({_STATE}): agents change it through leslie "
                                 f"commands (`leslie --help`), never by writing it", candidate)
        if len(rest) == 1:
            return Verdict(DENY, f"{shown} is leslie's threads folder: create threads with `leslie spawn`",
                           candidate)
        owner = rest[1].casefold()
        if _literal(owner) and owner == thread.casefold():
            tail = [p.casefold() for p in rest[2:]]
            if not tail and kind != WRITE:
                return Verdict(DENY, f"{shown} is the folder of thread {thread}; removing or replacing it would "
                                     f"remove its thread.json (remove the files inside it instead)", candidate)
            if len(tail) == 1 and may_be(tail[0], "thread.json"):
                return Verdict(DENY, f"{shown} is leslie's record of thread {thread}: change it through leslie "
                                     f"commands (`leslie set-status`, `leslie reference`...), never by writing it",
                               candidate)
            return Verdict(ALLOW, f"{shown} is in the folder of thread {thread}, the current thread", candidate)
        if not _literal(owner):
            return Verdict(DENY, f"{shown} may be in another thread's folder (a pattern or variable under "
                                 f".leslie/threads/); thread {thread} writes only .leslie/threads/{thread}/",
                           candidate)
        if is_thread_id(owner):
            return Verdict(DENY, f"{shown} belongs to thread {rest[1]}; thread {thread} may read another thread's "
                                 f"assets but never write them (write in .leslie/threads/{thread}/ instead)",
                           candidate)
        return Verdict(DENY, f"{shown} is inside .leslie/threads/ but not in a thread's folder", candidate)


def _absolute(path: str, cwd: str | None) -> str:
    return os.path.join(cwd or os.getcwd(), os.path.expanduser(path))


def check_path(root: str | None, thread_id: str | None, path: str, cwd: str | None = None, *, kind: str = WRITE,
               thread_of: ThreadOf | None = None) -> Verdict:
    """May the agent of `thread_id` write `path` (relative to `cwd`, default the process's)?"""
    return Scope(root, thread_id, thread_of).judge(_absolute(path, cwd), kind)


def check_paths(root: str | None, thread_id: str | None, paths: Iterable[str], cwd: str | None = None, *,
                thread_of: ThreadOf | None = None) -> Verdict:
    """The strictest verdict over `paths` (deny beats allow beats no opinion); allow only if all allow."""
    scope = Scope(root, thread_id, thread_of)
    verdicts = [scope.judge(_absolute(p, cwd)) for p in paths]
    if not verdicts:
        return NO_OPINION
    denied = [v for v in verdicts if v.decision == DENY]
    if denied:
        return denied[0]
    if all(v.decision == ALLOW for v in verdicts):
        return verdicts[0]
    return NO_OPINION


def is_inside_leslie(path: str, cwd: str | None = None) -> bool:
    """True when `path` lies in a `.leslie/` folder (as written or resolved): where the guard fails closed."""
    absolute = _absolute(path, cwd)
    return any(".leslie" in (p.casefold() for p in parts_of(normalize(candidate)))
               for candidate in (absolute, os.path.realpath(absolute)))
