"""The one exception tree of leslie: every user-facing error carries its exit code (SPEC §9)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pathlib import Path


# An ID's shape in words, for error messages: people should not have to read a regular expression.
ID_RULE = "followed by 1-48 lower-case letters, digits or dashes, starting with a letter or digit"
THREAD_ID_RULE = f"a thread ID is `thread-` {ID_RULE}"
OBJECTIVE_ID_RULE = f"an objective ID is `obj-` {ID_RULE}"


class LeslieError(Exception):
    """Base of every error leslie reports to a user; ``exit_code`` is the process exit code."""

    exit_code = 1

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class CheckFailed(LeslieError):
    """A check found problems (doctor, check-write, agents-md --check)."""

    exit_code = 1


class UsageError(LeslieError, ValueError):
    """A bad argument: malformed ID, illegal scope or text, self-reference, unknown status."""

    exit_code = 2


class NotFoundError(LeslieError, LookupError):
    """No `.leslie` root, or no such thread or objective."""

    exit_code = 3


REPAIR_HINT = "run `leslie doctor --fix` to repair derived files"


class CorruptStateError(LeslieError):
    """A state file cannot be trusted: malformed JSON, wrong types, conflict markers."""

    exit_code = 4

    def __init__(self, path: Path | str, problem: str, hint: str = REPAIR_HINT) -> None:
        super().__init__(f"{path}: {problem} ({hint})")
        self.path = str(path)
        self.problem = problem
        self.hint = hint


class LockTimeoutError(LeslieError, TimeoutError):
    """The state lock could not be taken in time; nothing was changed."""

    exit_code = 5


class StorageError(LeslieError, OSError):
    """The file system refused a read or write (disk full, permission denied, read-only)."""

    exit_code = 6


class HeldError(LeslieError):
    """Another live agent session holds the thread (SPEC §13); nothing was changed."""

    exit_code = 7
