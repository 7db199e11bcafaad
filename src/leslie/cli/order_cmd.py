"""`leslie after`, `leslie ready` and `leslie next`: order between threads (SPEC §14, `ops/order.py`)."""

import contextlib
import sys
from typing import TYPE_CHECKING, Annotated

import typer

from leslie.cli.common import JsonOption, RootOption, emit, objective_arg, open_repo, thread_arg
from leslie.cli.text import say
from leslie.terminal import visible

if TYPE_CHECKING:
    from leslie.store.repository import Repository

app = typer.Typer()

ObjectiveOption = Annotated[str | None, typer.Option(
    "--objective", help="Only the threads of this objective: its ID, a unique prefix, or its title.",
    show_default=False)]


@app.command()
def after(
    thread: Annotated[str, typer.Argument(metavar="THREAD", help="The thread that waits: its ID or a unique "
                                          "prefix of it.", show_default=False)],
    on: Annotated[str, typer.Option("--on", help="The thread it comes after (it is not ready before that one is "
                                    "done or deleted).", show_default=False)],
    remove: Annotated[bool, typer.Option("--remove", help="Remove the edge instead of adding it.")] = False,
    root: RootOption = None,
    json: JsonOption = False,
) -> None:
    """Make THREAD come after another thread (exit 2 for a self-edge or a cycle, naming it; 3: no such thread)."""
    from leslie.ops import order

    repo = open_repo(root)
    thread_id = thread_arg(repo, thread)
    predecessor = thread_arg(repo, on, "predecessor thread ID")
    change = order.remove_after if remove else order.add_after
    outcome = change(repo, thread_id, predecessor)
    verb = ("no longer comes after" if remove else "comes after") if outcome.changed else (
        "did not come after" if remove else "already comes after")
    emit({"thread": thread_id, "on": predecessor, "changed": outcome.changed, "after": list(outcome.thread.after)},
         json, lambda: say(f"{thread_id} {verb} {predecessor}\n"))


@app.command()
def ready(
    objective: ObjectiveOption = None,
    root: RootOption = None,
    json: JsonOption = False,
) -> None:
    """The threads an agent can start now: active, every thread they come after done or deleted, and held by
    no live session; oldest first."""
    from leslie.ops import order

    repo = open_repo(root)
    found = order.ready(repo, objective=None if objective is None else objective_arg(repo, objective))

    def human() -> None:
        for standing in found:
            sys.stdout.write(f"{standing.thread}  {visible(standing.title)}\n")

    emit([s.to_json() for s in found], json, human)


@app.command(name="next")
def next_thread(
    objective: ObjectiveOption = None,
    session: Annotated[str | None, typer.Option(
        "--session", help="The session that takes the thread (default: LESLIE_SESSION, else the agent session "
        "whose shell runs this, else cli-<login name>).", show_default=False)] = None,
    agent: Annotated[str | None, typer.Option(
        "--agent", help="The agent the session belongs to (shown, not compared; default: cli, or the agent whose "
        "shell runs this).", show_default=False)] = None,
    root: RootOption = None,
    json: JsonOption = False,
) -> None:
    """Claim the first ready thread for this session, make it the current thread and print its ID (exit 3 when
    none is ready). Concurrent calls never get the same thread."""
    from leslie.inject.injector import move_session
    from leslie.ops import order
    from leslie.ops.claims import calling_session

    repo = open_repo(root)
    who, named = calling_session(session, agent)
    taken = order.take_next(repo, session=named, agent=who,
                            objective=None if objective is None else objective_arg(repo, objective))
    left = move_session(str(repo.root), who, named, taken.claim.thread)  # an agent's own hook session follows
    if left is not None and left != taken.claim.thread:
        _give_back(repo, left, named)
    emit({**taken.to_json(), "id": taken.claim.thread}, json, lambda: say(f"{taken.claim.thread}\n"))


def _give_back(repo: "Repository", thread_id: str, session: str) -> None:
    """End `session`'s claim on the thread it left, if it holds one (it works on one thread at a time)."""
    from leslie.errors import LeslieError
    from leslie.ops.claims import holder, release

    held = holder(repo, thread_id)
    if held is not None and held.claim.session == session:
        with contextlib.suppress(LeslieError, OSError):
            release(repo, thread_id, session=session)
