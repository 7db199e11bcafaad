"""The index lock as it was before issue 18 (`filelock.FileLock`, polling every 50 ms), for bench_lock.py.

    BENCH_LOCK_PATCH=benchmarks/_filelock_patch.py python benchmarks/bench_lock.py

Needs `pip install filelock` (leslie no longer depends on it).
"""

import time
from collections.abc import Iterator
from contextlib import contextmanager

import filelock

import leslie.ops.threads
import leslie.store.files as files


@contextmanager
def _polling_lock(layout: files.Layout, timeout: float | None = None) -> Iterator[files.IndexLock]:
    wait = files.lock_timeout() if timeout is None else timeout
    lock = filelock.FileLock(str(layout.lock_path), timeout=wait)
    lock.acquire()
    start = time.time_ns()
    try:
        yield files.IndexLock(layout)
    finally:
        try:
            files._note_mutation(layout, start)
        finally:
            lock.release()


leslie.ops.threads.acquire_index_lock = _polling_lock  # type: ignore[assignment]
