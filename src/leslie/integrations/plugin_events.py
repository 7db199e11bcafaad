"""The wire between leslie's plugin files (opencode, pi) and `leslie hook opencode|pi`.

opencode and pi take no command hooks: they load a JavaScript/TypeScript module from the project
(`.opencode/plugins/leslie.js`, `.pi/extensions/leslie.ts`, written by `leslie hooks install`). That module
stays dumb: on each event it runs the leslie executable with one JSON object on stdin, and applies the JSON
object leslie prints. Every decision (inject or not, deny or not) is taken here, in Python.

What a plugin sends (one object; `event` is the client's own event name, `cwd` the project folder):
- a prompt: `{"event", "session_id", "cwd", "prompt", "usage": {"tokens", "contextWindow"} | null}`;
- a compaction: `{"event", "session_id", "cwd", "context_kept": bool | null}` (pi says whether the message
  that carried the block is among the messages its compaction kept verbatim);
- a tool call: `{"event", "session_id", "cwd", "tool", "args"}` with the tool's own name and arguments.

What leslie answers (always one JSON object on stdout, so that the plugin never has to guess):
`{"context": "<thread_context ...>"}` to inject, `{"block": "leslie: <reason>"}` to deny the tool call, `{}`
otherwise. Warnings go to stderr; the exit status is always 0.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import Any

from leslie.inject import injector
from leslie.inject.blocks import RepoHandle
from leslie.integrations import HookAnswer

ClaudeTool = Callable[[str | None, dict[str, Any]], tuple[str | None, dict[str, Any]]]

NOTHING = HookAnswer("{}")


def text_field(payload: dict[str, Any], key: str) -> str | None:
    """`payload[key]` when it is a non-empty string, else None."""
    value = payload.get(key)
    return value if isinstance(value, str) and value else None


def where(payload: dict[str, Any]) -> tuple[str | None, str, str]:
    """(repository root or None, project folder, session ID) of a plugin event."""
    cwd = text_field(payload, "cwd")
    if cwd is None or not os.path.isdir(cwd):
        cwd = os.getcwd()
    return injector.discover_root(cwd), cwd, text_field(payload, "session_id") or "default"


def usage_of(payload: dict[str, Any]) -> tuple[int, int] | None:
    """The client's real context usage `(tokens, window)`, when the plugin sent a usable one."""
    usage = payload.get("usage")
    if not isinstance(usage, dict):
        return None
    tokens, window = usage.get("tokens"), usage.get("contextWindow")
    if isinstance(tokens, bool) or isinstance(window, bool):
        return None
    if isinstance(tokens, int) and isinstance(window, int) and tokens >= 0 and window > 0:
        return tokens, window
    return None


def _session(payload: dict[str, Any], agent: str) -> tuple[str, str, str] | None:
    root, _cwd, session_id = where(payload)
    if root is None:
        return None
    thread_id = injector.session_thread(root, agent=agent, session_id=session_id)
    return None if thread_id is None else (root, session_id, thread_id)


def prompt_event(payload: dict[str, Any], agent: str) -> HookAnswer:
    """A user prompt: record the round, and answer the context when the policy injects (at the start of a
    session, after a change, after a compaction, or when the real usage predicts one)."""
    session = _session(payload, agent)
    if session is None:
        return NOTHING
    root, session_id, thread_id = session
    prompt = payload.get("prompt")
    result = injector.on_user_message(RepoHandle(root), agent=agent,
                                          session_id=session_id, thread_id=thread_id,
                                          message=prompt if isinstance(prompt, str) else None,
                                          usage=usage_of(payload))
    if result.reason is None or result.text is None:
        return HookAnswer("{}", result.warnings)
    return HookAnswer(json.dumps({"context": result.text}, ensure_ascii=False), result.warnings)


def compaction_event(payload: dict[str, Any], agent: str) -> HookAnswer:
    """The client compacted the conversation: the next prompt re-injects, unless the plugin says the
    message that carried the block was kept verbatim (pi keeps the most recent messages)."""
    session = _session(payload, agent)
    if session is None:
        return NOTHING
    root, session_id, thread_id = session
    injector.on_compaction(RepoHandle(root), agent=agent, session_id=session_id,
                               thread_id=thread_id, source=text_field(payload, "event") or "compaction",
                               forget_usage=True,  # the usage after it is smaller: not another compaction
                               context_kept=payload.get("context_kept") is True)
    return NOTHING


def tool_event(payload: dict[str, Any], agent: str, tool_name: str | None, tool_input: dict[str, Any]) -> HookAnswer:
    """The write guard for one tool call, given as Claude Code's tool name and input (`Write`/`Edit` with
    `file_path`, `Bash` with `command`, `apply_patch` with the patch text); None: a tool that writes nothing
    leslie checks."""
    if tool_name is None:
        return NOTHING
    from leslie.integrations import claude_code

    _root, cwd, session_id = where(payload)
    claude_payload = {"hook_event_name": "PreToolUse", "cwd": cwd, "session_id": session_id,
                      "tool_name": tool_name, "tool_input": tool_input}
    answer = claude_code.pre_tool_use(claude_payload, agent, answer_allow=False)
    if answer.stdout is None:
        return HookAnswer("{}", answer.warnings)
    output = json.loads(answer.stdout).get("hookSpecificOutput", {})
    if output.get("permissionDecision") != "deny":
        return HookAnswer("{}", answer.warnings)
    return HookAnswer(json.dumps({"block": output.get("permissionDecisionReason")}, ensure_ascii=False),
                      answer.warnings)


def answer(payload: dict[str, Any], agent: str, *, prompt: str, compaction: str, tool: str,
           claude_tool: ClaudeTool) -> HookAnswer:
    """The answer to one event of a plugin agent, whose events for a prompt, a compaction and a tool call are
    named `prompt`, `compaction` and `tool`; `claude_tool` maps its tool calls onto Claude Code's (unknown
    events: `{}`)."""
    event = text_field(payload, "event")
    if event == prompt:
        return prompt_event(payload, agent)
    if event == compaction:
        return compaction_event(payload, agent)
    if event == tool:
        raw = payload.get("args")
        name, tool_input = claude_tool(text_field(payload, "tool"), raw if isinstance(raw, dict) else {})
        return tool_event(payload, agent, name, tool_input)
    return NOTHING
