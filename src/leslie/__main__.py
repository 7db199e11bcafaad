"""Entry point of the `leslie` executable and of `python -m leslie`."""

from __future__ import annotations

import os
import sys

# Commands an agent runs on every prompt: dispatched without importing Typer, Rich, Jinja2 or lxml.
FAST_COMMANDS = frozenset({"hook", "inject", "check-write"})
# Commands that serve until stopped: what their reads build is never frozen (`leslie.store.bulk`).
LONG_RUNNING = frozenset({"board", "watch", "acp"})


def main(argv: list[str] | None = None) -> int:
    """Run leslie with `argv` (default: the process arguments) and return the exit code."""
    args = sys.argv[1:] if argv is None else list(argv)
    if argv is None:  # the `leslie` command itself: its first step is to ask the warm process (SPEC §12)
        from leslie.server import client

        warm = client.run(args)
        if warm is not None:
            return warm
    if args and args[0] in FAST_COMMANDS and "--help" not in args:
        from leslie.cli.fast import run_fast

        status = run_fast(args)
        if argv is None:  # the real process (not a test calling main): skip the interpreter's teardown
            exit_now(status)
        return status
    # Any word naming a serving command (it may follow global options) keeps the process unfrozen: a word that
    # only happens to be "board" costs a command the freeze, nothing else.
    one_shot = argv is None and LONG_RUNNING.isdisjoint(args)  # it exits after this one command
    if one_shot:
        from leslie.store import bulk

        bulk.ONE_SHOT = True
    # Every other command's common forms run without Typer (`cli/lite.py`); the rest is Typer's to answer.
    from leslie.cli.lite import run_lite

    code = run_lite(args)
    if code is not None:
        if one_shot:
            exit_now(code)
        return code
    from leslie.cli.app import run

    return run(args)


def exit_now(code: int) -> None:
    """End the process with `code` once stdout and stderr are flushed, skipping the interpreter's teardown.

    Every file the command wrote is closed by then (atomic writes close before they rename; leslie registers
    no `atexit` work and leaves no thread it must wait for); what remains is freeing the modules and objects:
    about 2 ms after a hook, 8-15 ms after a read at 10,000 threads (docs/benchmarks.md, "Session 10").
    """
    for stream in (sys.stdout, sys.stderr):
        try:  # noqa: SIM105 (contextlib is not loaded on the hook's path)
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)


if __name__ == "__main__":
    sys.exit(main())
