"""Tokens spent on `<thread_context>` over a simulated long Claude Code session, per injection mode.

    python benchmarks/bench_tokens.py                    # 300 rounds, 200k window, 4k tokens a round
    python benchmarks/bench_tokens.py --rounds 100 --window 100000 --compact-at 0.9 --markdown

Drives the real `leslie hook claude-code` executable, one process per event, exactly as Claude Code would:
a `UserPromptSubmit` per round (with `transcript_path`, a file that grows by 4 bytes per token of the
conversation), and, when the simulated context window reaches `--compact-at` of its size, a compaction:
the window shrinks to `--summary` of its size and the thread context is lost from it. With compaction
signals, the compaction is followed by Claude Code's `SessionStart` with `source: "compact"`; without,
leslie has to predict it (transcript size, round count).

Reported per mode (smart, always, start) and with/without signals: injections, tokens injected (bytes/4 of
the blocks), rounds the agent worked without its thread context in the window, and of those, the rounds
after an *observed* compaction. Targets (SPEC §10): smart injects >= 90 % fewer tokens than always, and
no round after an observed compaction goes without context. Exit status 1 when a target is missed.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _timing import LESLIE, machine_summary

from leslie.ops.bootstrap import init_repository
from leslie.ops.threads import reference, spawn
from leslie.store.repository import Repository

THREAD = "thread-bench"


@dataclass
class Outcome:
    """What one simulated session cost and missed."""

    mode: str
    signals: bool
    rounds: int
    compactions: int
    injections: int
    tokens: int
    rounds_without: int
    rounds_without_after_observed: int


def make_repo(root: Path) -> None:
    init_repository(root)
    repo = Repository(root)
    spawn(repo, "Benchmark thread: a realistic intent of a line or two.", thread_id=THREAD)
    for i in range(2):
        target = spawn(repo, f"Referenced thread {i}").thread.id
        reference(repo, THREAD, target, ["plan.md", "design/api.md"] if i else [])


def run_hook(root: Path, env: dict[str, str], payload: dict[str, object]) -> str | None:
    proc = subprocess.run([LESLIE, "hook", "claude-code"], cwd=root, env=env, input=json.dumps(payload).encode(),
                          capture_output=True, check=False)
    if proc.returncode != 0 or proc.stderr:
        raise RuntimeError(f"hook failed ({proc.returncode}): {proc.stderr.decode(errors='replace')}")
    if not proc.stdout.strip():
        return None
    return str(json.loads(proc.stdout)["hookSpecificOutput"]["additionalContext"])


def simulate(root: Path, env: dict[str, str], mode: str, signals: bool, args: argparse.Namespace) -> Outcome:
    (root / ".leslie" / "config.toml").write_text(
        f'[injection]\nmode = "{mode}"\ncontext_window_tokens = {args.window}\n'
        f"tokens_per_round = {args.tokens_per_round}\n", encoding="utf-8")
    session = f"bench-{mode}-{'signals' if signals else 'silent'}"
    transcript = root / f"{session}.jsonl"
    transcript.write_bytes(b"")
    base = {"session_id": session, "transcript_path": str(transcript), "cwd": str(root),
            "permission_mode": "default"}
    window_used = 0
    has_context = False
    observed = False  # a compaction was signalled since the context was last in the window
    out = Outcome(mode, signals, args.rounds, 0, 0, 0, 0, 0)

    def injected(text: str | None) -> None:
        nonlocal has_context, window_used, observed
        if text is not None:
            tokens = (len(text.encode()) + 3) // 4
            out.injections += 1
            out.tokens += tokens
            window_used += tokens
            has_context = True
            observed = False

    injected(run_hook(root, env, {**base, "hook_event_name": "SessionStart", "source": "startup"}))
    for round_number in range(1, args.rounds + 1):
        injected(run_hook(root, env, {**base, "hook_event_name": "UserPromptSubmit",
                                      "prompt": f"round {round_number}"}))
        if not has_context:
            out.rounds_without += 1
            out.rounds_without_after_observed += observed
        window_used += args.tokens_per_round
        with transcript.open("ab") as handle:  # the conversation's transcript grows with it
            handle.write(b"x" * (4 * args.tokens_per_round))
        if window_used >= args.compact_at * args.window:
            out.compactions += 1
            window_used = int(args.summary * args.window)
            has_context = False
            if signals:
                observed = True
                injected(run_hook(root, env, {**base, "hook_event_name": "SessionStart", "source": "compact"}))
    return out


def markdown(outcomes: list[Outcome], args: argparse.Namespace, always: dict[bool, int]) -> str:
    lines = [
        f"Simulated session: {args.rounds} rounds, window {args.window:,} tokens, {args.tokens_per_round:,} "
        f"tokens a round, compaction at {args.compact_at:.0%} (down to {args.summary:.0%}), through the real "
        "`leslie hook claude-code` (one process per event), default `[injection]` settings otherwise.",
        "",
        "| mode | compaction signals | compactions | injections | tokens injected | vs always "
        "| rounds without context | of which after an observed compaction |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for o in outcomes:
        saving = 100.0 * (1 - o.tokens / always[o.signals]) if always[o.signals] else 0.0
        versus = "baseline" if o.mode == "always" else f"{saving:.1f} % fewer"
        lines.append(f"| {o.mode} | {'yes' if o.signals else 'no'} | {o.compactions} | {o.injections} "
                     f"| {o.tokens:,} | {versus} | {o.rounds_without} | "
                     f"{o.rounds_without_after_observed if o.signals else 'n/a'} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Run every scenario, print the table, and return 1 when a target is missed."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=300)
    parser.add_argument("--window", type=int, default=200_000, help="context window, tokens")
    parser.add_argument("--tokens-per-round", type=int, default=4_000)
    parser.add_argument("--compact-at", type=float, default=0.95, help="fraction of the window")
    parser.add_argument("--summary", type=float, default=0.10, help="fraction of the window after a compaction")
    parser.add_argument("--markdown", action="store_true", help="print a table for docs/benchmarks.md")
    args = parser.parse_args(argv)

    env = {k: v for k, v in os.environ.items() if not k.startswith("LESLIE_")}
    env["LESLIE_THREAD"] = THREAD
    env["LESLIE_RENDER_SERVER"] = "0"  # tokens, not time, are measured here: leave no server running after
    outcomes = []
    with tempfile.TemporaryDirectory(prefix="leslie-tokens-") as tmp:
        root = Path(tmp)
        make_repo(root)
        for signals in (True, False):
            for mode in ("smart", "always", "start"):
                outcomes.append(simulate(root, env, mode, signals, args))
                print(f"  {mode:6s} signals={signals!s:5s} done", file=sys.stderr)
    always = {o.signals: o.tokens for o in outcomes if o.mode == "always"}
    smart = {o.signals: o for o in outcomes if o.mode == "smart"}
    table = markdown(outcomes, args, always)
    print(machine_summary())
    print(table)
    failures = []
    for signals, outcome in smart.items():
        if outcome.tokens > 0.10 * always[signals]:
            failures.append(f"smart (signals={signals}) injected {outcome.tokens} tokens, more than 10 % of "
                            f"always's {always[signals]}")
    if smart[True].rounds_without_after_observed:
        failures.append(f"{smart[True].rounds_without_after_observed} rounds after an observed compaction "
                        "went without context")
    for failure in failures:
        print(f"MISSED: {failure}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
