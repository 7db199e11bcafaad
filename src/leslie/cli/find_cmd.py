"""`leslie find TEXT`: search objectives, thread titles, intents and assets; grep's exit codes."""

import sys
from typing import Annotated

import typer

from leslie.cli.common import JsonOption, RootOption, emit, open_repo
from leslie.cli.text import cut
from leslie.terminal import visible

app = typer.Typer()

_TITLE_CHARS = 40  # a hit line names its thread; the full title is in --json and `leslie show`


@app.command()
def find(
    text: Annotated[str, typer.Argument(metavar="TEXT", help="What to look for (case-insensitive).",
                                        show_default=False)],
    root: RootOption = None,
    json: JsonOption = False,
) -> None:
    """Search objectives, thread titles, intents and thread files; one line per match (exit 1: no match)."""
    from leslie.ops.find import find as find_hits
    from leslie.server.watcher import asker

    hits = find_hits(open_repo(root), text, asker())

    def human() -> None:
        out = []
        for hit in hits:
            where = hit.where if hit.path is None and hit.where == "title" else f"{hit.where}:{hit.line}"
            out.append(f"{hit.id}  {cut(hit.title, _TITLE_CHARS)}  {visible(where)}  {visible(hit.text)}\n")
        sys.stdout.write("".join(out))

    emit([hit.to_json() for hit in hits], json, human)
    if not hits:
        raise typer.Exit(1)  # as grep: 1 when nothing matched, so `leslie find X && ...` reads naturally

