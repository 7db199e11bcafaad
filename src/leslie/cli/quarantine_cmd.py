"""`leslie quarantine list|restore`: what the write guard took out of the way, and bringing it back
(`guard/quarantine.py`)."""

from typing import Annotated

import typer

from leslie.cli.common import JsonOption, RootOption, emit, open_repo
from leslie.cli.text import say

quarantine_app = typer.Typer(name="quarantine", help="List what the write guard moved to its quarantine, and "
                             "bring a file back.", no_args_is_help=True)


@quarantine_app.command("list")
def list_kept(root: RootOption = None, json: JsonOption = False) -> None:
    """Every entry in the quarantine, newest first: its path, when, and where it is kept."""
    from leslie.guard import quarantine

    entries = quarantine.listed(str(open_repo(root).root))

    def human() -> None:
        if not entries:
            say("the quarantine is empty\n")
        for entry in entries:
            say(f"{entry.path}  {entry.kind}  {entry.when}  kept in {entry.where}\n")
        if entries:
            say("bring one back with `leslie quarantine restore PATH`\n")

    emit([entry.to_json() for entry in entries], json, human)


@quarantine_app.command("restore")
def restore(
    path: Annotated[str, typer.Argument(metavar="PATH", help="The file as it was (.leslie/threads/ID/plan.md: its "
                                        "newest entry), or an entry's path in the quarantine.", show_default=False)],
    root: RootOption = None,
    json: JsonOption = False,
) -> None:
    """Put a quarantined file back where it was; the version there now goes to the quarantine in its turn."""
    from leslie.guard import quarantine, tripwire
    from leslie.store.files import lock_timeout

    where = str(open_repo(root).root)
    with tripwire.index_lock(where, lock_timeout()):
        done = quarantine.restore(where, quarantine.find(where, path))
    entry = done.entry

    def human() -> None:
        say(f"restored {entry.path} from {entry.where}\n")
        if done.replaced is not None:
            say(f"the version that was there is kept in {done.replaced}\n")

    emit(done.to_json(), json, human)
