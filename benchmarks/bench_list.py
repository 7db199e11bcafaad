"""Benchmark `leslie list` (issue 17/18): the table on a terminal, `--plain` and `--json` piped.

    python benchmarks/bench_list.py                       # 1,000 and 10,000 threads, 7 runs each
    python benchmarks/bench_list.py --sizes 1000,10000,100000 --repeats 5 --markdown

The repository is bench_core's (`thread.json` written directly, two random references per thread, a plan and
a progress file each). Each figure is the median wall time of a whole `leslie` process next to
`python -c pass` interleaved with it: piped for `--plain` and `--json` (as a script or `| grep` runs them),
on a pseudo-terminal 80 columns wide for the table (the bare interpreter then runs on one too). Issue 18's
budgets: `--plain`/`--json` <= 150 ms at 10,000 threads and <= 1 s at 100,000; the table <= 2x `--plain`.
"""

from __future__ import annotations

import fcntl
import os
import pty
import select
import shutil
import statistics
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _timing import BARE, LESLIE, Timing, measured_env, time_command
from bench_core import growth_main, make_repo


def run_on_a_terminal(argv: list[str], cwd: Path, env: dict[str, str]) -> float:
    """Wall time of `argv` with stdout on a pseudo-terminal 80 columns wide, its output drained."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 80, 0, 0))
    start = time.perf_counter()
    proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=slave, stderr=subprocess.DEVNULL)
    os.close(slave)
    try:
        while True:
            if select.select([master], [], [], 1.0)[0]:
                try:
                    if not os.read(master, 1 << 16):
                        break
                except OSError:  # EIO: the child closed the terminal
                    break
            elif proc.poll() is not None:
                break
        proc.wait()
    finally:
        os.close(master)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} exited {proc.returncode}")
    return elapsed


def bench(size: int, repeats: int, workdir: Path) -> list[tuple[str, Timing, Timing]]:
    root = workdir / f"repo-{size}"
    shutil.rmtree(root, ignore_errors=True)
    started = time.perf_counter()
    make_repo(root, size)
    print(f"# {size:>7} threads made in {time.perf_counter() - started:.1f} s", file=sys.stderr)
    env = measured_env(LESLIE_ROOT=str(root), COLUMNS="80", TZ="UTC")
    env.pop("COLUMNS")  # the terminal's own width
    rows = []
    for label, argv in (("list --plain (piped)", [LESLIE, "list"]), ("list --json", [LESLIE, "list", "--json"])):
        bare: list[float] = []
        timing = time_command(label, argv, repeats, cwd=root, env=env, bare=bare)
        rows.append((label, timing, Timing("python -c pass", tuple(bare))))
        print(f"# {size:>7} {label:<28} {timing.median_ms:9.1f} ms", file=sys.stderr)
    table_runs: list[float] = []
    bare_runs: list[float] = []
    run_on_a_terminal([LESLIE, "list"], root, env)  # warm-up
    for _ in range(repeats):
        bare_runs.append(run_on_a_terminal(list(BARE), root, env))
        table_runs.append(run_on_a_terminal([LESLIE, "list"], root, env))
    label = "list (the table, 80-column pty)"
    rows.append((label, Timing(label, tuple(table_runs)), Timing("python -c pass (pty)", tuple(bare_runs))))
    print(f"# {size:>7} {label:<28} {statistics.median(table_runs) * 1000:9.1f} ms", file=sys.stderr)
    shutil.rmtree(root, ignore_errors=True)
    return rows


def main() -> int:
    return growth_main(__doc__ or "", "leslie-bench-list-", bench)


if __name__ == "__main__":
    raise SystemExit(main())
