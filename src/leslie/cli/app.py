"""The Typer application, and the one top-level handler that maps errors to messages and exit codes."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from leslie.cli import (
    acp_cmd,
    agents_cmd,
    board_cmd,
    context_cmd,
    find_cmd,
    git_cmd,
    objectives_cmd,
    repo_cmd,
    status_cmd,
    threads_cmd,
)
from leslie.cli.common import GlobalOptions
from leslie.cli.help import HELP_OPTION_NAMES, polish
from leslie.cli.report import run_reporting_errors
from leslie.version import __version__

app = typer.Typer(
    name="leslie",
    help="Thread-scoped, file-based working memory for coding agents, inside a git repository.",
    no_args_is_help=True,
    add_completion=True,
    pretty_exceptions_enable=False,
    rich_markup_mode="rich",
    context_settings={"help_option_names": HELP_OPTION_NAMES},
)


def _version(value: bool) -> None:
    if value:
        sys.stdout.write(f"leslie {__version__}\n")
        raise typer.Exit(0)


@app.callback()
def _root_options(
    root: Annotated[str | None, typer.Option("--root", help="Repository root for every command.",
                                             show_default=False)] = None,
    json_output: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
    version: Annotated[bool, typer.Option("--version", "-V", callback=_version, is_eager=True,
                                          help="Print the version and exit.")] = False,
) -> None:
    """Thread-scoped, file-based working memory for coding agents, inside a git repository."""
    GlobalOptions.root = root
    GlobalOptions.json = json_output


for module in (repo_cmd, objectives_cmd, threads_cmd, find_cmd, acp_cmd, git_cmd, context_cmd, agents_cmd,
               status_cmd, board_cmd):
    module.register(app)


def run(args: list[str]) -> int:
    """Run the CLI; every error becomes one line on stderr and its SPEC §9 exit code."""
    command = typer.main.get_command(app)
    polish(command)
    try:
        # Standalone mode lets Typer report its own usage errors (exit 2) and help; it ends with SystemExit.
        return run_reporting_errors(lambda: command.main(args=args, prog_name="leslie", standalone_mode=True))
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
