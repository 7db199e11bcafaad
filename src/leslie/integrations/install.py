"""`leslie hooks install|uninstall|status AGENT`: leslie's entries in the agent's project hook file.

Two forms (docs/integrations.md, "Where the hooks go, and hooks for a team"):

- **personal** (the default): the command is absolute, the `leslie` executable that runs `leslie hooks install`
  (so an agent started with another PATH, or after a virtualenv was deactivated, still finds it), quoted for
  the shell, and the write guard's entries are fail-closed where the agent offers it (Claude Code's
  `"onFailure": "block"`). It names a file of this machine, so it goes where the agent keeps per-user project
  settings: `.claude/settings.local.json` for Claude Code (kept out of git through `.git/info/exclude`). The
  other agents have no such file: leslie writes their project file, and keeps it out of git when it is leslie's
  alone (Copilot's `.github/hooks/leslie.json`, the plugin files), since a Copilot hook that cannot start denies
  the tool call.
- **shared** (`--shared`, for a repository a team commits): `sh -c '...'` that runs the `leslie` on PATH and,
  when there is none, prints one line on stderr and exits 0; never fail-closed. A teammate without leslie
  loses leslie's hooks, never a tool call. It goes into the project's shared file (`.claude/settings.json`).

Where each agent's hooks live:
- Claude Code: `.claude/settings.local.json` (personal) or `.claude/settings.json` (shared), key `hooks`.
- Codex: `.codex/hooks.json` (the project layer's hook file; its root holds only `hooks`, and optionally
  `description`).
- Gemini CLI: `.gemini/settings.json`, key `hooks`, timeouts in milliseconds (`integrations.gemini_install`).
- Qwen Code: `.qwen/settings.json` (the project's settings), key `hooks`; what leslie installs there is
  `leslie.integrations.qwen.HOOK_EVENTS`.
- Factory's droid: `.factory/settings.json` (the project's settings), key `hooks`; what leslie installs there
  is `leslie.integrations.factory.HOOK_EVENTS` (droid reads hooks from `settings.json` and `hooks.json`, not
  from its `settings.local.json`).
- GitHub Copilot CLI: `.github/hooks/leslie.json` (`{"version": 1, "hooks": {"<event>": [{"type": "command",
  "bash": "...", "timeoutSec": <seconds>}]}}`: no groups, no matchers, one command per event since Copilot's
  payloads do not name their event); what leslie installs there is `leslie.integrations.copilot.HOOK_EVENTS`.
- opencode, Kilo Code and pi: no hook file, but a plugin file of leslie's (`leslie.integrations.plugin_install`).

The other hook files have the same shape:
`{"hooks": {"<Event>": [{"matcher": "...", "hooks": [{"type": "command",
"command": "...", "timeout": <seconds>}]}]}}`. Installing merges leslie's entries in and leaves every other
key, event, group and hook untouched; it is idempotent (leslie's own entries, recognised by their command
`<executable> hook <agent>` or the shared form, are replaced, never duplicated). Uninstalling removes exactly
those entries, of either form and from either file, and the groups and events they leave empty. The file
keeps its key order and is written atomically.

`leslie hooks status` (`leslie.integrations.hooks_status`) never runs a command the repository names: it reads
the files, compares each entry with what `hooks install` would write, and looks the executable up (exists,
executable, and whether it is the very leslie running the check), without starting it.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from leslie.errors import CorruptStateError, UsageError
from leslie.integrations import gemini_install, hook_forms
from leslie.integrations.codex_trust import NEXT_STEPS as CODEX_NEXT_STEPS
from leslie.integrations.plugin_install import PluginFile
from leslie.store.files import read_repository_file, write_repository_file
from leslie.store.jsonio import StrictJSONError, loads_strict

CONTEXT_TIMEOUT = 15  # seconds: a render is ~0.1 s; context commands (5 s each by default) run in parallel
GUARD_TIMEOUT = 10  # seconds: the write guard's sweep stats every protected file (0.4 s at 10,000 threads)
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
    local_path: str | None = None  # where the agent keeps per-user project settings (the personal form goes there)
    own_file: bool = False  # `path` holds only leslie's entries: the personal form keeps it out of git

    def personal_path(self) -> str:
        """Where the personal form goes: the per-user file when the agent has one, else the project file."""
        return self.local_path or self.path

    def paths(self) -> tuple[str, ...]:
        """Every file leslie's entries may be in, the personal one first."""
        return (self.local_path, self.path) if self.local_path else (self.path,)


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
                      event_argument=True, top=(("version", 1),), own_file=True)


AGENTS = {
    "claude-code": AgentHooks("claude-code", ".claude/settings.json", (
        HookEntry("SessionStart", None, CONTEXT_TIMEOUT),
        HookEntry("UserPromptSubmit", None, CONTEXT_TIMEOUT),
        HookEntry("PreToolUse", "Write|Edit|MultiEdit|NotebookEdit|Bash", GUARD_TIMEOUT, fail_closed=True),
        HookEntry("PostToolUse", "Bash", GUARD_TIMEOUT, fail_closed=True),
        HookEntry("PostToolUseFailure", "Bash", GUARD_TIMEOUT, fail_closed=True),  # a Bash exit != 0 lands here
        HookEntry("Stop", None, GUARD_TIMEOUT),
    ), fail_closed_key="onFailure", local_path=".claude/settings.local.json"),
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


def which(name: str) -> str | None:
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
    found = which("leslie")
    if found is not None:
        return shlex.quote(os.path.abspath(found))
    return f"{shlex.quote(sys.executable)} -m leslie"


def path_warnings(command: str) -> tuple[str, ...]:
    """A warning when `leslie` is not on PATH (the installed hooks work; the user's shell will not)."""
    if which("leslie") is not None:
        return ()
    return (f"warning: `leslie` is not on your PATH; the hooks call it as {command.rsplit(' hook ', 1)[0]}, "
            "which keeps working only while that file exists",)


def is_leslie_hook(hook: Any, agent: str, key: str = "command") -> bool:
    """True for a hook entry that runs `... leslie hook <agent>` (any path to the executable, quoted or not,
    or `python -m leslie`), and an event name after it for Copilot, or leslie's shared form (`hook_forms`);
    `key` holds the command line."""
    if not isinstance(hook, dict) or not isinstance(hook.get(key), str):
        return False
    if hook_forms.is_shared(hook[key], agent):
        return True
    event = r"(\s+[A-Za-z]+)?" if agent == "copilot" else ""
    return re.search(rf"(^|[\s/\"']){re.escape('leslie')}(\.exe)?[\"']?\s+hook\s+{re.escape(agent)}{event}\s*$",
                     hook[key].strip()) is not None


def load_hook_file(root: Path, path: Path, setting_keys: tuple[str, ...] = ()) -> dict[str, Any]:
    """A hook file's JSON object ({} when absent or empty); CorruptStateError naming it otherwise."""
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


def entry_hook(spec: AgentHooks, entry: HookEntry, command: str, *, shared: bool = False) -> dict[str, Any]:
    """The hook object leslie writes for one event (`shared`: never fail-closed, a missing leslie must not
    block a teammate's tools)."""
    hook: dict[str, Any] = {"type": "command", spec.command_key: command, spec.timeout_key: entry.timeout}
    if entry.fail_closed and spec.fail_closed_key is not None and not shared:
        hook[spec.fail_closed_key] = "block"
    hook.update(entry.extra)
    return hook


def _entry_command(spec: AgentHooks, entry: HookEntry, executable: str | None) -> str:
    """The command of one entry: the personal form with `executable`, the shared form when it is None."""
    event = entry.event if spec.event_argument else None
    if executable is None:
        return hook_forms.shared_command(spec.agent, event)
    return hook_command(spec.agent, executable, event)


def _has_shared_entries(root: Path, spec: AgentHooks, relative: str) -> bool:
    path = root / relative
    if not path.exists():
        return False
    data = load_hook_file(root, path, spec.setting_keys)
    return any(hook_forms.is_shared(hook[spec.command_key], spec.agent)
               for pairs in leslie_entries(data, spec).values() for _group, hook in pairs)


def _strip_file(root: Path, spec: AgentHooks, relative: str) -> set[str]:
    """Remove leslie's entries for `spec` from one hook file (when it exists); the events that had one."""
    path = root / relative
    if not path.exists():
        return set()
    data = load_hook_file(root, path, spec.setting_keys)
    hooks: dict[str, Any] = dict(data.get("hooks", {}))
    touched = _strip(hooks, spec)
    if touched:
        data["hooks"] = hooks
        _write(root, path, data)
    return touched


def install(root: Path, agent: str, *, executable: str | None = None, shared: bool = False) -> HooksResult:
    """Merge leslie's hook entries for `agent` into its hook file under `root` (idempotent).

    Personal (the default): the command is `executable` (already quoted for the shell; default: this leslie's
    absolute path, `installing_executable`), in the agent's per-user project file when it has one, kept out of
    git. `shared`: the portable form (`hook_forms.shared_command`) in the project's shared file.
    """
    spec = agent_hooks(agent)
    if shared and executable is not None:
        raise UsageError("--shared runs the leslie on PATH: it takes no --executable")
    if spec.plugin is not None:
        return _install_plugin(root, spec, executable, shared)
    relative = spec.path if shared else spec.personal_path()
    warnings: list[str] = []
    for other in spec.paths():
        if other == relative:
            continue
        if not shared and _has_shared_entries(root, spec, other):
            # The team's portable entries already run leslie here; a second set would run it twice per event.
            return HooksResult(agent, other, False, (), hook_forms.shared_command(agent), (
                f"{other} already has leslie's shared hooks (the team's, running the leslie on PATH); nothing "
                f"installed in {relative}: leslie would run twice per event. To use this leslie's path instead, "
                f"`leslie hooks uninstall {agent}` first",), spec.next_steps)
        if _strip_file(root, spec, other):  # a personal install in the shared file (older leslie), or the reverse
            warnings.append(f"note: leslie's entries moved from {other} to {relative}"
                            + ("" if shared else f" (they named this machine's leslie; commit the change to {other})"))
    path = root / relative
    data = load_hook_file(root, path, spec.setting_keys)
    before = json.dumps(data, sort_keys=True)
    hooks: dict[str, Any] = dict(data.get("hooks", {}))
    _strip(hooks, spec)
    chosen = None if shared else executable or installing_executable()
    for entry in spec.entries:
        hook = entry_hook(spec, entry, _entry_command(spec, entry, chosen), shared=shared)
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
    command = hook_forms.shared_command(agent) if chosen is None else hook_command(agent, chosen)
    warnings += _git_placement(root, spec, relative, shared)
    warnings += path_warnings(command) if chosen is not None else _shared_path_warnings()
    return HooksResult(agent, relative, changed, tuple(e.event for e in spec.entries) if changed else (),
                       command, tuple(warnings), spec.next_steps)


def _git_placement(root: Path, spec: AgentHooks, relative: str, shared: bool) -> list[str]:
    """Keep a personal file out of git (`.git/info/exclude`), and a shared file of leslie's in it again; warn
    when git tracks a project file that now names this machine's leslie."""
    own = spec.own_file or spec.plugin is not None
    if shared:
        if own:
            hook_forms.include(root, relative)
        return []
    if relative == spec.local_path or own:
        warning = hook_forms.exclude(root, relative)
        return [warning] if warning else []
    if hook_forms.tracked(root, relative):
        return [f"warning: git tracks {relative}, and leslie's entries there now run this machine's leslie by "
                f"its path; before committing it, install with --shared (docs/integrations.md, Hooks for a team)"]
    return []


def _shared_path_warnings() -> list[str]:
    if which("leslie") is not None:
        return []
    return ["warning: `leslie` is not on your PATH: the shared hooks run the leslie on PATH, so here they do "
            "nothing (each says so on stderr) until it is"]


def uninstall(root: Path, agent: str) -> HooksResult:
    """Remove leslie's hook entries for `agent`, of either form, from every file they may be in (other entries
    stay)."""
    spec = agent_hooks(agent)
    if spec.plugin is not None:
        removed = plugin_file(spec).uninstall(root)
        hook_forms.include(root, spec.path)
        return HooksResult(agent, spec.path, removed, tuple(e.event for e in spec.entries) if removed else ())
    touched: set[str] = set()
    where = []
    for relative in spec.paths():
        here = _strip_file(root, spec, relative)
        if here:
            where.append(relative)
        touched |= here
    if spec.own_file:  # a file of leslie's alone, kept out of git while it was personal: its exclude line goes
        hook_forms.include(root, spec.path)
    if not touched:
        return HooksResult(agent, spec.personal_path(), False, ())
    return HooksResult(agent, ", ".join(where), True, tuple(sorted(touched)))


# -- plugin agents (opencode, Kilo, pi): one file of leslie's (`leslie.integrations.plugin_install`) -----------

def plugin_file(spec: AgentHooks) -> PluginFile:
    """The plugin file of a plugin agent."""
    assert spec.plugin is not None
    return PluginFile(spec.agent, spec.path, spec.plugin, CONTEXT_TIMEOUT * 1000, GUARD_TIMEOUT * 1000)


def _install_plugin(root: Path, spec: AgentHooks, executable: str | None, shared: bool) -> HooksResult:
    if shared:
        argv = hook_forms.shared_plugin_argv(spec.agent)
        full = hook_forms.shared_command(spec.agent)
    else:
        command = executable or installing_executable()
        argv = shlex.split(command)
        full = hook_command(spec.agent, command)
    changed = plugin_file(spec).install(root, argv)
    warnings = _git_placement(root, spec, spec.path, shared)
    warnings += _shared_path_warnings() if shared else path_warnings(full)
    return HooksResult(spec.agent, spec.path, changed, tuple(e.event for e in spec.entries) if changed else (),
                       full, tuple(warnings), spec.next_steps)


def leslie_entries(data: dict[str, Any], spec: AgentHooks) -> dict[str, list[tuple[dict[str, Any], dict[str, Any]]]]:
    """leslie's hooks for the agent of `spec` in a parsed hook file, by event: (group, hook) pairs."""
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
