"""Git and watching: `merge-relations` (the merge driver), `git setup`, `gc`, `watch`."""

import json as jsonlib
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from leslie.cli.common import JsonOption, RootOption, emit, open_repo, wants_json, warn
from leslie.cli.text import say
from leslie.errors import UsageError
from leslie.terminal import visible_json

app = typer.Typer()
git_app = typer.Typer(help="Git integration: merge drivers and hooks.", no_args_is_help=True)


@app.command("merge-relations")
def merge_relations(
    base: Annotated[Path, typer.Argument(metavar="BASE", help="The common ancestor's version (git's %O).",
                                         show_default=False)],
    ours: Annotated[Path, typer.Argument(metavar="OURS", help="Our version (git's %A); the result is "
                                         "written here.", show_default=False)],
    theirs: Annotated[Path, typer.Argument(metavar="THEIRS", help="Their version (git's %B).",
                                           show_default=False)],
    kind: Annotated[str, typer.Option("--kind", help="index (thread_relations.json) or thread (a "
                                      "thread.json).")] = "index",
    path: Annotated[str | None, typer.Option("--path", help="The file's path in the tree (git's %P): a "
                                             "thread.json's id must match its folder.", show_default=False)]
    = None,
) -> None:
    """Git merge driver: merge three versions of the index (or a thread.json) semantically into OURS.

    For the index it always succeeds (exit 0) and never leaves conflict markers; a corrupt or missing
    version is replaced by a rebuild from the working tree's thread.json files, else by the base. For a
    thread.json it exits 1, leaving OURS as it was, when a version does not parse or its id is not its
    folder's.
    """
    from leslie.ops.merge import driver_worktree, merge_index_files, merge_thread_files

    if kind == "index":
        outcome = merge_index_files(base, ours, theirs, driver_worktree())
    elif kind == "thread":
        outcome = merge_thread_files(base, ours, theirs, path)
    else:
        raise UsageError(f"unknown --kind {kind!r}: expected index or thread")
    warn([f"leslie merge-relations: {note}" for note in outcome.notes])
    if not outcome.clean:
        raise typer.Exit(1)


@git_app.command("setup")
def git_setup(
    check: Annotated[bool, typer.Option("--check", help="Change nothing; exit 1 listing what is missing.")]
    = False,
    root: RootOption = None,
    json: JsonOption = False,
) -> None:
    """Register the merge drivers and install post-merge/post-checkout/post-rewrite hooks (idempotent).

    Existing hooks are kept: leslie adds a marked block that runs `leslie doctor --fix --quiet`.
    """
    from leslie.ops.gitsetup import check_git, setup_git

    repo = open_repo(root)
    if check:
        report = check_git(repo.root)
        warn([f"note: {note}" for note in report.notes])
        emit({"ok": not report.missing, "missing": report.missing}, json, lambda: say(
            "".join(f"missing: {item}\n" for item in report.missing) or "ok: git integration in place\n"))
        if report.missing:
            raise typer.Exit(1)
        return
    changed = setup_git(repo.root)
    done = [item for item in changed if not item.startswith("note: ")]
    warn([item for item in changed if item.startswith("note: ")])
    emit({"changed": done}, json, lambda: say(
        ("updated " + ", ".join(done) if done else "git integration already in place") + "\n"))


@app.command()
def gc(
    older_than: Annotated[float, typer.Option("--older-than", metavar="DAYS", help="Only tombstones deleted "
                                              "more than DAYS days ago (0: all).")] = 30.0,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="List what would be pruned; change nothing.")]
    = False,
    root: RootOption = None,
    json: JsonOption = False,
) -> None:
    """Prune old tombstones (deleted threads' folders) that no live thread references.

    A pruned tombstone no longer stops a merge of an old branch from bringing the thread back.
    """
    from leslie.ops.gc import collect_garbage

    result = collect_garbage(open_repo(root), older_than_days=older_than, dry_run=dry_run)

    def human() -> None:
        verb = "would prune" if dry_run else "pruned"
        for tombstone in result.pruned:
            say(f"{verb} {tombstone.id} (deleted {tombstone.to_json()['deleted_at']})\n")
        for tombstone in result.kept:
            say(f"kept {tombstone.id}: {tombstone.kept_because}\n")
        if not result.pruned:
            say("no tombstone to prune\n")

    emit({"dry_run": dry_run, "pruned": [t.id for t in result.pruned],
          "kept": [t.to_json() for t in result.kept]}, json, human)


@app.command()
def watch(
    json: JsonOption = False,
    polling: Annotated[bool, typer.Option("--polling", help="Use the polling observer (no inotify).")] = False,
    debounce: Annotated[float, typer.Option("--debounce", metavar="SECONDS", help="Quiet time before a "
                                            "batch of events is processed.")] = 0.2,
    rescan: Annotated[float, typer.Option("--rescan", metavar="SECONDS", help="Full rescan period "
                                          "(0: only on events).")] = 30.0,
    root: RootOption = None,
) -> None:
    """Keep the index in step with hand edits and git; report writes into done/archived/deleted threads.

    Runs until Ctrl-C or SIGTERM. --json prints one JSON event per line.
    """
    from leslie.server.child import run_in_client

    run_in_client()  # it serves until stopped: in the client's own process, not a child of the warm one
    from leslie.inject.watch import describe
    from leslie.inject.watch import watch as run_watch

    if debounce < 0 or rescan < 0:
        raise UsageError("--debounce and --rescan must be 0 or more seconds")
    as_json = wants_json(json)

    def print_event(event: dict[str, Any]) -> None:
        if as_json:
            sys.stdout.write(visible_json(jsonlib.dumps(event, sort_keys=True, ensure_ascii=False)) + "\n")
        else:
            say(describe(event) + "\n")
        sys.stdout.flush()

    code = run_watch(open_repo(root), print_event, polling=polling, debounce=debounce, rescan=rescan)
    raise typer.Exit(code)

