"""Gemini CLI command hooks: `leslie hook gemini` reads one hook event (JSON) on stdin.

What Gemini CLI 0.61.0 sends (read in its bundle, `packages/core/src/hooks/`, and captured from the real CLI):
every event carries `session_id`, `transcript_path` (its JSON-lines chat record), `cwd`, `hook_event_name`,
`timestamp`; `SessionStart` adds `source` (`startup`, `resume`, `clear`), `BeforeAgent` `prompt`,
`BeforeTool`/`AfterTool` `tool_name` and `tool_input` (`write_file` and `replace` with `file_path`,
`run_shell_command` with `command` and an optional `dir_path` relative to `cwd`), `PreCompress` `trigger`.

What it does with the answer: stdout is parsed as JSON, and when stdout is empty, **stderr** is (a warning
would become the answer), so leslie always prints a JSON object, `{}` for nothing. `additionalContext` reaches
the model with `<` and `>` replaced by `&lt;`/`&gt;` (and nothing else), wrapped in `<hook_context>`; leslie
escapes `&` first, so the model reads the block escaped exactly once, which it can decode without ambiguity.

- `SessionStart`: no block. Gemini rebuilds a resumed conversation without the user messages that start with
  `<hook_context>`, and headless (`-p`) it puts `SessionStart`'s context in front of the prompt: the block and
  the user's prompt would both be gone after `--resume`. `clear` makes the next prompt get the block afresh.
- `BeforeAgent`: a round; the block when the policy says so (`start` included, in every mode: ACP fires no
  `SessionStart`), as a part after the prompt, which a resumed conversation keeps. The transcript's
  `tokens.input` is the real usage: Gemini compresses after this hook at half its window, so a block given at
  or past it follows the summary.
- `PreCompress`: fired before every request, whether Gemini compresses or not (it decides after the hook),
  and it cannot carry context: leslie records the transcript's usage; a sharp drop is a compression, and the
  next `BeforeAgent` re-injects.
- `BeforeTool`: the write guard; a denial is `{"decision": "deny", "reason": ...}` (the model gets the reason
  as the tool's error). `AfterTool` of `run_shell_command` and `AfterAgent`: the guard's second line
  (`leslie.guard.tripwire`), as Claude Code's `PostToolUse` and `Stop`.

The exit status is always 0.
"""

from __future__ import annotations

import json
import os
from typing import Any

from leslie.inject import injector
from leslie.inject.blocks import RepoHandle
from leslie.integrations import SILENT, HookAnswer
from leslie.integrations import claude_code as shared

AGENT = "gemini"
# Gemini's tools -> the Claude Code tool whose checks apply (the guard and the second line speak Claude's names).
TOOLS = {"write_file": "Write", "replace": "Edit", "run_shell_command": "Bash"}
EMPTY = "{}"


def readable(text: str) -> str:
    """`text` as leslie sends it: Gemini replaces only `<` and `>`, so `&` is escaped here, and the model reads
    the text escaped exactly once (`&lt;thread_context ...&gt;`, a literal `&lt;` in the text as `&amp;lt;`)."""
    return text.replace("&", "&amp;")


def _json(answer: HookAnswer) -> HookAnswer:
    """Always a JSON object on stdout, with any `additionalContext` made readable."""
    if answer.stdout is None:
        return HookAnswer(EMPTY, answer.warnings)
    document = json.loads(answer.stdout)
    output = document.get("hookSpecificOutput")
    if isinstance(output, dict) and isinstance(output.get("additionalContext"), str):
        output["additionalContext"] = readable(output["additionalContext"])
    return HookAnswer(json.dumps(document, ensure_ascii=False), answer.warnings)


def session_start(payload: dict[str, Any], agent: str = AGENT) -> HookAnswer:
    """`SessionStart`: no block (see the module's docstring); `clear` wiped the conversation, so the next prompt
    gets the block afresh (reason `start`)."""
    if shared.injected_elsewhere():
        return SILENT
    session = shared.session_of(payload, agent)
    if session is None:
        return SILENT
    root, session_id, thread_id = session
    if shared.text_field(payload, "source") == "clear":
        injector.on_conversation_cleared(RepoHandle(root), agent=agent, session_id=session_id,
                                             thread_id=thread_id, source="clear")
    return SILENT


def before_agent(payload: dict[str, Any], agent: str = AGENT) -> HookAnswer:
    """`BeforeAgent`: one round; the block when the policy injects (real usage from the transcript)."""
    if shared.injected_elsewhere():
        return SILENT
    session = shared.session_of(payload, agent)
    if session is None:
        return SILENT
    root, session_id, thread_id = session
    prompt = payload.get("prompt")
    result = injector.on_user_message(RepoHandle(root), agent=agent,
                                          session_id=session_id, thread_id=thread_id,
                                          message=prompt if isinstance(prompt, str) else None,
                                          transcript_path=shared.text_field(payload, "transcript_path"))
    return shared.context_answer("BeforeAgent", result)


def pre_compress(payload: dict[str, Any], agent: str = AGENT) -> HookAnswer:
    """`PreCompress`: record the transcript's usage (a sharp drop is a compression)."""
    transcript = shared.text_field(payload, "transcript_path")
    if shared.injected_elsewhere() or transcript is None:
        return SILENT
    session = shared.session_of(payload, agent)
    if session is None:
        return SILENT
    root, session_id, thread_id = session
    injector.on_transcript_usage(RepoHandle(root), agent=agent, session_id=session_id,
                                     thread_id=thread_id, transcript_path=transcript)
    return SILENT


def as_claude(payload: dict[str, Any], event: str) -> dict[str, Any]:
    """The tool event in Claude Code's terms (`tool_name`, `cwd` joined with `dir_path`, a call ID), for the
    write guard and the second line. Gemini gives no call ID: the arguments' digest pairs `BeforeTool` with
    its `AfterTool`."""
    raw_input = payload.get("tool_input")
    tool_input: dict[str, Any] = dict(raw_input) if isinstance(raw_input, dict) else {}
    tool = shared.text_field(payload, "tool_name") or ""
    cwd = shared.text_field(payload, "cwd") or os.getcwd()
    dir_path = tool_input.get("dir_path")
    if tool == "run_shell_command" and isinstance(dir_path, str) and dir_path:
        cwd = os.path.join(cwd, dir_path)  # the shell runs there; a relative dir_path is relative to cwd
    import zlib

    digest = zlib.crc32(json.dumps(tool_input, sort_keys=True, ensure_ascii=False).encode("utf-8", "replace"))
    return {**payload, "hook_event_name": event, "tool_name": TOOLS.get(tool, tool), "tool_input": tool_input,
            "cwd": cwd, "tool_use_id": f"gemini-{digest:08x}"}


def _gemini_denial(answer: HookAnswer) -> HookAnswer:
    """Claude Code's `permissionDecision` answer as Gemini's `decision`: `deny` with the reason, else `{}`
    (Gemini has no use for an `allow`: it would skip nothing, and the user's own policy decides)."""
    if answer.stdout is None:
        return HookAnswer(EMPTY, answer.warnings)
    output = json.loads(answer.stdout).get("hookSpecificOutput", {})
    if isinstance(output, dict) and output.get("permissionDecision") == "deny":
        document = {"decision": "deny", "reason": output.get("permissionDecisionReason", "leslie: denied")}
        return HookAnswer(json.dumps(document, ensure_ascii=False), answer.warnings)
    return HookAnswer(EMPTY, answer.warnings)


def before_tool(payload: dict[str, Any], agent: str = AGENT) -> HookAnswer:
    """`BeforeTool`: the write guard for `write_file`, `replace` and `run_shell_command`; a shell command it
    lets through is watched by the second line."""
    claude = as_claude(payload, "PreToolUse")
    first = shared.pre_tool_use(claude, agent, answer_allow=False)
    return _gemini_denial(shared.watched_pre_tool_use(claude, agent, first))


def answer(payload: dict[str, Any], agent: str = AGENT) -> HookAnswer:
    """Gemini CLI's answer to one hook event: always a JSON object (`{}` for nothing)."""
    event = payload.get("hook_event_name")
    if event == "SessionStart":
        claude = {**payload, "hook_event_name": "SessionStart"}
        return _json(shared.note_activity(claude, agent, session_start(payload, agent)))
    if event == "BeforeAgent":
        claude = {**payload, "hook_event_name": "UserPromptSubmit"}
        return _json(shared.note_activity(claude, agent, before_agent(payload, agent)))
    if event == "PreCompress":
        return _json(pre_compress(payload, agent))
    if event == "BeforeTool":
        return before_tool(payload, agent)
    if event == "AfterTool":
        return _json(shared.after_shell_call(as_claude(payload, "AfterTool"), agent))
    if event == "AfterAgent":
        return _json(shared.turn_ended(payload, agent))
    return HookAnswer(EMPTY)
