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

from leslie.inject.policy import tokens_of
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
    budget: int | None = None
    reads: int = 0  # file reads still needed after the injections (see `reads_needed`)
    reads_per_injection: int = 0


def _lines(prefix: str, count: int) -> str:
    return "".join(f"{prefix} {n}: a line of realistic length, about sixty characters.\n" for n in range(count))


def make_repo(root: Path) -> None:
    """The thread (a 40-line plan, a 60-entry progress log) references all of one thread (plan, progress, two
    design files) and the plan and `design/api.md` of another: about 26 KB (6,500 tokens) an agent may need."""
    init_repository(root)
    repo = Repository(root)
    spawn(repo, "Benchmark thread: a realistic intent of a line or two.", thread_id=THREAD)
    own = repo.layout.thread_dir(THREAD)
    (own / "plan.md").write_text("# Plan\n" + _lines("- [ ] step", 40), encoding="utf-8")
    (own / "progress.md").write_text("# Progress\n" + _lines("- entry", 60), encoding="utf-8")
    for i in range(2):
        target = spawn(repo, f"Referenced thread {i}").thread.id
        folder = repo.layout.thread_dir(target)
        (folder / "design").mkdir(exist_ok=True)
        (folder / "plan.md").write_text("# Plan\n" + _lines("- [x] step", 25), encoding="utf-8")
        (folder / "progress.md").write_text("# Progress\n" + _lines("- entry", 50), encoding="utf-8")
        (folder / "design" / "api.md").write_text("# API\n" + _lines("endpoint", 60 if i else 100), encoding="utf-8")
        if not i:
            (folder / "design" / "data.md").write_text("# Data\n" + _lines("table", 65), encoding="utf-8")
        reference(repo, THREAD, target, ["plan.md", "design/api.md"] if i else [])


NEEDED = ("intent", "plan", "progress", "designs")


def reads_needed(block: str) -> int:
    """File reads (or `leslie show` calls) an agent that must know its intent, plan, latest progress and the
    referenced designs still needs after receiving `block`: one per item the block does not carry whole
    (the progress counts as carried when its newest entries are there, even cut from the start)."""
    from lxml import etree

    root = etree.fromstring(block.encode("utf-8"))
    reads = 0 if root.get("intent") else 1
    own = {a.get("type"): a for a in root.findall("asset")}
    for kind in ("plan", "progress"):
        asset = own.get(kind)
        shown = asset is not None and asset.get("tokens") is not None
        complete = shown and (asset.get("omitted") is None or kind == "progress")
        reads += 0 if complete else 1
    for ref in root.findall("ref"):
        for asset in ref.findall("asset"):
            if asset.get("type") != "design":
                continue
            if asset.get("path", "").endswith("/"):
                design_files = {"api.md", "data.md"}
                shown = {f.get("path", "").rsplit("/", 1)[-1] for f in asset.findall("file")
                         if f.get("omitted") is None}
                reads += len(design_files - shown)
            else:
                reads += 0 if asset.get("tokens") is not None and asset.get("omitted") is None else 1
    return reads


def run_hook(root: Path, env: dict[str, str], payload: dict[str, object]) -> str | None:
    proc = subprocess.run([LESLIE, "hook", "claude-code"], cwd=root, env=env, input=json.dumps(payload).encode(),
                          capture_output=True, check=False)
    if proc.returncode != 0 or proc.stderr:
        raise RuntimeError(f"hook failed ({proc.returncode}): {proc.stderr.decode(errors='replace')}")
    if not proc.stdout.strip():
        return None
    return str(json.loads(proc.stdout)["hookSpecificOutput"]["additionalContext"])


def simulate(root: Path, env: dict[str, str], mode: str, signals: bool, args: argparse.Namespace,
             budget: int | None = None) -> Outcome:
    context = f"[context]\nbudget_tokens = {budget}\n" if budget is not None else ""
    (root / ".leslie" / "config.toml").write_text(
        f'[injection]\nmode = "{mode}"\ncontext_window_tokens = {args.window}\n'
        f"tokens_per_round = {args.tokens_per_round}\n" + context, encoding="utf-8")
    session = f"bench-{mode}-{'signals' if signals else 'silent'}-{budget}"
    transcript = root / f"{session}.jsonl"
    transcript.write_bytes(b"")
    base = {"session_id": session, "transcript_path": str(transcript), "cwd": str(root),
            "permission_mode": "default"}
    window_used = 0
    has_context = False
    observed = False  # a compaction was signalled since the context was last in the window
    out = Outcome(mode, signals, args.rounds, 0, 0, 0, 0, 0, budget)

    def injected(text: str | None) -> None:
        nonlocal has_context, window_used, observed
        if text is not None:
            tokens = tokens_of(len(text.encode()))
            out.reads_per_injection = reads_needed(text)
            out.reads += out.reads_per_injection
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


def budget_table(outcomes: list[Outcome], always_injections: int) -> str:
    """The issue 14 table: what each `[context] budget_tokens` costs and what it saves the agent. Mode
    `always` at the same budget would inject the same block (the files do not change here) at every one of
    its `always_injections`."""
    lines = [
        "| `budget_tokens` | tokens a block | injections | tokens injected | vs always at that budget "
        "| reads still needed per injection | reads still needed over the session |",
        "|---|---|---|---|---|---|---|",
    ]
    for o in outcomes:
        label = "0 (paths only)" if o.budget == 0 else f"{o.budget:,}"
        block = o.tokens // max(1, o.injections)
        always = block * always_injections
        lines.append(f"| {label} | {block:,} | {o.injections} | {o.tokens:,} | "
                     f"{100.0 * (1 - o.tokens / always):.1f} % fewer | {o.reads_per_injection} | {o.reads} |")
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
    parser.add_argument("--budgets", default="0,1000,2000,4000,8000",
                        help="[context] budget_tokens values compared (smart mode, with compaction signals)")
    args = parser.parse_args(argv)

    env = {k: v for k, v in os.environ.items() if not k.startswith("LESLIE_")}
    env["LESLIE_THREAD"] = THREAD
    env["LESLIE_WARM"] = "0"  # tokens, not time, are measured here: leave no process running after
    outcomes = []
    with tempfile.TemporaryDirectory(prefix="leslie-tokens-") as tmp:
        root = Path(tmp)
        make_repo(root)
        for signals in (True, False):
            for mode in ("smart", "always", "start"):
                outcomes.append(simulate(root, env, mode, signals, args))
                print(f"  {mode:6s} signals={signals!s:5s} done", file=sys.stderr)
        budgets = [simulate(root, env, "smart", True, args, int(b)) for b in args.budgets.split(",") if b]

    always = {o.signals: o.tokens for o in outcomes if o.mode == "always"}
    smart = {o.signals: o for o in outcomes if o.mode == "smart"}
    table = markdown(outcomes, args, always)
    print(machine_summary())
    print(table)
    print()
    print("Budgets (smart mode, compaction signals; reads: of intent, plan, latest progress, referenced designs):")
    print()
    print(budget_table(budgets, next(o.injections for o in outcomes if o.mode == "always" and o.signals)))
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
