"""The Typer application, whose commands are built as they are used, and `run`: the one top-level handler that
maps errors to messages and exit codes.

Each module in `leslie.cli` declares its commands on a `typer.Typer()` of its own, `app` (a command group, such
as `leslie objective`, is a Typer of its own: `objective_app`), and imports the library code inside its
commands. `COMMANDS` says which module declares each top-level command, and the root builds a command only when
it is used: Click's lazy loading of subcommands ("Lazily Loading Subcommands" in Click's documentation). A
command line then imports one command module and Typer builds that module's commands, not all forty, which
was a quarter of a command's time without the warm process (docs/benchmarks.md). `leslie --help`, shell
completion and the warm process (before it forks) build them all.

The command modules do not use `from __future__ import annotations`: Typer would then evaluate every
parameter's annotation from its text each time it builds a command (four times the cost of the build).
"""

import functools
import importlib
import os
import sys
from collections.abc import Iterator, Mapping
from typing import Annotated, Any

import typer

from leslie.cli.common import GlobalOptions
from leslie.cli.help import HELP_OPTION_NAMES, PANELS, polish
from leslie.cli.report import run_reporting_errors
from leslie.version import __version__

SETTINGS: dict[str, Any] = {"pretty_exceptions_enable": False, "rich_markup_mode": "rich"}
app = typer.Typer(
    name="leslie",
    help="Thread-scoped, file-based working memory for coding agents, inside a git repository.",
    no_args_is_help=True,
    add_completion=True,
    context_settings={"help_option_names": HELP_OPTION_NAMES},
    **SETTINGS,
)

# Each top-level command, in the order `leslie --help` lists them (by panel: `cli/help.py`), and where it is
# declared: a module of `leslie.cli` and its Typer, `app` for the module's commands, or the command group's own.
COMMANDS: dict[str, tuple[str, str]] = {
    **dict.fromkeys(("spawn", "list", "show", "set-status", "done", "pause", "resume", "archive", "retitle", "rm",
                     "switch", "edit"), ("threads_cmd", "app")),
    "find": ("find_cmd", "app"),
    "status": ("status_cmd", "app"),
    "board": ("board_cmd", "app"),
    "objective": ("objectives_cmd", "objective_app"),
    "relations": ("repo_cmd", "app"),
    "reference": ("threads_cmd", "app"),
    "unreference": ("threads_cmd", "app"),
    **dict.fromkeys(("after", "ready", "next"), ("order_cmd", "app")),
    "agents-md": ("repo_cmd", "app"),
    "context": ("context_cmd", "app"),
    "trust": ("agents_cmd", "app"),
    "inject": ("hook_cmd", "app"),
    "acp": ("acp_cmd", "app"),
    "sessions": ("agents_cmd", "app"),
    "stats": ("agents_cmd", "app"),
    "hook": ("hook_cmd", "app"),
    "check-write": ("hook_cmd", "app"),
    "quarantine": ("quarantine_cmd", "quarantine_app"),
    "hooks": ("agents_cmd", "hooks_app"),
    **dict.fromkeys(("who", "claim", "release"), ("claims_cmd", "app")),
    "worktree": ("worktree_cmd", "worktree_app"),
    "merge-relations": ("git_cmd", "app"),
    "watch": ("git_cmd", "app"),
    "git": ("git_cmd", "git_app"),
    "init": ("repo_cmd", "app"),
    "doctor": ("repo_cmd", "app"),
    "gc": ("git_cmd", "app"),
    "demo": ("context_cmd", "app"),
    "warm": ("warm_cmd", "warm_app"),
}


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


class LazyCommands(Mapping[str, Any]):
    """The root's commands by name (`COMMANDS`), each built at its first use; Click asks a group for its
    commands through `get_command` and `list_commands`, which read this mapping."""

    def __getitem__(self, name: str) -> Any:
        module, declared = COMMANDS[name]
        return _built(module, declared, None if declared == "app" else name)[name]

    def __iter__(self) -> Iterator[str]:
        return iter(COMMANDS)

    def __len__(self) -> int:
        return len(COMMANDS)


@functools.cache
def _built(module: str, declared: str, group: str | None) -> dict[str, Any]:
    """The Click commands of the Typer `declared` in `leslie.cli.<module>` (the command group `group`), by
    name, built by Typer as they are under `leslie` (with the root's settings) and polished for help."""
    typer_app = getattr(importlib.import_module(f"leslie.cli.{module}"), declared)
    holder = typer.Typer(**SETTINGS)
    holder.add_typer(typer_app, name=group)
    built: dict[str, Any] = dict(typer.main.get_command(holder).commands)  # type: ignore[attr-defined]
    for name, command in built.items():
        command.rich_help_panel = PANELS[name]
        polish(command, name)
    return built


@functools.cache
def click_command() -> Any:
    """The Click group of `leslie`: the root's options, built by Typer, and its commands, built as they are
    used (`LazyCommands`). Made once per process."""
    command = typer.main.get_command(app)
    polish(command)
    command.commands = LazyCommands()  # type: ignore[attr-defined]
    return command


def build_every_command() -> None:
    """Build every command now: the warm process does before it forks, so that no command has to."""
    list(click_command().commands.values())


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
