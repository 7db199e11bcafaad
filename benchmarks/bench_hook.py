"""Wall time of `leslie hook claude-code` on a `UserPromptSubmit`, side by side with the bare interpreter.

    python benchmarks/bench_hook.py                 # 21 runs of each case
    python benchmarks/bench_hook.py --repeats 31 --markdown

Three cases, each the median of whole `leslie` processes run through the real executable, every run
interleaved with one `python -c pass` (same interpreter as the `leslie` script) so both share the noise:

- **no injection**: a prompt in a session that already has its context (the common case);
- **injection, cached block**: the first prompt of a new session, the thread's block already rendered by
  an earlier injection (what a new session or a re-injection after a compaction costs);
- **injection, render + validate**: the same with leslie's derived caches deleted before each run, so the
  block is rendered with Jinja2 and checked with lxml.

Budgets (SPEC §10): no injection <= 2 x bare start; injecting <= 5 x and < 100 ms. Exit status 1 when one
is missed. Bytecode caching is on for the measured processes (`PYTHONDONTWRITEBYTECODE` is removed from
their environment, and a warm-up run writes the .pyc files), as in any installed copy of leslie.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _timing import BARE, LESLIE, machine_summary, run_once

from leslie.bootstrap import init_repository
from leslie.repository import Repository
from leslie.threads import reference, spawn

THREAD = "thread-bench"
BUDGET_NO_INJECTION = 2.0
BUDGET_INJECTION = 5.0
BUDGET_INJECTION_MS = 100.0


def make_repo(root: Path) -> None:
    init_repository(root)
    repo = Repository(root)
    spawn(repo, "Benchmark thread", thread_id=THREAD)
    for i in range(3):
        target = spawn(repo, f"Referenced thread {i}").thread.id
        reference(repo, THREAD, target, ["plan.md"] if i else [])
    # Predictions off, so the no-injection case stays one however many runs it takes.
    (root / ".leslie" / "config.toml").write_text(
        "[injection]\nreinject_every_rounds = 0\ncontext_window_tokens = 1000000000\n", encoding="utf-8")


def payload(root: Path, session: str) -> bytes:
    return json.dumps({"session_id": session, "transcript_path": None, "cwd": str(root), "permission_mode": "default",
                       "hook_event_name": "UserPromptSubmit", "prompt": "Continue with the plan."}).encode()


def drop_caches(root: Path) -> None:
    state = root / ".leslie" / "state"
    shutil.rmtree(state / "contexts", ignore_errors=True)
    (state / "config-cache.json").unlink(missing_ok=True)


def measure(root: Path, env: dict[str, str], repeats: int) -> dict[str, tuple[list[float], list[float]]]:
    """Per case: (hook run times, interleaved bare run times), seconds."""
    argv = (LESLIE, "hook", "claude-code")
    run_once(BARE)
    run_once(argv, cwd=root, env=env, stdin=payload(root, "warm"))  # writes .pyc files, renders and caches
    results: dict[str, tuple[list[float], list[float]]] = {}
    for case in ("no injection", "injection, cached block", "injection, render + validate"):
        hook_times: list[float] = []
        bare_times: list[float] = []
        for i in range(repeats):
            session = "warm" if case == "no injection" else f"{case[:13].replace(' ', '-')}{i}"
            if case.endswith("validate"):
                drop_caches(root)
            bare_times.append(run_once(BARE))
            hook_times.append(run_once(argv, cwd=root, env=env, stdin=payload(root, session)))
        results[case] = (hook_times, bare_times)
    return results


def check_output(root: Path, env: dict[str, str]) -> None:
    """The cases measure what they say: silence, then an injection."""
    import subprocess

    quiet = subprocess.run([LESLIE, "hook", "claude-code"], cwd=root, env=env, input=payload(root, "warm"),
                           capture_output=True, check=True)
    loud = subprocess.run([LESLIE, "hook", "claude-code"], cwd=root, env=env, input=payload(root, "check-new"),
                          capture_output=True, check=True)
    if quiet.stdout or b"additionalContext" not in loud.stdout or quiet.stderr or loud.stderr:
        raise SystemExit(f"unexpected hook output: {quiet!r} {loud!r}")


def main(argv: list[str] | None = None) -> int:
    """Measure the three cases, print a table, and return 1 when a budget is missed."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=21)
    parser.add_argument("--markdown", action="store_true", help="print a table for docs/benchmarks.md")
    args = parser.parse_args(argv)
    env = {k: v for k, v in os.environ.items() if not k.startswith("LESLIE_") and k != "PYTHONDONTWRITEBYTECODE"}
    env["LESLIE_THREAD"] = THREAD
    with tempfile.TemporaryDirectory(prefix="leslie-hook-") as tmp:
        root = Path(tmp)
        make_repo(root)
        results = measure(root, env, args.repeats)
        check_output(root, env)
    rows = []
    failures = []
    for case, (hook_times, bare_times) in results.items():
        hook_ms = statistics.median(hook_times) * 1000
        bare_ms = statistics.median(bare_times) * 1000
        ratio = hook_ms / bare_ms
        if case == "no injection":
            budget = f"<= {BUDGET_NO_INJECTION:g} x"
            ok = ratio <= BUDGET_NO_INJECTION
        else:
            budget = f"<= {BUDGET_INJECTION:g} x and < {BUDGET_INJECTION_MS:g} ms"
            ok = ratio <= BUDGET_INJECTION and hook_ms < BUDGET_INJECTION_MS
        if not ok:
            failures.append(f"{case}: {hook_ms:.1f} ms = {ratio:.2f} x bare ({budget})")
        rows.append(f"| {case} | {hook_ms:.1f} | {bare_ms:.1f} | {ratio:.2f} x | {budget} | "
                    f"{'ok' if ok else 'MISSED'} |")
    print(machine_summary())
    with contextlib.suppress(OSError):
        print(f"load average at the end: {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"{args.repeats} runs per case (median)\n")
    print("| `leslie hook claude-code`, UserPromptSubmit | hook (ms) | `python -c pass` (ms) | ratio | budget | |")
    print("|---|---|---|---|---|---|")
    print("\n".join(rows))
    for failure in failures:
        print(f"MISSED: {failure}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
