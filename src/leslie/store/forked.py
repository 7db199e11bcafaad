"""The second core for a long loop of system calls: half of it in a forked child, half here.

`list` stats two files per thread and `find` one entry per searched file: at 100,000 threads that is
100,000s of `stat` calls, about 5 µs each, and (in Python) no faster from threads, which hold the GIL for
most of each call. `split_map` forks one child for the second half of the items (it starts with this
process's imports and data: nothing is re-read or re-imported), does the first half here meanwhile, and joins
the child's results, sent back with `marshal` (plain values, between two processes of the same interpreter:
nothing a repository supplies is unmarshalled from anywhere else).

It never changes a result, only where it is computed: when forking is not safe or not tried (not Linux; a
process running other threads, such as the board's server), too few items to pay for it (a fork costs a few
milliseconds), or the child fails in any way (killed, an exception, short data), the work is done here,
sequentially, as it would have been. The child writes only its pipe (and what its work writes: `find`'s
child refreshes its own half of the cache's shards) and leaves with `os._exit`: no buffered output flushed
twice, no `atexit`, no lock released, no temp file removed on the parent's behalf.

Imports `os`, `sys`, `marshal` (built in) and `typing`, which every command has loaded before it gets here.
"""

from __future__ import annotations

import marshal
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

T = TypeVar("T")

SPLIT_FROM = 3_000  # fewer items: a fork and the join cost more than half the loop saves
_FORKS = sys.platform == "linux"  # the one platform it is tested on; elsewhere the loop stays sequential
_READ = 1 << 20
_SIGKILL = 9  # POSIX's number (not `signal.SIGKILL`: importing `signal` imports `enum`, ~8 ms)


def split_map(work: Callable[[Sequence[T]], list[Any]], items: Sequence[T], *,
              minimum: int | None = None) -> list[Any]:
    """`work(items)`, computed as `work(first half) + work(second half)` with the second half in a forked
    child when there are at least `minimum` items (SPLIT_FROM by default). `work` must return marshal-able
    values (ints, strings, bytes, tuples, lists, dicts of those) and must not depend on where it runs."""
    enough = len(items) >= (SPLIT_FROM if minimum is None else minimum)
    cut = len(items) // 2 if enough else len(items)
    with start(work, items[cut:], minimum=0 if enough else None) as job:
        return work(items[:cut]) + job.result()


class Job:
    """`work(items)` under way in a forked child, or not started (then `result` computes it here)."""

    def __init__(self, work: Callable[[Sequence[T]], list[Any]], items: Sequence[T], pid: int | None,
                 read_end: int | None) -> None:
        self._work: Callable[[Sequence[Any]], list[Any]] = work
        self._items: Sequence[Any] = items
        self._pid = pid
        self._read_end = read_end

    @property
    def forked(self) -> bool:
        """Whether a child is at work (until `result` or `close`)."""
        return self._pid is not None

    def result(self) -> list[Any]:
        """`work(items)`: the child's answer, or computed here when there was no child or it failed. Call it
        once, and always (it reaps the child)."""
        if self._pid is None or self._read_end is None:
            return self._work(self._items)
        received = _read_all(self._read_end)
        _, status = os.waitpid(self._pid, 0)
        self._pid = self._read_end = None
        value = _decode(received) if status == 0 else None
        return self._work(self._items) if value is None else value

    def close(self) -> None:
        """Abandon the child if `result` was not called (the caller failed): its pipe closed, it reaped."""
        if self._pid is not None and self._read_end is not None:
            os.close(self._read_end)
            os.kill(self._pid, _SIGKILL)  # its work is not wanted (it is not reaped yet: the kill cannot miss)
            os.waitpid(self._pid, 0)
            self._pid = self._read_end = None

    def __enter__(self) -> Job:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()


def start(work: Callable[[Sequence[T]], list[Any]], items: Sequence[T], *, minimum: int | None = None) -> Job:
    """`work(items)` begun in a forked child when there are at least `minimum` items (SPLIT_FROM by default)
    and forking is safe; the caller goes on meanwhile and calls `result()` on the returned job."""
    if len(items) < (SPLIT_FROM if minimum is None else minimum) or not _FORKS or not _single_threaded():
        return Job(work, items, None, None)
    try:
        read_end, write_end = os.pipe()
    except OSError:
        return Job(work, items, None, None)
    try:
        pid = os.fork()
    except OSError:
        os.close(read_end)
        os.close(write_end)
        return Job(work, items, None, None)
    if pid == 0:  # the child: compute, send, leave without any of the parent's exit work
        code = 1
        try:
            os.close(read_end)
            data = marshal.dumps(work(items))
            view = memoryview(data)
            while view:
                view = view[os.write(write_end, view):]
            code = 0
        finally:
            os._exit(code)
    os.close(write_end)
    return Job(work, items, pid, read_end)


def _single_threaded() -> bool:
    """No other thread runs: a fork copies only the calling thread, and whatever another one held (a lock,
    half-written data) would stay held in the child."""
    threading = sys.modules.get("threading")
    return threading is None or threading.active_count() == 1


def _read_all(fd: int) -> bytes:
    chunks = []
    try:
        while chunk := os.read(fd, _READ):
            chunks.append(chunk)
    except OSError:
        chunks = []
    finally:
        os.close(fd)
    return b"".join(chunks)


def _decode(data: bytes) -> list[Any] | None:
    try:
        value = marshal.loads(data)
    except (EOFError, ValueError, TypeError):
        return None
    return value if isinstance(value, list) else None
