"""`leslie hooks install|uninstall claude-code|codex`: leslie's entries in the agent's project hook file.

- Claude Code: `.claude/settings.json` (the project's shared settings), key `hooks`.
- Codex: `.codex/hooks.json` (the project layer's hook file; its root holds only `hooks`, and optionally
  `description`).

Both files have the same shape: `{"hooks": {"<Event>": [{"matcher": "...", "hooks": [{"type": "command",
"command": "...", "timeout": <seconds>}]}]}}`. Installing merges leslie's entries in and leaves every other
key, event, group and hook untouched; it is idempotent (leslie's own entries, recognised by their command
`<executable> hook <agent>`, are replaced, never duplicated). Uninstalling removes exactly those entries,
and the groups and events they leave empty. The file keeps its key order and is written atomically.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from leslie._json import StrictJSONError, loads_strict
from leslie.errors import CorruptStateError, UsageError
from leslie.store import read_repository_file, write_repository_file

CONTEXT_TIMEOUT = 15  # seconds: a render is ~0.1 s; context commands (5 s each by default) run in parallel
GUARD_TIMEOUT = 5  # seconds: the write guard reads a few files


@dataclass(frozen=True)
class AgentHooks:
    """Where an agent's project hook file lives and which events leslie handles there."""

    agent: str
    path: str  # relative to the repository root
    events: tuple[tuple[str, str | None, int], ...]  # (event, matcher or None, timeout in seconds)


AGENTS = {
    "claude-code": AgentHooks("claude-code", ".claude/settings.json", (
        ("SessionStart", None, CONTEXT_TIMEOUT),
        ("UserPromptSubmit", None, CONTEXT_TIMEOUT),
        ("PreToolUse", "Write|Edit|MultiEdit|NotebookEdit|Bash", GUARD_TIMEOUT),
    )),
    "codex": AgentHooks("codex", ".codex/hooks.json", (
        ("SessionStart", None, CONTEXT_TIMEOUT),
        ("UserPromptSubmit", None, CONTEXT_TIMEOUT),
        ("PostCompact", None, GUARD_TIMEOUT),
        ("PreToolUse", "Bash|apply_patch|Write|Edit", GUARD_TIMEOUT),
    )),
}


@dataclass(frozen=True)
class HooksResult:
    """What an install or uninstall did to the agent's hook file."""

    agent: str
    path: str  # relative to the repository root
    changed: bool
    events: tuple[str, ...]  # events whose leslie entry was added or removed


def agent_hooks(agent: str) -> AgentHooks:
    """The hook layout of `agent`; UsageError for an agent leslie has no hooks for."""
    try:
        return AGENTS[agent]
    except KeyError:
        raise UsageError(f"no hooks for agent {agent!r}: expected {' or '.join(AGENTS)}") from None


def hook_command(agent: str, executable: str = "leslie") -> str:
    """The command line leslie installs for `agent`."""
    return f"{executable} hook {agent}"


def is_leslie_hook(hook: Any, agent: str) -> bool:
    """True for a hook entry that runs `... leslie hook <agent>` (any path to the executable)."""
    if not isinstance(hook, dict) or not isinstance(hook.get("command"), str):
        return False
    return re.search(rf"(^|[\s/\"']){re.escape('leslie')}(\.exe)?[\"']?\s+hook\s+{re.escape(agent)}\s*$",
                     hook["command"].strip()) is not None


def _load(root: Path, path: Path) -> dict[str, Any]:
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
    if not isinstance(hooks, dict) or not all(isinstance(v, list) for v in hooks.values()):
        raise CorruptStateError(path, "has a `hooks` entry that is not an object of lists")
    return data


def _strip(hooks: dict[str, Any], agent: str) -> set[str]:
    """Remove leslie's entries for `agent` from every event; return the events that had one."""
    touched = set()
    for event in list(hooks):
        groups = []
        for group in hooks[event]:
            kept_group = group
            if isinstance(group, dict) and isinstance(group.get("hooks"), list):
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


def install(root: Path, agent: str, *, executable: str = "leslie") -> HooksResult:
    """Merge leslie's hook entries for `agent` into its project hook file under `root` (idempotent)."""
    spec = agent_hooks(agent)
    path = root / spec.path
    data = _load(root, path)
    before = json.dumps(data, sort_keys=True)
    hooks: dict[str, Any] = dict(data.get("hooks", {}))
    _strip(hooks, agent)
    for event, matcher, timeout in spec.events:
        group: dict[str, Any] = {} if matcher is None else {"matcher": matcher}
        group["hooks"] = [{"type": "command", "command": hook_command(agent, executable), "timeout": timeout}]
        hooks[event] = [*hooks.get(event, []), group]
    data["hooks"] = hooks
    changed = json.dumps(data, sort_keys=True) != before
    if changed:
        _write(root, path, data)
    return HooksResult(agent, spec.path, changed, tuple(e for e, _m, _t in spec.events) if changed else ())


def uninstall(root: Path, agent: str) -> HooksResult:
    """Remove leslie's hook entries for `agent` from its project hook file (other entries stay)."""
    spec = agent_hooks(agent)
    path = root / spec.path
    if not path.exists():
        return HooksResult(agent, spec.path, False, ())
    data = _load(root, path)
    hooks: dict[str, Any] = dict(data.get("hooks", {}))
    touched = _strip(hooks, agent)
    if not touched:
        return HooksResult(agent, spec.path, False, ())
    data["hooks"] = hooks
    _write(root, path, data)
    return HooksResult(agent, spec.path, True, tuple(sorted(touched)))


def installed(root: Path, agent: str) -> bool:
    """True when every event leslie handles for `agent` has its entry in the hook file."""
    spec = agent_hooks(agent)
    try:
        data = _load(root, root / spec.path)
    except CorruptStateError:
        return False
    hooks = data.get("hooks", {})
    return all(
        any(isinstance(g, dict) and any(is_leslie_hook(h, agent) for h in g.get("hooks", []) or [])
            for g in hooks.get(event, []))
        for event, _m, _t in spec.events
    )


def relative_executable(path: str) -> str:
    """How to write an explicit executable path in the hook command (quoted when it has spaces)."""
    return f'"{path}"' if any(c.isspace() for c in path) else path

