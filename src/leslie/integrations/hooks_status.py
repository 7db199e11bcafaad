"""`leslie hooks status`, and the hooks' lines of `leslie status` and `leslie doctor`: what is installed.

It reads the agents' hook files and leslie's plugin files and compares them with what `leslie hooks install`
would write (`leslie.integrations.install`). **It never runs a hook command, nor anything a repository names**
(docs/security.md, "Agents' hook files: read, never run"): `check_command` looks the executable up with `stat`
and `access` only, and tells the leslie running the check by the file itself (`hook_forms.running_leslie_is`).
"""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from leslie.errors import CorruptStateError
from leslie.integrations import gemini_install, hook_forms
from leslie.integrations.install import (
    AGENTS,
    EVENT_AGENTS,
    AgentHooks,
    agent_hooks,
    entry_hook,
    hook_command,
    is_leslie_hook,
    leslie_entries,
    load_hook_file,
    plugin_file,
    which,
)
from leslie.store.files import read_repository_file

if TYPE_CHECKING:
    from leslie.ops.doctor import DoctorReport
    from leslie.store.repository import Repository


@dataclass(frozen=True)
class CommandCheck:
    """What can be known of one installed hook command without running it."""

    command: str
    executable: str | None  # the file it runs, when found
    version: str | None  # this leslie's version, when the command runs this very leslie
    problem: str | None  # None when nothing is wrong with it
    form: str = "personal"  # "personal" (an executable's path) or "shared" (the leslie on PATH)
    this_leslie: bool = False  # the executable is the leslie running the check (same file)

    @property
    def ok(self) -> bool:
        return self.problem is None


@dataclass(frozen=True)
class HooksStatus:
    """The state of leslie's hooks for one agent."""

    agent: str
    path: str  # the file(s) holding leslie's entries, else where `hooks install` puts them
    installed: tuple[str, ...]  # events with a leslie entry
    missing: tuple[str, ...]  # events leslie handles that have none
    outdated: tuple[str, ...]  # events whose entry differs from what `leslie hooks install` writes
    commands: tuple[CommandCheck, ...]
    problem: str | None = None  # the hook file itself cannot be read
    agent_trust: tuple[str, ...] = ()  # what the agent still needs before it runs them (Codex's trust)
    placement: tuple[str, ...] = ()  # entries in the wrong file: a machine path in a shared file, two sets

    @property
    def ok(self) -> bool:
        """Everything installed, current, in its place, and every command found."""
        return (self.problem is None and not self.missing and not self.outdated and not self.placement
                and all(c.ok for c in self.commands) and not self.agent_trust)


def check_command(command: str, agent: str, *, root: Path | None = None) -> CommandCheck:
    """What an installed `... hook AGENT` line runs, found without running it (nor anything it names): the
    executable exists and may be executed, is a leslie by its name, lies outside the repository `root`, and
    whether it is the leslie running this check (`hook_forms.running_leslie_is`)."""
    from leslie import __version__

    if hook_forms.is_shared(command, agent):
        found = which("leslie")
        if found is None:
            return CommandCheck(command, None, None, "the shared form runs the leslie on PATH, and this PATH has "
                                "none: here the hooks do nothing", "shared")
        this = hook_forms.running_leslie_is(found, [])
        return CommandCheck(command, found, __version__ if this else None, None, "shared", this)
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
    if os.sep in name and not os.path.isabs(name):
        return CommandCheck(command, None, None, f"{name} is a relative path: it runs whatever file is there in "
                            "the agent's working folder")
    found = which(name) if os.sep not in name else (name if os.path.isfile(name) else None)
    if found is None:
        where = "is not on this PATH" if os.sep not in name else "does not exist"
        return CommandCheck(command, None, None, f"{name} {where}")
    if not os.access(found, os.X_OK):
        return CommandCheck(command, found, None, f"{found} is not executable")
    if hook_forms.running_leslie_is(found, argv[1:]):
        return CommandCheck(command, found, __version__, None, "personal", True)
    leslie_like = (os.path.basename(name) in ("leslie", "leslie.exe") and len(argv) == 1) or argv[1:] == ["-m",
                                                                                                          "leslie"]
    if not leslie_like:
        return CommandCheck(command, found, None, f"{found} is not a leslie executable")
    if root is not None and _inside(os.path.realpath(found), os.path.realpath(root)):
        return CommandCheck(command, found, None, f"{found} is inside the repository: a file that came with it, "
                            "not an installed leslie")
    return CommandCheck(command, found, None, None)


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def _mentions_leslie(root: Path, relative: str, agent: str) -> bool:
    """Whether the hook file's text holds `hook <agent>` at all (True when it cannot be read)."""
    try:
        raw = read_repository_file(root, root / relative)
    except (CorruptStateError, OSError):
        return True
    return raw is None or f"hook {agent}".encode() in raw


def check(root: Path, agent: str) -> HooksStatus:
    """What is installed for `agent` (either form, in either file), what is missing, outdated or misplaced, and
    what each command runs, found without starting any process it names (`check_command`)."""
    spec = agent_hooks(agent)
    if spec.plugin is not None:
        return _check_plugin(root, spec)
    events = {e.event for e in spec.entries}
    per_file: list[tuple[str, dict[str, Any], dict[str, list[tuple[dict[str, Any], dict[str, Any]]]]]] = []
    for relative in spec.paths():
        try:
            data = load_hook_file(root, root / relative, spec.setting_keys)
        except CorruptStateError as exc:
            if spec.shared_settings and not _mentions_leslie(root, relative, agent):
                # The agent's own settings, which it reads more leniently (Gemini allows comments), without a
                # leslie hook: nothing of leslie's to report on.
                continue
            return HooksStatus(agent, relative, (), tuple(e.event for e in spec.entries), (), (), exc.message)
        entries = leslie_entries(data, spec)
        if entries:
            per_file.append((relative, data, entries))
    found: dict[str, list[tuple[dict[str, Any], dict[str, Any]]]] = {}
    for _relative, _data, entries in per_file:
        for event, pairs in entries.items():
            found.setdefault(event, []).extend(pairs)
    missing = tuple(e.event for e in spec.entries if e.event not in found)
    outdated = []
    for entry in spec.entries:
        for group, hook in found.get(entry.event, []):
            command = hook[spec.command_key]
            shared = hook_forms.is_shared(command, agent)
            wanted = entry_hook(spec, entry, command, shared=shared)
            wrong_event = spec.event_argument and command.rstrip("'").split()[-1] != entry.event
            stale = shared and command != hook_forms.shared_command(agent, entry.event if spec.event_argument
                                                                     else None)
            if (wrong_event or stale or group.get("matcher") != entry.matcher
                    or {k: hook.get(k) for k in wanted} != wanted):
                outdated.append(entry.event)
                break
    commands = sorted({hook[spec.command_key] for pairs in found.values() for _group, hook in pairs})
    if spec.event_argument:  # one command per event, one executable to look at
        commands = sorted({_without_event(c, agent, events) for c in commands})
    agent_trust: tuple[str, ...] = ()
    data = per_file[-1][1] if per_file else {}
    if agent == "codex" and found:
        from leslie.integrations import codex_trust

        trust = codex_trust.read_trust(root, data, lambda hook: is_leslie_hook(hook, agent))
        agent_trust = tuple(codex_trust.trust_lines(trust))
    elif agent == "gemini" and found:
        agent_trust = tuple(gemini_install.trust_lines(str(root)))
    elif agent == "copilot" and found:
        from leslie.integrations import copilot

        agent_trust = tuple(copilot.trust_lines(str(root)))
    where = ", ".join(relative for relative, _data, _entries in per_file) or spec.personal_path()
    return HooksStatus(agent, where, tuple(e for e in found if e in events), missing, tuple(outdated),
                       tuple(check_command(c, agent, root=root) for c in commands), agent_trust=agent_trust,
                       placement=tuple(_placement(spec, per_file)))


def _check_plugin(root: Path, spec: AgentHooks) -> HooksStatus:
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
    if argv == hook_forms.shared_plugin_argv(spec.agent):
        command = hook_forms.shared_command(spec.agent)
    else:
        command = hook_command(spec.agent, shlex.join(argv))
    return HooksStatus(spec.agent, spec.path, events, (), () if current else events,
                       (check_command(command, spec.agent, root=root),))


def installed(root: Path, agent: str) -> bool:
    """True when every event leslie handles for `agent` has its entry in the hook file."""
    return not check(root, agent).missing


def _without_event(command: str, agent: str, events: set[str]) -> str:
    """Copilot's command without the event it names: one command per executable to look at."""
    if hook_forms.is_shared(command, agent):
        return hook_forms.shared_command(agent)
    return command.rsplit(None, 1)[0] if command.rsplit(maxsplit=1)[-1] in events else command


def _placement(spec: AgentHooks, per_file: list[tuple[str, dict[str, Any], Any]]) -> list[str]:
    """Findings about where leslie's entries are: a machine path in the shared file of an agent that has a
    per-user one (leslie's old default there), and entries in two files (leslie runs twice per event)."""
    if spec.local_path is None:
        return []
    lines = []
    holding = [relative for relative, _data, _entries in per_file]
    for relative, _data, entries in per_file:
        machine = sorted({hook[spec.command_key] for pairs in entries.values() for _group, hook in pairs
                          if not hook_forms.is_shared(hook[spec.command_key], spec.agent)})
        if relative == spec.path and machine:
            lines.append(f"{spec.agent}: {spec.path}, the settings a repository shares, holds leslie hooks that run "
                         f"this machine's path ({machine[0]}): a teammate without leslie there gets broken hooks "
                         f"(and Claude Code blocks every Write, Edit and Bash call); run `leslie hooks install "
                         f"{spec.agent}` to move them to {spec.personal_path()}, or `leslie hooks install "
                         f"{spec.agent} --shared` for the portable form")
    if len(holding) > 1:
        lines.append(f"{spec.agent}: leslie's hooks are in both {' and '.join(holding)}, so leslie runs twice per "
                     f"event; run `leslie hooks install {spec.agent}` (or with --shared) to keep one set")
    return lines


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
            remedy = "put leslie on PATH" if command.form == "shared" else f"{fix} with a working leslie"
            lines.append(f"{status.agent}: the hook command `{command.command}` is broken: {command.problem} "
                         f"({remedy})")
    return lines + list(status.placement) + list(status.agent_trust)


def check_for_doctor(repo: Repository, report: DoctorReport) -> None:
    """For `leslie doctor`: the agents' hooks (installed ones must be complete and point at an existing
    leslie), and what the write guard's second line has caught (`leslie.guard.tripwire`)."""
    from leslie.guard import snapshots, tripwire

    for agent in AGENTS:
        status = check(repo.root, agent)
        if not status.installed and status.problem is None:
            continue
        if status.problem is not None or status.missing or not all(c.ok for c in status.commands):
            report.problems += status_lines(status)
        elif status.outdated or status.agent_trust or status.placement:  # the user's to give or to decide: a note
            report.notes += status_lines(status)
    count, last, unreadable = tripwire.incidents_summary(str(repo.root))
    record = snapshots.shown(str(repo.root), tripwire.incidents_file(str(repo.root)))
    if count:
        report.notes.append(f"the write guard recorded {count} change(s) by agents' shell commands to files they "
                            f"may not write (last: {last}); see {record}")
    if unreadable:
        report.notes.append(f"{unreadable} line(s) of the write guard's record {record} could not be read (skipped)")
