"""`leslie spawn` and `leslie reference` without Typer, for their budget of 150 ms with 10,000 threads.

SPEC §10 gives these two commands 150 ms of wall time in a repository of 10,000 threads. Typer alone (its
import, and the pydantic coercion of every parameter) costs about that much on a small machine, so their
common forms are parsed here by hand and run exactly the library calls, and print exactly the output, of
`cli/threads_cmd.py`. Anything outside those forms — `--help`, `--context`, an unknown or repeated option,
a value that looks like an option, a positional argument (but `reference`'s one ID[:SCOPE]), a missing
`--intent` or target — returns None, and `leslie.__main__` hands the arguments to Typer, which answers with
its usual help and usage errors.
`tests/test_cli_quick.py` runs both paths side by side and requires identical results.
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

_FLAGS = frozenset({"--json"})
_SPAWN_VALUED = frozenset({"--intent", "--title", "--objective", "--parent", "--id", "--root"})
_REFERENCE_VALUED = frozenset({"--target", "--thread", "--root"})
_SPAWN_REPEATABLE = frozenset({"--ref", "--scope"})
_REFERENCE_REPEATABLE = frozenset({"--scope"})

Parsed = tuple[dict[str, str], dict[str, list[str]], bool]


def _parse(args: list[str], valued: frozenset[str], repeatable: frozenset[str], positional: str | None = None
           ) -> Parsed | None:
    """(single options, repeated options' values, --json) for the simple grammar; None for anything else.

    `positional` names the single option a lone argument stands for (`reference ID` is `--target ID`); it is
    kept under its own key, so giving both reaches the library, which refuses it as Typer's path does.
    """
    values: dict[str, str] = {}
    repeated: dict[str, list[str]] = {name: [] for name in repeatable}
    as_json = False
    i = 0
    while i < len(args):
        arg = args[i]
        if arg in _FLAGS:
            as_json = True
            i += 1
            continue
        if positional is not None and not arg.startswith("-") and "ARG" not in values:
            values["ARG"] = arg
            i += 1
            continue
        name, has_inline, inline = arg.partition("=")
        if name not in valued and name not in repeatable:
            return None
        if has_inline:
            value = inline
            i += 1
        elif i + 1 < len(args) and not args[i + 1].startswith("-"):
            value = args[i + 1]
            i += 2
        else:
            return None
        if name in repeatable:
            repeated[name].append(value)
        elif name in values:
            return None
        else:
            values[name] = value
    return values, repeated, as_json


def _emit(data: dict[str, Any], as_json: bool, human: str) -> None:
    # The same bytes as `cli.common.emit` prints.
    if as_json:
        import json

        sys.stdout.write(json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n")
    else:
        sys.stdout.write(human)


def _warn(lines: tuple[str, ...]) -> None:
    for line in lines:
        sys.stderr.write(line + "\n")


def _spawn(values: dict[str, str], repeated: dict[str, list[str]], as_json: bool) -> None:
    """`cli.threads_cmd.spawn` without `--context`."""
    from leslie.ops import threads
    from leslie.store.names import resolve_objective_id, resolve_thread_id
    from leslie.store.repository import Repository

    repo = Repository.discover(values.get("--root"))
    refs = threads.spawn_refs(repeated["--ref"], repeated["--scope"], repo)
    objective, parent = values.get("--objective"), values.get("--parent")
    outcome = threads.spawn(repo, values["--intent"], title=values.get("--title"),
                            objective=None if objective is None else resolve_objective_id(repo.root, objective),
                            refs=refs, parent=None if parent is None else resolve_thread_id(
                                repo.root, parent, "parent thread ID"),
                            thread_id=values.get("--id"))
    _warn(outcome.warnings)
    _emit({"id": outcome.thread.id, "thread": outcome.thread.to_json()}, as_json, outcome.thread.id + "\n")


def _reference(values: dict[str, str], repeated: dict[str, list[str]], as_json: bool) -> None:
    """`cli.threads_cmd.reference`."""
    from leslie.ops import threads
    from leslie.store.repository import Repository

    repo = Repository.discover(values.get("--root"))
    spec = threads.target_spec([values[name] for name in ("ARG", "--target") if name in values],
                               repeated["--scope"], repo)
    target = spec.target
    source = threads.current_thread_id(repo, values.get("--thread"))
    outcome = threads.reference(repo, source, target, spec.scope)
    _warn(outcome.warnings)
    scope_now = outcome.thread.references.get(target, ())
    human = (f"{source} -> {target}" + (f" [{', '.join(scope_now)}]" if scope_now else " [whole thread]")
             + ("" if outcome.changed else " (unchanged)") + "\n")
    _emit({"changed": outcome.changed, "thread": source, "target": target, "scope": list(scope_now)}, as_json,
          human)


def run_quick(args: list[str]) -> int | None:
    """Run `spawn` or `reference` if `args` are in their simple form; None to let Typer handle them."""
    command, rest = args[0], args[1:]
    action: Callable[[dict[str, str], dict[str, list[str]], bool], None]
    if command == "spawn":
        parsed = _parse(rest, _SPAWN_VALUED, _SPAWN_REPEATABLE)
        if parsed is None or "--intent" not in parsed[0]:
            return None
        action = _spawn
    elif command == "reference":
        parsed = _parse(rest, _REFERENCE_VALUED, _REFERENCE_REPEATABLE, positional="--target")
        if parsed is None or ("--target" not in parsed[0] and "ARG" not in parsed[0]):
            return None
        action = _reference
    else:
        return None
    from leslie.cli.report import run_reporting_errors

    return run_reporting_errors(lambda: action(*parsed))
