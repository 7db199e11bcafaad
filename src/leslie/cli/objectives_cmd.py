"""`leslie objective create|list|show|set-status|retitle`."""

from typing import Annotated

import typer

from leslie.cli.common import JsonOption, RootOption, emit, objective_arg, open_repo, table
from leslie.cli.text import say

objective_app = typer.Typer(help="Create, list, show objectives and change their status.", no_args_is_help=True)
IdArgument = Annotated[str, typer.Argument(metavar="ID", help="The objective (obj-...).", show_default=False)]


@objective_app.command("create")
def create(
    title: Annotated[str, typer.Argument(metavar="TITLE", help="The objective's title.", show_default=False)],
    objective_id: Annotated[str | None, typer.Option("--id", help="Choose the ID (obj-...).",
                                                     show_default=False)] = None,
    description: Annotated[str | None, typer.Option("--description", help="Longer description.",
                                                    show_default=False)] = None,
    root: RootOption = None,
    json: JsonOption = False,
) -> None:
    """Create an objective and print its ID."""
    from leslie.ops import objectives

    objective = objectives.create_objective(open_repo(root), title, objective_id=objective_id,
                                            description=description)
    emit({"id": objective.id, "objective": objective.to_json()}, json,
         lambda: say(objective.id + "\n"))


@objective_app.command("list")
def list_objectives(root: RootOption = None, json: JsonOption = False) -> None:
    """List objectives: ID, status, title and how many threads each has."""
    from leslie.ops import objectives

    repo = open_repo(root)
    found = repo.objectives()
    counts = objectives.thread_counts(repo)
    emit([{**o.to_json(), "thread_count": counts.get(o.id, 0)} for o in found], json,
         lambda: table(["ID", "Status", "Title", "Threads"],
                       [[o.id, o.status, o.title, str(counts.get(o.id, 0))] for o in found]))


@objective_app.command("show")
def show(objective_id: IdArgument, root: RootOption = None, json: JsonOption = False) -> None:
    """Show one objective and its threads."""
    from leslie.ops import objectives

    repo = open_repo(root)
    objective_id = objective_arg(repo, objective_id)
    objective = objectives.find_objective(repo, objective_id)
    index = repo.read_index()
    members = sorted(t for t, e in index.threads.items() if e.get("objective") == objective_id)
    data = {**objective.to_json(), "threads": members}
    entries = index.threads

    def human() -> None:
        from leslie.cli.text import columns, fields

        say(fields([("id", objective.id), ("title", objective.title), ("status", objective.status),
                    ("description", objective.description or "-"), ("threads", str(len(members)))]))
        if members:
            say("\n" + columns(["Thread", "Status", "Title"], [
                [tid, str(entries[tid].get("status", "")), str(entries[tid].get("title", ""))] for tid in members]))

    emit(data, json, human)


@objective_app.command("set-status")
def set_status(
    objective_id: IdArgument,
    status: Annotated[str, typer.Argument(metavar="STATUS", help="active, done or archived.",
                                          show_default=False)],
    root: RootOption = None,
    json: JsonOption = False,
) -> None:
    """Set an objective's status: active, done or archived."""
    from leslie.ops import objectives

    repo = open_repo(root)
    objective = objectives.set_objective_status(repo, objective_arg(repo, objective_id), status)
    emit({"id": objective.id, "status": objective.status}, json,
         lambda: say(f"{objective.id}: {objective.status}\n"))


@objective_app.command("retitle")
def retitle(
    objective_id: IdArgument,
    title: Annotated[str, typer.Argument(metavar="TITLE", help="The new title.", show_default=False)],
    root: RootOption = None,
    json: JsonOption = False,
) -> None:
    """Change an objective's title."""
    from leslie.ops import objectives

    repo = open_repo(root)
    objective, changed = objectives.retitle_objective(repo, objective_arg(repo, objective_id), title)
    emit({"id": objective.id, "title": objective.title, "changed": changed}, json,
         lambda: say(f"{objective.id}: {objective.title}\n"))

