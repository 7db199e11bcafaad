"""Context commands (SPEC §7.3): run the configured commands in parallel, capture their output.

`config.toml` comes with the repository, so its commands run only once the user approved the current list
with `leslie trust` (`leslie.context.trust`, which also covers template overrides); the callers check that first.

Commands run through the shell in the repository root, all at once, each in its own process group, with its
output (stdout and stderr together) spooled to a temporary file so a chatty command can neither fill a pipe
nor memory. A command that outlives its timeout is killed with its whole group. Output is capped at
`OUTPUT_CAP` bytes with a note saying how much was cut; the template escapes it. A failure or a timeout is
reported in the command's element and never blocks the injection.
"""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from leslie.context.block import CommandOutput

OUTPUT_CAP = 4096  # bytes of output kept per command

CommandSpec = dict[str, Any]  # {"name", "command", "dynamic", "timeout"}, as in `config.ContextCommand`


def _capped(data: bytes, total: int, cap: int) -> str:
    text = data[:cap].decode("utf-8", "replace")
    if total > cap:
        text += f"\n[output truncated: {total - cap} more bytes]"
    return text


def _run_one(root: str, spec: CommandSpec, cap: int) -> CommandOutput:
    from leslie.context.block import CommandOutput

    name = str(spec["name"])
    timeout = float(spec.get("timeout", 5.0))
    with tempfile.TemporaryFile() as spool:
        try:
            proc = subprocess.Popen(str(spec["command"]), shell=True, cwd=root, stdin=subprocess.DEVNULL,
                                    stdout=spool, stderr=subprocess.STDOUT, start_new_session=True)
        except OSError as exc:
            return CommandOutput(name, None, "", f"could not start: {exc.strerror or exc}")
        error = None
        try:
            code: int | None = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            try:  # the whole group: a shell's children would otherwise outlive it
                os.killpg(proc.pid, signal.SIGKILL)
            except OSError:
                proc.kill()
            proc.wait()
            code, error = None, f"timed out after {timeout:g} s"
        if code is not None and code < 0:
            error = f"killed by signal {-code}"
            code = None
        total = spool.tell()
        spool.seek(0)
        head = spool.read(cap)
    return CommandOutput(name, code, _capped(head, total, cap), error)


def run_commands(root: str, commands: Sequence[CommandSpec], cap: int = OUTPUT_CAP) -> list[CommandOutput]:
    """Run `commands` in parallel in `root`; their outputs in the configured order (failures included)."""
    from leslie.context.block import CommandOutput

    results: list[CommandOutput | None] = [None] * len(commands)

    def work(index: int, spec: CommandSpec) -> None:
        try:
            results[index] = _run_one(root, spec, cap)
        except Exception as exc:  # a broken command never breaks the injection
            results[index] = CommandOutput(str(spec.get("name", "?")), None, "", f"{type(exc).__name__}: {exc}")

    workers = [threading.Thread(target=work, args=(i, spec), daemon=True) for i, spec in enumerate(commands)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return [r if r is not None else CommandOutput(str(c["name"]), None, "", "did not run")
            for r, c in zip(results, commands, strict=True)]


def outputs_to_json(outputs: Sequence[CommandOutput]) -> list[dict[str, Any]]:
    """Command outputs as plain JSON values (to freeze static ones in the session state)."""
    return [{"name": o.name, "exit_code": o.exit_code, "output": o.output, "error": o.error} for o in outputs]


def outputs_from_json(values: Any) -> list[CommandOutput]:
    """The inverse of `outputs_to_json`; malformed entries are dropped."""
    from leslie.context.block import CommandOutput

    result = []
    for value in values if isinstance(values, list) else []:
        if isinstance(value, dict) and isinstance(value.get("name"), str) and isinstance(value.get("output"), str):
            code = value.get("exit_code")
            error = value.get("error")
            result.append(CommandOutput(value["name"], code if isinstance(code, int) else None, value["output"],
                                        error if isinstance(error, str) else None))
    return result
