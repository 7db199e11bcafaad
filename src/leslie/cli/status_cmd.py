"""`leslie status`: the current thread, what its agent was last told, and what needs attention."""

from leslie.cli.common import JsonOption, RootOption, emit, open_repo
from leslie.cli.params import Group
from leslie.cli.text import say


def status(root: RootOption = None, json: JsonOption = False) -> None:
    """Say where this working tree stands: the current thread, what its agent was last told, what needs
    attention (doctor problems, unapproved context commands, missing or broken agent hooks)."""
    from leslie.integrations import status as lib

    data = lib.gather(open_repo(root))
    emit(data, json, lambda: say("\n".join(lib.lines(data)) + "\n"))


def register(app: Group) -> None:
    app.command()(status)
