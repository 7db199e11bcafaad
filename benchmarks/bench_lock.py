"""The index lock under contention: throughput and the wait distribution of 16 API writers.

    python benchmarks/bench_lock.py                          # 16 writers x 40 mutations at 10,000 threads
    python benchmarks/bench_lock.py --size 10000 --workers 16 --ops 60 --rounds 3

Each writer (benchmarks/_lock_worker.py) runs the concurrency suite's mutation loop through the Python API
(spawn, reference, unreference, retitle; every writer also references the same four shared threads) and
records, for every mutation, how long it waited for the index lock (`.git/leslie/index.lock`) and how long it held it.
Reported: mutations per second (first start to last exit), and the waits' p50 / p90 / p99 / max, with how
many mutations failed on the lock timeout (SPEC §2: `LESLIE_LOCK_TIMEOUT`, default 30 s). Issue 18's budget:
p99 ≤ 1 s and no timeout, throughput within 15 % of the polling lock's.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _timing import PYTHON, machine_summary, measured_env
from bench_core import SHARED_TARGETS, make_repo

from leslie.ops.threads import spawn
from leslie.store.repository import Repository

WORKER = Path(__file__).resolve().parent / "_lock_worker.py"


def percentile(values: list[int], q: float) -> float:
    """The `q`-quantile (0..1) of `values` by nearest rank, in milliseconds."""
    ordered = sorted(values)
    rank = min(len(ordered) - 1, max(0, round(q * len(ordered)) - 1))
    return ordered[rank] / 1e6


def one_round(root: Path, results: Path, workers: int, ops: int) -> dict[str, object]:
    """Run `workers` writers at once on `root`; throughput and the waits of every mutation."""
    shutil.rmtree(results, ignore_errors=True)
    results.mkdir(parents=True)
    started = time.perf_counter()
    procs = [subprocess.Popen([PYTHON, str(WORKER), str(root), str(results / f"w{w}.json"), str(w), str(ops),
                               "--targets", ",".join(SHARED_TARGETS)], env=measured_env())
             for w in range(workers)]
    codes = [proc.wait() for proc in procs]
    elapsed = time.perf_counter() - started
    if any(codes):
        raise RuntimeError(f"lock workers crashed: exit codes {codes}")
    waits: list[int] = []
    holds: list[int] = []
    failed = []
    for w in range(workers):
        doc = json.loads((results / f"w{w}.json").read_text(encoding="utf-8"))
        waits += doc["waits"]
        holds += doc["holds"]
        if doc["failed"]:
            failed.append(doc["failed"])
    return {"mutations": len(holds), "seconds": elapsed, "rate": len(holds) / elapsed,
            "p50": percentile(waits, 0.5), "p90": percentile(waits, 0.9), "p99": percentile(waits, 0.99),
            "max": max(waits) / 1e6, "hold_p50": percentile(holds, 0.5), "failed": failed}


def main(argv: list[str] | None = None) -> int:
    """Build the repository, run the rounds, print one line per round and the verdict."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=int, default=10_000, help="threads in the repository")
    parser.add_argument("--workers", type=int, default=16)
    parser.add_argument("--ops", type=int, default=40, help="mutations per writer")
    parser.add_argument("--rounds", type=int, default=1, help="rounds on the same repository (it grows)")
    parser.add_argument("--workdir", type=Path, default=None)
    args = parser.parse_args(argv)
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="leslie-bench-lock-"))
    root = workdir / "repo-lock"
    shutil.rmtree(root, ignore_errors=True)
    print(f"# {machine_summary()}", file=sys.stderr)
    make_repo(root, args.size)
    repo = Repository(root)
    for target in SHARED_TARGETS:
        spawn(repo, f"shared target {target}", thread_id=target)
    ok = True
    for number in range(args.rounds):
        row = one_round(root, workdir / f"lock-results-{number}", args.workers, args.ops)
        print(f"{args.size} threads, {args.workers} writers x {args.ops}: {row['mutations']} mutations in "
              f"{row['seconds']:.1f} s = {row['rate']:.1f}/s; wait p50 {row['p50']:.0f} ms, p90 {row['p90']:.0f} ms, "
              f"p99 {row['p99']:.0f} ms, max {row['max']:.0f} ms; hold p50 {row['hold_p50']:.1f} ms; "
              f"timeouts {len(row['failed'])}", flush=True)
        ok = ok and row["p99"] <= 1000 and not row["failed"]  # type: ignore[operator]
    if args.workdir is None:
        shutil.rmtree(workdir, ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
