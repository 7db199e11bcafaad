"""Benchmark leslie's core commands against SPEC §10, side by side with the bare interpreter.

    python benchmarks/bench_core.py                       # 100, 10,000 and 50,000 threads, 7 runs each
    python benchmarks/bench_core.py --sizes 10000 --repeats 11
    python benchmarks/bench_core.py --mutations           # also 16 workers x 200 API mutations
    python benchmarks/bench_core.py --markdown            # tables ready for docs/benchmarks.md

Each figure is the median wall time of a whole `leslie` process (run through the real executable),
next to `python -c pass` measured in the same run and interleaved with it. Repositories are generated
fast: `thread.json` files written directly as canonical JSON and the index built with the library,
not thousands of CLI calls. Exit status 1 when a budget of SPEC §10 is missed.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _timing import (
    LESLIE,
    PYTHON,
    Timing,
    growth_table,
    machine_summary,
    measured_env,
    ratio,
    time_bare,
    time_command,
)

from leslie.ops.bootstrap import init_repository
from leslie.store.files import write_json
from leslie.store.jsonio import dumps_canonical
from leslie.store.model import Objective, Thread
from leslie.store.relations import build_index
from leslie.store.repository import Repository

BUDGET_SIZE = 10_000
BUDGETS_MS = {"spawn": 150.0, "reference": 150.0, "doctor": 2000.0}
OBJECTIVE = "obj-bench"
WORKER = Path(__file__).resolve().parent.parent / "tests" / "workers" / "mutation_worker.py"
SHARED_TARGETS = ["thread-base-0", "thread-base-1", "thread-base-2", "thread-base-3"]


def bench_thread_id(i: int) -> str:
    return f"thread-b{i:06d}"


def make_repo(root: Path, size: int, *, refs_per_thread: int = 2, seed: int = 7, assets: bool = True) -> None:
    """A leslie repository of `size` threads with random references, written directly (seconds, not hours)."""
    rng = random.Random(seed)
    root.mkdir(parents=True, exist_ok=True)
    init_repository(root)
    repo = Repository(root)
    write_json(repo.layout.objective_file(OBJECTIVE),
               Objective(OBJECTIVE, "Benchmark", created_at="2026-01-01T00:00:00Z").to_json())
    threads = []
    for i in range(size):
        tid = bench_thread_id(i)
        targets = {bench_thread_id(rng.randrange(i)) for _ in range(refs_per_thread)} if i else set()
        thread = Thread(id=tid, title=f"Benchmark thread {i}", intent=f"Benchmark thread {i}\n",
                        objective=OBJECTIVE, references=dict.fromkeys(targets, ()),
                        created_at="2026-01-01T00:00:00Z")
        folder = repo.layout.thread_dir(tid)
        folder.mkdir(parents=True)
        # Plain writes, no fsync: this is set-up, not the thing measured.
        (folder / "thread.json").write_bytes(dumps_canonical(thread.to_json()))
        if assets:
            (folder / "plan.md").write_text(f"# Plan: Benchmark thread {i}\n", encoding="utf-8")
            (folder / "progress.md").write_text(f"# Progress: Benchmark thread {i}\n", encoding="utf-8")
        threads.append(thread)
    repo.layout.index_path.write_bytes(dumps_canonical(build_index(threads).to_json()))


def has_command(name: str) -> bool:
    """Whether this leslie build has the command (`context` lands with another issue)."""
    proc = subprocess.run([LESLIE, name, "--help"], capture_output=True, check=False)
    return proc.returncode == 0


@dataclass
class Row:
    """One measured operation at one repository size."""

    operation: str
    size: int
    timing: Timing
    bare: Timing

    @property
    def budget_ms(self) -> float | None:
        return BUDGETS_MS.get(self.operation) if self.size == BUDGET_SIZE else None

    @property
    def ok(self) -> bool:
        return self.budget_ms is None or self.timing.median_ms <= self.budget_ms


def bench_size(size: int, repeats: int, workdir: Path, with_context: bool) -> list[Row]:
    """Generate a repository of `size` threads and time spawn, reference, context and doctor in it."""
    root = workdir / f"repo-{size}"
    shutil.rmtree(root, ignore_errors=True)
    started = time.perf_counter()
    make_repo(root, size)
    print(f"# generated {size} threads in {time.perf_counter() - started:.1f} s", file=sys.stderr)
    env = measured_env(LESLIE_ROOT=str(root))
    source = bench_thread_id(0)
    # Each measured reference adds a new edge, so every run really rewrites thread.json and the index.
    targets = [bench_thread_id(size - 1 - i) for i in range(repeats + 2)]
    plans: list[tuple[str, object]] = [
        ("spawn", [LESLIE, "spawn", "--intent", "A benchmark thread"]),
        ("reference", lambda i: [LESLIE, "reference", "--thread", source, "--target", targets[i]]),
    ]
    if with_context:
        plans.append(("context", [LESLIE, "context", "--thread", bench_thread_id(size // 2)]))
    plans.append(("doctor", [LESLIE, "doctor"]))
    rows = []
    for operation, argv in plans:
        bare: list[float] = []
        timing = time_command(operation, argv, repeats, cwd=root, env=env, bare=bare)  # type: ignore[arg-type]
        rows.append(Row(operation, size, timing, Timing("python -c pass", tuple(bare))))
        print(f"# {size:>6} {operation:<10} {timing.median_ms:8.1f} ms", file=sys.stderr)
    shutil.rmtree(root, ignore_errors=True)
    return rows


def bench_mutations(workers: int, ops: int, workdir: Path) -> tuple[int, float]:
    """`workers` processes x `ops` API mutations at once (tests/workers/mutation_worker.py); (mutations, s).

    The same workload as tests/test_concurrency.py: each worker spawns threads, references shared and own
    threads, unreferences and retitles; the wall time runs from the first start to the last exit.
    """
    from leslie.ops.threads import spawn

    root = workdir / "repo-mutations"
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    init_repository(root)
    repo = Repository(root)
    for target in SHARED_TARGETS:
        spawn(repo, f"shared target {target}", thread_id=target)
    results = workdir / "mutation-results"
    shutil.rmtree(results, ignore_errors=True)
    results.mkdir()
    started = time.perf_counter()
    procs = [subprocess.Popen([PYTHON, str(WORKER), str(root), str(results / f"w{w}.json"), str(w), str(ops),
                               "--via", "api", "--targets", ",".join(SHARED_TARGETS)], env=measured_env())
             for w in range(workers)]
    codes = [proc.wait() for proc in procs]
    elapsed = time.perf_counter() - started
    if any(codes):
        raise RuntimeError(f"mutation workers failed: exit codes {codes}")
    done = sum(json.loads((results / f"w{w}.json").read_text())["mutations"] for w in range(workers))
    check = subprocess.run([LESLIE, "--root", str(root), "doctor"], capture_output=True, text=True, check=False)
    if check.returncode != 0:
        raise RuntimeError(f"doctor after the mutation benchmark: {check.stdout}{check.stderr}")
    shutil.rmtree(root, ignore_errors=True)
    return done, elapsed


def compile_bytecode() -> None:
    """Compile leslie's modules once, as `pip install` does, so no measured run pays for it."""
    import compileall

    import leslie

    compileall.compile_dir(str(Path(leslie.__file__).parent), quiet=1)


Results = dict[int, list[tuple[str, Timing, Timing]]]


def growth_main(description: str, prefix: str, bench: Callable[[int, int, Path], list[tuple[str, Timing, Timing]]],
                render: Callable[[Results, bool], str] = growth_table, argv: list[str] | None = None) -> int:
    """The shared `main` of the scripts that time commands at several repository sizes (`--sizes`,
    `--repeats`, `--markdown`): bytecode compiled, `bench(size, repeats, workdir)` per size, one table."""
    parser = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="1000,10000", help="comma-separated thread counts")
    parser.add_argument("--repeats", type=int, default=7, help="measured runs per command (median taken)")
    parser.add_argument("--markdown", action="store_true", help="print a Markdown table")
    args = parser.parse_args(argv)
    compile_bytecode()
    with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
        results = {size: bench(size, args.repeats, Path(tmp)) for size in map(int, args.sizes.split(","))}
    print(machine_summary())
    print(render(results, args.markdown))
    return 0


def render(rows: list[Row], bare: Timing, markdown: bool) -> str:
    """The results table: median ms, ratio to the interleaved bare interpreter, budget and verdict."""
    lines = []
    if markdown:
        lines += ["| operation | threads | median ms | × bare | budget | |", "|---|---:|---:|---:|---|---|"]
    else:
        lines.append(f"{'operation':<10} {'threads':>7} {'median ms':>10} {'x bare':>7}  budget")
    for row in rows:
        budget = f"≤ {row.budget_ms:.0f} ms" if row.budget_ms else ""
        verdict = ("ok" if row.ok else "MISSED") if row.budget_ms else ""
        times = ratio(row.timing, row.bare)
        if markdown:
            lines.append(f"| `leslie {row.operation}` | {row.size:,} | {row.timing.median_ms:.0f} | "
                         f"{times:.1f} | {budget} | {verdict} |")
        else:
            lines.append(f"{row.operation:<10} {row.size:>7} {row.timing.median_ms:>10.1f} {times:>7.1f}  "
                         f"{budget} {verdict}")
    lines.append(f"bare interpreter (python -c pass): {bare.median_ms:.1f} ms median of {len(bare.runs)}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Parse arguments, run the benchmarks, print the tables; exit 1 when a budget is missed."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="100,10000,50000", help="comma-separated thread counts")
    parser.add_argument("--repeats", type=int, default=7, help="measured runs per operation (median taken)")
    parser.add_argument("--workdir", type=Path, default=None, help="where to build repositories (default: a temp dir)")
    parser.add_argument("--mutations", action="store_true", help="also run 16 workers x 200 API mutations")
    parser.add_argument("--workers", type=int, default=16)
    parser.add_argument("--ops", type=int, default=200)
    parser.add_argument("--markdown", action="store_true", help="print Markdown tables")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",") if s]
    with_context = has_command("context")
    if not with_context:
        print("# `leslie context` is not available in this build: skipped", file=sys.stderr)
    print(f"# machine: {machine_summary()}")
    compile_bytecode()
    bare = time_bare(args.repeats)
    with tempfile.TemporaryDirectory(prefix="leslie-bench-", dir=args.workdir) as tmp:
        workdir = Path(tmp)
        rows: list[Row] = []
        for size in sizes:
            rows += bench_size(size, args.repeats, workdir, with_context)
        print(render(rows, bare, args.markdown))
        ok = all(row.ok for row in rows)
        if args.mutations:
            done, seconds = bench_mutations(args.workers, args.ops, workdir)
            rate = done / seconds
            print(f"{args.workers} workers x {args.ops} API mutations: {done} in {seconds:.1f} s = "
                  f"{rate:.0f} mutations/s (budget ≥ 150/s) {'ok' if rate >= 150 else 'MISSED'}")
            ok = ok and rate >= 150
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
