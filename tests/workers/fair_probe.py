"""A fairness probe of `leslie.store.files.acquire_index_lock`.

    python fair_probe.py ROOT RESULT.json ROUNDS HOLD_MS

Each round asks for the index lock, holds it HOLD_MS milliseconds and asks again at once (the worst case
for a lock that lets the last holder win). Every round records [asked, entered, left] in CLOCK_MONOTONIC
nanoseconds, shared by every process on the machine: from these the test counts how many other holders
went first while one waited.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from leslie.store.files import Layout, acquire_index_lock


def main() -> int:
    """Run the rounds and write the list of [asked, entered, left] triples."""
    root, result, rounds, hold = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
    layout = Layout(root)
    rows = []
    for _ in range(rounds):
        asked = time.monotonic_ns()
        with acquire_index_lock(layout):
            entered = time.monotonic_ns()
            time.sleep(hold / 1000)
            left = time.monotonic_ns()
        rows.append([asked, entered, left])
    result.write_text(json.dumps(rows), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
