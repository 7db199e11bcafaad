"""`leslie status`: the current thread, what its agent was last told, and what needs attention."""

import typer

from leslie.cli.common import JsonOption, RootOption, emit, open_repo
from leslie.cli.text import say

app = typer.Typer()


@app.command()
def status(root: RootOption = None, json: JsonOption = False) -> None:
    """Say where this working tree stands: the current thread, what its agent was last told, what needs
    attention (doctor problems, unapproved context commands, missing or broken agent hooks)."""
    from leslie.integrations import status as lib
    from leslie.server.watcher import asker

    data = lib.gather(open_repo(root), asker())
    emit(data, json, lambda: say("\n".join(lib.lines(data)) + "\n"))

