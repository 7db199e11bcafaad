"""What each `[context] budget_tokens` costs and saves an agent: the table of docs/context.md (issue 33).

    python benchmarks/bench_budget.py                         # demo, 40 fresh references, the fixture project
    python benchmarks/bench_budget.py --project PATH          # your own project's plans (see below)
    python benchmarks/bench_budget.py --budgets 0,4000 --rounds 100

Three repositories:
- `demo`: what `leslie demo` builds (the example tree), the thread it shows;
- `fresh`: a new repository whose thread references 40 freshly spawned threads (nothing but scaffold);
- `project`: a real project's plans. By default `benchmarks/fixtures/httpclient/` (six threads of an HTTP
  client's move to HTTP/2, written as a real project's design notes read). `--project PATH` takes either a
  repository with a `.leslie/` folder (its threads as they are; `--thread` or the thread `leslie demo` would
  show), or a folder of thread folders (each with plan.md, progress.md, design/, ...; a `manifest.json` as the
  fixture's may give titles, intents, statuses and references, else one new thread references all of them).

For each budget:
- **tokens at start**: the block injected at the session's start;
- **reads replaced**: the agent's first file reads the block makes needless: its own plan and progress and the
  referenced in-scope files, each inlined whole (a cut file still needs its read), and the assets marked
  `empty="true"` (spawn's scaffold only), which an agent need not open either (`of which empty`);
- **their cost**: what those reads would have cost in the conversation, the tool call (`Read` with the file's
  absolute path, as JSON input) and its result (the file with `cat -n` line numbers, as Claude Code's Read
  shows it);
- **per session**: over a simulated session of `--rounds` rounds (smart injection with compaction signals,
  a 200k window filled by 4k tokens a round, compaction at 95 % down to 10 %, as benchmarks/bench_tokens.py),
  the tokens injected, and the reads' cost saved (each injection comes when the window lost the files, so an
  agent would read them again); `net` is injected minus saved, against budget 0.

Tokens are counted with o200k_base (the `bpe-openai` package, whose wheel holds the vocabulary: no download)
when it is installed, else with leslie's estimate (UTF-8 bytes / 4). The estimate's error against the
tokenizer is printed too. A second table compares three ways of writing the inlined text in XML.

The session is driven through `leslie.integrations.claude_code.answer`, the function `leslie hook
claude-code` calls, in this process (one hook process per event, as bench_tokens.py does, gives the same
injections and takes minutes instead of seconds).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from lxml import etree

from leslie.context.block import render_context
from leslie.context.files import tokens_of
from leslie.ops.bootstrap import init_repository
from leslie.ops.threads import RefSpec, set_status, spawn
from leslie.store.repository import Repository

HERE = Path(__file__).resolve().parent
FIXTURE = HERE / "fixtures" / "httpclient"
BUDGETS = "0,1000,2000,4000,8000"
REPOSITORY = "/home/dev/src/project"  # where a `Read` call says the repository is

Count = Callable[[str], int]


def token_counter() -> tuple[str, Count]:
    """The tokenizer used for every count, and its name."""
    try:
        import bpe_openai
    except ImportError:
        return "leslie's estimate (UTF-8 bytes / 4): bpe-openai is not installed", estimate
    encoding = bpe_openai.get_encoding("o200k_base")
    return "o200k_base (bpe-openai)", lambda text: len(encoding.encode(text, disallowed_special=()))


def estimate(text: str) -> int:
    """leslie's own estimate (`leslie.context.files.tokens_of`)."""
    return tokens_of(len(text.encode("utf-8")))


# -- the repositories ------------------------------------------------------------------------------------

def _git_init(root: Path) -> None:
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)


def build_demo(root: Path) -> str:
    """`leslie demo --keep root`; the thread it shows."""
    from leslie.ops.demo import build_demo as demo

    return demo(keep=root).thread.id


def build_fresh(root: Path, count: int = 40) -> str:
    """A thread referencing `count` freshly spawned threads."""
    _git_init(root)
    init_repository(root)
    repo = Repository(root)
    ids = iter(_thread_ids(count + 1))
    refs = [RefSpec(spawn(repo, f"Fresh work number {i}: a task described in one line", thread_id=next(ids)).thread.id)
            for i in range(count)]
    return spawn(repo, "The agent's thread: use what the others found", refs=refs, thread_id=next(ids)).thread.id


def _thread_id(name: str) -> str:
    """A thread ID made from a folder's name."""
    import re

    slug = re.sub(r"[^a-z0-9-]+", "-", name.lower().removeprefix("thread-")).strip("-")[:40] or "x"
    return f"thread-{slug}"


def _thread_ids(count: int) -> list[str]:
    """IDs shaped as spawn makes them (`thread-` and six base-36 characters), the same at every run, so
    the token counts are too."""
    import random

    chosen = random.Random(33)
    return [f"thread-{''.join(chosen.choice('0123456789abcdefghijklmnopqrstuvwxyz') for _ in range(6))}"
            for _ in range(count)]


def build_project(root: Path, source: Path, thread: str | None) -> str:
    """A repository with the project's threads (see the module's docstring); the agent's thread."""
    _git_init(root)
    if (source / ".leslie").is_dir():
        shutil.copytree(source / ".leslie", root / ".leslie",
                        ignore=shutil.ignore_patterns("state", "__pycache__"))
        init_repository(root)
        if thread is not None:
            return thread
        from leslie.ops.demo import showcase_thread

        repo = Repository(root)
        return showcase_thread([repo.read_thread(t) for t in repo.thread_ids()]).id
    init_repository(root)
    repo = Repository(root)
    manifest_path = source / "manifest.json"
    if manifest_path.is_file():
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
        entries = manifest["threads"]
        agent = thread or manifest["agent"]
    else:  # each folder a thread; loose Markdown files the design notes of one more
        folders = sorted(p.name for p in source.iterdir() if p.is_dir() and not p.name.startswith("."))
        entries = [{"id": _thread_id(n), "folder": n, "title": n, "intent": f"The work in {n}"} for n in folders]
        notes = sorted(p for p in source.glob("*.md") if p.is_file())
        if notes:
            entries.append({"id": "thread-notes", "title": "Notes", "intent": "The project's loose notes"})
        agent = thread or "thread-agent"
        entries.append({"id": agent, "title": "The agent's thread", "intent": "Continue the project's work",
                        "refs": [[e["id"], []] for e in entries]})
    for entry in entries:
        refs = [RefSpec(target, tuple(scope)) for target, scope in entry.get("refs", [])]
        spawn(repo, entry["intent"], title=entry["title"], thread_id=entry["id"], refs=refs)
        folder = source / entry.get("folder", entry["id"])
        if entry["id"] == "thread-notes" and "folder" not in entry:
            (repo.layout.thread_dir("thread-notes") / "design").mkdir(exist_ok=True)
            for note in notes:
                shutil.copy(note, repo.layout.thread_dir("thread-notes") / "design" / note.name)
        elif folder.is_dir():
            shutil.copytree(folder, repo.layout.thread_dir(entry["id"]), dirs_exist_ok=True)
        if entry.get("status", "active") != "active":
            set_status(repo, entry["id"], entry["status"])
    if manifest_path.is_file():
        _fixed_times(repo, [entry["id"] for entry in entries])
    return agent


def _fixed_times(repo: Repository, thread_ids: list[str]) -> None:
    """Give the copied files times of their own, one second apart in manifest order (each thread's files by
    path): a checkout writes files in any order, and which referenced file is inlined first goes by its time
    (most recently changed first), so the table would differ from one clone to the next."""
    moment = 1_767_225_600  # 2026-01-01T00:00:00Z
    for thread_id in thread_ids:
        folder = repo.layout.thread_dir(thread_id)
        for path in sorted(p for p in folder.rglob("*") if p.is_file() and p.name != "thread.json"):
            moment += 1
            os.utime(path, (moment, moment))


# -- what a block saves ----------------------------------------------------------------------------------

@dataclass
class Start:
    """The block at a session's start, at one budget."""

    tokens: int
    estimated: int
    reads: int
    reads_cost: int
    empty: int
    texts: list[str] = field(default_factory=list)  # the inlined texts (for the escaping comparison)


def read_cost(path: str, text: str, count: Count) -> int:
    """Tokens of a `Read` of `path` in the conversation: the tool call and its result (`cat -n` lines). The
    absolute path is a typical one (`REPOSITORY`), not the benchmark's temporary folder: the same at every run."""
    call = json.dumps({"name": "Read", "input": {"file_path": f"{REPOSITORY}/{path}"}})
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    result = "".join(f"{number:6d}\t{line}\n" for number, line in enumerate(lines, 1))
    return count(call) + count(result)


def at_start(root: Path, thread: str, budget: int, count: Count) -> Start:
    """The block at `budget` and the reads it makes needless."""
    block = render_context(Repository(root), thread, budget=budget, cache=False)
    tree = etree.fromstring(block.encode("utf-8"))
    start = Start(count(block), estimate(block), 0, 0, 0)
    for element in tree.iter("asset", "file"):
        if element.get("empty") == "true":  # spawn's scaffold only: the agent need not open it either
            start.empty += 1
            start.reads += 1
            path = element.get("path", "")
            start.reads_cost += read_cost(path, (root / path).read_text(encoding="utf-8"), count)
            continue
        if element.get("tokens") is None or element.get("omitted") is not None:
            continue
        text = element.text or ""
        start.reads += 1
        start.reads_cost += read_cost(element.get("path", ""), text, count)
        start.texts.append(text)
    return start


@dataclass
class Session:
    """A simulated session at one budget: injections and the tokens they carried."""

    injections: int = 0
    tokens: int = 0


def simulate(root: Path, thread: str, budget: int, rounds: int, count: Count) -> Session:
    """`rounds` user prompts through the Claude Code hook (smart mode, compaction signals)."""
    from leslie.integrations.claude_code import answer

    window, per_round, compact_at, summary = 200_000, 4_000, 0.95, 0.10
    (root / ".leslie" / "config.toml").write_text(
        f'[injection]\nmode = "smart"\ncontext_window_tokens = {window}\ntokens_per_round = {per_round}\n'
        f"[context]\nbudget_tokens = {budget}\n"
        # One session after another on the same thread: without this, each would find the one before holding
        # it (`<held_by>`, SPEC §13) and pay for that element, its timestamps and the temporary path.
        "[claims]\nauto = false\n", encoding="utf-8")
    session_id = f"bench-budget-{budget}"
    transcript = root / f"{session_id}.jsonl"
    transcript.write_bytes(b"")
    base = {"session_id": session_id, "transcript_path": str(transcript), "cwd": str(root),
            "permission_mode": "default"}
    os.environ["LESLIE_THREAD"] = thread
    out = Session()
    used = 0

    def hook(payload: dict[str, object]) -> None:
        nonlocal used
        result = answer({**base, **payload}, "claude-code")
        if result.stdout:
            text = json.loads(result.stdout)["hookSpecificOutput"]["additionalContext"]
            out.injections += 1
            out.tokens += count(text)
            used += count(text)

    hook({"hook_event_name": "SessionStart", "source": "startup"})
    for number in range(1, rounds + 1):
        hook({"hook_event_name": "UserPromptSubmit", "prompt": f"round {number}"})
        used += per_round
        with transcript.open("ab") as handle:
            handle.write(b"x" * (4 * per_round))
        if used >= compact_at * window:
            used = int(summary * window)
            hook({"hook_event_name": "SessionStart", "source": "compact"})
    return out


# -- the tables ------------------------------------------------------------------------------------------

def escapings(texts: list[str], count: Count) -> dict[str, tuple[int, int]]:
    """Tokens of the inlined texts written three ways, and the entities a reader must decode in each."""
    from markupsafe import escape

    from leslie.context.render import xml_element_text

    def cdata(text: str) -> str:
        return "<![CDATA[" + text.replace("]]>", "]]]]><![CDATA[>").replace("\r", "]]>&#13;<![CDATA[") + "]]>"

    ways = {"full (attribute) escaping, before issue 33": lambda t: str(escape(t)).replace("\r", "&#13;"),
            "minimal: `&` `<` `]]>` and CR only (chosen)": xml_element_text,
            "CDATA section": cdata}
    return {name: (sum(count(way(t)) for t in texts), sum(way(t).count("&") for t in texts))
            for name, way in ways.items()}


def run(name: str, root: Path, thread: str, budgets: list[int], rounds: int, count: Count) -> list[str]:
    starts = {b: at_start(root, thread, b, count) for b in budgets}
    sessions = {b: simulate(root, thread, b, rounds, count) for b in budgets}
    base = budgets[0]
    rows = []
    for b in budgets:
        s, session = starts[b], sessions[b]
        saved = s.reads_cost * session.injections
        net = (session.tokens - saved) - (sessions[base].tokens - starts[base].reads_cost * sessions[base].injections)
        rows.append(f"| {name} | {b:,} | {s.tokens:,} | {s.reads} ({s.empty}) | {s.reads_cost:,} | "
                    f"{session.injections} | {session.tokens:,} | {saved:,} | {net:+,} |")
        print(f"  {name} budget {b}: done", file=sys.stderr)
    return rows


def main(argv: list[str] | None = None) -> int:
    """Build the repositories, measure every budget, print the tables."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--budgets", default=BUDGETS)
    parser.add_argument("--rounds", type=int, default=300)
    parser.add_argument("--project", type=Path, default=FIXTURE, help="a real project's plans (see --help)")
    parser.add_argument("--thread", help="the agent's thread in --project")
    parser.add_argument("--scenarios", default="demo,fresh,project")
    args = parser.parse_args(argv)
    budgets = sorted(int(b) for b in args.budgets.split(",") if b)
    label, count = token_counter()
    rows: list[str] = []
    texts: list[str] = []
    errors: list[tuple[int, int]] = []
    with tempfile.TemporaryDirectory(prefix="leslie-budget-") as tmp:
        for name in args.scenarios.split(","):
            root = Path(tmp) / name
            root.mkdir()
            if name == "demo":
                thread = build_demo(root)
            elif name == "fresh":
                thread = build_fresh(root)
            else:
                thread = build_project(root, args.project.resolve(), args.thread)
            rows += run(name, root, thread, budgets, args.rounds, count)
            top = at_start(root, thread, budgets[-1], count)
            texts += top.texts
            errors += [(at_start(root, thread, b, count).estimated, at_start(root, thread, b, count).tokens)
                       for b in budgets]
    print(f"Tokens counted with {label}; {args.rounds} rounds a session.\n")
    print("| repository | budget | tokens at start | reads replaced (of which empty) | their cost | injections "
          "| tokens injected per session | reads' cost saved per session | net vs budget 0 |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    print("\n".join(rows))
    if label.startswith("o200k"):
        worst = max(abs(e - t) / t for e, t in errors if t)
        total = sum(e for e, _ in errors) / sum(t for _, t in errors)
        print(f"\nleslie's estimate (bytes / 4) against o200k_base over these blocks: {total:.2f} x the "
              f"tokenizer's count in total, {worst:.0%} off at worst.")
    print(f"\nThe inlined text of the blocks at budget {budgets[-1]:,}, written three ways:\n")
    print("| element text | tokens | `&` entities to decode |")
    print("|---|---:|---:|")
    for way, (tokens, entities) in escapings(texts, count).items():
        print(f"| {way} | {tokens:,} | {entities:,} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
