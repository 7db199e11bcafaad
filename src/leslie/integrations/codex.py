"""Codex command hooks: `leslie hook codex` reads one hook event (JSON) on stdin.

Codex's hooks follow Claude Code's shapes (source: the generated schemas in openai/codex,
`codex-rs/hooks/schema/generated/*.command.{input,output}.schema.json`, and
https://developers.openai.com/codex/hooks). Inputs carry `session_id`, `transcript_path` (may be null),
`cwd`, `hook_event_name`, `model`, and per event: `SessionStart` `source` (`startup`, `resume`, `clear`,
`compact`); `UserPromptSubmit` `prompt`, `turn_id`; `PreToolUse` `tool_name` (`Bash` with
`tool_input.command`, `apply_patch` with the patch text, matched by `Write`/`Edit` aliases), `tool_input`;
`PostCompact` `trigger` (`manual`, `auto`).

Answers:
- `SessionStart` / `UserPromptSubmit`: `hookSpecificOutput.additionalContext` as for Claude Code.
- `PostCompact`: its output cannot carry context, so leslie only records the compaction; the next
  `UserPromptSubmit` re-injects (reason `compacted`). Nothing is printed.
- `PreToolUse`: `permissionDecision: "deny"` with a reason for a write into another thread's folder;
  otherwise nothing (Codex does not take a bare `allow`).
"""

from __future__ import annotations

from typing import Any

from leslie.inject import injector
from leslie.inject.blocks import RepoHandle
from leslie.integrations import SILENT, HookAnswer
from leslie.integrations.claude_code import (
    CONTEXT_EVENTS,
    after_shell_call,
    context_event,
    injected_elsewhere,
    note_activity,
    pre_tool_use,
    session_of,
    turn_ended,
    watched_pre_tool_use,
)

AGENT = "codex"


def post_compact(payload: dict[str, Any], agent: str = AGENT) -> HookAnswer:
    """Record the compaction; the next user prompt of the session re-injects the context."""
    if injected_elsewhere():
        return SILENT
    session = session_of(payload, agent)
    if session is None:
        return SILENT
    root, session_id, thread_id = session
    injector.on_compaction(RepoHandle(root), agent=agent, session_id=session_id,
                           thread_id=thread_id, source="PostCompact")
    return SILENT


def internal_thread(payload: dict[str, Any]) -> bool:
    """True for an event of a Codex thread without a rollout: the title-generation thread that app-server
    clients (codex-acp, the IDE extension, the desktop app) run beside each conversation. It is no user
    session: injecting into it wastes tokens and records a phantom session. (`codex exec --ephemeral` has no
    rollout either, and gets no block from the hooks: `leslie inject` serves it.)"""
    return payload.get("transcript_path") is None


def answer(payload: dict[str, Any], agent: str = AGENT) -> HookAnswer:
    """Codex's answer to one hook event (unknown events: silence)."""
    event = payload.get("hook_event_name")
    if event in (*CONTEXT_EVENTS, "PostCompact") and internal_thread(payload):
        return SILENT
    if event in CONTEXT_EVENTS:
        return note_activity(payload, agent, context_event(payload, agent))
    if event == "PostCompact":
        return post_compact(payload, agent)
    if event == "PreToolUse":
        return watched_pre_tool_use(payload, agent, pre_tool_use(payload, agent, answer_allow=False))
    if event == "PostToolUse":
        return after_shell_call(payload, agent)
    if event == "Stop":
        return turn_ended(payload, agent)
    return SILENT
