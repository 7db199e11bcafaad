"""`leslie board`: the local web view of `.leslie/` (the board's libraries load only when it runs)."""

import sys
from typing import Annotated

import typer

from leslie.cli.common import RootOption, open_repo

app = typer.Typer()


@app.command()
def board(
    host: Annotated[str, typer.Option("--host", metavar="ADDRESS",
                                      help="Address to listen on; anything but loopback shares the board.")]
    = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", metavar="PORT", help="Port to listen on (0: a free one).")] = 0,
    no_open: Annotated[bool, typer.Option("--no-open", help="Print the address, do not open a browser.")] = False,
    root: RootOption = None,
) -> None:
    """Serve a read-only web view of the threads, their graph and sessions; it follows changes live."""
    from leslie.server.child import run_in_client

    run_in_client()  # it serves until stopped: in the client's own process, not a child of the warm one
    from leslie.board.serve import serve

    def ready(url: str) -> None:
        sys.stdout.write(f"leslie board: {url} (Ctrl-C to stop)\n")
        sys.stdout.flush()

    serve(open_repo(root), host=host, port=port, open_browser=not no_open, ready=ready)

