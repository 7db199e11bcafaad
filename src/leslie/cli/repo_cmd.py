"""Repository-wide commands: init, doctor, relations, agents-md."""

import sys
from typing import Annotated

import typer

from leslie.cli.common import JsonOption, RootOption, emit, open_repo, print_kept, warn_notes
from leslie.cli.text import say, say_err
from leslie.errors import CheckFailed, UsageError

app = typer.Typer()


@app.command()
def init(
    git: Annotated[bool, typer.Option("--git", help="Also register the merge driver and git hooks.")] = False,
    claude: Annotated[bool, typer.Option("--claude", help="Also add @AGENTS.md to CLAUDE.md.")] = False,
    root: RootOption = None,
    json: JsonOption = False,
) -> None:
    """Create .leslie/, its .gitignore, the .gitattributes line and the AGENTS.md block (idempotent)."""
    from leslie.cli.common import GlobalOptions
    from leslie.ops.bootstrap import choose_init_root, init_repository

    where = choose_init_root(root if root is not None else GlobalOptions.root)
    if git:
        from leslie.ops.gitsetup import prepare_git_setup

        prepare_git_setup(where)  # not a git work tree: refused before anything is written
    result = init_repository(where, claude=claude)
    warn_notes(result.warnings)
    changed = list(result.changed)
    if git:
        from leslie.ops.gitsetup import setup_git

        changed += [item for item in setup_git(result.root) if item not in changed]
    emit({"root": str(result.root), "changed": changed}, json, lambda: say(
        f"leslie initialised in {result.root}" + (f" ({', '.join(changed)})" if changed else " (nothing to do)")
        + "\n"))


@app.command()
def doctor(
    fix: Annotated[bool, typer.Option("--fix", help="Rebuild the index, drop dangling references, "
                                      "remove stale temp files (backing up what it replaces).")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Print only problems that remain.")] = False,
    root: RootOption = None,
    json: JsonOption = False,
) -> None:
    """Check every invariant of the index and the state files; exit 1 when problems remain."""
    from leslie.integrations.hooks_status import check_for_doctor
    from leslie.ops.doctor import run_doctor

    repo = open_repo(root)
    report = run_doctor(repo, fix=fix)
    check_for_doctor(repo, report)  # the agents' hooks and the write guard's record: not the library's

    def human() -> None:
        if not quiet:
            for line in report.fixed:
                say(f"fixed: {line}\n")
        for line in report.problems:
            say(f"problem: {line}\n")
        if not quiet:
            for line in report.notes:
                say(f"note: {line}\n")
        if report.ok and not quiet:
            say("ok: index consistent with every thread.json\n")

    emit({"ok": report.ok, "problems": report.problems, "fixed": report.fixed, "notes": report.notes}, json, human)
    if not report.ok:
        raise typer.Exit(1)


@app.command()
def relations(
    fmt: Annotated[str | None, typer.Option("--format", help="json (default), mermaid or dot.",
                                            show_default=False)] = None,
    root: RootOption = None,
    json: JsonOption = False,
) -> None:
    """Print the reference graph: the index as JSON, or a Mermaid or Graphviz dot graph (titles, statuses,
    objectives)."""
    from leslie.store.relations import format_relations

    if json and fmt not in (None, "json"):  # --json is --format json; a contradiction is an error
        raise UsageError(f"--json and --format {fmt} disagree: give one of them")
    fmt = fmt or "json"
    if fmt not in ("json", "mermaid", "dot"):
        raise UsageError(f"unknown --format {fmt!r}: expected json, mermaid or dot")
    repo = open_repo(root)
    if fmt == "json":
        from leslie.store.derived import printable_as_stored
        from leslie.terminal import visible_json

        index = repo.read_index()
        sys.stdout.write(visible_json(format_relations(index, as_stored=printable_as_stored(repo, index))))
        return
    from leslie.ops.graphs import dot_piece, mermaid_piece, render_dot, render_mermaid
    from leslie.ops.tree_drawing import TreeDrawing
    from leslie.server.watcher import asker

    render, piece = (render_mermaid, mermaid_piece) if fmt == "mermaid" else (render_dot, dot_piece)
    # Kept in the derived store while the tree stays as it is, and each thread's piece while it does.
    drawing = TreeDrawing(repo, fmt, ask=asker(), piece=piece)
    print_kept(drawing, lambda: drawing.draw(lambda tree, pieces: [render(tree, pieces)]))


@app.command("agents-md")
def agents_md(
    check: Annotated[bool, typer.Option("--check", help="Exit 1 if the block is missing or outdated.")] = False,
    claude: Annotated[bool, typer.Option("--claude", help="Also add @AGENTS.md to CLAUDE.md.")] = False,
    root: RootOption = None,
    json: JsonOption = False,
) -> None:
    """Write or update leslie's block in AGENTS.md (nothing outside its markers is touched)."""
    from leslie.context.agents_md import check_agents_md, update_agents_md

    repo = open_repo(root)
    notes: list[str] = []
    if check:
        try:
            check_agents_md(repo.root, warnings=notes)
        except CheckFailed as exc:
            warn_notes(notes)
            problem = exc.message
            emit({"ok": False, "problem": problem}, json, lambda: say_err(problem + "\n"))
            raise typer.Exit(1) from None
        warn_notes(notes)
        emit({"ok": True}, json, lambda: say("AGENTS.md is up to date\n"))
        return
    changed = update_agents_md(repo.root, claude=claude, warnings=notes)
    warn_notes(notes)
    emit({"changed": changed}, json, lambda: say(
        ("updated " + ", ".join(changed) if changed else "AGENTS.md is up to date") + "\n"))

