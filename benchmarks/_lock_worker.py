"""One writer of `bench_lock.py`: tests/workers/mutation_worker.py's API loop, timing every lock wait.

    python _lock_worker.py ROOT RESULT.json WORKER OPS --targets ID,ID,...

The wait is the time from asking for the index lock to holding it (CLOCK_MONOTONIC); the hold is the
time from holding it to releasing it. Both go to RESULT.json, in nanoseconds, one entry per mutation.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "workers"))

import mutation_worker

import leslie.ops.threads as threads_ops

if os.environ.get("BENCH_LOCK_PATCH"):  # another lock to compare with: a file that rebinds the ops' lock
    exec(Path(os.environ["BENCH_LOCK_PATCH"]).read_text(encoding="utf-8"))

waits: list[int] = []
holds: list[int] = []
_acquire = threads_ops.acquire_index_lock


@contextmanager
def _timed(*args: Any, **kwargs: Any) -> Iterator[Any]:
    asked = time.monotonic_ns()
    with _acquire(*args, **kwargs) as lock:
        held = time.monotonic_ns()
        waits.append(held - asked)
        try:
            yield lock
        finally:
            holds.append(time.monotonic_ns() - held)


def main() -> int:
    """Run the worker's loop with the timed lock and write its waits and holds."""
    root, result, worker, ops = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    targets = [t for t in sys.argv[sys.argv.index("--targets") + 1].split(",") if t]
    threads_ops.acquire_index_lock = _timed  # type: ignore[assignment]
    failed = None
    try:
        mutation_worker.run(mutation_worker.Driver(root, "api"), worker, ops, 1, targets)
    except Exception as exc:  # a lock timeout (exit 5 in the CLI) is a result here, not a crash
        failed = f"{type(exc).__name__}: {exc}"
    result.write_text(json.dumps({"waits": waits, "holds": holds, "failed": failed}), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
