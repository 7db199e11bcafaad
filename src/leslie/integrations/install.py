"""`leslie hooks install|uninstall|status AGENT`: leslie's entries in the agent's project hook file.

- Claude Code: `.claude/settings.json` (the project's shared settings), key `hooks`.
- Codex: `.codex/hooks.json` (the project layer's hook file; its root holds only `hooks`, and optionally
  `description`).
- Gemini CLI: `.gemini/settings.json`, key `hooks`, timeouts in milliseconds (`integrations.gemini_install`).
- Qwen Code: `.qwen/settings.json` (the project's settings), key `hooks`; what leslie installs there is
  `leslie.integrations.qwen.HOOK_EVENTS`.
- Factory's droid: `.factory/settings.json` (the project's settings), key `hooks`; what leslie installs there
  is `leslie.integrations.factory.HOOK_EVENTS`.
- GitHub Copilot CLI: `.github/hooks/leslie.json` (`{"version": 1, "hooks": {"<event>": [{"type": "command",
  "bash": "...", "timeoutSec": <seconds>}]}}`: no groups, no matchers, one command per event since Copilot's
  payloads do not name their event); what leslie installs there is `leslie.integrations.copilot.HOOK_EVENTS`.

- opencode, Kilo Code and pi: no hook file, but a plugin file of leslie's (`leslie.integrations.plugin_install`).

The other hook files have the same shape:
`{"hooks": {"<Event>": [{"matcher": "...", "hooks": [{"type": "command",
"command": "...", "timeout": <seconds>}]}]}}`. Installing merges leslie's entries in and leaves every other
key, event, group and hook untouched; it is idempotent (leslie's own entries, recognised by their command
`<executable> hook <agent>`, are replaced, never duplicated). Uninstalling removes exactly those entries,
and the groups and events they leave empty. The file keeps its key order and is written atomically.

The command is absolute: the `leslie` executable that runs `leslie hooks install` (so an agent started
with another PATH, or after a virtualenv was deactivated, still finds it), quoted for the shell. The write
guard's entries are fail-closed where the agent offers it: Claude Code's `"onFailure": "block"` makes a
hook that cannot start, times out or crashes block the tool call instead of letting it through. Codex has
no such option (a failed hook lets the call go ahead); `leslie hooks status` and `leslie doctor` say when
an installed command no longer runs.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from leslie.errors import CorruptStateError, UsageError
from leslie.integrations import gemini_install
from leslie.integrations.codex_trust import NEXT_STEPS as CODEX_NEXT_STEPS
from leslie.integrations.plugin_install import PluginFile
from leslie.store.files import read_repository_file, write_repository_file
from leslie.store.jsonio import StrictJSONError, loads_strict
from leslie.store.record import dataclass, field

if TYPE_CHECKING:
    from leslie.ops.doctor import DoctorReport
    from leslie.store.repository import Repository

CONTEXT_TIMEOUT = 15  # seconds: a render is ~0.1 s; context commands (5 s each by default) run in parallel
GUARD_TIMEOUT = 10  # seconds: the write guard's sweep stats every protected file (0.4 s at 10,000 threads)
PROBE_TIMEOUT = 10.0  # seconds `leslie hooks status` gives `<command> --version`
EVENT_AGENTS = ("copilot",)  # agents whose hook command ends with the event it answers


@dataclass(frozen=True)
class HookEntry:
    """One event leslie handles for an agent: its matcher, timeout, and whether a failure blocks."""

    event: str
    matcher: str | None
    timeout: int
    fail_closed: bool = False
    extra: tuple[tuple[str, Any], ...] = ()  # more keys of the hook object


@dataclass(frozen=True)
class AgentHooks:
    """Where an agent's project hook file lives and which events leslie handles there."""

    agent: str
    path: str  # relative to the repository root
    entries: tuple[HookEntry, ...]
    fail_closed_key: str | None = None  # the agent's name for "a failure of this hook blocks"
    next_steps: str | None = None  # what the user must still do for the agent to run the hooks
    setting_keys: tuple[str, ...] = ()  # keys of `hooks` that are settings, not events (left alone)
    shared_settings: bool = False  # the file is the agent's general settings, not only hooks
    flat: bool = False  # Copilot's layout: each event lists hook objects (no groups, no matchers)
    command_key: str = "command"  # where a hook object holds its command line
    timeout_key: str = "timeout"
    event_argument: bool = False  # the command names its event: `leslie hook AGENT EVENT`
    top: tuple[tuple[str, Any], ...] = ()  # keys the file's root must hold (Copilot's `version`)
    plugin: str | None = None  # a plugin agent (no hook file): the packaged plugin's name (`plugin_install`)


def _timeout(kind: str) -> int:
    return CONTEXT_TIMEOUT if kind == "context" else GUARD_TIMEOUT


def _qwen_hooks() -> AgentHooks:
    from leslie.integrations import qwen

    return AgentHooks("qwen", qwen.HOOK_FILE, tuple(HookEntry(event, matcher, _timeout(kind), fail_closed)
                                                    for event, matcher, kind, fail_closed in qwen.HOOK_EVENTS),
                      next_steps=qwen.NEXT_STEPS)


def _factory_hooks() -> AgentHooks:
    from leslie.integrations import factory

    return AgentHooks("factory", factory.HOOK_FILE, tuple(HookEntry(event, matcher, _timeout(kind))
                                                          for event, matcher, kind in factory.HOOK_EVENTS))


def _copilot_hooks() -> AgentHooks:
    from leslie.integrations import copilot

    return AgentHooks("copilot", copilot.HOOK_FILE, tuple(HookEntry(event, None, _timeout(kind))
                                                          for event, kind in copilot.HOOK_EVENTS),
                      next_steps=copilot.NEXT_STEPS, flat=True, command_key="bash", timeout_key="timeoutSec",
                      event_argument=True, top=(("version", 1),))


AGENTS = {
    "claude-code": AgentHooks("claude-code", ".claude/settings.json", (
        HookEntry("SessionStart", None, CONTEXT_TIMEOUT),
        HookEntry("UserPromptSubmit", None, CONTEXT_TIMEOUT),
        HookEntry("PreToolUse", "Write|Edit|MultiEdit|NotebookEdit|Bash", GUARD_TIMEOUT, fail_closed=True),
        HookEntry("PostToolUse", "Bash", GUARD_TIMEOUT, fail_closed=True),
        HookEntry("PostToolUseFailure", "Bash", GUARD_TIMEOUT, fail_closed=True),  # a Bash exit != 0 lands here
        HookEntry("Stop", None, GUARD_TIMEOUT),
    ), fail_closed_key="onFailure"),
    "codex": AgentHooks("codex", ".codex/hooks.json", (
        # Codex cuts hook context over about 2,500 tokens in the middle (seen with 0.169.0: 14 of 41
        # references lost); `additionalContextLimit: 0` lifts the limit for leslie's context hooks.
        HookEntry("SessionStart", None, CONTEXT_TIMEOUT, extra=(("additionalContextLimit", 0),)),
        HookEntry("UserPromptSubmit", None, CONTEXT_TIMEOUT, extra=(("additionalContextLimit", 0),)),
        HookEntry("PostCompact", None, CONTEXT_TIMEOUT),
        HookEntry("PreToolUse", "Bash|apply_patch|Write|Edit", GUARD_TIMEOUT),
        HookEntry("PostToolUse", "Bash", GUARD_TIMEOUT),
        HookEntry("Stop", None, GUARD_TIMEOUT),
    ), next_steps=CODEX_NEXT_STEPS),
    "gemini": AgentHooks("gemini", gemini_install.PATH, tuple(
        HookEntry(event, matcher, timeout) for event, matcher, timeout in gemini_install.ENTRIES),
        next_steps=gemini_install.NEXT_STEPS, setting_keys=gemini_install.SETTING_KEYS, shared_settings=True),
    "copilot": _copilot_hooks(),
    "qwen": _qwen_hooks(),
    "factory": _factory_hooks(),
    # Plugin agents: one file of leslie's, its events are the client's plugin API's (`plugin_install`).
    "opencode": AgentHooks("opencode", ".opencode/plugins/leslie.js", (
        HookEntry("chat.message", None, CONTEXT_TIMEOUT),
        HookEntry("session.compacted", None, CONTEXT_TIMEOUT),
        HookEntry("tool.execute.before", None, GUARD_TIMEOUT),
    ), plugin="opencode.js"),
    "kilo": AgentHooks("kilo", ".kilo/plugins/leslie.js", (  # Kilo Code: opencode's fork, its plugin API
        HookEntry("chat.message", None, CONTEXT_TIMEOUT),
        HookEntry("session.compacted", None, CONTEXT_TIMEOUT),
        HookEntry("tool.execute.before", None, GUARD_TIMEOUT),
    ), plugin="opencode.js"),
    "pi": AgentHooks("pi", ".pi/extensions/leslie.ts", (
        HookEntry("before_agent_start", None, CONTEXT_TIMEOUT),
        HookEntry("session_compact", None, CONTEXT_TIMEOUT),
        HookEntry("tool_call", None, GUARD_TIMEOUT),
    ), plugin="pi.ts"),
}


@dataclass(frozen=True)
class HooksResult:
    """What an install or uninstall did to the agent's hook file."""

    agent: str
    path: str  # relative to the repository root
    changed: bool
    events: tuple[str, ...]  # events whose leslie entry was added or removed
    command: str | None = None  # the command installed
    warnings: tuple[str, ...] = field(default_factory=tuple)
    next_steps: str | None = None  # what the user must still do for the agent to run them


def agent_hooks(agent: str) -> AgentHooks:
    """The hook layout of `agent`; UsageError for an agent leslie has no hooks for."""
    try:
        return AGENTS[agent]
    except KeyError:
        raise UsageError(f"no hooks for agent {agent!r}: expected one of {', '.join(AGENTS)}") from None


def hook_command(agent: str, executable: str = "leslie", event: str | None = None) -> str:
    """The command line leslie installs for `agent` (`executable` already quoted for the shell); `event` for
    an agent whose payloads do not name it."""
    return f"{executable} hook {agent}" + (f" {event}" if event is not None else "")


def _which(name: str) -> str | None:
    """`shutil.which`, imported when a command is looked up: `shutil` (with `bz2` and `lzma`) costs ~3 ms,
    and `leslie status` imports this module whether or not any hooks are installed."""
    import shutil

    return shutil.which(name)


def installing_executable() -> str:
    """How to call the leslie that is running now, as an absolute command, quoted for the shell.

    The console script it was started as (`sys.argv[0]` made absolute), else the `leslie` on PATH, else
    this interpreter with `-m leslie`.
    """
    started_as = os.path.abspath(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    if os.path.basename(started_as) in ("leslie", "leslie.exe") and os.access(started_as, os.X_OK):
        return shlex.quote(started_as)
    found = _which("leslie")
    if found is not None:
        return shlex.quote(os.path.abspath(found))
    return f"{shlex.quote(sys.executable)} -m leslie"


def path_warnings(command: str) -> tuple[str, ...]:
    """A warning when `leslie` is not on PATH (the installed hooks work; the user's shell will not)."""
    if _which("leslie") is not None:
        return ()
    return (f"warning: `leslie` is not on your PATH; the hooks call it as {command.rsplit(' hook ', 1)[0]}, "
            "which keeps working only while that file exists",)


def is_leslie_hook(hook: Any, agent: str, key: str = "command") -> bool:
    """True for a hook entry that runs `... leslie hook <agent>` (any path to the executable, quoted or not,
    or `python -m leslie`), and an event name after it for Copilot; `key` holds the command line."""
    if not isinstance(hook, dict) or not isinstance(hook.get(key), str):
        return False
    event = r"(\s+[A-Za-z]+)?" if agent == "copilot" else ""
    return re.search(rf"(^|[\s/\"']){re.escape('leslie')}(\.exe)?[\"']?\s+hook\s+{re.escape(agent)}{event}\s*$",
                     hook[key].strip()) is not None


def _load(root: Path, path: Path, setting_keys: tuple[str, ...] = ()) -> dict[str, Any]:
    # A regular file of bounded size, through links only inside the repository (store.repository_target);
    # strict JSON, so a deep, huge-integer or lone-surrogate document is refused here, not a crash further on.
    raw = read_repository_file(root, path)
    if raw is None or not raw.strip():
        return {}
    try:
        data = loads_strict(raw)
    except StrictJSONError as exc:
        raise CorruptStateError(path, f"is not valid JSON ({exc}); fix it by hand, leslie leaves it untouched") \
            from None
    if not isinstance(data, dict):
        raise CorruptStateError(path, "is not a JSON object; fix it by hand, leslie leaves it untouched")
    hooks = data.get("hooks", {})
    if not isinstance(hooks, dict) or not all(isinstance(v, list) for k, v in hooks.items()
                                              if k not in setting_keys):
        raise CorruptStateError(path, "has a `hooks` entry that is not an object of lists")
    return data


def _strip(hooks: dict[str, Any], spec: AgentHooks) -> set[str]:
    """Remove leslie's entries for the agent of `spec` from every event; return the events that had one."""
    agent = spec.agent
    touched = set()
    for event in list(hooks):
        if not isinstance(hooks[event], list):  # a setting (Gemini's `enabled`, ...), not an event
            continue
        groups = []
        for group in hooks[event]:
            kept_group = group
            if spec.flat:
                if is_leslie_hook(group, agent, spec.command_key):
                    touched.add(event)
                    continue
            elif isinstance(group, dict) and isinstance(group.get("hooks"), list):
                kept = [h for h in group["hooks"] if not is_leslie_hook(h, agent)]
                if len(kept) != len(group["hooks"]):
                    touched.add(event)
                    if not kept:
                        continue
                    kept_group = {**group, "hooks": kept}
            groups.append(kept_group)
        if groups:
            hooks[event] = groups
        else:
            del hooks[event]
    return touched


def _write(root: Path, path: Path, data: dict[str, Any]) -> None:
    write_repository_file(root, path, (json.dumps(data, indent=2, ensure_ascii=False) + "\n").encode("utf-8"))


def entry_hook(spec: AgentHooks, entry: HookEntry, command: str) -> dict[str, Any]:
    """The hook object leslie writes for one event."""
    hook: dict[str, Any] = {"type": "command", spec.command_key: command, spec.timeout_key: entry.timeout}
    if entry.fail_closed and spec.fail_closed_key is not None:
        hook[spec.fail_closed_key] = "block"
    hook.update(entry.extra)
    return hook


def install(root: Path, agent: str, *, executable: str | None = None) -> HooksResult:
    """Merge leslie's hook entries for `agent` into its project hook file under `root` (idempotent).

    `executable`: how the hooks call leslie, already quoted for the shell (default: this leslie's absolute
    path, `installing_executable`).
    """
    spec = agent_hooks(agent)
    if spec.plugin is not None:
        return _install_plugin(root, spec, executable)
    path = root / spec.path
    data = _load(root, path, spec.setting_keys)
    before = json.dumps(data, sort_keys=True)
    hooks: dict[str, Any] = dict(data.get("hooks", {}))
    _strip(hooks, spec)
    chosen = executable or installing_executable()
    command = hook_command(agent, chosen)
    for entry in spec.entries:
        hook = entry_hook(spec, entry, hook_command(agent, chosen, entry.event if spec.event_argument else None))
        if spec.flat:
            hooks[entry.event] = [*hooks.get(entry.event, []), hook]
            continue
        group: dict[str, Any] = {} if entry.matcher is None else {"matcher": entry.matcher}
        group["hooks"] = [hook]
        hooks[entry.event] = [*hooks.get(entry.event, []), group]
    for key, value in spec.top:
        data.setdefault(key, value)
    data["hooks"] = hooks
    changed = json.dumps(data, sort_keys=True) != before
    if changed:
        _write(root, path, data)
    return HooksResult(agent, spec.path, changed, tuple(e.event for e in spec.entries) if changed else (),
                       command, path_warnings(command), spec.next_steps)


def uninstall(root: Path, agent: str) -> HooksResult:
    """Remove leslie's hook entries for `agent` from its project hook file (other entries stay)."""
    spec = agent_hooks(agent)
    if spec.plugin is not None:
        removed = plugin_file(spec).uninstall(root)
        return HooksResult(agent, spec.path, removed, tuple(e.event for e in spec.entries) if removed else ())
    path = root / spec.path
    if not path.exists():
        return HooksResult(agent, spec.path, False, ())
    data = _load(root, path, spec.setting_keys)
    hooks: dict[str, Any] = dict(data.get("hooks", {}))
    touched = _strip(hooks, spec)
    if not touched:
        return HooksResult(agent, spec.path, False, ())
    data["hooks"] = hooks
    _write(root, path, data)
    return HooksResult(agent, spec.path, True, tuple(sorted(touched)))


# -- plugin agents (opencode, Kilo, pi): one file of leslie's (`leslie.integrations.plugin_install`) -----------

def plugin_file(spec: AgentHooks) -> PluginFile:
    """The plugin file of a plugin agent."""
    assert spec.plugin is not None
    return PluginFile(spec.agent, spec.path, spec.plugin, CONTEXT_TIMEOUT * 1000, GUARD_TIMEOUT * 1000)


def _install_plugin(root: Path, spec: AgentHooks, executable: str | None) -> HooksResult:
    command = executable or installing_executable()
    changed = plugin_file(spec).install(root, shlex.split(command))
    full = hook_command(spec.agent, command)
    return HooksResult(spec.agent, spec.path, changed, tuple(e.event for e in spec.entries) if changed else (),
                       full, path_warnings(full), spec.next_steps)


def _check_plugin(root: Path, spec: AgentHooks, *, probe: bool) -> HooksStatus:
    events = tuple(e.event for e in spec.entries)
    try:
        found = plugin_file(spec).installed(root)
    except CorruptStateError as exc:
        return HooksStatus(spec.agent, spec.path, (), events, (), (), exc.message)
    if found is None:
        return HooksStatus(spec.agent, spec.path, (), events, (), ())
    argv, current = found
    if argv is None:
        return HooksStatus(spec.agent, spec.path, events, (), events, ())
    command = hook_command(spec.agent, shlex.join(argv))
    return HooksStatus(spec.agent, spec.path, events, (), () if current else events,
                       (check_command(command, spec.agent, probe=probe),))


def installed(root: Path, agent: str) -> bool:
    """True when every event leslie handles for `agent` has its entry in the hook file."""
    return not check(root, agent, probe=False).missing


# -- leslie hooks status -------------------------------------------------------------------------------

@dataclass(frozen=True)
class CommandCheck:
    """Whether one installed hook command starts a working leslie."""

    command: str
    executable: str | None  # the file it runs, when found
    version: str | None  # what `<command> --version` printed
    problem: str | None  # None when it works

    @property
    def ok(self) -> bool:
        return self.problem is None


@dataclass(frozen=True)
class HooksStatus:
    """The state of leslie's hooks for one agent."""

    agent: str
    path: str
    installed: tuple[str, ...]  # events with a leslie entry
    missing: tuple[str, ...]  # events leslie handles that have none
    outdated: tuple[str, ...]  # events whose entry differs from what `leslie hooks install` writes
    commands: tuple[CommandCheck, ...]
    problem: str | None = None  # the hook file itself cannot be read
    agent_trust: tuple[str, ...] = ()  # what the agent still needs before it runs them (Codex's trust)

    @property
    def ok(self) -> bool:
        """Everything installed, current, and every command runs."""
        return (self.problem is None and not self.missing and not self.outdated
                and all(c.ok for c in self.commands) and not self.agent_trust)


def _leslie_entries(data: dict[str, Any], spec: AgentHooks) -> dict[str, list[tuple[dict[str, Any], dict[str, Any]]]]:
    agent = spec.agent
    found: dict[str, list[tuple[dict[str, Any], dict[str, Any]]]] = {}
    for event, groups in data.get("hooks", {}).items():
        for group in groups if isinstance(groups, list) else ():
            if spec.flat:
                if is_leslie_hook(group, agent, spec.command_key):
                    found.setdefault(event, []).append((group, group))
            elif isinstance(group, dict) and isinstance(group.get("hooks"), list):
                for hook in group["hooks"]:
                    if is_leslie_hook(hook, agent):
                        found.setdefault(event, []).append((group, hook))
    return found


def check_command(command: str, agent: str, *, probe: bool = True) -> CommandCheck:
    """Does `command` (an installed `... hook AGENT` line) start a leslie that runs?"""
    try:
        argv = shlex.split(command)
    except ValueError as exc:
        return CommandCheck(command, None, None, f"cannot be parsed as a shell command ({exc})")
    if len(argv) >= 3 and argv[-3:-1] == ["hook", agent] and agent in EVENT_AGENTS:
        argv = argv[:-1]
    argv = argv[:-2] if argv[-2:] == ["hook", agent] else argv
    if not argv:
        return CommandCheck(command, None, None, "names no executable")
    name = argv[0]
    found = _which(name) if os.sep not in name else (name if os.path.isfile(name) else None)
    if found is None:
        where = "is not on this PATH" if os.sep not in name else "does not exist"
        return CommandCheck(command, None, None, f"{name} {where}")
    if not os.access(found, os.X_OK):
        return CommandCheck(command, found, None, f"{found} is not executable")
    if not probe:
        return CommandCheck(command, found, None, None)
    import subprocess

    try:
        proc = subprocess.run([found, *argv[1:], "--version"], capture_output=True, text=True,
                              timeout=PROBE_TIMEOUT, check=False, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return CommandCheck(command, found, None, f"`{name} --version` did not answer within {PROBE_TIMEOUT:g} s")
    except OSError as exc:
        return CommandCheck(command, found, None, f"{found} cannot be started ({exc.strerror or exc})")
    output = (proc.stdout or proc.stderr).strip()
    if proc.returncode != 0 or "leslie" not in output:
        tail = output.splitlines()[-1] if output else f"exit {proc.returncode}"
        return CommandCheck(command, found, None, f"`{name} --version` failed: {tail}")
    return CommandCheck(command, found, output.splitlines()[0], None)


def _mentions_leslie(root: Path, spec: AgentHooks, agent: str) -> bool:
    """Whether the hook file's text holds `hook <agent>` at all (True when it cannot be read)."""
    try:
        raw = read_repository_file(root, root / spec.path)
    except (CorruptStateError, OSError):
        return True
    return raw is None or f"hook {agent}".encode() in raw


def check(root: Path, agent: str, *, probe: bool = True) -> HooksStatus:
    """What is installed for `agent`, what is missing or outdated, and whether each command runs
    (`probe=False`: only that its executable exists; no process is started)."""
    spec = agent_hooks(agent)
    if spec.plugin is not None:
        return _check_plugin(root, spec, probe=probe)
    try:
        data = _load(root, root / spec.path, spec.setting_keys)
    except CorruptStateError as exc:
        if spec.shared_settings and not _mentions_leslie(root, spec, agent):
            # The agent's own settings, which it reads more leniently (Gemini allows comments), without a
            # leslie hook: nothing of leslie's to report on.
            return HooksStatus(agent, spec.path, (), tuple(e.event for e in spec.entries), (), ())
        return HooksStatus(agent, spec.path, (), tuple(e.event for e in spec.entries), (), (), exc.message)
    found = _leslie_entries(data, spec)
    missing = tuple(e.event for e in spec.entries if e.event not in found)
    outdated = []
    for entry in spec.entries:
        for group, hook in found.get(entry.event, []):
            wanted = entry_hook(spec, entry, hook[spec.command_key])
            wrong_event = spec.event_argument and hook[spec.command_key].split()[-1] != entry.event
            if wrong_event or group.get("matcher") != entry.matcher or {k: hook.get(k) for k in wanted} != wanted:
                outdated.append(entry.event)
                break
    commands = sorted({hook[spec.command_key] for pairs in found.values() for _group, hook in pairs})
    if spec.event_argument:  # one command per event, one executable to probe
        commands = sorted({c.rsplit(None, 1)[0] if c.split()[-1] in {e.event for e in spec.entries} else c
                           for c in commands})
    agent_trust: tuple[str, ...] = ()
    if agent == "codex" and found:
        from leslie.integrations import codex_trust

        trust = codex_trust.read_trust(root, data, lambda hook: is_leslie_hook(hook, agent))
        agent_trust = tuple(codex_trust.trust_lines(trust))
    elif agent == "gemini" and found:
        agent_trust = tuple(gemini_install.trust_lines(str(root)))
    elif agent == "copilot" and found:
        from leslie.integrations import copilot

        agent_trust = tuple(copilot.trust_lines(str(root)))
    return HooksStatus(agent, spec.path, tuple(e for e in found if e in {x.event for x in spec.entries}),
                       missing, tuple(outdated), tuple(check_command(c, agent, probe=probe) for c in commands),
                       agent_trust=agent_trust)


def status_lines(status: HooksStatus) -> list[str]:
    """`status` in words, one line per finding (for `leslie hooks status` and `leslie doctor`)."""
    fix = f"run `leslie hooks install {status.agent}`"
    if status.problem is not None:
        return [f"{status.agent}: {status.problem}"]
    if not status.installed:
        return [f"{status.agent}: not installed in {status.path} ({fix})"]
    lines = []
    if status.missing:
        lines.append(f"{status.agent}: {status.path} lacks leslie's {', '.join(status.missing)} hooks ({fix})")
    if status.outdated:
        lines.append(f"{status.agent}: leslie's {', '.join(status.outdated)} hooks in {status.path} are older "
                     f"than this leslie's ({fix})")
    for command in status.commands:
        if not command.ok:
            lines.append(f"{status.agent}: the hook command `{command.command}` is broken: {command.problem} "
                         f"({fix} with a working leslie)")
    return lines + list(status.agent_trust)


def check_for_doctor(repo: Repository, report: DoctorReport) -> None:
    """For `leslie doctor`: the agents' hooks (installed ones must be complete and point at an existing
    leslie), and what the write guard's second line has caught (`leslie.guard.tripwire`)."""
    from leslie.guard import snapshots, tripwire

    for agent in AGENTS:
        status = check(repo.root, agent, probe=False)
        if not status.installed and status.problem is None:
            continue
        if status.problem is not None or status.missing or not all(c.ok for c in status.commands):
            report.problems += status_lines(status)
        elif status.outdated or status.agent_trust:  # the agent's own trust is the user's to give: a note
            report.notes += status_lines(status)
    count, last, unreadable = tripwire.incidents_summary(str(repo.root))
    record = snapshots.shown(str(repo.root), tripwire.incidents_file(str(repo.root)))
    if count:
        report.notes.append(f"the write guard recorded {count} change(s) by agents' shell commands to files they "
                            f"may not write (last: {last}); see {record}")
    if unreadable:
        report.notes.append(f"{unreadable} line(s) of the write guard's record {record} "
                            "could not be read (skipped)")
