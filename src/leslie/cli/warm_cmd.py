"""`leslie warm`: the warm process that runs every command (SPEC §12): show it, stop it, or be it."""

import json
from typing import Annotated

import typer

from leslie.cli.common import emit
from leslie.cli.text import say

warm_app = typer.Typer(help="Show or stop the warm process that runs leslie's commands (SPEC §12).",
                       invoke_without_command=True)


@warm_app.callback()
def show(ctx: typer.Context,
         json_output: Annotated[bool, typer.Option("--json", help="Print machine-readable JSON.")] = False,
         ) -> None:
    """Say whether the warm process runs: its process ID, identity, uptime, memory and commands served."""
    if ctx.invoked_subcommand is not None:
        return
    from leslie.server import client

    data = describe()
    emit(data, json_output, lambda: say(_lines(data, client.enabled())))


def describe() -> dict[str, object]:
    """The running warm process's status (`leslie.server.warm.status`), or `{"running": false, ...}`."""
    from leslie.server import client

    answer = client.control(b"status")
    doc = None
    if answer is not None:
        try:
            doc = json.loads(answer)
        except ValueError:
            doc = None
    if not isinstance(doc, dict):
        return {"running": False, "enabled": client.enabled(), "socket": client.socket_path()}
    return {"running": True, "enabled": client.enabled(), **doc}


def _lines(data: dict[str, object], enabled: bool) -> str:
    if not data.get("running"):
        why = "off (LESLIE_WARM=0)" if not enabled else "not running (the next command starts it)"
        return f"warm process: {why}\n"
    memory = data.get("memory")
    watcher = data.get("watcher")
    watching = (f"pid {watcher.get('pid')}" if isinstance(watcher, dict) and watcher.get("running")
                else "not running")
    rows = [
        f"warm process: pid {data.get('pid')}, up {data.get('uptime')} s, "
        f"{data.get('served')} commands served, {data.get('commands_running')} running",
        f"  leslie {data.get('version')} at {data.get('location')}, code {data.get('code')}",
        f"  python {data.get('python')} in {data.get('prefix')}",
        f"  memory {int(memory) // (1 << 20)} MiB" if isinstance(memory, int) else "  memory unknown",
        f"  socket {data.get('socket')}",
        f"  guard watcher: {watching}",
    ]
    return "\n".join(rows) + "\n"


@warm_app.command()
def stop() -> None:
    """End the warm process (the next command starts a new one; LESLIE_WARM=0 keeps it off)."""
    from leslie.server import client

    answer = client.control(b"stop")
    say("warm process: stopped\n" if answer == b"stopping" else "warm process: not running\n")


@warm_app.command(hidden=True)
def serve(idle: Annotated[float, typer.Option("--idle", help="Seconds without a request before it exits.",
                                              min=1.0)] = 900.0) -> None:
    """Be the warm process (started in the background by the first command that finds none)."""
    from leslie.cli.app import run
    from leslie.cli.preload import preload
    from leslie.server import warm

    raise typer.Exit(warm.main_serve(run, preload, idle))
