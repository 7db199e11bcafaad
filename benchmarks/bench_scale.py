"""Benchmark the read commands and `doctor` from 100 to 100,000 threads (issue 18): time, memory, cold cache.

    python benchmarks/bench_scale.py --sizes 100,10000              # while iterating
    python benchmarks/bench_scale.py                                # 100, 10,000 and 100,000 threads
    python benchmarks/bench_scale.py --sizes 100000 --repeats 5 --markdown

Besides the reads, `doctor` runs three ways: on the healthy repository, and twice on a repository whose index a
hand edit made differ from a rebuild (one thread.json retitled before each run and put back after it): `doctor`
then says what is wrong, and `doctor --fix` rebuilds the index (which the benchmark rebuilds back after each run).
`list --plain` also runs right after a `set-status` each time: the read that follows a mutation.

Repositories are bench_core's (`thread.json` written directly, two random references per thread, a plan and a
progress file each), each plan grown to about 2 KB of prose as in bench_views (so that `find` reads something
like real notes). Building 100,000 threads takes minutes: built repositories are kept in
`$TMPDIR/leslie-bench-scale/` (`--cache`) and reused by later runs (`--rebuild` starts again).

For each size and command, `--repeats` whole `leslie` processes run through the real executable, each after a
`python -c pass` (interleaved, so both share the machine's noise); the table gives medians, the ratio, and
the command's CPU time (user + system, from `os.wait4`: what a loaded machine distorts least) and the peak
resident memory of its process (`ru_maxrss`, which starts at this benchmark's own peak: a child started with
`vfork` keeps it across `exec`, so the repositories are built by a child process and this one stays at ~20 MB).
Then the same command runs
with a **cold** file cache (`--cold-repeats` times; 0 skips): before each run every file of the repository is
evicted from the page cache with `posix_fadvise(POSIX_FADV_DONTNEED)`. That needs no root, but it evicts
file *data* only: the kernel keeps directory entries and inodes cached (dropping those needs root,
`echo 2 > /proc/sys/vm/drop_caches`), so a cold figure here is a lower bound of a truly cold machine's.
Finally each command runs `--repeats` times inside one interpreter after a warm-up run (`in-process ms`):
the library's own cost and the CLI's parsing of the arguments (Typer builds its command tree on every call,
~50-150 ms), without the interpreter's start and the imports (measured by bench_core and bench_views).

`--baseline PYTHON` measures another installation beside this one (the interpreter of a virtualenv where an
older checkout is installed): each command runs in both in turn, the same number of times, and the table has
an "after" and a "before" row for it. On a shared machine that is the fair comparison; two runs one after
the other meet different neighbours.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _timing import BARE, LESLIE, PYTHON, machine_summary, measured_env
from bench_core import bench_thread_id, compile_bytecode

BUDGET_MS = {10_000: 150.0, 100_000: 1000.0}  # the read commands (issue 18)
DOCTOR_BUDGET_MS = {10_000: 2000.0, 100_000: 8000.0}  # doctor, cold cache
MEMORY_BUDGET_MB = 300.0  # any command at 100,000 threads
CACHE_VERSION = "1"  # bump when make_repo or grow_plans change what they write
DIFFERS = "index differs"  # doctor's rows on a repository whose index a hand edit made stale
AFTER_WRITE = "after a set-status"  # a read's row right after a mutation (what a cache of the index must follow)


def commands(size: int) -> list[tuple[str, list[str]]]:
    """(label, arguments) of every measured command at `size` threads."""
    middle = bench_thread_id(size // 2)
    found: list[tuple[str, list[str]]] = [
        ("show", ["show", middle]),
        ("show --json", ["show", middle, "--json"]),
        ("context", ["context", "--thread", middle]),
        ("find (1 hit)", ["find", "zanzibar"]),
        ("status", ["status"]),
        ("list --json", ["list", "--json"]),
    ]
    if has_option("list", "--plain"):
        found.append(("list --plain", ["list", "--plain"]))
        found.append((f"list --plain ({AFTER_WRITE})", ["list", "--plain"]))
    found += [("relations --format json", ["relations", "--format", "json"]), ("doctor", ["doctor"]),
              (f"doctor ({DIFFERS})", ["doctor"]), (f"doctor --fix ({DIFFERS})", ["doctor", "--fix"])]
    return found


@contextmanager
def prepared(label: str, root: Path, size: int, leslie: str, env: dict[str, str], command: list[str]) -> Iterator[None]:
    """The repository as the row `label` needs it for one run, put back afterwards. For a read after a mutation:
    the same read once (unmeasured: the other installation wrote meanwhile), then one thread's status set just
    before the run (and set back after it). For the rows of an index
    that differs from a rebuild (what a merge or a hand edit leaves, and what `doctor` then decodes and
    rebuilds): one thread.json retitled by hand before the run; after it, the file restored and, after
    `--fix`, the index rebuilt back (the same bytes) and the backups removed."""
    if AFTER_WRITE in label:
        thread = bench_thread_id(size // 2)
        subprocess.run([leslie, *command], cwd=root, env=env, capture_output=True, check=True)
        subprocess.run([leslie, "set-status", thread, "paused"], cwd=root, env=env, capture_output=True, check=True)
        try:
            yield
        finally:
            subprocess.run([leslie, "set-status", thread, "active"], cwd=root, env=env, capture_output=True,
                           check=True)
        return
    if DIFFERS not in label:
        yield
        return
    path = root / ".leslie" / "threads" / bench_thread_id(size // 2) / "thread.json"
    original = path.read_bytes()
    path.write_bytes(original.replace(b'"title": "', b'"title": "Edited: ', 1))
    try:
        yield
    finally:
        path.write_bytes(original)
        if "--fix" in label:
            subprocess.run([leslie, "doctor", "--fix"], cwd=root, env=env, capture_output=True, check=True)
            for backups in (root / ".leslie" / "state" / "backups", root / ".git" / "leslie" / "backups"):
                shutil.rmtree(backups, ignore_errors=True)


def has_option(command: str, option: str) -> bool:
    """Whether this leslie build's `command` has `option` (`list --plain` lands with another branch)."""
    proc = subprocess.run([LESLIE, command, "--help"], capture_output=True, text=True, check=False)
    return option in proc.stdout


BUILD = """
import sys
from pathlib import Path
sys.path.insert(0, sys.argv[1])  # this folder
from bench_core import make_repo
from bench_views import grow_plans
root, size = Path(sys.argv[2]), int(sys.argv[3])
make_repo(root, size)
grow_plans(root, size)
"""


def cached_repo(cache: Path, size: int, rebuild: bool) -> Path:
    """The repository of `size` threads, built once into `cache` and reused (a marker file says it is whole)."""
    root = cache / f"repo-{size}-v{CACHE_VERSION}"
    marker = cache / f"repo-{size}-v{CACHE_VERSION}.done"
    if rebuild or not marker.exists():
        import shutil

        marker.unlink(missing_ok=True)
        shutil.rmtree(root, ignore_errors=True)
        started = time.perf_counter()
        # Built by a child process: a process's peak resident memory passes to the commands it starts
        # (`ru_maxrss` keeps the pre-`exec` peak, and `subprocess` starts them with `vfork`), so this one
        # must stay small for their peaks to be theirs.
        subprocess.run([PYTHON, "-c", BUILD, str(Path(__file__).resolve().parent), str(root), str(size)], check=True)
        marker.write_text("built\n")
        print(f"# built {size} threads in {time.perf_counter() - started:.0f} s", file=sys.stderr)
    return root


def evict(root: Path) -> None:
    """Drop every file of `root` from the page cache (data only; see the module's docstring)."""
    for folder, _dirs, files in os.walk(root):
        for name in files:
            try:
                fd = os.open(os.path.join(folder, name), os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
            except OSError:
                continue
            try:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)


def run(argv: list[str], *, cwd: Path | None = None, env: dict[str, str] | None = None) -> tuple[float, float, float]:
    """Run `argv` to its end: (wall seconds, CPU seconds (user + system), peak resident memory in MB).

    Exit 0 or 1 (find, doctor) only. The CPU time is what a loaded machine distorts least.
    """
    started = time.perf_counter()
    proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _pid, status, usage = os.wait4(proc.pid, 0)
    elapsed = time.perf_counter() - started
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode not in (0, 1):
        error = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
        raise RuntimeError(f"{' '.join(argv)} exited {proc.returncode}: {error}")
    if proc.stderr:
        proc.stderr.close()
    return elapsed, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024  # KB on Linux


IN_PROCESS = """
import contextlib, io, json, statistics, sys, time
from leslie.cli.app import run
args, repeats = json.loads(sys.argv[1]), int(sys.argv[2])
def once():
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        started = time.perf_counter()
        try:
            run(list(args))
        except SystemExit:
            pass
        return time.perf_counter() - started
once()  # imports, compiled patterns
print(statistics.median(once() for _ in range(repeats)))
"""


def in_process(args: list[str], repeats: int, root: Path, env: dict[str, str], python: str = PYTHON) -> float:
    """Median seconds of `leslie ARGS` run inside one warmed interpreter (the library and the CLI's parsing)."""
    out = subprocess.run([python, "-c", IN_PROCESS, json.dumps(args), str(repeats)], cwd=root, env=env,
                         capture_output=True, text=True, check=True).stdout
    return float(out.strip().splitlines()[-1])


@dataclass(frozen=True)
class Install:
    """A leslie installation to measure: a name for the table, its interpreter and its `leslie` beside it."""

    name: str
    python: str

    @property
    def leslie(self) -> str:
        return str(Path(self.python).with_name("leslie"))


@dataclass
class Row:
    """One command at one size (of one installation)."""

    label: str
    size: int
    warm_ms: float
    cpu_ms: float
    bare_ms: float
    peak_mb: float
    cold_ms: float | None
    in_process_ms: float | None
    install: str = ""

    @property
    def budget_ms(self) -> float | None:
        if self.label.startswith("doctor"):
            return DOCTOR_BUDGET_MS.get(self.size)
        return BUDGET_MS.get(self.size)

    @property
    def ok(self) -> bool:
        budget = self.budget_ms
        # doctor's budget is for a cold cache; the reads' for a warm one (their cold figure is reported too).
        doctor = self.label.startswith("doctor")
        measured = self.cold_ms if doctor and self.cold_ms is not None else self.warm_ms
        memory_ok = self.size < 100_000 or self.peak_mb <= MEMORY_BUDGET_MB
        return (budget is None or measured <= budget) and memory_ok


def bench_size(size: int, args: argparse.Namespace) -> list[Row]:
    """Every command at `size` threads: warm (interleaved with the bare start), cold, in-process. With
    `--baseline`, each command runs in both installations in turn, so the two share the machine's noise."""
    root = cached_repo(args.cache, size, args.rebuild)
    env = measured_env(LESLIE_ROOT=str(root), LESLIE_THREAD=bench_thread_id(size // 2))
    installs = [Install("after" if args.baseline else "", PYTHON)]
    if args.baseline:
        installs.append(Install("before", str(args.baseline)))
    rows = []
    for label, command in commands(size):
        if not label.startswith(args.only):
            continue
        found = {install: ([], [], [], [], []) for install in installs}  # warm, cpu, bare, peaks, cold
        for install in installs:
            with prepared(label, root, size, install.leslie, env, command):
                run([install.leslie, *command], cwd=root, env=env)  # warm-up: the file cache, compiled bytecode
        for _ in range(args.repeats):
            for install in installs:
                warm, cpu, bare, peaks, _cold = found[install]
                bare.append(run(list(BARE))[0])
                with prepared(label, root, size, install.leslie, env, command):
                    elapsed, used, peak = run([install.leslie, *command], cwd=root, env=env)
                warm.append(elapsed)
                cpu.append(used)
                peaks.append(peak)
        for _ in range(args.cold_repeats):
            for install in installs:
                with prepared(label, root, size, install.leslie, env, command):
                    evict(root)
                    found[install][4].append(run([install.leslie, *command], cwd=root, env=env)[0])
        # In one interpreter the runs would not follow a change each: the whole runs only.
        inside = {install: in_process(command, args.repeats, root, env, install.python)
                  if args.in_process and DIFFERS not in label and AFTER_WRITE not in label else None
                  for install in installs}
        for install in installs:
            warm, cpu, bare, peaks, cold = found[install]
            seconds = inside[install]
            row = Row(label, size, statistics.median(warm) * 1000, statistics.median(cpu) * 1000,
                      statistics.median(bare) * 1000, max(peaks),
                      statistics.median(cold) * 1000 if cold else None,
                      seconds * 1000 if seconds is not None else None, install.name)
            rows.append(row)
            print(f"# {size:>6} {label:<24} {install.name:<6} {row.warm_ms:8.0f} ms warm {row.cpu_ms:8.0f} ms cpu "
                  f"{row.cold_ms or 0:8.0f} ms cold  "
                  f"{row.in_process_ms or 0:7.0f} ms in-process  {row.peak_mb:5.0f} MB", file=sys.stderr)
    return rows


def render(rows: list[Row], markdown: bool) -> str:
    """The growth table: one line per command and size."""
    def cell(value: float | None) -> str:
        return f"{value:.0f}" if value is not None else "-"

    head = ["command", "threads", "warm ms", "CPU ms", "× bare", "cold ms", "in-process ms", "peak MB", "budget", ""]
    lines = []
    if markdown:
        lines += ["| " + " | ".join(head) + " |", "|---|---:|---:|---:|---:|---:|---:|---:|---|---|"]
    else:
        lines.append(f"{'command':<24} {'threads':>7} {'warm ms':>8} {'CPU ms':>7} {'x bare':>6} {'cold ms':>8} "
                     f"{'in-proc':>8} {'peak MB':>8}  budget")
    for row in rows:
        budget = f"≤ {row.budget_ms:.0f} ms" if row.budget_ms is not None else ""
        if row.size >= 100_000:
            budget += f"{', ' if budget else ''}≤ {MEMORY_BUDGET_MB:.0f} MB"
        verdict = ("ok" if row.ok else "MISSED") if budget else ""
        times = row.warm_ms / row.bare_ms
        install = f" ({row.install})" if row.install else ""
        if markdown:
            lines.append(f"| `leslie {row.label}`{install} | {row.size:,} | {row.warm_ms:.0f} | {row.cpu_ms:.0f} | "
                         f"{times:.1f} | {cell(row.cold_ms)} | {cell(row.in_process_ms)} | {row.peak_mb:.0f} | "
                         f"{budget} | {verdict} |")
        else:
            lines.append(f"{row.label + install:<24} {row.size:>7} {row.warm_ms:>8.0f} {row.cpu_ms:>7.0f} "
                         f"{times:>6.1f} {cell(row.cold_ms):>8} "
                         f"{cell(row.in_process_ms):>8} {row.peak_mb:>8.0f}  {budget} {verdict}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Parse arguments, build or reuse the repositories, measure, print the table; exit 1 on a missed budget."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="100,10000,100000", help="comma-separated thread counts")
    parser.add_argument("--repeats", type=int, default=5, help="warm runs per command (median taken)")
    parser.add_argument("--cold-repeats", type=int, default=3, help="cold-cache runs per command (0: none)")
    parser.add_argument("--no-in-process", dest="in_process", action="store_false",
                        help="skip the in-process timing")
    parser.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "leslie-bench-scale",
                        help="where built repositories are kept between runs")
    parser.add_argument("--rebuild", action="store_true", help="build the repositories again")
    parser.add_argument("--markdown", action="store_true", help="print a Markdown table")
    parser.add_argument("--only", default="", help="measure only the commands whose label starts with this")
    parser.add_argument("--baseline", type=Path, default=None, metavar="PYTHON",
                        help="another installation's interpreter (its `leslie` beside it, e.g. a virtualenv of "
                             "an older checkout): every command runs in both in turn, rows marked after/before")
    args = parser.parse_args(argv)
    args.cache.mkdir(parents=True, exist_ok=True)
    print(f"# machine: {machine_summary()}; load average {os.getloadavg()[0]:.1f}")
    compile_bytecode()
    rows: list[Row] = []
    for size in (int(s) for s in args.sizes.split(",") if s):
        rows += bench_size(size, args)
    print(render(rows, args.markdown))
    print(f"# load average after: {os.getloadavg()[0]:.1f}")
    return 0 if all(row.ok for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
