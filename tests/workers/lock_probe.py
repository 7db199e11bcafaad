"""A mutual-exclusion probe of `leslie.store.files.acquire_index_lock`.

    python lock_probe.py ROOT COUNTER RESULT.json ROUNDS

Each round takes the index lock, reads a counter file, sleeps a little (to widen any race), writes the
counter plus one with a plain non-atomic write, and records when it entered and left the critical section
(CLOCK_MONOTONIC, shared by every process on the machine). Without mutual exclusion two processes read
the same value and one increment is lost, and their intervals overlap.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from leslie.store.files import Layout, acquire_index_lock


def main() -> int:
    """Run the rounds and write the list of [enter, exit] intervals in nanoseconds."""
    root, counter, result, rounds = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3]), int(sys.argv[4])
    layout = Layout(root)
    intervals = []
    for _ in range(rounds):
        with acquire_index_lock(layout):
            entered = time.monotonic_ns()
            value = int(counter.read_text(encoding="utf-8") or "0")
            time.sleep(0.0005)
            counter.write_text(str(value + 1), encoding="utf-8")
            left = time.monotonic_ns()
        intervals.append([entered, left])
    result.write_text(json.dumps(intervals), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
