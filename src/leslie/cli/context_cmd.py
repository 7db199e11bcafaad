"""`leslie context` (the block an agent is given) and `leslie demo` (the example tree, end to end)."""

import sys
from pathlib import Path
from typing import Annotated

import typer

from leslie.cli.common import JsonOption, RootOption, ThreadOption, emit, open_repo, wants_json, warn_notes
from leslie.errors import NotFoundError, UsageError

app = typer.Typer()


def _read_message(path: str) -> str:
    """The message from a file, or stdin for `-` (UTF-8)."""
    if path == "-":
        data = sys.stdin.buffer.read()
        source = "stdin"
    else:
        try:
            data = Path(path).read_bytes()
        except FileNotFoundError:
            raise NotFoundError(f"--message-file {path}: no such file") from None
        except IsADirectoryError:
            raise UsageError(f"--message-file {path}: is a folder") from None
        source = path
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UsageError(f"--message-file {source}: not UTF-8 text (byte {exc.start})") from None


@app.command()
def context(
    thread: ThreadOption = None,
    message: Annotated[str | None, typer.Option("--message", help="The user's message, printed after the "
                                                "block and a blank line.", show_default=False)] = None,
    message_file: Annotated[str | None, typer.Option("--message-file", metavar="PATH|-",
                                                     help="Read the message from a file, or stdin for -.",
                                                     show_default=False)] = None,
    fmt: Annotated[str | None, typer.Option("--format", metavar="xml|json",
                                            help="xml (default) or json: the same information as JSON.",
                                            show_default=False)] = None,
    budget: Annotated[int | None, typer.Option("--budget", metavar="TOKENS", min=0,
                                               help="Preview the block with this token budget for inlined file "
                                               "content instead of [context] budget_tokens (0: paths only).",
                                               show_default=False)] = None,
    root: RootOption = None,
    json: JsonOption = False,
) -> None:
    """Print the current thread's <thread_context> block, then a blank line and the message if given."""
    from leslie.context.block import FORMATS, context_output
    from leslie.ops.threads import current_thread_id

    if fmt is not None and fmt not in FORMATS:
        raise UsageError(f"unknown --format {fmt!r}: expected xml or json")
    if fmt == "xml" and wants_json(json):
        raise UsageError("--json and --format xml contradict each other")
    if message is not None and message_file is not None:
        raise UsageError("give --message or --message-file, not both")
    text = _read_message(message_file) if message_file is not None else message
    repo = open_repo(root)
    thread_id = current_thread_id(repo, thread)
    chosen = "json" if wants_json(json) else (fmt or "xml")
    notes: list[str] = []
    try:
        sys.stdout.write(context_output(repo, thread_id, fmt=chosen, message=text, warnings=notes,
                                        budget=budget))
    finally:
        warn_notes(notes)


@app.command()
def demo(
    keep: Annotated[str | None, typer.Option("--keep", metavar="PATH", help="Build the demo repository at "
                                             "PATH (new or empty folder) and keep it to explore.",
                                             show_default=False)] = None,
    json: JsonOption = False,
) -> None:
    """Build a demo git repository from leslie's example tree and show what an agent is told."""
    from leslie.ops.demo import build_demo, describe

    result = build_demo(Path(keep) if keep is not None else None)
    emit(result.to_json(), json, lambda: sys.stdout.write(describe(result)))

