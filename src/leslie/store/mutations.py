"""The windows in which leslie itself wrote under `.leslie/`, for the write guard's second line.

A mutation notes its window (start and end, in nanoseconds) while it holds the index lock, so that the guard
(`leslie.guard.tripwire`) does not report leslie's own writes as an agent's. Only where the guard is in use:
its folder exists once a shell tool call was watched in the repository.
"""

from __future__ import annotations

import contextlib
import os

from leslie.errors import LeslieError
from leslie.store.fsio import atomic_write, read_regular
from leslie.store.machine import state_dir

WRITES_LOG_LIMIT = 1 << 18  # bytes of `leslie-writes` before old windows are dropped


def guard_dir(root: str) -> str:
    """The write guard's folder in this work tree's machine state (`store.machine`); not created here."""
    return os.path.join(state_dir(root), "guard")


def guard_exists(root: str) -> bool:
    """True once a shell tool call was watched in this repository (one stat)."""
    return os.path.isdir(guard_dir(root))


def writes_log(root: str) -> str:
    return os.path.join(guard_dir(root), "leslie-writes")


def record_leslie_write(root: str, start_ns: int, end_ns: int) -> None:
    """Note that a leslie mutation ran from `start_ns` to `end_ns` (only where the guard is in use). The
    caller holds the index lock, so the log can be trimmed here."""
    if not guard_exists(root):
        return
    try:
        fd = os.open(writes_log(root), os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o644)
    except OSError:
        return  # the guard then treats this mutation's writes as anyone's: reported, never lost
    try:
        os.write(fd, f"{start_ns} {end_ns}\n".encode())
        if os.fstat(fd).st_size > WRITES_LOG_LIMIT:  # no sweep for a long time: keep the last hour's windows
            keep = [w for w in leslie_writes(root) if w[1] > end_ns - 3600 * 10**9]
            atomic_write(writes_log(root), "".join(f"{s} {e}\n" for s, e in keep).encode(), durable=False)
    except OSError:
        pass  # a full disk: as above, the mutation's writes are then reported as anyone's would be
    finally:
        os.close(fd)


def leslie_writes(root: str) -> list[tuple[int, int]]:
    """The windows recorded by `record_leslie_write` since the last sweep."""
    try:  # missing (none since the last sweep), linked or oversized: no window is known
        data = read_regular(writes_log(root), limit=2 * WRITES_LOG_LIMIT)
    except (OSError, LeslieError):
        data = b""
    windows = []
    for line in data.splitlines():
        start, _, end = line.partition(b" ")
        if start.isdigit() and end.isdigit():
            windows.append((int(start), int(end)))
    return windows


def forget_leslie_writes(root: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(writes_log(root))
