"""Factory's droid CLI command hooks: `leslie hook factory` reads one hook event (JSON) on stdin.

What droid 0.225.2 sends (read from its bundle, checked with the real client, `droid exec`, against a Chat
Completions mock): Claude Code's shapes (`session_id`, `transcript_path`, `cwd`, `hook_event_name`, ...),
read from `.factory/settings.json` → `hooks`, with Factory's own tool names: `Create {file_path, content}`,
`Edit {file_path, old_str, new_str}`, `Execute {command}` (the shell). A guard that knows only Claude Code's
names lets every one of them through, so they are read as Claude Code's `Write`, `Edit` and `Bash`.

Its events (the bundle's list): `PreToolUse`, `PostToolUse`, `Notification`, `UserPromptSubmit`, `Stop`,
`SubagentStop`, `PreCompact`, `SessionStart`, `SessionEnd`; no `PostToolUseFailure`. Seen with `droid exec`:
`SessionStart` (`source: "startup"`) fires and its `hookSpecificOutput.additionalContext` reaches the model
as written (not escaped); `UserPromptSubmit` never fires in `exec` (not even multi-turn, `--input-format
stream-json`); `PreToolUse` fires for `Create`, `Edit`
and `Execute` and `permissionDecision: "deny"` stops the call; `PostToolUse` fires after `Execute` (with
`tool_response` a string). A compaction starts a new session (`source: "compact"` in the bundle), not seen
here: continuing a session (`exec -s`) exits 1 with no output offline, without a Factory login. The rest is
Claude Code's behaviour (`leslie.integrations.claude_code`).
"""

from __future__ import annotations

from typing import Any

from leslie.integrations import HookAnswer
from leslie.integrations import claude_code as claude

AGENT = "factory"
# Factory's tool ids and the Claude Code tool each one is read as (the guard knows Claude Code's).
# `ApplyPatch` (a patch text, read as Codex's `apply_patch`) and `MultiEdit` are in the bundle's tool list but
# were not offered to a custom Chat Completions model: guarded all the same.
TOOLS = {"Create": "Write", "Edit": "Edit", "MultiEdit": "MultiEdit", "ApplyPatch": "apply_patch",
         "Execute": "Bash"}

# What `leslie hooks install factory` writes into `.factory/settings.json` (see
# `leslie.integrations.install`): (event, matcher, kind). Timeouts are in seconds.
HOOK_FILE = ".factory/settings.json"
HOOK_EVENTS = (
    ("SessionStart", None, "context"),
    ("UserPromptSubmit", None, "context"),
    ("PreToolUse", "Create|Edit|MultiEdit|ApplyPatch|Execute", "guard"),
    ("PostToolUse", "Execute", "guard"),
    ("Stop", None, "guard"),
)


def claude_shaped(payload: dict[str, Any]) -> dict[str, Any]:
    """The event with Factory's tool names read as Claude Code's."""
    tool = payload.get("tool_name")
    if not isinstance(tool, str) or tool not in TOOLS:
        return payload
    return {**payload, "tool_name": TOOLS[tool]}


def answer(payload: dict[str, Any], agent: str = AGENT) -> HookAnswer:
    """droid's answer to one hook event: Claude Code's, with Factory's tools read as Claude Code's."""
    return claude.answer(claude_shaped(payload), agent)
