"""`leslie status`: the current thread, what its agent was last told, and what needs attention."""


import sys

from leslie.cli.common import JsonOption, RootOption, emit, open_repo
from leslie.cli.params import Group


def status(root: RootOption = None, json: JsonOption = False) -> None:
    """Say where this working tree stands: the current thread, what its agent was last told, what needs
    attention (doctor problems, unapproved context commands, missing or broken agent hooks)."""
    from leslie.integrations import status as lib

    data = lib.gather(open_repo(root))
    emit(data, json, lambda: sys.stdout.write("\n".join(lib.lines(data)) + "\n"))


def register(app: Group) -> None:
    app.command()(status)
