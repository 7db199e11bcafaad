"""A worker that hammers one shared thread's references: the read-modify-write the lock must protect.

    python shared_source_worker.py ROOT RESULT.json WORKER OPS SOURCE

Each op spawns a target of its own (`thread-s<W>-<i>`) and adds a reference from the shared SOURCE
thread to it. Every worker rewrites the same `thread.json`; without the lock, two workers read the same
references and one of the new edges is lost. The result file lists the edges this worker added.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from leslie.ops.threads import reference, spawn
from leslie.store.repository import Repository


def main() -> int:
    """Spawn targets and reference each from the shared source; record the edges added."""
    root, result, worker, ops, source = (Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3]),
                                         int(sys.argv[4]), sys.argv[5])
    repo = Repository(root)
    added = []
    for i in range(ops):
        target = f"thread-s{worker}-{i}"
        spawn(repo, f"target {i} of worker {worker}", thread_id=target)
        reference(repo, source, target)
        added.append(target)
    result.write_text(json.dumps(added), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
