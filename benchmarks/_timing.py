"""Shared timing helpers for leslie's benchmarks: whole-process wall time, medians, ratio to a bare interpreter.

SPEC §10 measures every budget as the median wall time of a whole process, side by side with
`python3 -c pass` on the same machine in the same run. These helpers do exactly that, interleaving the
bare-interpreter runs with the measured ones so that a noisy neighbour slows both alike.
"""

from __future__ import annotations

import fcntl
import os
import platform
import pty
import statistics
import struct
import subprocess
import sys
import termios
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

PYTHON = sys.executable
LESLIE = str(Path(sys.executable).with_name("leslie"))
BARE = (PYTHON, "-c", "pass")

Argv = Sequence[str]
ArgvFactory = Callable[[int], Argv]


@dataclass(frozen=True)
class Timing:
    """Wall times (seconds) of repeated runs of one command."""

    label: str
    runs: tuple[float, ...]

    @property
    def median(self) -> float:
        return statistics.median(self.runs)

    @property
    def median_ms(self) -> float:
        return self.median * 1000


def run_once(argv: Argv, *, cwd: Path | None = None, env: dict[str, str] | None = None,
             stdin: bytes | None = None, check: bool = True, terminal: bool = False) -> float:
    """Run `argv` once and return its wall time in seconds; a non-zero exit fails loudly when `check`.
    `terminal`: its standard output is a pseudo-terminal (`run_on_terminal`), as a person at one has it."""
    if terminal:
        return run_on_terminal(argv, cwd=cwd, env=env, check=check)
    start = time.perf_counter()
    proc = subprocess.run(list(argv), cwd=cwd, env=env, input=stdin, capture_output=True, check=False)
    elapsed = time.perf_counter() - start
    if check and proc.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} exited {proc.returncode}: {proc.stderr.decode(errors='replace')}")
    return elapsed


def run_on_terminal(argv: Argv, *, cwd: Path | None = None, env: dict[str, str] | None = None, columns: int = 100,
                    check: bool = True) -> float:
    """Run `argv` once with its standard output on a pseudo-terminal `columns` wide, read to its end; its wall
    time in seconds (standard error piped)."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, columns, 0, 0))
    start = time.perf_counter()
    try:
        proc = subprocess.Popen(list(argv), cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=slave,
                                stderr=subprocess.PIPE)
    finally:
        os.close(slave)
    try:
        while True:
            try:
                if not os.read(master, 1 << 16):
                    break
            except OSError:  # the last writer closed the terminal (EIO on Linux)
                break
        _, err = proc.communicate()
    finally:
        os.close(master)
    elapsed = time.perf_counter() - start
    if check and proc.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} exited {proc.returncode}: {err.decode(errors='replace')}")
    return elapsed


def time_command(label: str, argv: Argv | ArgvFactory, repeats: int, *, cwd: Path | None = None,
                 env: dict[str, str] | None = None, stdin: bytes | None = None, warmup: int = 1,
                 bare: list[float] | None = None, check: bool = True,
                 before: Callable[[int], object] | None = None, terminal: bool = False) -> Timing:
    """Run a command `repeats` times (after `warmup` unmeasured runs) and collect wall times.

    `argv` may be a function of the run number, for mutations that must differ between runs (a new
    reference target each time, so every run really writes). When `bare` is given, one bare-interpreter
    run is appended to it before each measured run: the two series then share the same noise.
    `check=False` times a run whatever its exit status (`find` exits 1 when nothing matches). `before(i)`, when
    given, runs untimed before run i (warm-ups included): a mutation that the measured read must then follow.
    `terminal`: each run's standard output is a pseudo-terminal (`run_on_terminal`).
    """
    make: ArgvFactory = argv if callable(argv) else (lambda _i, fixed=argv: fixed)  # type: ignore[misc]
    for i in range(warmup):
        if before is not None:
            before(-1 - i)
        run_once(make(-1 - i), cwd=cwd, env=env, stdin=stdin, check=check, terminal=terminal)
    runs = []
    for i in range(repeats):
        if bare is not None:
            bare.append(run_once(BARE))
        if before is not None:
            before(i)
        runs.append(run_once(make(i), cwd=cwd, env=env, stdin=stdin, check=check, terminal=terminal))
    return Timing(label, tuple(runs))


def measured_env(**extra: str) -> dict[str, str]:
    """The environment of measured processes: like an installed leslie, with its bytecode cached, none of
    the caller's LESLIE_* settings, and the warm process running (SPEC §10 budgets are taken warm, as a
    user's machine has it after the first command), unless `LESLIE_WARM="0"` is among `extra`.

    PYTHONDONTWRITEBYTECODE (set in some sandboxes) would make every run compile leslie's modules from
    source, which a real installation never does (pip compiles them at install time). The warm process is
    the benchmark's own (a runtime folder of its own), started before this returns and stopped at exit.
    """
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE" and not k.startswith("LESLIE_")}
    env["XDG_RUNTIME_DIR"] = _runtime_folder()
    env.update(extra)
    if env.get("LESLIE_WARM") != "0":
        start_warm(env)
    return env


_runtime: list[str] = []


def _runtime_folder() -> str:
    """This benchmark run's private runtime folder (short: a socket path has about 100 bytes)."""
    if not _runtime:
        import atexit
        import tempfile

        _runtime.append(tempfile.mkdtemp(prefix="lbw-", dir="/tmp"))
        atexit.register(_stop_warm)
    return _runtime[0]


def warm_status(env: dict[str, str]) -> str:
    """`leslie warm --json` in `env`: the warm process's status (JSON with "running")."""
    return subprocess.run([LESLIE, "warm", "--json"], env={**env, "LESLIE_WARM": "0"}, capture_output=True,
                          text=True, check=True).stdout


def start_warm(env: dict[str, str]) -> None:
    """Start the warm process for `env` (the first command does), and wait until it answers; nothing for a
    leslie older than the warm process (a "before" figure measured with the same script)."""
    import json

    probe = subprocess.run([LESLIE, "warm", "--help"], env=env, capture_output=True, check=False)
    if probe.returncode != 0 or json.loads(warm_status(env))["running"]:
        return
    run_once((LESLIE, "--version"), env=env)
    deadline = time.monotonic() + 60
    while not json.loads(warm_status(env))["running"]:
        if time.monotonic() > deadline:
            raise RuntimeError("the warm process did not start")
        time.sleep(0.05)


# Exit 0 when the watcher watches the repository `sys.argv[1]` (or this leslie has no such watcher).
_WATCHING = """
import sys
try:
    from leslie.server.watcher import ask
except ImportError:
    sys.exit(0)
reply = ask(sys.argv[1], None)
sys.exit(0 if reply and "mark" in reply else 1)
"""


def settle_watcher(root: Path, env: dict[str, str]) -> None:
    """Wait until the warm process's watcher watches the repository at `root` (the first `list` asks it to,
    and a big repository takes it a few seconds), as on a user's machine after the first reads: `list` and
    `find` then read again only what changed (docs/design.md, "Reads that ask the watcher"). Nothing for a
    leslie without that watcher (a "before" figure measured with the same script)."""
    if env.get("LESLIE_WARM") == "0":
        return
    probe = [str(Path(LESLIE).with_name("python")), "-c", _WATCHING, str(root)]
    deadline = time.monotonic() + 120
    while subprocess.run(probe, env=env, capture_output=True, check=False).returncode != 0:
        if time.monotonic() > deadline:
            raise RuntimeError("the watcher did not start watching the repository")
        time.sleep(0.2)


def _stop_warm() -> None:
    import shutil

    env = {**os.environ, "XDG_RUNTIME_DIR": _runtime[0], "LESLIE_WARM": "0"}
    subprocess.run([LESLIE, "warm", "stop"], env=env, capture_output=True, check=False)
    shutil.rmtree(_runtime[0], ignore_errors=True)


def time_bare(repeats: int) -> Timing:
    """The bare interpreter start (`python -c pass`), the yardstick of SPEC §10."""
    run_once(BARE)
    return Timing("python -c pass", tuple(run_once(BARE) for _ in range(repeats)))


def ratio(timing: Timing, bare: Timing) -> float:
    """How many bare interpreter starts one run of `timing` costs (medians)."""
    return timing.median / bare.median


def cpu_model() -> str:
    """The CPU model name from /proc/cpuinfo, else what `platform` knows."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            for line in info:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine_summary() -> str:
    """One line describing the machine: CPU count, model, Python version, OS."""
    return (f"nproc={os.cpu_count()}, CPU: {cpu_model()}, Python {platform.python_version()} "
            f"({PYTHON}), {platform.system()} {platform.release()}")


def growth_table(results: dict[int, list[tuple[str, Timing, Timing]]], markdown: bool) -> str:
    """One row per command, one column per repository size: median wall time and its ratio to the bare
    interpreter measured beside it (`results`: size -> [(label, timing, bare)], the same labels per size)."""
    sizes = sorted(results)
    lines = []
    if markdown:
        lines.append("| command | " + " | ".join(f"{s:,} threads" for s in sizes) + " |")
        lines.append("|---|" + "---:|" * len(sizes))
    for number, (label, _, _) in enumerate(results[sizes[0]]):
        cells = []
        for size in sizes:
            _, timing, bare = results[size][number]
            cells.append(f"{timing.median_ms:,.0f} ms ({ratio(timing, bare):.1f} x bare)")
        lines.append(f"| `leslie {label}` | " + " | ".join(cells) + " |" if markdown else f"{label}: {cells}")
    return "\n".join(lines)
