"""Benchmark every everyday command, reads and mutations, as whole `leslie` processes (issues 17 and 18).

    python benchmarks/bench_commands.py                          # 1,000 and 10,000 threads, 7 runs each
    python benchmarks/bench_commands.py --sizes 10000 --repeats 11 --markdown

Budgets (SPEC §10, with the warm process running, as `_timing.measured_env` has it, and its watcher watching
the repository, as after a user's first `list`: `_timing.settle_watcher`): at 1,000 threads every
read <= 3 x `python -c pass` and every mutation <= 4 x; at 10,000 threads every command <= 100 ms. Exit
status 1 when one is missed. The repository is bench_core's
(`thread.json` written directly, two random references per thread, a plan and a progress file each). Each
figure is the median wall time of the whole process, piped, next to `python -c pass` interleaved with it.
Mutations change something on every run (a new title, a status that alternates, a fresh thread to remove),
so each run really writes `thread.json` and the index under the lock.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _timing import LESLIE, Timing, measured_env, ratio, settle_watcher, time_command
from bench_core import bench_thread_id, growth_main, make_repo

BUDGET_MS = 100.0  # at 10,000 threads and more
BUDGET_READ, BUDGET_MUTATION = 3.0, 4.0  # x bare, below 10,000 threads
READS = frozenset({"list", "list --plain", "list --json", "show ID", "status", "context", "find WORD",
                   "objective list", "relations"})
Plan = tuple[str, Sequence[str] | Callable[[int], Sequence[str]]]


def plans(root: Path, size: int, repeats: int) -> list[Plan]:
    """What to run: each a label and an argv (or a function of the run number, for mutations)."""
    env = measured_env(LESLIE_ROOT=str(root))
    runs = repeats + 2  # the warm-up run is numbered -1
    # Fresh, unreferenced threads for `rm`, made by leslie itself before the clock starts.
    doomed = [f"thread-doomed-{i}" for i in range(runs)]
    for tid in doomed:
        subprocess.run([LESLIE, "spawn", "--intent", "to remove", "--id", tid], env=env, check=True,
                       capture_output=True)
    subprocess.run([LESLIE, "objective", "create", "Benchmark objective", "--id", "obj-measured"], env=env,
                   check=True, capture_output=True)
    a, b = bench_thread_id(size // 3), bench_thread_id(size // 2)
    targets = [bench_thread_id(size - 1 - i) for i in range(runs)]
    return [
        ("list", [LESLIE, "list"]),
        ("list --plain", [LESLIE, "list", "--plain"]),
        ("list --json", [LESLIE, "list", "--json"]),
        ("relations", [LESLIE, "relations"]),
        ("show ID", [LESLIE, "show", a]),
        ("status", [LESLIE, "status"]),  # of the current thread: LESLIE_THREAD, set in `bench`
        ("context", [LESLIE, "context", "--thread", a]),
        ("find WORD", [LESLIE, "find", "zanzibar"]),
        ("objective list", [LESLIE, "objective", "list"]),
        ("spawn", [LESLIE, "spawn", "--intent", "A benchmark thread", "--objective", "obj-bench"]),
        ("reference", lambda i: [LESLIE, "reference", targets[i], "--thread", a]),
        ("unreference", lambda i: [LESLIE, "unreference", targets[i], "--thread", a]),
        ("set-status", lambda i: [LESLIE, "set-status", b, "paused" if i % 2 else "active"]),
        ("retitle", lambda i: [LESLIE, "retitle", b, f"Benchmark title {i}"]),
        ("edit --intent", lambda i: [LESLIE, "edit", b, "--intent", f"A sharper intent {i}"]),
        ("switch", lambda i: [LESLIE, "switch", a if i % 2 else b]),
        ("rm --yes", lambda i: [LESLIE, "rm", doomed[i], "--yes"]),
        ("objective create", [LESLIE, "objective", "create", "Another objective"]),
        ("objective retitle", lambda i: [LESLIE, "objective", "retitle", "obj-measured", f"Objective {i}"]),
    ]


def bench(size: int, repeats: int, workdir: Path) -> list[tuple[str, Timing, Timing]]:
    root = workdir / f"repo-{size}"
    shutil.rmtree(root, ignore_errors=True)
    make_repo(root, size)
    env = measured_env(LESLIE_ROOT=str(root), LESLIE_THREAD=bench_thread_id(size // 3))
    settle_watcher(root, env)
    rows = []
    for label, argv in plans(root, size, repeats):
        bare: list[float] = []
        # `find` exits 1 with no match, as grep does: that is its answer, not a failure.
        timing = time_command(label, argv, repeats, cwd=root, env=env, bare=bare, check=label != "find WORD")
        rows.append((label, timing, Timing("python -c pass", tuple(bare))))
        print(f"# {size:>6} {label:<18} {timing.median_ms:8.1f} ms", file=sys.stderr)
    shutil.rmtree(root, ignore_errors=True)
    return rows


def render(results: dict[int, list[tuple[str, Timing, Timing]]], markdown: bool) -> str:
    sizes = sorted(results)
    labels = [label for label, _, _ in results[sizes[0]]]
    lines = []
    if markdown:
        lines.append("| command | " + " | ".join(f"{s:,} threads" for s in sizes) + " | budget |")
        lines.append("|---|" + "---:|" * len(sizes) + "---|")
    for n, label in enumerate(labels):
        cells = []
        missed = []
        for size in sizes:
            _, timing, bare = results[size][n]
            cells.append(f"{timing.median_ms:.0f} ms ({ratio(timing, bare):.1f}×)")
            if size >= 10_000 and timing.median_ms > BUDGET_MS:
                missed.append(f"{timing.median_ms:.0f} ms > {BUDGET_MS:.0f} ms at {size:,}")
            limit = BUDGET_READ if label in READS else BUDGET_MUTATION
            if size < 10_000 and ratio(timing, bare) > limit:
                missed.append(f"{ratio(timing, bare):.1f}× > {limit:g}× at {size:,}")
        FAILURES.extend(f"{label}: {m}" for m in missed)
        verdict = "MISSED: " + "; ".join(missed) if missed else "ok"
        if markdown:
            lines.append(f"| `leslie {label}` | " + " | ".join(cells) + f" | {verdict} |")
        else:
            lines.append(f"{label:<18} " + "  ".join(f"{c:>18}" for c in cells) + f"  {verdict}")
    bare_ms = [results[s][0][2].median_ms for s in sizes]
    lines.append("bare interpreter (python -c pass), median: " + ", ".join(f"{m:.1f} ms" for m in bare_ms))
    return "\n".join(lines)


FAILURES: list[str] = []


def main() -> int:
    code = growth_main(__doc__ or "", "leslie-bench-commands-", bench, render)
    for failure in FAILURES:
        print(f"MISSED: {failure}")
    return 1 if FAILURES or code else 0


if __name__ == "__main__":
    sys.exit(main())
