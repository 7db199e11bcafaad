"""`leslie status`: the current thread, what its agent was last told, and what needs attention."""

from __future__ import annotations

import sys

import typer

from leslie.cli.common import JsonOption, RootOption, emit, open_repo


def status(root: RootOption = None, json: JsonOption = False) -> None:
    """Say where this working tree stands: the current thread, what its agent was last told, what needs
    attention (doctor problems, unapproved context commands, missing or broken agent hooks)."""
    from leslie.integrations import status as lib

    data = lib.gather(open_repo(root))
    emit(data, json, lambda: sys.stdout.write("\n".join(lib.lines(data)) + "\n"))


def register(app: typer.Typer) -> None:
    app.command()(status)
