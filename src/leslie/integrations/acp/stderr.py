"""What the proxy says: one line on stderr, and how a failure is described in it.

stdin and stdout carry the protocol, so stderr is the only place the proxy may speak; whatever it says there is
one line (a newline in the text becomes a space).
"""

from __future__ import annotations

import contextlib
import os

from leslie.errors import LeslieError


def warn(text: str) -> None:
    """One line on stderr; a raw write, so no stream lock is held by a thread at interpreter exit."""
    line = text.replace("\r", " ").replace("\n", " ")
    with contextlib.suppress(OSError):
        os.write(2, f"leslie acp: {line}\n".encode(errors="replace"))


def describe(exc: BaseException) -> str:
    """A failure in a few words: a leslie error's message, else the exception's type and text."""
    return exc.message if isinstance(exc, LeslieError) else f"{type(exc).__name__}: {exc}"
