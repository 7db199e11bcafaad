"""`leslie worktree add|list|remove`: a git worktree per thread (SPEC §13, `ops/worktrees.py`)."""

import sys
from typing import Annotated

import typer

from leslie.cli.common import JsonOption, RootOption, emit, open_repo, thread_arg
from leslie.cli.text import say

worktree_app = typer.Typer(name="worktree", help="Give a thread a git worktree of its own, list them, remove one.",
                           no_args_is_help=True)

ThreadArgument = Annotated[str, typer.Argument(metavar="THREAD", help="The thread: its ID or a unique prefix.",
                                               show_default=False)]


@worktree_app.command("add")
def add(
    thread: ThreadArgument,
    path: Annotated[str | None, typer.Argument(metavar="PATH", help="Where (default: the sibling folder "
                                               "<repo>.worktrees/<thread-id>).", show_default=False)] = None,
    branch: Annotated[str | None, typer.Option("--branch", metavar="NAME", help="The new branch (default: "
                                               "leslie/<thread-id>).", show_default=False)] = None,
    root: RootOption = None,
    json: JsonOption = False,
) -> None:
    """Create a git worktree from HEAD on a new branch, with THREAD as its current thread."""
    from leslie.ops import worktrees

    repo = open_repo(root)
    bound = worktrees.add(repo, thread_arg(repo, thread), path, branch)
    emit(bound.to_json(), json, lambda: say(f"{bound.thread}: worktree {bound.path} on branch {bound.branch}\n"))


@worktree_app.command("list")
def list_worktrees(root: RootOption = None, json: JsonOption = False) -> None:
    """Every thread's worktree: thread, path, branch, holder."""
    from leslie.ops import worktrees

    rows = worktrees.listed(open_repo(root))

    def human() -> None:
        if not rows:
            say("no worktrees (`leslie worktree add THREAD`)\n")
        for row in rows:
            held = row["held_by"]
            who = "-" if held is None else f"held by {held['agent']} session {held['session']}"
            gone = "" if row["present"] else "  (folder gone)"
            say(f"{row['thread']}  {row['path']}  {row['branch']}  {who}{gone}\n")

    emit(rows, json, human)


@worktree_app.command("remove")
def remove(
    thread: ThreadArgument,
    force: Annotated[bool, typer.Option("--force", help="Remove it even with uncommitted changes (lost).")] = False,
    root: RootOption = None,
    json: JsonOption = False,
) -> None:
    """Remove THREAD's worktree (refused with uncommitted changes unless --force); its branch stays."""
    from leslie.ops import worktrees

    repo = open_repo(root)
    bound = worktrees.remove(repo, thread_arg(repo, thread), force=force)
    emit(bound.to_json(), json, lambda: sys.stdout.write(f"removed {bound.path} (branch {bound.branch} kept)\n"))
