"""The Typer application, and the one top-level handler that maps errors to messages and exit codes."""

from __future__ import annotations

import functools
import inspect
import sys
from collections.abc import Callable
from typing import Annotated, Any, get_args, get_origin, get_type_hints

import typer

from leslie.cli import params, warm_cmd
from leslie.cli.common import GlobalOptions
from leslie.cli.help import HELP_OPTION_NAMES, polish
from leslie.cli.registry import root_group
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


def _typer_annotation(annotation: Any) -> Any:
    """`Annotated[T, params.Option(...)]` as `Annotated[T, typer.Option(...)]` (anything else as is)."""
    if get_origin(annotation) is not Annotated:
        return annotation
    base, *extras = get_args(annotation)
    converted = [typer.Option(*e.decls, **e.settings) if isinstance(e, params.Option)
                 else typer.Argument(*e.decls, **e.settings) if isinstance(e, params.Argument) else e
                 for e in extras]
    return Annotated[(base, *converted)]


def _typer_callback(func: Callable[..., Any]) -> Callable[..., Any]:
    """`func` with its parameters declared for Typer: a wrapper carrying the converted signature."""
    hints = get_type_hints(func, include_extras=True)
    signature = inspect.signature(func)
    parameters = [p.replace(annotation=_typer_annotation(hints[p.name])) for p in signature.parameters.values()]

    @functools.wraps(func)
    def callback(*args: Any, **kwargs: Any) -> Any:
        return func(*args, **kwargs)

    callback.__signature__ = signature.replace(  # type: ignore[attr-defined]
        parameters=parameters, return_annotation=hints.get("return", inspect.Signature.empty))
    callback.__annotations__ = {p.name: p.annotation for p in parameters}
    return callback


def _add(target: typer.Typer, group: params.Group) -> None:
    for name, (func, settings) in group.commands.items():
        target.command(name, **settings)(_typer_callback(func))
    for name, sub in group.groups.items():
        child = typer.Typer(**sub.settings)
        _add(child, sub)
        target.add_typer(child, name=name)


_add(app, root_group())
warm_cmd.register(app)

@functools.cache
def click_command() -> Any:
    """The Click command Typer builds from `app` (built once per process: the warm process builds it before
    it forks, so no command pays for it)."""
    command = typer.main.get_command(app)
    polish(command)
    return command


def run(args: list[str]) -> int:
    """Run the CLI; every error becomes one line on stderr and its SPEC §9 exit code."""
    command = click_command()
    try:
        # Standalone mode lets Typer report its own usage errors (exit 2) and help; it ends with SystemExit.
        return run_reporting_errors(lambda: command.main(args=args, prog_name="leslie", standalone_mode=True))
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
