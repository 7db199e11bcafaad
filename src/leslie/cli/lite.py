"""Every command's common forms, parsed without Typer from the same declarations (`cli/params.py`).

Typer costs ~150-250 ms before a command starts (its import, pydantic's, and building the whole app), more
than a read or a mutation's own budget (SPEC §10; issues 17 and 18). For a command line made only of its
command's declared options and arguments, given plainly, this module builds exactly the keyword arguments
Typer would pass and calls the same function, under the same error reporting. Anything else returns None
and `leslie.__main__` hands the arguments to Typer, which answers as it always did:
- `--help`/`-h`, `-V`, shell completion, `--` or any token that starts with `-` but is not a declared option;
- an unknown command, a group without a subcommand, a command with its own context settings (`acp`);
- a repeated single-valued option, an option without its value or whose value starts with `-`;
- a missing required parameter, extra positional arguments;
- a value Typer would have to convert beyond the plain cases (int and float digits, Path), or one its
  declared `min`/`max` refuses.
`tests/test_cli_lite.py` runs a corpus of command lines through both paths and requires the same exit
code, output and files.
"""

from __future__ import annotations

import os
import sys

from leslie.cli.params import Argument, Group, Option

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

# Parameter settings that only shape the help or completion; any other setting sends the command to Typer.
_HELP_ONLY = frozenset({"help", "show_default", "metavar", "rich_help_panel", "show_choices", "autocompletion",
                        "shell_complete", "min", "max"})
_ROOT_VALUED = "--root"
_ROOT_FLAG = "--json"
INTERRUPTED = 130  # Typer's exit code for Ctrl-C (128 + SIGINT)


class _Fallback(Exception):
    """This command line is Typer's to answer."""


def run_lite(args: list[str]) -> int | None:
    """Run `args` without Typer and return the exit code, or None when Typer must answer."""
    if "_LESLIE_COMPLETE" in os.environ:
        return None
    try:
        root, as_json, func, kwargs = _resolve(args)
    except _Fallback:
        return None
    from leslie.cli.common import GlobalOptions
    from leslie.cli.report import run_reporting_errors

    GlobalOptions.root = root
    GlobalOptions.json = as_json
    try:
        return run_reporting_errors(lambda: _call(func, kwargs))
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except KeyboardInterrupt:  # Ctrl-C: as Typer ends it, quietly with 130 (what was written is atomic)
        return INTERRUPTED


def _call(func: Callable[..., Any], kwargs: dict[str, Any]) -> None:
    try:
        func(**kwargs)
        sys.stdout.flush()
    except BrokenPipeError:
        # As Click does: a reader that went away (`leslie list | head -1`) ends the command quietly, exit 1.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        raise SystemExit(1) from None


def _resolve(args: list[str]) -> tuple[str | None, bool, Callable[..., Any], dict[str, Any]]:
    root: str | None = None
    as_json = False
    i = 0
    while i < len(args) and args[i].startswith("-"):  # the app's own options, before the command
        name, sep, inline = args[i].partition("=")
        has_inline = sep == "="
        if name == _ROOT_FLAG and not has_inline:
            as_json, i = True, i + 1
        elif name == _ROOT_VALUED and root is None:
            root, i = _value(args, i, has_inline, inline)
        else:
            raise _Fallback
    if i == len(args):
        raise _Fallback
    from leslie.cli.registry import home_group

    group: Group | None = home_group(args[i])
    while group is not None:
        name = args[i] if i < len(args) else ""
        if name in group.commands:
            func, settings = group.commands[name]
            if settings:
                raise _Fallback
            return root, as_json, func, _parse(func, args[i + 1:])
        group, i = group.groups.get(name), i + 1
    raise _Fallback


def _value(args: list[str], i: int, has_inline: bool, inline: str) -> tuple[str, int]:
    if has_inline:
        return inline, i + 1
    if i + 1 < len(args) and not args[i + 1].startswith("-"):
        return args[i + 1], i + 2
    raise _Fallback


class _Spec:
    """One parameter as the parser needs it."""

    __slots__ = ("base", "default", "kind", "name", "param")

    def __init__(self, name: str, param: Option | Argument, kind: str, base: Any, default: Any) -> None:
        self.name, self.param, self.kind, self.base, self.default = name, param, kind, base, default


def _specs(func: Callable[..., Any]) -> list[_Spec]:
    from types import NoneType, UnionType
    from typing import Annotated, get_args, get_origin, get_type_hints

    code = func.__code__
    names = code.co_varnames[:code.co_argcount + code.co_kwonlyargcount]
    defaults = dict(zip(names[code.co_argcount - len(func.__defaults__ or ()):code.co_argcount],
                        func.__defaults__ or (), strict=True))
    defaults.update(func.__kwdefaults__ or {})
    hints = get_type_hints(func, include_extras=True)
    specs = []
    for name in names:
        hint = hints[name]
        if get_origin(hint) is not Annotated:
            raise _Fallback
        base, *extras = get_args(hint)
        params = [e for e in extras if isinstance(e, Option | Argument)]
        if len(params) != 1 or not set(params[0].settings) <= _HELP_ONLY:
            raise _Fallback
        if isinstance(base, UnionType):  # `T | None`
            members = [m for m in get_args(base) if m is not NoneType]
            if len(members) != 1:
                raise _Fallback
            base = members[0]
        kind = "list" if get_origin(base) is list else "bool" if base is bool else "one"
        if kind == "list":
            (base,) = get_args(base)
        specs.append(_Spec(name, params[0], kind, base, defaults.get(name, ...)))
    return specs


def _convert(spec: _Spec, text: str) -> Any:
    from pathlib import Path  # the store imports it for every command anyway

    base = spec.base
    if base is str:
        return text
    if base is int and text.isascii() and text.isdigit():
        value: Any = int(text)
    elif base is float and text.isascii() and text.replace(".", "", 1).isdigit() and text[0] != ".":
        value = float(text)
    elif base is Path and text:
        value = Path(text)
    else:
        raise _Fallback
    settings = spec.param.settings
    if ("min" in settings and value < settings["min"]) or ("max" in settings and value > settings["max"]):
        raise _Fallback
    return value


def _parse(func: Callable[..., Any], args: list[str]) -> dict[str, Any]:
    specs = _specs(func)
    options = {decl: spec for spec in specs if isinstance(spec.param, Option) for decl in spec.param.decls}
    if any("/" in decl or not decl.startswith("-") for decl in options):
        raise _Fallback
    positional = [spec for spec in specs if isinstance(spec.param, Argument)]
    values: dict[str, Any] = {}
    i = 0
    while i < len(args):
        arg = args[i]
        if arg.startswith("-"):
            name, sep, inline = arg.partition("=")
            has_inline = sep == "="
            spec = options.get(name)
            if spec is None:
                raise _Fallback
            if spec.kind == "bool":
                if has_inline or spec.name in values:
                    raise _Fallback
                values[spec.name], i = True, i + 1
                continue
            text, i = _value(args, i, has_inline, inline)
            if spec.kind == "list":
                values.setdefault(spec.name, []).append(_convert(spec, text))
            elif spec.name in values:
                raise _Fallback
            else:
                values[spec.name] = _convert(spec, text)
            continue
        if not positional:
            raise _Fallback
        spec = positional[0]
        if spec.kind == "list":
            values.setdefault(spec.name, []).append(_convert(spec, arg))
        else:
            values[spec.name] = _convert(spec, arg)
            positional.pop(0)
        i += 1
    for spec in specs:
        if spec.name not in values:
            if spec.default is ...:
                raise _Fallback
            values[spec.name] = spec.default
    return values
