"""Options shared by every command, and the one place that prints results as text or JSON."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable
from itertools import islice
from typing import TYPE_CHECKING, Annotated, Any

import typer

from leslie.cli.text import say_err

if TYPE_CHECKING:
    from leslie.store.drawings import Drawing
    from leslie.store.repository import Repository

RootOption = Annotated[
    str | None,
    typer.Option("--root", help="Repository root (default: LESLIE_ROOT, else the nearest folder holding .leslie/).",
                 show_default=False),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON.")]
ThreadOption = Annotated[
    str | None,
    typer.Option("--thread", help="The thread to act on, by ID or unique prefix (default: LESLIE_THREAD, else "
                 "`leslie switch`).", show_default=False),
]
AgentArgument = Annotated[str, typer.Argument(help="The agent: claude-code, codex, gemini, copilot, qwen, factory, "
                                                   "opencode, kilo or pi.", show_default=False)]


class GlobalOptions:
    """`--root` and `--json` given before the command name (`leslie --json list`)."""

    root: str | None = None
    json: bool = False


def open_repo(root: str | None) -> Repository:
    """The repository for this command: `--root` on the command, before it, or discovered."""
    from leslie.store.repository import Repository

    return Repository.discover(root if root is not None else GlobalOptions.root)


def thread_arg(repo: Repository, text: str, what: str = "thread ID") -> str:
    """The full ID of the thread a person named (an ID or a unique prefix of one; `store.names`)."""
    from leslie.store.names import resolve_thread_id

    return resolve_thread_id(repo.root, text, what)


def objective_arg(repo: Repository, text: str) -> str:
    """The full ID of the objective a person named: an ID, a unique prefix of one, or a title."""
    from leslie.ops.objectives import named_objective

    return named_objective(repo, text)


def wants_json(flag: bool) -> bool:
    return flag or GlobalOptions.json


def emit(data: Any, as_json: bool, human: Callable[[], object] | None = None) -> None:
    """Print `data` as JSON when asked (or when there is no human form), else call `human`; the JSON with
    `visible_json`'s escapes (nothing in it acts on a terminal).

    On a terminal the JSON is indented for a person to read; piped, it is one line, as `gh --json` does. A
    program parses either, the line is a third of the bytes for an agent to read, and the standard library
    encodes it in C (with an indent its encoder is pure Python: at 1,000 threads `list --tree --json` spent
    27 ms there, the one-line form 6 ms)."""
    if wants_json(as_json) or human is None:
        import json  # here: a human answer does not need it

        from leslie.terminal import visible_json

        if not sys.stdout.isatty():
            sys.stdout.write(json_line(data))
            return
        # Written as it is encoded, a few thousand pieces at a time: `json.dumps` would hold every piece and
        # then the whole text (at 100,000 threads `list --tree --json` peaked at 525 MB that way).
        pieces = json.JSONEncoder(indent=2, sort_keys=True, ensure_ascii=False).iterencode(data)
        while text := "".join(islice(pieces, 4096)):
            sys.stdout.write(visible_json(text))
        sys.stdout.write("\n")
    else:
        human()


def json_line(data: Any) -> str:
    """`data` as `emit` writes it to a pipe: one line of JSON, keys sorted, made `visible_json`."""
    import json

    from leslie.terminal import visible_json

    return visible_json(json.dumps(data, sort_keys=True, ensure_ascii=False)) + "\n"


def print_kept(drawing: Drawing, draw: Callable[[], Iterable[str]]) -> None:
    """Print a text the derived store keeps (`store.drawings`): the kept one, else the pieces `draw` makes now,
    written as they are made (a few thousand at a time) and kept for the next run when they may be; one too long
    to keep whole (`drawings.MAX_TEXT`: 100,000 threads' JSON, tens of megabytes) is not held, and the drawing
    keeps what else it can (the tree's pieces)."""
    from leslie.store.drawings import MAX_TEXT

    text = drawing.stored()
    if text is not None:
        sys.stdout.write(text)
        return
    pieces = iter(draw())
    keep = drawing.keepable
    kept: list[str] | None = []
    size = 0
    # Written a few thousand pieces at a time: a `write` of each (one per thread in the tree) cost ~1 µs, 11 ms
    # at 10,000 threads against 1.5 ms joined.
    while batch := list(islice(pieces, 4096)):
        text = "".join(batch)
        sys.stdout.write(text)
        if keep and kept is not None:
            size += len(text)
            if size > MAX_TEXT:  # too long to keep: let go of what was held
                kept = None
            else:
                kept.append(text)
    if keep:
        drawing.keep(None if kept is None else "".join(kept))  # None: what else it keeps (the tree's pieces)


def warn(lines: tuple[str, ...] | list[str]) -> None:
    """Warnings and notes go to stderr so stdout stays parseable (made `visible`: they may quote the repository)."""
    for line in lines:
        say_err(line + "\n")


def warn_notes(notes: tuple[str, ...] | list[str]) -> None:
    """Library notes (an ignored template override, ...) as `leslie: warning:` lines on stderr."""
    for note in notes:
        say_err(f"leslie: warning: {note}\n")


def confirm(question: str) -> bool:
    """Ask `question [y/N]` on stderr (stdout stays for the output) and read the answer; only y/yes says yes."""
    say_err(f"{question} [y/N] ")
    sys.stderr.flush()
    return sys.stdin.readline().strip().lower() in ("y", "yes")


def table(columns: list[str], rows: list[list[str]]) -> None:
    """Aligned columns for people, cut to the terminal's width, IDs (the first column) never cut."""
    from leslie.cli.text import columns as aligned

    sys.stdout.write(aligned(columns, rows))
