"""Context commands (SPEC §7.3): run the configured commands in parallel, and the `leslie trust` gate.

`config.toml` comes with the repository, so a freshly cloned repository could otherwise run arbitrary
commands on a user's machine at the first prompt. Commands therefore run only once the user approved the
current list with `leslie trust`. The approval is recorded outside the repository, in
`$XDG_CONFIG_HOME/leslie/trust.json` (default `~/.config/leslie/trust.json`), keyed by the repository's real
path and a SHA-256 of the command list (names, commands, `dynamic`, timeouts): any change to the list needs
a new approval.

Commands run through the shell in the repository root, all at once, each in its own process group, with its
output (stdout and stderr together) spooled to a temporary file so a chatty command can neither fill a pipe
nor memory. A command that outlives its timeout is killed with its whole group. Output is capped at
`OUTPUT_CAP` bytes with a note saying how much was cut; the template escapes it. A failure or a timeout is
reported in the command's element and never blocks the injection.
"""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import tempfile
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from leslie._fsio import FileLock, atomic_write
from leslie._json import StrictJSONError, dumps_canonical, loads_strict
from leslie.errors import CorruptStateError

if TYPE_CHECKING:
    from leslie.context import CommandOutput

OUTPUT_CAP = 4096  # bytes of output kept per command
TRUST_VERSION = 1

CommandSpec = dict[str, Any]  # {"name", "command", "dynamic", "timeout"}, as in `config.ContextCommand`


def command_list_hash(commands: Sequence[CommandSpec]) -> str:
    """SHA-256 of the command list as approved: every field of every command, in order."""
    canonical = [
        {"name": c["name"], "command": c["command"], "dynamic": bool(c.get("dynamic", False)),
         "timeout": float(c.get("timeout", 5.0))}
        for c in commands
    ]
    return hashlib.sha256(dumps_canonical(canonical)).hexdigest()


def trust_file() -> str:
    """Where approvals live: `$XDG_CONFIG_HOME/leslie/trust.json`, default `~/.config/leslie/trust.json`."""
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return os.path.join(base, "leslie", "trust.json")


def _repo_key(root: str) -> str:
    return os.path.realpath(root)


def _read_trust(path: str) -> dict[str, Any]:
    try:
        with open(path, "rb") as handle:
            data = loads_strict(handle.read())
    except FileNotFoundError:
        return {"version": TRUST_VERSION, "repositories": {}}
    except StrictJSONError as exc:
        raise CorruptStateError(path, str(exc)) from None
    if not isinstance(data, dict) or not isinstance(data.get("repositories"), dict):
        raise CorruptStateError(path, "is not a leslie trust file")
    return data


def approval(root: str) -> dict[str, Any] | None:
    """The recorded approval for the repository at `root` (hash, time, commands), or None."""
    entry = _read_trust(trust_file())["repositories"].get(_repo_key(root))
    return entry if isinstance(entry, dict) else None


def is_trusted(root: str, commands: Sequence[CommandSpec]) -> bool:
    """True when the user approved exactly this command list for this repository."""
    entry = approval(root)
    return entry is not None and entry.get("commands_hash") == command_list_hash(commands)


def _update_trust(root: str, entry: dict[str, Any] | None) -> bool:
    path = trust_file()
    with FileLock(path + ".lock"):
        data = _read_trust(path)
        key = _repo_key(root)
        had = key in data["repositories"]
        if entry is None:
            data["repositories"].pop(key, None)
        else:
            data["repositories"][key] = entry
        data["version"] = TRUST_VERSION
        atomic_write(path, dumps_canonical(data))
    return had


def grant(root: str, commands: Sequence[CommandSpec]) -> None:
    """Record the user's approval of `commands` for the repository at `root`."""
    from leslie.sessions import utc_now

    _update_trust(root, {
        "commands_hash": command_list_hash(commands),
        "approved_at": utc_now(),
        "commands": [{"name": c["name"], "command": c["command"]} for c in commands],
    })


def revoke(root: str) -> bool:
    """Forget the approval for the repository at `root`; False when there was none."""
    return _update_trust(root, None)


def _capped(data: bytes, total: int, cap: int) -> str:
    text = data[:cap].decode("utf-8", "replace")
    if total > cap:
        text += f"\n[output truncated: {total - cap} more bytes]"
    return text


def _run_one(root: str, spec: CommandSpec, cap: int) -> CommandOutput:
    from leslie.context import CommandOutput

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
    from leslie.context import CommandOutput

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
    from leslie.context import CommandOutput

    result = []
    for value in values if isinstance(values, list) else []:
        if isinstance(value, dict) and isinstance(value.get("name"), str) and isinstance(value.get("output"), str):
            code = value.get("exit_code")
            error = value.get("error")
            result.append(CommandOutput(value["name"], code if isinstance(code, int) else None, value["output"],
                                        error if isinstance(error, str) else None))
    return result


def describe(commands: Sequence[CommandSpec]) -> str:
    """The command list as a user approves it: one `name: command` line each."""
    return "\n".join(f"  {c['name']}: {c['command']}" + ("  (dynamic)" if c.get("dynamic") else "")
                     for c in commands)

