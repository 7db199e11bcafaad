"""`leslie hooks install|uninstall|status opencode|kilo|pi`: leslie's plugin file in the project.

opencode and pi have no command hooks: they load code from the project. leslie ships that code as package
data (`leslie/integrations/plugins/opencode.js`, `pi.ts`) and installs it with the absolute command of the
leslie that installs it written in (like the command of the other agents' hooks): `.opencode/plugins/leslie.js`,
`.pi/extensions/leslie.ts`; Kilo Code, a fork of opencode with its plugin API, gets opencode's plugin in
`.kilo/plugins/leslie.js`, calling `leslie hook kilo`. The file is leslie's alone: installing replaces it
(idempotent), uninstalling deletes it; a file there that leslie did not write is refused, never overwritten.
Reads and writes follow the rules of every other project file leslie touches (`store.repository_target`: a
regular file of bounded size, through links only inside the repository, written atomically).
"""

from __future__ import annotations

import json
import os
import re
import shlex
from pathlib import Path

from leslie.errors import CorruptStateError
from leslie.integrations.install import (
    CONTEXT_TIMEOUT,
    GUARD_TIMEOUT,
    AgentHooks,
    HooksResult,
    HooksStatus,
    check_command,
    hook_command,
    installing_executable,
    path_warnings,
)
from leslie.store.files import read_repository_file, write_repository_file

PLUGIN_DIR = Path(__file__).resolve().parent / "plugins"
PLUGIN_CAP = 256 * 1024  # bytes: leslie's plugin is ~4 KiB; anything far larger there is not leslie's
COMMAND_LINE = re.compile(r"^const LESLIE(?:: string\[\])? = (\[.*\]);", re.MULTILINE)


def template(spec: AgentHooks) -> str:
    """The packaged plugin source of `spec`'s agent, placeholders in."""
    assert spec.plugin is not None
    return (PLUGIN_DIR / spec.plugin).read_text(encoding="utf-8")


def marker(spec: AgentHooks) -> str:
    """The first line of leslie's plugin file for this agent: how an installed one is recognised."""
    return template(spec).splitlines()[0]


def render(spec: AgentHooks, argv: list[str]) -> str:
    """The plugin file that runs leslie as `argv`."""
    return (template(spec).replace("__LESLIE_COMMAND__", json.dumps(argv)).replace("__AGENT__", json.dumps(spec.agent))
            .replace("__CONTEXT_TIMEOUT_MS__", str(CONTEXT_TIMEOUT * 1000))
            .replace("__GUARD_TIMEOUT_MS__", str(GUARD_TIMEOUT * 1000)))


def _read(root: Path, spec: AgentHooks) -> str | None:
    """The installed file's text (None when absent); CorruptStateError for one leslie did not write."""
    raw = read_repository_file(root, root / spec.path, limit=PLUGIN_CAP)
    if raw is None:
        return None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        text = ""
    if not text.startswith(marker(spec)):
        raise CorruptStateError(spec.path, "is not leslie's plugin file; leslie leaves it untouched (move it "
                                           "away to install leslie's)")
    return text


def installed_argv(text: str) -> list[str] | None:
    """The leslie command written into an installed plugin file, None when it cannot be read."""
    found = COMMAND_LINE.search(text)
    if found is None:
        return None
    try:
        argv = json.loads(found.group(1))
    except ValueError:
        return None
    return argv if isinstance(argv, list) and argv and all(isinstance(a, str) for a in argv) else None


def install(root: Path, spec: AgentHooks, executable: str | None = None) -> HooksResult:
    """Write leslie's plugin file for `spec`'s agent (idempotent). `executable`: quoted for the shell."""
    command = executable or installing_executable()
    wanted = render(spec, shlex.split(command))
    existing = _read(root, spec)
    events = tuple(e.event for e in spec.entries)
    full = hook_command(spec.agent, command)
    if existing == wanted:
        return HooksResult(spec.agent, spec.path, False, (), full, path_warnings(full), spec.next_steps)
    write_repository_file(root, root / spec.path, wanted.encode("utf-8"))
    return HooksResult(spec.agent, spec.path, True, events, full, path_warnings(full), spec.next_steps)


def uninstall(root: Path, spec: AgentHooks) -> HooksResult:
    """Delete leslie's plugin file (a file leslie did not write is refused)."""
    if _read(root, spec) is None:
        return HooksResult(spec.agent, spec.path, False, ())
    os.unlink(root / spec.path)
    return HooksResult(spec.agent, spec.path, True, tuple(e.event for e in spec.entries))


def check(root: Path, spec: AgentHooks, *, probe: bool = True) -> HooksStatus:
    """Whether leslie's plugin file is there, current, and runs a leslie that works."""
    events = tuple(e.event for e in spec.entries)
    try:
        text = _read(root, spec)
    except CorruptStateError as exc:
        return HooksStatus(spec.agent, spec.path, (), events, (), (), exc.message)
    if text is None:
        return HooksStatus(spec.agent, spec.path, (), events, (), ())
    argv = installed_argv(text)
    if argv is None:
        return HooksStatus(spec.agent, spec.path, events, (), events, ())
    command = hook_command(spec.agent, shlex.join(argv))
    outdated = () if text == render(spec, argv) else events
    return HooksStatus(spec.agent, spec.path, events, (), outdated,
                       (check_command(command, spec.agent, probe=probe),))
