"""The one mapping from errors to what a user sees: one line on stderr and the SPEC §9 exit code.

A message may quote the repository (a file name, a title, a value read from a state file): it is made
`visible` here (`leslie.terminal`), once for every command, so no control character in it reaches the terminal.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

from leslie.errors import LeslieError
from leslie.terminal import visible

if TYPE_CHECKING:
    from collections.abc import Callable

INTERNAL_ERROR = 70


def run_reporting_errors(action: Callable[[], object]) -> int:
    """Run `action` and return 0, or report the error it raised and return its exit code.

    `SystemExit` (Typer's own way of ending) passes through to the caller.
    """
    try:
        action()
    except LeslieError as exc:
        _debug_traceback()
        _report(f"leslie: error: {exc.message}")
        return exc.exit_code
    except OSError as exc:
        _debug_traceback()
        _report(f"leslie: error: {exc.strerror or exc} ({exc.filename or 'I/O'})")
        return 6
    except Exception as exc:  # the last resort: a bug, reported in one line, traceback on demand
        _debug_traceback()
        _report(f"leslie: internal error: {type(exc).__name__}: {exc} (set LESLIE_DEBUG=1 for details)")
        return INTERNAL_ERROR
    return 0


def _report(message: str) -> None:
    """`message` on stderr, its lines made `visible` (a message of several lines keeps them)."""
    sys.stderr.write(visible(message, lines=True) + "\n")


def _debug_traceback() -> None:
    if os.environ.get("LESLIE_DEBUG") == "1":
        import traceback

        traceback.print_exc()
