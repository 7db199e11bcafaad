"""The Typer application, built from the command modules, and `run`: the one top-level handler that maps
errors to messages and exit codes.

Each module in `leslie.cli` declares its commands on a `typer.Typer()` of its own (a command group, such as
`leslie objective`, is a Typer of its own too) and imports the library code inside its commands, so building
the application imports Typer and the declarations only. The command modules do not use `from __future__ import
annotations`: Typer would then evaluate every parameter's annotation from its text each time it builds the app
(four times the cost of the build, which a command without the warm process pays).
"""

import functools
import os
import sys
from typing import Annotated, Any

import typer

from leslie.cli import (
    acp_cmd,
    agents_cmd,
    board_cmd,
    context_cmd,
    find_cmd,
    git_cmd,
    hook_cmd,
    objectives_cmd,
    repo_cmd,
    status_cmd,
    threads_cmd,
    warm_cmd,
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


# `leslie --help` lists the commands in panels (`cli/help.py`), each panel in the order they are added here.
app.add_typer(repo_cmd.app)  # init, doctor, relations, agents-md
app.add_typer(threads_cmd.app)  # spawn, reference, unreference, list, show, set-status, done, ..., edit
app.add_typer(find_cmd.app)
app.add_typer(acp_cmd.app)
app.add_typer(git_cmd.app)  # merge-relations, gc, watch
app.add_typer(git_cmd.git_app, name="git")
app.add_typer(context_cmd.app)  # context, demo
app.add_typer(agents_cmd.app)  # sessions, stats, trust
app.add_typer(hook_cmd.app)  # hook, inject, check-write
app.add_typer(agents_cmd.hooks_app, name="hooks")
app.add_typer(status_cmd.app)
app.add_typer(board_cmd.app)
app.add_typer(objectives_cmd.app, name="objective")
app.add_typer(warm_cmd.warm_app, name="warm")


@functools.cache
def click_command() -> Any:
    """The Click command Typer builds from `app` (built once per process: the warm process builds it before
    it forks, so no command pays for it)."""
    command = typer.main.get_command(app)
    polish(command)
    return command


def run(args: list[str]) -> int:
    """Run the command line `args` and return its exit code; every error becomes one line on stderr and its
    SPEC §9 exit code."""
    command = click_command()
    try:
        # Standalone mode lets Typer report its own usage errors (exit 2) and help; it ends with SystemExit.
        code = run_reporting_errors(lambda: command.main(args=args, prog_name="leslie", standalone_mode=True))
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    try:
        sys.stdout.flush()  # now, not at exit: a reader that went away is then an exit code, not a traceback
    except BrokenPipeError:
        # As Click ends a command whose reader went away (`leslie list | head -1`): exit 1, nothing on stderr.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        return 1
    return code
