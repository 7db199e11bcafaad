"""`leslie status`, `--help`, and IDs typed as prefixes: what they cost (issue 16).

For each size: `status` against `doctor` (status must not pay for the full check), `show` by full ID and by
prefix, `spawn --ref` and `reference --target` by full ID and by prefix (the quick paths: a full ID must cost
nothing more than before, a prefix one listing of `.leslie/threads/`), and `leslie --help` with its panels.
The bare interpreter start is timed beside each command (same noise); medians in milliseconds.

    .venv/bin/python benchmarks/bench_status.py --sizes 1000,10000 --repeats 9
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _timing import LESLIE, Timing, machine_summary, measured_env, time_command
from bench_core import bench_thread_id, make_repo


def bench(size: int, repeats: int, workdir: Path) -> list[tuple[str, Timing, Timing]]:
    root = workdir / f"status-{size}"
    shutil.rmtree(root, ignore_errors=True)
    make_repo(root, size)
    env = measured_env(LESLIE_ROOT=str(root), LESLIE_THREAD=bench_thread_id(size // 2))
    middle = bench_thread_id(size // 2)
    prefix = middle[len("thread-"):]  # b000500: unique, the random part without its `thread-`
    source = bench_thread_id(0)
    full_targets = [bench_thread_id(size - 1 - i) for i in range(repeats + 2)]
    short_targets = [bench_thread_id(size - 1 - repeats - 2 - i)[len("thread-"):] for i in range(repeats + 2)]
    plans = [
        ("status", [LESLIE, "status"]),
        ("doctor", [LESLIE, "doctor"]),
        ("show ID", [LESLIE, "show", middle]),
        ("show PREFIX", [LESLIE, "show", prefix]),
        ("spawn --ref ID", [LESLIE, "spawn", "--intent", "x", "--ref", middle]),
        ("spawn --ref PREFIX", [LESLIE, "spawn", "--intent", "x", "--ref", prefix]),
        ("reference ID", lambda i: [LESLIE, "reference", "--thread", source, "--target", full_targets[i]]),
        ("reference PREFIX", lambda i: [LESLIE, "reference", "--thread", source, "--target", short_targets[i]]),
        ("--help", [LESLIE, "--help"]),
    ]
    rows = []
    for label, argv in plans:
        bare: list[float] = []
        timing = time_command(label, argv, repeats, cwd=root, env=env, bare=bare)  # type: ignore[arg-type]
        rows.append((label, timing, Timing("bare", tuple(bare))))
        print(f"# {size:>6} {label:<20} {timing.median_ms:8.1f} ms", file=sys.stderr)
    shutil.rmtree(root, ignore_errors=True)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="1000,10000", help="comma-separated thread counts")
    parser.add_argument("--repeats", type=int, default=9, help="measured runs per command (median taken)")
    args = parser.parse_args(argv)
    print(machine_summary())
    with tempfile.TemporaryDirectory(prefix="leslie-bench-status-") as tmp:
        print("| command | threads | median | bare interpreter |")
        print("|---|---|---|---|")
        for size in (int(s) for s in args.sizes.split(",")):
            for label, timing, bare in bench(size, args.repeats, Path(tmp)):
                print(f"| `leslie {label}` | {size:,} | {timing.median_ms:.0f} ms | {bare.median_ms:.0f} ms |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
