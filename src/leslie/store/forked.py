"""The second core for a long loop of system calls: part of it in a forked child, the rest here.

`list` stats two files per thread and `find` one entry per searched file: at 100,000 threads that is
100,000s of `stat` calls, about 3-5 µs each, and (in Python) no faster from threads, which hold the GIL for
most of each call. `split_map` cuts the items into pieces and forks one child (it starts with this process's
imports and data: nothing is re-read or re-imported); the two take the pieces in turn from one queue, and the
child's results come back with `marshal` (plain values, between two processes of the same interpreter:
nothing a repository supplies is unmarshalled from anywhere else). `start` runs one given share in the child
while the caller does other work.

It never changes a result, only where it is computed: when forking is not safe or not tried (not Linux; a
process running other threads, such as the board's server), too few items to pay for it (a fork costs a few
milliseconds), or the child fails in any way (killed, an exception, short data), the work is done here,
sequentially, as it would have been. The child writes only its pipe (and what its work writes: `find`'s
child refreshes the cache shards it takes) and leaves with `os._exit`: no buffered output flushed
twice, no `atexit`, no lock released, no temp file removed on the parent's behalf.

Imports `os`, `sys`, `marshal` (built in) and `typing`, which every command has loaded before it gets here.
"""

from __future__ import annotations

import marshal
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

T = TypeVar("T")

SPLIT_FROM = 3_000  # fewer items: a fork and the join cost more than half the loop saves
PIECES = 64  # how many pieces `split_map` cuts the items into: a piece is the unit the two take in turn
_FORKS = sys.platform == "linux"  # the one platform it is tested on; elsewhere the loop stays sequential
_READ = 1 << 20
_SIGKILL = 9  # POSIX's number (not `signal.SIGKILL`: importing `signal` imports `enum`, ~8 ms)
_TICKET = 2  # bytes per piece number in the queue
_MOST_PIECES = 4096 // _TICKET  # a pipe holds at least 4 KiB: the whole queue is written before the fork


def split_map(work: Callable[[Sequence[T]], list[Any]], items: Sequence[T], *,
              minimum: int | None = None, pieces: int = PIECES, first: Callable[[], object] | None = None,
              ) -> list[Any]:
    """`work(items)`, computed as the concatenation of `work(piece)` over `pieces` consecutive pieces of
    `items`, shared with a forked child when there are at least `minimum` items (SPLIT_FROM by default).

    The two take the pieces in turn from one queue (a pipe holding the pieces' numbers, read two bytes at a
    time): the one that runs faster (the child pays for its copy-on-write pages) does more, and both finish
    within a piece of each other. A piece the child took but did not deliver is done here. `work` must return
    marshal-able values (ints, strings, bytes, tuples, lists, dicts of those) and must not depend on where
    it runs. `first()`, when given, is called once here before this process takes a piece (so, shared, while
    the child takes its first ones): work only this process needs, done in the child's time."""
    count = min(pieces, len(items), _MOST_PIECES)
    queue = None
    if len(items) >= (SPLIT_FROM if minimum is None else minimum) and count >= 2 and _can_fork():
        queue = _queue(count)
    if queue is None:
        if first is not None:
            first()
        return work(items)
    parts = [items[len(items) * i // count:len(items) * (i + 1) // count] for i in range(count)]
    try:
        with _start(lambda: [[number, work(parts[number])] for number in _taken(queue)], list) as job:
            if first is not None:
                first()
            done = {number: work(parts[number]) for number in _taken(queue)}
            for pair in job.result():
                if isinstance(pair, list) and len(pair) == 2 and pair[0] in range(count) and isinstance(pair[1], list):
                    done.setdefault(pair[0], pair[1])
    finally:
        os.close(queue)
    result: list[Any] = []
    for number, part in enumerate(parts):
        result += done[number] if number in done else work(part)  # the child failed (or lost a ticket)
    return result


class Job:
    """Work under way in a forked child, or not started (then `result` computes it here)."""

    def __init__(self, here: Callable[[], list[Any]], pid: int | None, read_end: int | None) -> None:
        self._here = here
        self._pid = pid
        self._read_end = read_end

    @property
    def forked(self) -> bool:
        """Whether a child is at work (until `result` or `close`)."""
        return self._pid is not None

    def result(self) -> list[Any]:
        """The child's answer, or the work computed here when there was no child or it failed. Call it
        once, and always (it reaps the child)."""
        if self._pid is None or self._read_end is None:
            return self._here()
        received = _read_all(self._read_end)
        _, status = os.waitpid(self._pid, 0)
        self._pid = self._read_end = None
        value = _decode(received) if status == 0 else None
        return self._here() if value is None else value

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
    def here() -> list[Any]:
        return work(items)

    if len(items) < (SPLIT_FROM if minimum is None else minimum) or not _can_fork():
        return Job(here, None, None)
    return _start(here, here)


def _start(child: Callable[[], list[Any]], here: Callable[[], list[Any]]) -> Job:
    """`child()` run in a forked child, its value sent back marshalled; `here()` stands in when it fails."""
    try:
        read_end, write_end = os.pipe()
    except OSError:
        return Job(here, None, None)
    try:
        pid = os.fork()
    except OSError:
        os.close(read_end)
        os.close(write_end)
        return Job(here, None, None)
    if pid == 0:  # the child: compute, send, leave without any of the parent's exit work
        code = 1
        try:
            os.close(read_end)
            data = marshal.dumps(child())
            view = memoryview(data)
            while view:
                view = view[os.write(write_end, view):]
            code = 0
        finally:
            os._exit(code)
    os.close(write_end)
    return Job(here, pid, read_end)


def _queue(count: int) -> int | None:
    """The read end of a pipe holding the numbers 0..count-1 and then its end (the write end is closed)."""
    try:
        read_end, write_end = os.pipe()
    except OSError:
        return None
    try:
        os.write(write_end, b"".join(number.to_bytes(_TICKET, "big") for number in range(count)))
    except OSError:
        os.close(read_end)
        return None
    finally:
        os.close(write_end)
    return read_end


def _taken(queue: int) -> Iterator[int]:
    """The piece numbers this process takes from the queue, one at a time, until it is empty."""
    while True:
        try:
            ticket = os.read(queue, _TICKET)
        except OSError:
            return
        if len(ticket) < _TICKET:  # empty (or a torn read, which cannot happen: that piece is done here)
            return
        yield int.from_bytes(ticket, "big")


def _can_fork() -> bool:
    return _FORKS and single_threaded()


def single_threaded() -> bool:
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
