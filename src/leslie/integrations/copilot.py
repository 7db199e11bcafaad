"""GitHub Copilot CLI command hooks: `leslie hook copilot EVENT` reads one hook event (JSON) on stdin.

What Copilot CLI 1.0.102 sends (checked with the real client): camelCase payloads that do not name their
event, hence the EVENT argument: every one carries `sessionId`, `timestamp`, `cwd`; `sessionStart` adds
`source` (`new`, `resume`, `startup`) and `initialPrompt`; `userPromptSubmitted` adds `prompt`; `preToolUse`
and `postToolUse` add `toolName` and `toolArgs` (`bash {command}`, `create {path, file_text}`, `edit {path,
old_str, new_str}`), `postToolUse` also `toolResult`; `preCompact` adds `transcriptPath`, `trigger`;
`agentStop` adds `transcriptPath`, `stopReason`. No payload carries a tool call's ID.

What leslie answers (Copilot reads only top-level fields; `hookSpecificOutput` is ignored):
- `userPromptSubmitted`: `{"additionalContext": "<thread_context ...>"}` when the policy injects. Copilot
  appends it to the prompt (in `<system_reminder>`), stores it with the prompt (`--continue` keeps it), and a
  compaction summarises it away.
- `sessionStart`: nothing. It runs at the same time as the first `userPromptSubmitted` (both would decide
  from the same state, and inject twice), and its context lives only as long as the process.
- `preCompact`: its output is ignored and no hook fires after a compaction, so leslie marks the compaction
  and the next `userPromptSubmitted` re-injects (reason `compacted`).
- `preToolUse`: `{"permissionDecision": "deny", "permissionDecisionReason": "leslie: ..."}` for a write into
  another thread's folder or leslie's own state; nothing otherwise (Copilot's own permissions decide).
- `postToolUse` / `postToolUseFailure` of `bash`, `agentStop`: the write guard's second line (see
  `leslie.guard.tripwire`); what was undone comes back as `additionalContext` (`agentStop`: `decision:
  "block"`).

The exit status is always 0.
"""

from __future__ import annotations

import json
import os
from typing import Any

from leslie.inject import injector
from leslie.inject.blocks import RepoHandle
from leslie.integrations import SILENT, HookAnswer
from leslie.integrations import claude_code as claude

AGENT = "copilot"
# Copilot's event names and the Claude Code event each one is handled as.
EVENTS = {"sessionStart": "SessionStart", "userPromptSubmitted": "UserPromptSubmit", "preToolUse": "PreToolUse",
          "postToolUse": "PostToolUse", "postToolUseFailure": "PostToolUseFailure", "preCompact": "PreCompact",
          "agentStop": "Stop"}
# Copilot's tools and the Claude Code tool each one is read as; their paths are in `path`.
TOOLS = {"bash": "Bash", "create": "Write", "edit": "Edit"}

# What `leslie hooks install copilot` writes into `.github/hooks/leslie.json` (see
# `leslie.integrations.install`): (event, kind). Copilot's command hooks have no matcher: leslie answers
# nothing for other tools.
HOOK_FILE = ".github/hooks/leslie.json"
HOOK_EVENTS = (
    ("sessionStart", "context"),
    ("userPromptSubmitted", "context"),
    ("preCompact", "context"),
    ("preToolUse", "guard"),
    ("postToolUse", "guard"),
    ("agentStop", "guard"),
)
NEXT_STEPS = ("Copilot CLI runs a repository's hooks only in a folder you trusted: answer yes when `copilot` "
              "asks to trust this folder (it is then listed in `trustedFolders` of ~/.copilot/config.json); "
              "`copilot -p` never asks.")


def copilot_home() -> str:
    """`$COPILOT_HOME`, default `~/.copilot`."""
    return os.environ.get("COPILOT_HOME") or os.path.join(os.path.expanduser("~"), ".copilot")


def trust_lines(root: str) -> list[str]:
    """What Copilot still needs before it runs the repository's hooks: nothing when the repository (or a folder
    above it) is in `trustedFolders` of Copilot's `config.json` (seen with 1.0.102: a listed parent counts; an
    untrusted folder's hooks are skipped without a word), else one line saying how to trust it."""
    path = os.path.join(copilot_home(), "config.json")
    try:
        with open(path, "rb") as source:
            raw = source.read(1 << 20).decode("utf-8", "replace")
        # Copilot writes `//` comment lines above the JSON.
        data = json.loads("\n".join(line for line in raw.splitlines() if not line.lstrip().startswith("//")))
    except FileNotFoundError:
        data = {}
    except (OSError, ValueError) as exc:
        return [f"copilot: cannot read {path} ({exc}) to tell whether Copilot trusts this folder"]
    folders = data.get("trustedFolders") if isinstance(data, dict) else None
    real = os.path.realpath(root)
    for folder in folders if isinstance(folders, list) else []:
        if isinstance(folder, str) and folder:
            trusted = os.path.realpath(folder)
            if real == trusted or real.startswith(trusted.rstrip(os.sep) + os.sep):
                return []
    return [f"copilot: {real} is not a trusted folder of Copilot CLI (trustedFolders in {path}): Copilot skips "
            "the repository's hooks without a word; start `copilot` here and answer yes to trusting the folder"]


def call_id(tool_args: object) -> str:
    """A stable ID for a tool call (Copilot sends none): its arguments, hashed, the same before and after."""
    import hashlib

    text = json.dumps(tool_args, sort_keys=True, ensure_ascii=False, default=str)
    return "copilot-" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def claude_shaped(event: str, payload: dict[str, Any]) -> dict[str, Any]:
    """The event as Claude Code would send it: snake_case fields, Claude Code's tool names."""
    shaped: dict[str, Any] = {"hook_event_name": EVENTS.get(event, event)}
    for ours, theirs in (("session_id", "sessionId"), ("cwd", "cwd"), ("prompt", "prompt"),
                         ("transcript_path", "transcriptPath"), ("source", "source")):
        if theirs in payload:
            shaped[ours] = payload[theirs]
    tool = payload.get("toolName")
    if isinstance(tool, str):
        args = payload.get("toolArgs")
        if isinstance(args, str):  # some versions send the arguments as a JSON string
            try:
                args = json.loads(args)
            except ValueError:
                args = {"command": args} if tool == "bash" else {}
        shaped["tool_name"] = TOOLS.get(tool, tool)
        shaped["tool_input"] = args if isinstance(args, dict) else {}
        if tool == "bash":  # only shell calls are watched between their two hooks (and hashlib costs)
            shaped["tool_use_id"] = call_id(args)
    return shaped


def top_level(result: HookAnswer) -> HookAnswer:
    """Claude Code's answer in Copilot's shape: `hookSpecificOutput`'s fields at the top level."""
    if result.stdout is None:
        return result
    document = json.loads(result.stdout)
    output = document.pop("hookSpecificOutput", None)
    if isinstance(output, dict):
        output.pop("hookEventName", None)
        document.update(output)
    return HookAnswer(json.dumps(document, ensure_ascii=False), result.warnings)


def after_call(shaped: dict[str, Any]) -> HookAnswer:
    """`postToolUse`: what the shell call changed and leslie put back, as context for the model."""
    result = claude.after_shell_call(shaped, AGENT)
    if result.stdout is None:
        return result
    document = json.loads(result.stdout)
    output = document.get("hookSpecificOutput")
    context = document.get("reason") or (output.get("additionalContext") if isinstance(output, dict) else None)
    return HookAnswer(json.dumps({"additionalContext": context}, ensure_ascii=False) if context else None,
                      result.warnings)


def pre_compact(shaped: dict[str, Any]) -> HookAnswer:
    """Mark the compaction; the next prompt re-injects the context."""
    if claude.injected_elsewhere():
        return SILENT
    session = claude.session_of(shaped, AGENT)
    if session is not None:
        root, session_id, thread_id = session
        injector.on_compaction(RepoHandle(root), agent=AGENT, session_id=session_id,
                                   thread_id=thread_id, source="preCompact")
    return SILENT


def answer(payload: dict[str, Any], event: str) -> HookAnswer:
    """Copilot's answer to one hook event, named by `event` (unknown events: silence)."""
    shaped = claude_shaped(event, payload)
    if event == "sessionStart":
        return claude.note_activity(shaped, AGENT, SILENT)
    if event == "userPromptSubmitted":
        # sessionStart runs concurrently and may not have made the guard's folder yet: make sure here too.
        claude.note_activity({**shaped, "hook_event_name": "SessionStart"}, AGENT, SILENT)
        return claude.note_activity(shaped, AGENT, top_level(claude.context_event(shaped, AGENT)))
    if event == "preCompact":
        return pre_compact(shaped)
    if event == "preToolUse":
        first = claude.pre_tool_use(shaped, AGENT, answer_allow=False)
        return top_level(claude.watched_pre_tool_use(shaped, AGENT, first))
    if event in ("postToolUse", "postToolUseFailure"):
        return after_call(shaped)
    if event == "agentStop":
        result = claude.turn_ended(shaped, AGENT)
        if result.stdout is None:
            return result
        document = json.loads(result.stdout)
        document.pop("systemMessage", None)
        return HookAnswer(json.dumps(document, ensure_ascii=False) if document else None, result.warnings)
    return SILENT
