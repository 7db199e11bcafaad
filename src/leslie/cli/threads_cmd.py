"""Thread commands: spawn, reference, unreference, list, show, set-status and its shortcuts, retitle, rm, switch,
edit."""

import sys
from typing import TYPE_CHECKING, Annotated, Any

import typer

from leslie.cli.common import (
    JsonOption,
    RootOption,
    ThreadOption,
    confirm,
    emit,
    objective_arg,
    open_repo,
    print_kept,
    thread_arg,
    wants_json,
    warn,
    warn_notes,
)
from leslie.cli.text import say, say_err
from leslie.errors import UsageError

if TYPE_CHECKING:
    from leslie.ops.threads import RefSpec
    from leslie.store.model import Thread
    from leslie.store.relations import Index
    from leslie.store.repository import Repository

app = typer.Typer()

IdArgument = Annotated[str, typer.Argument(metavar="ID", help="The thread.", show_default=False)]
ScopeOption = Annotated[
    list[str] | None,
    typer.Option("--scope", help="A path in the target thread's folder (repeatable); none: the whole thread.",
                 show_default=False),
]
TargetArgument = Annotated[
    str | None,
    typer.Argument(metavar="ID[:SCOPE]", help="The target thread, or one path of it (ID:SCOPE).",
                   show_default=False),
]
TargetOption = Annotated[
    str | None,
    typer.Option("--target", help="The target thread, ID or ID:SCOPE (the same as the argument).",
                 show_default=False),
]


def _thread_json(thread: "Thread", index: "Index | None" = None) -> dict[str, Any]:
    data = thread.to_json()
    if index is not None:
        data["referenced_by"] = sorted(index.referrers(thread.id))  # one entry, not the whole index decoded
    return data


@app.command()
def spawn(
    intent: Annotated[str, typer.Option("--intent", help="What the thread is for (multi-line allowed).",
                                        show_default=False)],
    title: Annotated[str | None, typer.Option("--title", help="Short title (default: from the intent).",
                                              show_default=False)] = None,
    objective: Annotated[str | None, typer.Option(
        "--objective", help="The objective: its ID, a unique prefix, or its title (default: the parent's, else the "
        "only active objective, else obj-default).", show_default=False)] = None,
    ref: Annotated[list[str] | None, typer.Option("--ref", help="Reference ID or ID:SCOPE (repeatable).",
                                                  show_default=False)] = None,
    scope: Annotated[list[str] | None, typer.Option("--scope", help="A path of the one --ref's thread "
                     "(repeatable; the same as --ref ID:SCOPE).", show_default=False)] = None,
    parent: Annotated[str | None, typer.Option("--parent", help="The thread that spawns this one.",
                                               show_default=False)] = None,
    after: Annotated[list[str] | None, typer.Option("--after", help="A thread the new one comes after: it is not "
                                                    "ready before that one is done (repeatable).",
                                                    show_default=False)] = None,
    thread_id: Annotated[str | None, typer.Option("--id", help="Choose the ID (thread-...).",
                                                  show_default=False)] = None,
    context: Annotated[bool, typer.Option("--context", help="Also print the new thread's <thread_context>.")]
    = False,
    worktree: Annotated[bool, typer.Option("--worktree", help="Also give the thread a git worktree of its own, as "
                                           "`leslie worktree add` does (at PATH when one follows).")] = False,
    worktree_path: Annotated[str | None, typer.Argument(
        metavar="PATH", help="With --worktree: where the worktree goes (default: <repo>.worktrees/<thread-id>).",
        show_default=False)] = None,
    root: RootOption = None,
    json: JsonOption = False,
) -> None:
    """Create a thread (status active) and print its ID."""
    from leslie.ops import threads

    if worktree_path is not None and not worktree:
        raise UsageError(f"unexpected argument {worktree_path!r}: a PATH goes with --worktree")
    repo = open_repo(root)
    refs = threads.spawn_refs(ref or [], scope or [], repo)
    outcome = threads.spawn(repo, intent, title=title, refs=refs, thread_id=thread_id,
                            objective=None if objective is None else objective_arg(repo, objective),
                            parent=None if parent is None else thread_arg(repo, parent, "parent thread ID"),
                            after=[thread_arg(repo, text, "predecessor thread ID") for text in after or []])
    warn(outcome.warnings)
    rendered = _render_context(repo, outcome.thread.id) if context else None
    data: dict[str, Any] = {"id": outcome.thread.id, "thread": _thread_json(outcome.thread)}
    if rendered is not None:
        data["context"] = rendered
    if worktree:
        from leslie.ops import worktrees

        data["worktree"] = worktrees.add(repo, outcome.thread.id, worktree_path).to_json()

    def human() -> None:
        say(outcome.thread.id + "\n")
        if worktree:
            say(f"worktree {data['worktree']['path']} on branch {data['worktree']['branch']}\n")
        if rendered is not None:
            sys.stdout.write("\n" + rendered)  # XML for an agent, as `leslie context` prints it

    emit(data, json, human)


def _render_context(repo: "Repository", thread_id: str) -> str:
    from leslie.context.block import render_context

    notes: list[str] = []
    try:
        text = render_context(repo, thread_id, warnings=notes)
    finally:
        warn_notes(notes)
    return text if text.endswith("\n") else text + "\n"


def _target(repo: "Repository", argument: str | None, option: str | None, scope: list[str] | None) -> "RefSpec":
    from leslie.ops import threads

    return threads.target_spec([text for text in (argument, option) if text is not None], scope or [], repo)


@app.command()
def reference(
    target_arg: TargetArgument = None,
    target_opt: TargetOption = None,
    scope: ScopeOption = None,
    thread: ThreadOption = None,
    root: RootOption = None,
    json: JsonOption = False,
) -> None:
    """Add a read-only reference from the current thread to ID, or to ID:SCOPE (--scope adds paths)."""
    from leslie.ops import threads

    repo = open_repo(root)
    spec = _target(repo, target_arg, target_opt, scope)
    target = spec.target
    source = threads.current_thread_id(repo, thread)
    outcome = threads.reference(repo, source, target, spec.scope)
    warn(outcome.warnings)
    scope_now = outcome.thread.references.get(target, ())
    emit({"changed": outcome.changed, "thread": source, "target": target, "scope": list(scope_now)}, json,
         lambda: say(f"{source} -> {target}" + (f" [{', '.join(scope_now)}]" if scope_now else
                     " [whole thread]") + ("" if outcome.changed else " (unchanged)") + "\n"))


@app.command()
def unreference(
    target_arg: TargetArgument = None,
    target_opt: TargetOption = None,
    scope: ScopeOption = None,
    thread: ThreadOption = None,
    root: RootOption = None,
    json: JsonOption = False,
) -> None:
    """Remove the current thread's reference to ID, or only the paths given as ID:SCOPE or --scope."""
    from leslie.ops import threads

    repo = open_repo(root)
    spec = _target(repo, target_arg, target_opt, scope)
    target = spec.target
    source = threads.current_thread_id(repo, thread)
    outcome = threads.unreference(repo, source, target, spec.scope)
    warn(outcome.warnings)
    remaining = outcome.thread.references.get(target)
    emit({"changed": outcome.changed, "thread": source, "target": target,
          "scope": None if remaining is None else list(remaining)}, json,
         lambda: say(
             (f"{source} no longer references {target}" if remaining is None
              else f"{source} -> {target} [{', '.join(remaining) or 'whole thread'}]")
             + ("" if outcome.changed else " (unchanged)") + "\n"))


@app.command("list")
def list_threads(
    objective: Annotated[list[str] | None, typer.Option(
        "--objective", metavar="OBJECTIVE", help="Only this objective's threads: its ID, a unique prefix of it, or "
        "its exact title (repeatable: any of them).", show_default=False)] = None,
    status: Annotated[list[str] | None, typer.Option(
        "--status", metavar="STATUS", help="Only threads with this status: active, paused, done or archived. "
        "Repeatable, or comma-separated: any of them.", show_default=False)] = None,
    sort: Annotated[str, typer.Option("--sort", metavar="KEY", help="Order: activity (newest first), created "
                                      "(newest first), title, id or status.")] = "activity",
    limit: Annotated[int | None, typer.Option("--limit", metavar="N", help="Show at most N threads (N ≥ 1).",
                                              show_default=False)] = None,
    plain: Annotated[bool, typer.Option("--plain", help="One tab-separated line per thread, no header, nothing "
                                        "cut (the default when stdout is not a terminal).")] = False,
    tree: Annotated[bool, typer.Option("--tree", help="Objectives → threads → references, as a tree.")] = False,
    root: RootOption = None,
    json: JsonOption = False,
) -> None:
    """List threads grouped by objective, newest activity first (a table on a terminal, plain lines piped)."""
    from leslie.ops.listing import Listing, Row, group_rows, parse_filters

    repo = open_repo(root)
    filters = parse_filters(repo, statuses=status or [], objectives=objective or [], sort=sort, limit=limit)
    if tree:
        _print_tree(repo, json, filters.objectives or None, filters.statuses or None)
        return
    from leslie.cli.list_view import json_chunks, plain_chunks, table_form
    from leslie.ops.claims import live_claims
    from leslie.server.watcher import asker

    # Every form is kept in the derived store for the next run while nothing it shows changed.
    if wants_json(json):  # terminal-safe as it is (`visible_json` where needed)
        holders = {held.claim.thread: held.to_json() for held in live_claims(repo)}
        listing = Listing(repo, filters, name="json", also=holders, ask=asker())
        print_kept(listing, lambda: json_chunks(listing.rows(), holders))
        return
    if plain or not sys.stdout.isatty():
        listing = Listing(repo, filters, name="plain", intents=False, ask=asker())
        print_kept(listing, lambda: plain_chunks(listing.rows()))
        return
    also, draw = table_form({held.claim.thread: f"{held.claim.agent} session {held.claim.session}"
                             for held in live_claims(repo)})
    listing = Listing(repo, filters, name="table", also=also, intents=False, ask=asker())
    # Plain tuples made Rows only for the table, which groups them; no intents, which it does not show.
    print_kept(listing, lambda: [draw(group_rows(repo, list(map(Row._make, listing.rows())), filters.sort))])


def _print_tree(repo: "Repository", json: bool, objective: frozenset[str] | None,
                status: frozenset[str] | None) -> None:
    """The tree: on a terminal fitted and coloured; piped, plain text or one line of JSON; each kept by the derived
    store for the next run while the tree stays as it is (`ops.tree_drawing.TreeDrawing`). The indented JSON a
    terminal gets with `--json` is drawn each time."""
    from leslie.cli.tree_view import json_lines, json_piece, plain_lines, plain_piece, terminal_form
    from leslie.ops.tree_drawing import TreeDrawing, load_tree
    from leslie.server.watcher import asker

    if sys.stdout.isatty() and wants_json(json):
        shape = load_tree(repo, objective=objective, status=status, ask=asker())
        document = shape.to_json()
        del shape  # not held while the document is encoded
        emit(document, True)
        return
    if sys.stdout.isatty():
        name, piece, lines = terminal_form()
    elif wants_json(json):
        name, piece, lines = "json", json_piece, json_lines
    else:
        name, piece, lines = "plain", plain_piece, plain_lines
    drawing = TreeDrawing(repo, name, objective=objective, status=status, ask=asker(), piece=piece)
    print_kept(drawing, lambda: drawing.draw(lines))


@app.command()
def show(
    thread_id: Annotated[str, typer.Argument(metavar="ID", help="The thread to show.", show_default=False)],
    root: RootOption = None,
    json: JsonOption = False,
) -> None:
    """Show one thread: title, status, objective, intent, references and who references it, and where it stands
    in the order (what it comes after, what comes after it: ready or blocked)."""
    from leslie.store.model import validate_thread_id

    repo = open_repo(root)
    thread_id = validate_thread_id(thread_arg(repo, thread_id))
    thread = repo.read_thread(thread_id)
    index = repo.read_index()
    data = _thread_json(thread, index)
    data["path"] = repo.layout.relative(repo.layout.thread_dir(thread_id)) + "/"
    from leslie.ops.claims import holder

    held = holder(repo, thread_id)
    data["held_by"] = None if held is None else held.to_json()
    first, then = index.order(thread_id)
    if first or then:  # only a thread in the order (SPEC §14): a show without order keeps its exact shape
        from leslie.ops.order import waiting_for

        waits = waiting_for(index, thread_id)
        data["before"] = sorted(then)
        data["waiting_for"] = list(waits)
        data["order"] = None if thread.status != "active" else "blocked" if waits else \
            "held" if held is not None else "ready"

    def human() -> None:
        from leslie.cli.text import fields

        objective = repo.objective_title(thread.objective)
        rows = [("id", thread.id), ("title", thread.title), ("status", thread.status),
                ("objective", "-" if thread.objective is None else
                 f"{objective} ({thread.objective})" if objective else thread.objective),
                ("spawned by", thread.spawned_by or "-"), ("created", thread.created_at),
                ("folder", data["path"]), ("intent", thread.intent)]
        rows += [("references", f"{target} [{', '.join(scope) or 'whole thread'}]")
                 for target, scope in sorted(thread.references.items())]
        rows += [("referenced by", ", ".join(data["referenced_by"]) or "-")]
        if "order" in data:
            def listed(ids: list[str]) -> str:
                return ", ".join(f"{t} ({(index.entry(t) or {}).get('status', 'deleted')})" for t in ids) or "-"

            rows += [("after", listed(list(thread.after))), ("before", listed(data["before"]))]
            if data["order"] is not None:
                rows += [("order", data["order"] + (f": waits for {', '.join(data['waiting_for'])}"
                                                    if data["waiting_for"] else ""))]
        rows += [("held by", "-" if held is None else f"{held.claim.agent} session {held.claim.session} "
                  f"({held.claim.worktree}, since {held.claim.since}, last seen {held.last_seen})")]
        say(fields(rows))

    emit(data, json, human)


def _apply_status(thread_id: str, status: str, root: str | None, json: bool) -> None:
    from leslie.ops import threads

    repo = open_repo(root)
    thread_id = thread_arg(repo, thread_id)
    outcome = threads.set_status(repo, thread_id, status)
    emit({"id": thread_id, "status": outcome.thread.status, "changed": outcome.changed}, json,
         lambda: say(f"{thread_id}: {outcome.thread.status}\n"))


@app.command("set-status")
def set_status(
    thread_id: IdArgument,
    status: Annotated[str, typer.Argument(metavar="STATUS", help="active, paused, done or archived.",
                                          show_default=False)],
    root: RootOption = None,
    json: JsonOption = False,
) -> None:
    """Set a thread's status: active, paused, done or archived."""
    _apply_status(thread_id, status, root, json)


@app.command()
def done(thread_id: IdArgument, root: RootOption = None, json: JsonOption = False) -> None:
    """Mark a thread done (shortcut for set-status ID done)."""
    _apply_status(thread_id, "done", root, json)


@app.command()
def pause(thread_id: IdArgument, root: RootOption = None, json: JsonOption = False) -> None:
    """Pause a thread (shortcut for set-status ID paused)."""
    _apply_status(thread_id, "paused", root, json)


@app.command()
def resume(thread_id: IdArgument, root: RootOption = None, json: JsonOption = False) -> None:
    """Make a thread active again (set-status ID active)."""
    _apply_status(thread_id, "active", root, json)


@app.command()
def archive(thread_id: IdArgument, root: RootOption = None, json: JsonOption = False) -> None:
    """Archive a thread (shortcut for set-status ID archived)."""
    _apply_status(thread_id, "archived", root, json)


@app.command()
def retitle(
    thread_id: IdArgument,
    title: Annotated[str, typer.Argument(metavar="TITLE", help="The new title.", show_default=False)],
    root: RootOption = None,
    json: JsonOption = False,
) -> None:
    """Change a thread's title."""
    from leslie.ops import threads

    repo = open_repo(root)
    thread_id = thread_arg(repo, thread_id)
    outcome = threads.retitle(repo, thread_id, title)
    emit({"id": thread_id, "title": outcome.thread.title, "changed": outcome.changed}, json,
         lambda: say(f"{thread_id}: {outcome.thread.title}\n"))


@app.command()
def rm(
    thread_id: Annotated[str, typer.Argument(metavar="ID", help="The thread to delete.", show_default=False)],
    force: Annotated[bool, typer.Option("--force", help="Also remove other threads' references to it.")] = False,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Say what would happen; change nothing.")] = False,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask, even on a terminal.")] = False,
    root: RootOption = None,
    json: JsonOption = False,
) -> None:
    """Delete a thread, leaving a tombstone; refused while referenced unless --force.

    On a terminal it first shows what would go and asks; --yes skips the question. Without a terminal on
    stdin (a script, a pipe) it does not ask.
    """
    from leslie.ops import threads

    repo = open_repo(root)
    thread_id = thread_arg(repo, thread_id)  # a prefix names the thread before the question shows it
    if not dry_run and not yes and sys.stdin.isatty():
        _confirm_removal(repo, thread_id, force)
    outcome = threads.remove(repo, thread_id, force=force, dry_run=dry_run)
    data = {"id": thread_id, "dry_run": dry_run, **outcome.detail}

    def human() -> None:
        verb = "would delete" if dry_run else "deleted"
        say(f"{verb} {thread_id}\n")
        for source in outcome.detail["referenced_by"]:
            say(f"  {'would remove' if dry_run else 'removed'} reference from {source}\n")
        for path in outcome.detail["files"]:
            say(f"  {'would remove' if dry_run else 'removed'} {path}\n")

    emit(data, json, human)


def _confirm_removal(repo: "Repository", thread_id: str, force: bool) -> None:
    """Show what `rm` would delete and ask; a "no" changes nothing and exits 1."""
    from leslie.ops import threads

    preview = threads.remove(repo, thread_id, force=force, dry_run=True)  # refusals come before the question
    for source in preview.detail["referenced_by"]:
        say_err(f"  would remove the reference from {source}\n")
    for path in preview.detail["files"]:
        say_err(f"  would remove {path}\n")
    if not confirm(f"Delete thread {thread_id} ({preview.thread.title})?"):
        say_err(f"{thread_id} not deleted; nothing changed\n")
        raise typer.Exit(1)


@app.command()
def switch(
    thread_id: Annotated[str | None, typer.Argument(metavar="ID", help="The thread to make current; none: "
                                                    "print the current thread.", show_default=False)] = None,
    root: RootOption = None,
    json: JsonOption = False,
) -> None:
    """Record the current thread for this working tree; without ID, print the current thread."""
    from leslie.ops import threads

    repo = open_repo(root)
    if thread_id is None:
        _print_current(repo, json)
        return
    thread = threads.switch(repo, thread_arg(repo, thread_id))
    emit({"current_thread": thread.id}, json, lambda: say(f"current thread: {thread.id}\n"))


def _print_current(repo: "Repository", json: bool) -> None:
    from leslie.ops import threads

    current = threads.current_thread(repo)
    if current is None:
        emit({"current_thread": None}, json, lambda: say_err(
            "no current thread: run `leslie switch ID` (or set LESLIE_THREAD)\n"))
        raise typer.Exit(1)
    thread = current.thread
    emit({"current_thread": thread.id, "title": thread.title, "status": thread.status, "source": current.source},
         json, lambda: say(f"current thread: {thread.id} ({thread.title})"
                           + (" from LESLIE_THREAD" if current.source == "LESLIE_THREAD" else "")
                           + "\n"))


@app.command()
def edit(
    thread_id: Annotated[str, typer.Argument(metavar="ID", help="The thread to edit.", show_default=False)],
    title: Annotated[str | None, typer.Option("--title", help="The new title.", show_default=False)] = None,
    intent: Annotated[str | None, typer.Option("--intent", help="The new intent (multi-line allowed).",
                                               show_default=False)] = None,
    objective: Annotated[str | None, typer.Option("--objective", help="Move the thread to this objective (its ID, a "
                                                  "unique prefix, or its title).", show_default=False)] = None,
    no_objective: Annotated[bool, typer.Option("--no-objective", help="Leave the thread without an objective.")]
    = False,
    root: RootOption = None,
    json: JsonOption = False,
) -> None:
    """Change a thread's title, intent or objective; with no option, edit them in $EDITOR (else $VISUAL)."""
    if objective is not None and no_objective:
        raise UsageError("--objective and --no-objective disagree: give one of them")
    from leslie.ops import threads
    from leslie.store.model import validate_thread_id

    repo = open_repo(root)
    before = repo.read_live_thread(validate_thread_id(thread_id))
    if title is None and intent is None and objective is None and not no_objective:
        from leslie.ops.editing import edit_in_editor
        from leslie.server.child import run_in_client

        run_in_client()  # the editor gets the terminal as the client's own child (job control, resizing)

        outcome = edit_in_editor(repo, thread_id)
    else:
        outcome = threads.edit(repo, thread_id, title=title, intent=intent,
                               objective=None if no_objective else objective_arg(repo, objective)
                               if objective is not None else threads.UNCHANGED)
    after = outcome.thread
    fields = [name for name in ("title", "intent", "objective") if getattr(before, name) != getattr(after, name)]
    emit({"id": thread_id, "changed": outcome.changed, "fields": fields, "thread": _thread_json(after)}, json,
         lambda: say(f"{thread_id}: " + (f"changed {', '.join(fields)}" if outcome.changed
                                         else "unchanged") + "\n"))

