"""Benchmark the read views of issue 16: `list --tree`, `relations --format mermaid|dot` and `find`.

    python benchmarks/bench_views.py                      # 1,000 and 10,000 threads, 7 runs each
    python benchmarks/bench_views.py --sizes 1000 --repeats 11 --markdown

The repository is bench_core's (`thread.json` written directly, two random references per thread, a plan
and a progress file each), with each plan grown to about 2 KB of prose so that `find` reads something
like real notes. The warm process's watcher watches the repository before anything is timed
(`_timing.settle_watcher`), as after a user's first read. Each figure is the median wall time of a whole
`leslie` process, piped (as a script or `| grep` runs it), next to `python -c pass` interleaved with it.

The tree's drawings are kept in the derived store while the tree stays as it is (`ops/tree.py`, "Drawings"),
so a repeated read gives the kept text; the rows "after a retitle" retitle one thread, untimed, before each
run: the read then draws the tree anew, as the first read after any change does. The row "on a terminal" runs
`list --tree` with its output on a pseudo-terminal 100 columns wide, read to its end: fitted and coloured, the
drawing a person at a terminal gets (kept per width and colours, as the piped ones are).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _timing import LESLIE, Timing, measured_env, settle_watcher, time_command
from bench_core import bench_thread_id, growth_main, make_repo

PROSE = ("- [ ] Check the migration of the accounts table against the staging snapshot; note the row counts\n"
         "  before and after, and the time it took, in progress.md.\n") * 12


AFTER_WRITE = "after a retitle"  # a read's row right after the tree changed: its kept drawing cannot serve
ON_A_TERMINAL = "list --tree (on a terminal)"  # fitted and coloured, kept per width like the piped drawing


def grow_plans(root: Path, size: int) -> None:
    """About 2 KB of plan per thread, one of them holding a rare word (`find` then has hits in one file)."""
    for i in range(size):
        plan = root / ".leslie" / "threads" / bench_thread_id(i) / "plan.md"
        extra = "- [ ] Rotate the zanzibar keys\n" if i == size // 2 else ""
        plan.write_text(f"# Plan: Benchmark thread {i}\n\n{PROSE}{extra}", encoding="utf-8")


def bench(size: int, repeats: int, workdir: Path) -> list[tuple[str, Timing, Timing]]:
    root = workdir / f"repo-{size}"
    shutil.rmtree(root, ignore_errors=True)
    make_repo(root, size)
    grow_plans(root, size)
    env = measured_env(LESLIE_ROOT=str(root))
    settle_watcher(root, env)  # as on a user's machine after the first read (bench_commands does the same)
    plans = [
        ("list --tree", [LESLIE, "list", "--tree"]),
        ("list --tree --json", [LESLIE, "list", "--tree", "--json"]),
        ("relations --format mermaid", [LESLIE, "relations", "--format", "mermaid"]),
        ("relations --format dot", [LESLIE, "relations", "--format", "dot"]),
        ("find zanzibar (1 hit)", [LESLIE, "find", "zanzibar"]),
        ("find 'thread 7' (many hits)", [LESLIE, "find", "thread 7"]),
        # Exit 1 is the right answer here; `sh` turns it into 0 (its own start is ~1 ms).
        ("find absent (no hit)", ["sh", "-c", f'"{LESLIE}" find nowhere-at-all; test $? -eq 1']),
        ("list (the table, for comparison)", [LESLIE, "list"]),
        ("--version (the CLI's start alone)", [LESLIE, "--version"]),
    ]
    retitled = bench_thread_id(size // 3)

    def retitle(run: int) -> None:  # untimed: the tree the next read draws is not the one it drew before
        subprocess.run([LESLIE, "retitle", retitled, f"Benchmark thread retitled {run}"], cwd=root, env=env,
                       check=True, stdout=subprocess.DEVNULL)

    plans += [(f"list --tree ({AFTER_WRITE})", [LESLIE, "list", "--tree"]),
              (f"relations --format mermaid ({AFTER_WRITE})", [LESLIE, "relations", "--format", "mermaid"]),
              (ON_A_TERMINAL, [LESLIE, "list", "--tree"])]
    rows = []
    for label, argv in plans:
        bare: list[float] = []
        timing = time_command(label, argv, repeats, cwd=root, env=env, bare=bare,
                              before=retitle if label.endswith(f"({AFTER_WRITE})") else None,
                              terminal=label == ON_A_TERMINAL)
        rows.append((label, timing, Timing("python -c pass", tuple(bare))))
        print(f"# {size:>6} {label:<34} {timing.median_ms:8.1f} ms", file=sys.stderr)
    shutil.rmtree(root, ignore_errors=True)
    return rows


def main() -> int:
    return growth_main(__doc__ or "", "leslie-bench-views-", bench)


if __name__ == "__main__":
    raise SystemExit(main())
