"""How commands declare their parameters and groups, without importing Typer.

Each command is a plain function whose parameters are annotated `Annotated[T, Option(...)]` or
`Annotated[T, Argument(...)]`, and each module registers its commands on a `Group`. Two readers use the
same declarations:
- `cli/app.py` turns them into the Typer application (`typer.Option(*decls, **settings)`): the help, the
  completion and every usage error stay Typer's;
- `cli/lite.py` parses the common forms itself and calls the same function: a read or a mutation then
  costs what its work costs, not Typer's ~150 ms start (issues 17 and 18).
Typer stays the definition of the command line; `tests/test_cli_lite.py` runs both paths side by side.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any


class Param:
    """A parameter's declaration: Typer's positional `decls` and keyword settings, kept as given."""

    __slots__ = ("decls", "settings")

    def __init__(self, *decls: str, **settings: Any) -> None:
        self.decls = decls
        self.settings = settings


class Option(Param):
    """`typer.Option(*decls, **settings)`, declared without Typer."""


class Argument(Param):
    """`typer.Argument(**settings)`, declared without Typer."""


class Group:
    """Commands and sub-groups under one name (`leslie`, `leslie objective`, ...); `settings` go to `typer.Typer`."""

    def __init__(self, **settings: Any) -> None:
        self.settings = settings
        self.commands: dict[str, tuple[Callable[..., Any], dict[str, Any]]] = {}
        self.groups: dict[str, Group] = {}

    def command(self, name: str | None = None, **settings: Any) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """Register a function as a command (named after it, `_` as `-`, as Typer names it)."""

        def register(func: Callable[..., Any]) -> Callable[..., Any]:
            self.commands[name or func.__name__.lower().replace("_", "-")] = (func, settings)
            return func

        return register

    def add_group(self, group: Group, name: str) -> None:
        """Add a sub-group (`leslie objective ...`)."""
        self.groups[name] = group
