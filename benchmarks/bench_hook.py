"""Wall time of `leslie hook claude-code` on a `UserPromptSubmit`, side by side with the bare interpreter.

    python benchmarks/bench_hook.py                 # 21 runs of each case
    python benchmarks/bench_hook.py --repeats 31 --markdown

Six cases, each the median of whole `leslie` processes run through the real executable, every run
interleaved with one `python -c pass` (same interpreter as the `leslie` script) so both share the noise.
With the warm process running (SPEC §12: as a user's machine has it after the first command):

- **no injection**: a prompt in a session that already has its context (the common case);
- **no injection, right after a hook**: the same, each run right after another (untimed) one, as an agent's
  hooks come in a burst (`PreToolUse`, a fast tool, `PostToolUse`): the warm process has just forked its next
  child and may still be preparing it;
- **injection, cached block**: the first prompt of a new session, the thread's block already rendered by
  an earlier injection (what a new session or a re-injection after a compaction costs);
- **injection, render + validate**: the same with leslie's derived caches deleted before each run, so the
  block is fingerprinted, rendered with Jinja2 and checked with lxml (already loaded in the warm process);

and cold, with `LESLIE_WARM=0` (the first command, or a user who turned it off):

- **cold, no injection** and **cold, render + validate**.

Budgets (SPEC §10): no injection <= 2.5 x bare; injecting <= 3 x; cold <= 12 x. Exit status 1 when one is
missed. Bytecode caching is on for the measured processes (`PYTHONDONTWRITEBYTECODE` is removed from their
environment, and a warm-up run writes the .pyc files), as in any installed copy of leslie. The run uses a
runtime folder of its own (`XDG_RUNTIME_DIR`), so its warm process is its own, stopped at the end.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _timing import BARE, LESLIE, machine_summary, measured_env, run_once, warm_status

from leslie.ops.bootstrap import init_repository
from leslie.ops.threads import reference, spawn
from leslie.store import machine
from leslie.store.repository import Repository

THREAD = "thread-bench"


def make_repo(root: Path, threads: int = 0, refs: int = 3, file_bytes: int = 0, budget: int | None = None) -> None:
    """The benchmark repository: by default 4 threads (the thread and 3 references); with `threads`, a
    repository of that many (`bench_core.make_repo`) whose thread references `refs` of them, each holding a
    design file of `file_bytes` bytes and a progress log (issue 14: what the hook stats, and what it inlines
    under `budget` tokens)."""
    if threads:
        from bench_core import bench_thread_id
        from bench_core import make_repo as make_big_repo

        from leslie.ops.threads import RefSpec

        make_big_repo(root, threads, refs_per_thread=2)
        repo = Repository(root)
        targets = [bench_thread_id(i) for i in range(min(refs, threads))]
        for i, target in enumerate(targets):
            folder = repo.layout.thread_dir(target)
            (folder / "design").mkdir(exist_ok=True)
            line = f"Design notes of thread {i}: decisions, interfaces, open questions.\n"
            (folder / "design" / "spec.md").write_text(line * max(1, file_bytes // len(line)), encoding="utf-8")
            (folder / "progress.md").write_text("".join(f"- step {n}: done\n" for n in range(40)), encoding="utf-8")
        spawn(repo, "Benchmark thread", thread_id=THREAD, refs=[RefSpec(t) for t in targets])
    else:
        init_repository(root)
        repo = Repository(root)
        spawn(repo, "Benchmark thread", thread_id=THREAD)
        for i in range(refs):
            target = spawn(repo, f"Referenced thread {i}").thread.id
            reference(repo, THREAD, target, ["plan.md"] if i else [])
    # Predictions off, so the no-injection case stays one however many runs it takes.
    context = f"[context]\nbudget_tokens = {budget}\n" if budget is not None else ""
    (root / ".leslie" / "config.toml").write_text(
        "[injection]\nreinject_every_rounds = 0\ncontext_window_tokens = 1000000000\n" + context, encoding="utf-8")


def payload(root: Path, session: str) -> bytes:
    return json.dumps({"session_id": session, "transcript_path": None, "cwd": str(root), "permission_mode": "default",
                       "hook_event_name": "UserPromptSubmit", "prompt": "Continue with the plan."}).encode()


def drop_caches(root: Path) -> None:
    state = Path(machine.state_dir(root))
    shutil.rmtree(state / "contexts", ignore_errors=True)
    (state / "config-cache.json").unlink(missing_ok=True)


CASES = {  # case: (warm, drop the caches, budget in bare starts)
    "no injection": (True, False, 2.5),
    "no injection, right after a hook": (True, False, 2.5),
    "injection, cached block": (True, False, 3.0),
    "injection, render + validate": (True, True, 3.0),
    "cold, no injection": (False, False, 12.0),
    "cold, render + validate": (False, True, 12.0),
}


def measure(root: Path, env: dict[str, str], repeats: int) -> dict[str, tuple[list[float], list[float]]]:
    """Per case: (hook run times, interleaved bare run times), seconds."""
    argv = (LESLIE, "hook", "claude-code")
    run_once(BARE)
    run_once(argv, cwd=root, env=env, stdin=payload(root, "warm"))  # writes .pyc files, renders and caches
    cold = {**env, "LESLIE_WARM": "0"}
    results: dict[str, tuple[list[float], list[float]]] = {}
    for n, (case, (warm, drop, _budget)) in enumerate(CASES.items()):
        hook_times: list[float] = []
        bare_times: list[float] = []
        for i in range(repeats):
            session = "warm" if "no injection" in case else f"case{n}-{i}"
            if drop:
                drop_caches(root)
            bare_times.append(run_once(BARE))
            if "right after" in case:
                run_once(argv, cwd=root, env=env, stdin=payload(root, session))
            hook_times.append(run_once(argv, cwd=root, env=env if warm else cold, stdin=payload(root, session)))
        results[case] = (hook_times, bare_times)
    return results


def check_output(root: Path, env: dict[str, str]) -> None:
    """The cases measure what they say: silence, an injection, the same block rendered warm and cold, and
    warm runs that were served by the warm process."""
    has_warm = subprocess.run([LESLIE, "warm", "--help"], env=env, capture_output=True, check=False).returncode == 0
    served_before = json.loads(warm_status(env))["served"] if has_warm else 0

    def hook(session: str, extra: dict[str, str] | None = None) -> subprocess.CompletedProcess[bytes]:
        return subprocess.run([LESLIE, "hook", "claude-code"], cwd=root, env={**env, **(extra or {})},
                              input=payload(root, session), capture_output=True, check=True)

    quiet = hook("warm")
    loud = hook("check-new")
    drop_caches(root)
    rendered = hook("check-rendered")
    drop_caches(root)
    alone = hook("check-alone", {"LESLIE_WARM": "0"})
    if quiet.stdout or b"additionalContext" not in loud.stdout or quiet.stderr or loud.stderr:
        raise SystemExit(f"unexpected hook output: {quiet!r} {loud!r}")
    if rendered.stdout != loud.stdout or alone.stdout != loud.stdout:
        raise SystemExit("the block rendered warm and cold differ")
    if has_warm and json.loads(warm_status(env))["served"] != served_before + 3:
        raise SystemExit("the warm process did not serve the warm runs")


def main(argv: list[str] | None = None) -> int:
    """Measure the three cases, print a table, and return 1 when a budget is missed."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=21)
    parser.add_argument("--markdown", action="store_true", help="print a table for docs/benchmarks.md")
    parser.add_argument("--threads", type=int, default=0, help="threads in the repository (default: 4)")
    parser.add_argument("--refs", type=int, default=3, help="threads the measured thread references")
    parser.add_argument("--file-bytes", type=int, default=0, help="size of a design file in each referenced "
                        "thread (with --threads)")
    parser.add_argument("--budget", type=int, default=None, help="[context] budget_tokens (default: leslie's)")
    parser.add_argument("--git", action="store_true", help="make the repository a git work tree (the machine "
                        "state then lives in .git/leslie/, as in most users' repositories)")
    args = parser.parse_args(argv)
    env = measured_env(LESLIE_THREAD=THREAD)
    with tempfile.TemporaryDirectory(prefix="leslie-hook-") as tmp:
        root = Path(tmp)
        if args.git:
            subprocess.run(["git", "init", "-q", str(root)], check=True)
        make_repo(root, args.threads, args.refs, args.file_bytes, args.budget)
        results = measure(root, env, args.repeats)
        check_output(root, env)
    rows = []
    failures = []
    for case, (hook_times, bare_times) in results.items():
        hook_ms = statistics.median(hook_times) * 1000
        bare_ms = statistics.median(bare_times) * 1000
        ratio = hook_ms / bare_ms
        budget = CASES[case][2]
        ok = ratio <= budget
        if not ok:
            failures.append(f"{case}: {hook_ms:.1f} ms = {ratio:.2f} x bare (<= {budget:g} x)")
        rows.append(f"| {case} | {hook_ms:.1f} | {bare_ms:.1f} | {ratio:.2f} x | <= {budget:g} x | "
                    f"{'ok' if ok else 'MISSED'} |")
    print(machine_summary())
    with contextlib.suppress(OSError):
        print(f"load average at the end: {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"{args.repeats} runs per case (median); threads {args.threads or 4}, references {args.refs}, "
          f"design file {args.file_bytes} bytes, budget {args.budget if args.budget is not None else 'default'}\n")
    print("| `leslie hook claude-code`, UserPromptSubmit | hook (ms) | `python -c pass` (ms) | ratio | budget | |")
    print("|---|---|---|---|---|---|")
    print("\n".join(rows))
    for failure in failures:
        print(f"MISSED: {failure}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
