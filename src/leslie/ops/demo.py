"""`leslie demo`: a throw-away git repository holding leslie's example tree, and what an agent would be told."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from leslie.errors import NotFoundError, UsageError
from leslie.store.model import Thread

EXAMPLE_DIR_NAME = ".leslie.example"


def example_tree() -> Path:
    """The packaged example `.leslie/` tree: `leslie/example` in a wheel, `.leslie.example/` in a checkout."""
    package = Path(__file__).resolve().parents[1]  # src/leslie (this module is leslie/ops/demo.py)
    for candidate in (package / "example", package.parent.parent / EXAMPLE_DIR_NAME):
        if (candidate / "thread_relations.json").is_file():
            return candidate
    raise NotFoundError("leslie's example tree is not installed (expected leslie/example in the package)")


@dataclass(frozen=True)
class DemoResult:
    """The demo repository, the thread shown and its context, and the other threads for the overview."""

    root: Path
    kept: bool
    thread: Thread
    context: str
    threads: tuple[Thread, ...]
    objectives: tuple[tuple[str, str], ...]  # (id, title)

    def to_json(self) -> dict[str, Any]:
        """The `--json` form."""
        return {
            "root": str(self.root),
            "kept": self.kept,
            "thread": self.thread.id,
            "context": self.context,
            "threads": [{"id": t.id, "title": t.title, "status": t.status, "objective": t.objective}
                        for t in self.threads],
            "objectives": [{"id": oid, "title": title} for oid, title in self.objectives],
        }


def showcase_thread(threads: list[Thread]) -> Thread:
    """The thread that shows the most: live, with both whole and scoped references (most references first)."""
    live = [t for t in threads if not t.is_tombstone]
    if not live:
        raise NotFoundError("the example tree holds no threads")

    def score(thread: Thread) -> tuple[bool, int, str]:
        scopes = thread.references.values()
        both = any(not s for s in scopes) and any(s for s in scopes)
        return (not both, -len(thread.references), thread.id)

    return min(live, key=score)


def _git(root: Path, *args: str) -> None:
    # The demo must work without a git identity configured, and never read the user's hooks or templates.
    subprocess.run(["git", "-c", "user.name=leslie demo", "-c", "user.email=demo@leslie.invalid",
                    "-c", "init.templateDir=", "-c", "commit.gpgsign=false", *args],
                   cwd=root, check=True, capture_output=True, timeout=60)


def _prepare(root: Path) -> None:
    from leslie.ops.bootstrap import init_repository

    shutil.copytree(example_tree(), root / ".leslie", ignore=shutil.ignore_patterns("state", "__pycache__"))
    (root / "README.md").write_text(
        "# Tasklight (leslie demo)\n\nA stand-in web app repository. Its `.leslie/` folder holds the working "
        "memory of the agents\nthat are adding OAuth login to it; see `leslie list`.\n", encoding="utf-8")
    try:
        _git(root, "init", "-q")
    except (OSError, subprocess.SubprocessError) as exc:
        raise NotFoundError(f"`leslie demo` needs git on PATH ({exc})") from None
    init_repository(root)
    try:
        _git(root, "add", "-A")
        _git(root, "commit", "-q", "-m", "Example repository with leslie threads")
    except (OSError, subprocess.SubprocessError):
        pass  # a commit is a nicety: the demo works the same in an uncommitted repository


def build_demo(keep: Path | None = None) -> DemoResult:
    """Build the demo repository (at `keep`, kept; else in a temp folder, removed) and render one context."""
    from leslie.context.block import render_context
    from leslie.store.repository import Repository

    if keep is not None:
        keep = keep.absolute()
        if keep.exists() and (not keep.is_dir() or any(keep.iterdir())):
            raise UsageError(f"--keep {keep}: must be a new or empty folder")
        keep.mkdir(parents=True, exist_ok=True)
        root = keep
    else:
        root = Path(tempfile.mkdtemp(prefix="leslie-demo-"))
    try:
        _prepare(root)
        repo = Repository(root)
        threads = [repo.read_thread(tid) for tid in repo.thread_ids()]
        chosen = showcase_thread(threads)
        context = render_context(repo, chosen.id)
        # Oldest first: the overview then reads as the story of the work.
        threads.sort(key=lambda t: (t.created_at, t.id))
        objectives = tuple((o.id, o.title) for o in sorted(repo.objectives(), key=lambda o: (o.created_at, o.id)))
    finally:
        if keep is None:
            shutil.rmtree(root, ignore_errors=True)
    return DemoResult(root, keep is not None, chosen, context,
                      tuple(t for t in threads if not t.is_tombstone), objectives)


def describe(result: DemoResult) -> str:
    """The human explanation printed by `leslie demo`."""
    by_id = {t.id: t for t in result.threads}
    chosen = result.thread
    lines = [
        f"leslie demo: a git repository whose .leslie/ holds {len(result.threads)} threads under "
        f"{len(result.objectives)} objectives,",
        "the working memory of agents adding OAuth login to a web app.",
        "",
    ]
    for oid, title in result.objectives:
        lines.append(f"  {oid}  {title}")
        for thread in result.threads:
            if thread.objective == oid:
                lines.append(f"    {thread.id}  [{thread.status}] {thread.title}")
    lines += [
        "",
        f"An agent working on {chosen.id} ({chosen.title!r}) is given this block at the top of its",
        f"first message (`leslie context --thread {chosen.id}`):",
        "",
        result.context.rstrip("\n"),
        "",
        "How to read it:",
        "  - the <asset> elements directly inside are the agent's own plan, progress, design/ and artifacts/:",
        "    it reads and writes them, and creates the plan if none exists yet;",
    ]
    for target, scope in sorted(chosen.references.items()):
        title = by_id[target].title if target in by_id else target
        if scope:
            lines.append(f"  - <ref thread=\"{target}\"> ({title}): only {', '.join(scope)}, read-only;")
        else:
            lines.append(f"  - <ref thread=\"{target}\"> ({title}): the whole thread, read-only;")
    lines += [
        "  - references are one level deep, and deleted threads never appear.",
        "The AGENTS.md that `leslie init` wrote there teaches agents these rules.",
        "",
    ]
    if result.kept:
        lines += [f"Demo repository: {result.root}",
                  f"Try: cd {result.root} && leslie list && leslie show {chosen.id}", ""]
    else:
        lines += [f"Demo repository: {result.root} (removed again; `leslie demo --keep DIR` keeps one to explore)",
                  ""]
    return "\n".join(lines)

