"""What a command's handler in `leslie.guard.shell.commands` works with: the `Call` it is given (where the
command runs, what it reads), and the `Target`s and `TreeCheck`s it records through it.

The walker (`leslie.guard.shell.writes`) builds the calls; the handlers only see this module, so neither
imports the other's internals.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from leslie.guard.shell.words import MARKERS, UNKNOWN, Word

if TYPE_CHECKING:
    from leslie.guard.shell.writes import Walker

WRITE, REMOVE, GIT, SWEEP = "write", "remove", "git", "sweep"
UNKNOWN_DIR = "/" + UNKNOWN  # a working directory that cannot be known (`cd "$X"`)
MAX_DIRS = 8  # directories a command may run in, before the rest are "unknown"
MAX_READ = 1024 * 1024  # bytes of a patch file read to see which files it changes


class Target:
    """A path a command writes (`kind` WRITE, REMOVE, GIT or SWEEP): `path` is absolute, possibly with markers, and
    still as joined (`a/link/../b`): the guard resolves it both as text and by the kernel's rules."""

    __slots__ = ("kind", "path", "shown")

    def __init__(self, kind: str, path: str, shown: str) -> None:
        self.kind = kind
        self.path = path
        self.shown = shown

    def __repr__(self) -> str:
        return f"Target({self.kind}, {self.path!r})"


class TreeCheck:
    """A git command that rewrites the working tree around `directory` without naming paths there: the
    guard asks git which files it would change. `clean` holds `git clean` options for a dry run."""

    __slots__ = ("clean", "directory", "ignored", "shown", "untracked")

    def __init__(self, directory: str, shown: str, *, untracked: bool = False, ignored: bool = False,
                 clean: list[str] | None = None) -> None:
        self.directory = directory
        self.shown = shown
        self.untracked = untracked
        self.ignored = ignored
        self.clean = clean

    def __repr__(self) -> str:
        return f"TreeCheck({self.directory!r}, {self.shown!r})"


class Input:
    """What a command reads on stdin, as far as it is visible: `text` (a here-document, a here-string,
    what `echo` printed), `items` (the paths a stage prints: `echo` words, `find` results), `file` (a file
    redirected in with `<`)."""

    __slots__ = ("file", "items", "text")

    def __init__(self, text: str | None = None, items: list[Word] | None = None, file: Word | None = None) -> None:
        self.text = text
        self.items = items
        self.file = file


NO_INPUT = Input()


class State:
    """Where the shell may be: its possible directories, `OLDPWD`, the `pushd` stack, known variables."""

    __slots__ = ("dirs", "old", "stack", "variables")

    def __init__(self, dirs: tuple[str, ...], old: tuple[str, ...] = (), stack: tuple[tuple[str, ...], ...] = (),
                 variables: dict[str, tuple[str, ...]] | None = None) -> None:
        self.dirs = dirs
        self.old = old
        self.stack = stack
        self.variables = variables if variables is not None else {}

    def copy(self) -> State:
        return State(self.dirs, self.old, self.stack, dict(self.variables))


def _union(a: tuple[str, ...], b: tuple[str, ...]) -> tuple[str, ...]:
    merged = tuple(dict.fromkeys(a + b))
    return merged if len(merged) <= MAX_DIRS else (*merged[:MAX_DIRS - 1], UNKNOWN_DIR)


def merge(a: State | None, b: State | None) -> State | None:
    """The state after one of two paths (either may be None: that path does not continue)."""
    if a is None or b is None:
        return a if b is None else b
    variables = dict(a.variables)
    for name, values in b.variables.items():
        variables[name] = _union(variables.get(name, ()), values) if name in variables else values
    return State(_union(a.dirs, b.dirs), _union(a.old, b.old), a.stack or b.stack, variables)


class Call:
    """One command as its handler in `leslie.guard.shell.commands` sees it: where it runs and what it reads."""

    __slots__ = ("state", "stdin", "walker")

    def __init__(self, walker: Walker, state: State, stdin: Input) -> None:
        self.walker = walker
        self.state = state
        self.stdin = stdin

    def write(self, word: Word | None, kind: str = WRITE) -> None:
        """`word` is a path this command writes (`kind`); None: a folder it writes into is the current one."""
        if word is None:
            self.walker.write_dirs(self.state.dirs, ".")
        else:
            self.walker.write(word, self.state, kind)

    def inside(self, directory: Word | None) -> Call:
        """The same command, run in `directory` (`tar -C`, `git -C`, `patch -d`)."""
        if directory is None:
            return self
        dirs = self.walker.directories(directory, self.state)
        return Call(self.walker, State(dirs, self.state.old, self.state.stack, self.state.variables), self.stdin)

    def at_top(self) -> Call:
        """The same command, run at the top of each working tree it may be in (git's `:/` pathspecs)."""
        tops: list[str] = []
        for directory in self.state.dirs:
            here = directory
            while not os.path.exists(os.path.join(here, ".git")) and os.path.dirname(here) != here:
                here = os.path.dirname(here)
            tops.append(here if os.path.exists(os.path.join(here, ".git")) else directory)
        state = State(tuple(dict.fromkeys(tops)), self.state.old, self.state.stack, self.state.variables)
        return Call(self.walker, state, self.stdin)

    def run(self, words: list[Word]) -> None:
        """Another command this one runs (`find -exec`)."""
        self.walker.simple(words, self.state.copy(), NO_INPUT)

    def input_text(self) -> str | None:
        """The text on this command's stdin: a here-document, or a small regular file redirected in."""
        if self.stdin.text is not None:
            return self.stdin.text
        return self.read(self.stdin.file) if self.stdin.file is not None else None

    def read(self, word: Word) -> str | None:
        """The content of the small regular file `word` names (a patch), or None: never a FIFO or a device
        (reading one could hang the hook), never more than `MAX_READ` bytes, only a literal path."""
        import stat

        for path in self.walker.absolute(word, self.state):
            if any(marker in path for marker in MARKERS):
                continue
            try:
                fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
            except OSError:
                continue
            try:
                info = os.fstat(fd)
                if stat.S_ISREG(info.st_mode) and info.st_size <= MAX_READ:
                    return os.read(fd, MAX_READ).decode("utf-8", "replace")
            finally:
                os.close(fd)
        return None

    def tree(self, shown: str, *, untracked: bool = False, ignored: bool = False,
             clean: list[str] | None = None) -> None:
        """A git command that rewrites the working tree around each current directory."""
        for directory in self.state.dirs:
            self.walker.trees.append(TreeCheck(directory, shown, untracked=untracked, ignored=ignored, clean=clean))

    def script(self, text: str) -> None:
        """A command line this command runs in a shell of its own (`watch`, `flock -c`)."""
        self.walker.nested(text, self.state.copy())


def find_starts(args: list[Word]) -> list[Word]:
    """The start paths of `find ARGS` (after its `-H`, `-L`, `-P` options; `.` when none is given)."""
    starts: list[Word] = []
    for word in args:
        if word.text in ("-H", "-L", "-P") and not starts:
            continue
        if word.text.startswith(("-", "(", "!", ")")):
            break
        starts.append(word)
    return starts or [Word(".", ".", [], True)]


def below(word: Word) -> Word:
    """A path somewhere below the folder `word` names (what `find` prints, what `{}` stands for)."""
    return Word(word.text.rstrip("/") + "/*", word.pattern.rstrip("/") + "/" + UNKNOWN, [], False)
