"""`leslie claim`, `leslie release` and `leslie who`: who works on what (SPEC §13, `ops/claims.py`)."""

import sys
from typing import TYPE_CHECKING, Annotated

import typer

from leslie.cli.common import JsonOption, RootOption, emit, open_repo, thread_arg
from leslie.terminal import visible

if TYPE_CHECKING:
    from leslie.store.repository import Repository

app = typer.Typer()

ThreadArgument = Annotated[str | None, typer.Argument(
    metavar="THREAD", help="The thread: its ID or a unique prefix of it (default: the current thread).",
    show_default=False)]
SessionOption = Annotated[str | None, typer.Option(
    "--session", help="The session that holds the claim (default: LESLIE_SESSION, else the agent session whose "
    "shell runs this, else cli-<login name>).",
    show_default=False)]


def _thread(repo: "Repository", text: str | None) -> str:
    from leslie.ops.threads import current_thread_id

    return current_thread_id(repo) if text is None else thread_arg(repo, text)


@app.command()
def claim(
    thread: ThreadArgument = None,
    session: SessionOption = None,
    agent: Annotated[str | None, typer.Option("--agent", help="The agent the session belongs to (shown, not "
                                              "compared; default: cli, or the agent whose shell runs this).",
                                              show_default=False)] = None,
    ttl: Annotated[int | None, typer.Option("--ttl", metavar="SECONDS", help="How long the claim stays live "
                                            "while its session is not seen (default: [claims] ttl_seconds).",
                                            show_default=False)] = None,
    root: RootOption = None,
    json: JsonOption = False,
) -> None:
    """Take a thread for one session (exit 7, nothing changed, when another live session holds it)."""
    from leslie.ops.claims import calling_session
    from leslie.ops.claims import claim as take

    repo = open_repo(root)
    who, named = calling_session(session, agent)
    held, new = take(repo, _thread(repo, thread), session=named, agent=who, ttl=ttl)
    c = held.claim
    emit({**held.to_json(), "new": new}, json, lambda: sys.stdout.write(
        f"{'claimed' if new else 'still claimed'} {c.thread} for {visible(c.agent)} session "
        f"{visible(c.session)} (ttl {c.ttl} s)\n"))


@app.command()
def release(
    thread: ThreadArgument = None,
    session: SessionOption = None,
    root: RootOption = None,
    json: JsonOption = False,
) -> None:
    """Give a thread back (exit 7, nothing changed, when another live session holds it)."""
    from leslie.ops.claims import calling_session
    from leslie.ops.claims import release as give_back

    repo = open_repo(root)
    thread_id = _thread(repo, thread)
    ended = give_back(repo, thread_id, session=calling_session(session)[1])
    emit({"thread": thread_id, "released": ended is not None,
          "claim": None if ended is None else ended.to_json()}, json, lambda: sys.stdout.write(
        f"released {thread_id}\n" if ended is not None else f"{thread_id} was not claimed\n"))


@app.command()
def who(
    root: RootOption = None,
    json: JsonOption = False,
) -> None:
    """Every live agent session and claim: thread, agent, session, worktree, branch, since, last seen."""
    from leslie.ops.claims import who as rows_of

    rows = rows_of(open_repo(root))

    def human() -> None:
        if not rows:
            sys.stdout.write("no live sessions or claims\n")
            return
        for row in rows:
            held = "claimed" if row["claimed"] else "-"
            sys.stdout.write("  ".join(visible(str(value)) for value in (
                row["thread"], row["agent"], row["session"], held, row["worktree"], row["branch"] or "-",
                f"since {row['since']}", f"seen {row['last_seen']}")) + "\n")

    emit(rows, json, human)
