"""Qwen Code command hooks: `leslie hook qwen` reads one hook event (JSON) on stdin.

What Qwen Code 0.24.4 sends (its bundled `qc-helper/docs/features/hooks.md`, checked with the real client):
Claude Code's shapes (`session_id`, `transcript_path`, `cwd`, `hook_event_name`, ...), with Qwen's own tool
names: `write_file {file_path, content}`, `edit {file_path, old_string, new_string}`, `run_shell_command
{command, directory}`. `UserPromptSubmit` fires for the user's prompt (with `submitted_prompt`) and again
before every tool-result continuation, with `prompt: ""`: that is no user round.

Where the context goes, and why leslie injects at the prompt only:
- `UserPromptSubmit` context becomes a text part `<qwen:user-prompt-submit-context>` after the prompt. It is
  stored with the prompt in the session's history, so `qwen --continue` keeps it, and a compaction
  summarises it away. So the block is injected there: at the first prompt (`start`), after a change, when a
  compaction is predicted, and at the first prompt after a compaction.
- `SessionStart` context would go into the system prompt, which a resumed process rebuilds without it; it is
  not used. `SessionStart` with `source: "compact"` (fired after Qwen compacted, without waiting for the
  hook) marks the compaction, so that the next prompt re-injects (reason `compacted`).
- Qwen escapes `<` and `>` of every hook context (so a hook cannot close its tag): the model reads
  `&lt;thread_context thread="..."&gt;`. leslie puts one plain line in front saying so.

Answers are Claude Code's: `hookSpecificOutput.additionalContext`, `hookSpecificOutput.permissionDecision`
(`deny` for a write into another thread's folder, `allow` for the current thread's own assets), `decision:
"block"` after a shell call that changed what it may not. The exit status is always 0.
"""

from __future__ import annotations

import json
import os
from typing import Any

from leslie.inject import injector
from leslie.inject.blocks import RepoHandle
from leslie.integrations import SILENT, HookAnswer
from leslie.integrations import claude_code as claude

AGENT = "qwen"
# Qwen's tool ids and the Claude Code tool each one is read as (the guard knows Claude Code's).
TOOLS = {"write_file": "Write", "edit": "Edit", "run_shell_command": "Bash"}
# No angle bracket or ampersand in it: Qwen's escaping leaves it as written.
ESCAPED_NOTE = ("leslie thread context follows: an XML block whose tags show as HTML entities, because Qwen Code "
                "escapes angle brackets in hook context")

# What `leslie hooks install qwen` writes into `.qwen/settings.json` (see
# `leslie.integrations.install`): (event, matcher, kind, fail closed). Timeouts are in seconds (Qwen reads
# 1000 and more as milliseconds).
HOOK_FILE = ".qwen/settings.json"
HOOK_EVENTS = (
    ("SessionStart", None, "context", False),
    ("UserPromptSubmit", None, "context", False),
    ("PreToolUse", "^(write_file|edit|run_shell_command)$", "guard", False),
    ("PostToolUse", "^run_shell_command$", "guard", False),
    ("PostToolUseFailure", "^run_shell_command$", "guard", False),
    ("Stop", None, "guard", False),
)
NEXT_STEPS = ("Qwen Code loads a project's hooks only in a trusted folder when folder trust is on "
              "(`security.folderTrust.enabled` in ~/.qwen/settings.json; off by default): trust the folder "
              "when Qwen asks, or with /permissions.")


def claude_shaped(payload: dict[str, Any]) -> dict[str, Any]:
    """The event with Qwen's tool names read as Claude Code's, and a shell call's `directory` as its cwd."""
    tool = payload.get("tool_name")
    if not isinstance(tool, str) or tool not in TOOLS:
        return payload
    shaped = {**payload, "tool_name": TOOLS[tool]}
    tool_input = payload.get("tool_input")
    directory = tool_input.get("directory") if isinstance(tool_input, dict) else None
    cwd = claude.text_field(payload, "cwd")
    if tool == "run_shell_command" and isinstance(directory, str) and directory:
        where = os.path.join(cwd, directory) if cwd else directory
        if os.path.isdir(where):
            shaped["cwd"] = where
    return shaped


def is_user_prompt(payload: dict[str, Any]) -> bool:
    """False for the `UserPromptSubmit` Qwen sends before a tool-result continuation (`prompt: ""`)."""
    if isinstance(payload.get("submitted_prompt"), str):
        return True
    prompt = payload.get("prompt")
    return isinstance(prompt, str) and prompt != ""


def context_answer(result: HookAnswer) -> HookAnswer:
    """Claude Code's context answer, with the line that tells the model how to read Qwen's escaping."""
    if result.stdout is None:
        return result
    document = json.loads(result.stdout)
    output = document.get("hookSpecificOutput")
    if isinstance(output, dict) and isinstance(output.get("additionalContext"), str):
        output["additionalContext"] = f"{ESCAPED_NOTE}\n{output['additionalContext']}"
    return HookAnswer(json.dumps(document, ensure_ascii=False), result.warnings)


def session_start(payload: dict[str, Any]) -> HookAnswer:
    """`SessionStart`: the guard's folder (so that prompts are recorded); `compact` marks the compaction and
    `clear` the wiped conversation, so that the next prompt injects again."""
    source = payload.get("source")
    if source in ("compact", "clear") and not claude.injected_elsewhere():
        session = claude.session_of(payload, AGENT)
        if session is not None:
            root, session_id, thread_id = session
            handle = RepoHandle(root)
            if source == "compact":
                injector.on_compaction(handle, agent=AGENT, session_id=session_id, thread_id=thread_id,
                                           source="SessionStart compact")
            else:
                injector.on_conversation_cleared(handle, agent=AGENT, session_id=session_id,
                                                     thread_id=thread_id, source="SessionStart clear")
    return claude.note_activity(payload, AGENT, SILENT)


def answer(payload: dict[str, Any], agent: str = AGENT) -> HookAnswer:
    """Qwen Code's answer to one hook event (unknown events: silence)."""
    event = payload.get("hook_event_name")
    if event == "SessionStart":
        return session_start(payload)
    if event == "UserPromptSubmit":
        if not is_user_prompt(payload):
            return SILENT
        return claude.note_activity(payload, agent, context_answer(claude.context_event(payload, agent)))
    shaped = claude_shaped(payload)
    if event == "PreToolUse":
        return claude.watched_pre_tool_use(shaped, agent, claude.pre_tool_use(shaped, agent, answer_allow=True))
    if event in ("PostToolUse", "PostToolUseFailure"):
        return claude.after_shell_call(shaped, agent)
    if event == "Stop":
        return note_usage(payload, claude.turn_ended(payload, agent))
    return SILENT


def note_usage(payload: dict[str, Any], result: HookAnswer) -> HookAnswer:
    """`Stop` reports the context's real size (`input_tokens` of `context_limit`): recorded, so that the policy
    predicts from it rather than from an estimate. No compaction is inferred from a drop: Qwen announces its
    own (`SessionStart` `compact`). A failure here is a warning."""
    used, size = payload.get("input_tokens"), payload.get("context_limit")
    if type(used) is not int or type(size) is not int or used < 0 or size <= 0 or claude.injected_elsewhere():
        return result
    try:
        session = claude.session_of(payload, AGENT)
        if session is not None:
            root, session_id, thread_id = session
            injector.on_usage(RepoHandle(root), agent=AGENT, session_id=session_id,
                                  thread_id=thread_id, used=used, size=size, detect_drop=False)
    except Exception as exc:
        return HookAnswer(result.stdout, (*result.warnings, f"could not record Qwen's usage: "
                                                           f"{type(exc).__name__}: {exc}"))
    return result
