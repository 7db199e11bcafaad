"""Claude Code command hooks: `leslie hook claude-code` reads one hook event (JSON) on stdin.

What Claude Code sends (https://code.claude.com/docs/en/hooks): every event carries `session_id`,
`transcript_path`, `cwd` and `hook_event_name`; `SessionStart` adds `source` (`startup`, `resume`, `clear`,
`compact`), `UserPromptSubmit` adds `prompt`, `PreToolUse` adds `tool_name` and `tool_input` (`file_path`
for Write/Edit/MultiEdit, `notebook_path` for NotebookEdit, `command` for Bash).

What leslie answers on stdout (nothing at all when it has nothing to say):

- `SessionStart` / `UserPromptSubmit`, when the policy injects:
  `{"hookSpecificOutput": {"hookEventName": "<event>", "additionalContext": "<thread_context ...>"}}`.
  A `SessionStart` with `source: "compact"` is an observed compaction: the context is re-injected right
  there, into the compacted conversation.
- `PreToolUse`: `{"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny",
  "permissionDecisionReason": "leslie: ..."}}` for a write into another thread's folder or leslie's own
  state; `"allow"` for a file tool writing the current thread's own assets; nothing elsewhere (see
  `leslie.guard.rules`). The repository is found from `cwd` and from the written paths.

The exit status is always 0: a hook never fails the agent's turn (a warning goes to stderr instead).
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from leslie.inject import injector
from leslie.inject.blocks import RepoHandle
from leslie.integrations import SILENT, HookAnswer

if TYPE_CHECKING:
    from leslie.guard.paths import Verdict
    from leslie.inject.injector import Injection
    from leslie.ops.watched import Ask

AGENT = "claude-code"
FILE_TOOLS = ("Write", "Edit", "MultiEdit", "NotebookEdit")
PATH_KEYS = ("file_path", "notebook_path", "path")
CONTEXT_EVENTS = ("SessionStart", "UserPromptSubmit")
SHELL_TOOLS = ("Bash",)  # the tools whose calls the second line watches (Claude Code's and Codex's shell)


def text_field(payload: dict[str, Any], key: str) -> str | None:
    """`payload[key]` when it is a non-empty string, else None."""
    value = payload.get(key)
    return value if isinstance(value, str) and value else None


def locate(payload: dict[str, Any]) -> tuple[str | None, str, str]:
    """(repo root or None, working directory, session ID) of a hook event: the root is found from `cwd`."""
    cwd = text_field(payload, "cwd")
    if cwd is None or not os.path.isdir(cwd):
        cwd = os.getcwd()
    return injector.discover_root(cwd), cwd, text_field(payload, "session_id") or "default"


def session_of(payload: dict[str, Any], agent: str) -> tuple[str, str, str] | None:
    """(repo root, session ID, thread) of a hook event; None outside a repository or without a thread."""
    root, _cwd, session_id = locate(payload)
    if root is None:
        return None
    thread_id = injector.session_thread(root, agent=agent, session_id=session_id)
    return None if thread_id is None else (root, session_id, thread_id)


def context_answer(event: str, injection: Injection) -> HookAnswer:
    """The `additionalContext` answer of a context event, or silence (warnings kept either way)."""
    if injection.reason is None or injection.text is None:
        return HookAnswer(None, injection.warnings)
    document = {"hookSpecificOutput": {"hookEventName": event, "additionalContext": injection.text}}
    return HookAnswer(json.dumps(document, ensure_ascii=False), injection.warnings)


def injected_elsewhere() -> bool:
    """True when this agent runs behind `leslie acp`, which injects the context itself (see `acp`)."""
    return os.environ.get("LESLIE_INJECTED_BY") == "acp"


def context_event(payload: dict[str, Any], agent: str) -> HookAnswer:
    """`SessionStart` or `UserPromptSubmit`: record the event, and inject when the policy says so."""
    if injected_elsewhere():
        return SILENT
    event = str(payload.get("hook_event_name"))
    session = session_of(payload, agent)
    if session is None:
        return SILENT
    root, session_id, thread_id = session
    handle = RepoHandle(root)
    transcript = text_field(payload, "transcript_path")
    if event == "SessionStart":
        result = injector.on_session_start(handle, agent=agent, session_id=session_id, thread_id=thread_id,
                                           source=text_field(payload, "source") or "startup",
                                           transcript_path=transcript)
    else:
        prompt = payload.get("prompt")
        result = injector.on_user_message(handle, agent=agent, session_id=session_id, thread_id=thread_id,
                                              message=prompt if isinstance(prompt, str) else None,
                                              transcript_path=transcript)
    return context_answer(event, result)


def permission_answer(decision: str, reason: str) -> HookAnswer:
    """A `PreToolUse` permission decision (`deny` or `allow`) with leslie's reason."""
    document = {"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": decision,
                                       "permissionDecisionReason": f"leslie: {reason}"}}
    return HookAnswer(json.dumps(document, ensure_ascii=False))


def _strings(value: object) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def written_paths(tool: str, tool_input: dict[str, Any]) -> list[str] | None:
    """The paths a file-writing tool writes; None when `tool` is not one (Bash is checked separately)."""
    if tool in FILE_TOOLS or tool in ("Write", "Edit"):
        return [p for p in (tool_input.get(k) for k in PATH_KEYS) if isinstance(p, str) and p]
    if tool == "apply_patch":  # Codex: the patch text, wherever the tool input carries it
        from leslie.guard.rules import patch_targets

        return [path for text in _strings(tool_input) for path in patch_targets(text)]
    return None


def tool_verdict(root: str | None, thread_id: str | None, tool: str, tool_input: dict[str, Any], cwd: str,
                 thread_of: Callable[[str], str | None] | None = None) -> Verdict:
    """The guard's verdict on one tool call. `root` (found from `cwd`) may be None: a written path can still
    lead into a repository, whose thread `thread_of(root)` tells."""
    from leslie.guard import rules as guard  # here: the guard is not needed on the prompt path
    from leslie.guard.paths import NO_OPINION, check_paths

    paths = written_paths(tool, tool_input)
    if paths is not None:
        return check_paths(root, thread_id, paths, cwd, thread_of=thread_of)
    if tool == "Bash":
        command = tool_input.get("command")
        if isinstance(command, str):
            return guard.check_bash(root, thread_id, command, cwd, thread_of=thread_of)
    return NO_OPINION


def _touches_leslie(tool: str, tool_input: dict[str, Any], cwd: str) -> bool:
    from leslie.guard import rules as guard
    from leslie.guard.paths import is_inside_leslie

    if is_inside_leslie(cwd):
        return True
    if tool == "Bash" or written_paths(tool, tool_input) is None:
        return any(guard.mentions_leslie(text) for text in _strings(tool_input))
    return any(is_inside_leslie(p, cwd) for p in written_paths(tool, tool_input) or [])


def pre_tool_use(payload: dict[str, Any], agent: str, *, answer_allow: bool) -> HookAnswer:
    """The write guard for one tool call. Fails closed (deny) for any error about a path in `.leslie/`.

    The repository is found from `cwd` and from the written paths (an agent outside the repository may
    write into it by an absolute path); the thread there is the session's (`injector.session_thread`), and in
    another repository than the working directory's, only what that one records for the session."""
    root, cwd, session_id = locate(payload)
    tool = text_field(payload, "tool_name") or ""
    raw_input = payload.get("tool_input")
    tool_input: dict[str, Any] = raw_input if isinstance(raw_input, dict) else {}

    def thread_of(other_root: str) -> str | None:
        # Another repository's thread is what it records for this session (its binding, its `leslie switch`):
        # LESLIE_THREAD names the thread of the repository the agent works in, so it counts elsewhere only
        # when the agent works in none (leslie.guard.paths.Scope.thread).
        return injector.session_thread(other_root, agent=agent, session_id=session_id,
                                       environ=None if root is None else {})

    try:
        thread_id = injector.session_thread(root, agent=agent, session_id=session_id) if root is not None else None
        verdict = tool_verdict(root, thread_id, tool, tool_input, cwd, thread_of)
    except Exception as exc:
        if _touches_leslie(tool, tool_input, cwd):
            return permission_answer("deny", f"could not check this write near .leslie/ "
                                             f"({type(exc).__name__}: {exc}); denied to be safe")
        raise
    if root is not None and thread_id is not None and session_id:
        _seen(root, agent, session_id, thread_id)
    if verdict.decision == "deny":
        return permission_answer("deny", verdict.reason)
    if verdict.decision == "allow" and answer_allow:
        return permission_answer("allow", verdict.reason)
    return SILENT


def _seen(root: str, agent: str, session_id: str, thread_id: str) -> None:
    """SPEC §13: a tool call is a sign of life too (`store.presence.refresh`). A failure costs nothing but this
    one record: `leslie who` misses this call, and the next one writes it."""
    from leslie.errors import LeslieError
    from leslie.store import presence

    with contextlib.suppress(LeslieError, OSError):
        presence.refresh(root, agent, session_id, thread_id)


# -- the second line: shell tool calls are watched (`leslie.guard.tripwire`) -----------------------------------

def _shell_context(payload: dict[str, Any], agent: str) -> tuple[str, str, str, str] | None:
    """(root, session ID, thread, tool call ID) of a shell tool call event, None when nothing is watched
    (not a shell call, or a command that certainly writes nothing: `leslie.guard.shell.readonly`)."""
    if text_field(payload, "tool_name") not in SHELL_TOOLS:
        return None
    raw_input = payload.get("tool_input")
    command = raw_input.get("command") if isinstance(raw_input, dict) else None
    if isinstance(command, str):
        from leslie.guard.shell.readonly import read_only

        if read_only(command):
            return None
    session = session_of(payload, agent)
    return None if session is None else (*session, text_field(payload, "tool_use_id") or "?")


def _watcher() -> Ask | None:
    """How the second line asks the resident watcher what changed (`leslie.server.watcher`, beside the warm
    process), None when the warm process is turned off: the hooks then sweep every time."""
    from leslie.server.watcher import asker

    return asker()


def _mentions_leslie(payload: dict[str, Any]) -> bool:
    return any(".leslie" in text for text in _strings(payload.get("tool_input")))


def watch_shell_call(payload: dict[str, Any], agent: str) -> HookAnswer:
    """`PreToolUse` of a shell command the first line let through: snapshot, then open the call's window.
    Fails closed (deny) when the snapshot fails for a command that names `.leslie`."""
    try:
        where = _shell_context(payload, agent)
        if where is None:
            return SILENT
        from leslie.guard import tripwire

        tripwire.before_shell_call(where[0], agent, where[1], where[2], where[3], _watcher())
    except Exception as exc:
        if _mentions_leslie(payload):
            return permission_answer("deny", f"could not take the snapshot of .leslie/ this command needs "
                                             f"({type(exc).__name__}: {exc}); denied to be safe")
        return HookAnswer(None, (f"the write guard could not take its snapshot: {type(exc).__name__}: {exc}",))
    return SILENT


def watched_pre_tool_use(payload: dict[str, Any], agent: str, first: HookAnswer) -> HookAnswer:
    """The first line's answer `first`, and for a shell command it did not deny, the second line's watch."""
    if text_field(payload, "tool_name") not in SHELL_TOOLS or _is_denial(first):
        return first
    watched = watch_shell_call(payload, agent)
    return HookAnswer(watched.stdout or first.stdout, (*first.warnings, *watched.warnings))


def _is_denial(result: HookAnswer) -> bool:
    if result.stdout is None:
        return False
    output = json.loads(result.stdout).get("hookSpecificOutput", {})
    return isinstance(output, dict) and output.get("permissionDecision") == "deny"


def notices_answer(event: str, notices: list[dict[str, Any]], thread_id: str) -> HookAnswer:
    """What the agent and the user are told about changes found after a call (`PostToolUse`, `Stop`):
    `decision: "block"` with the list when something was put back, else the list as context."""
    if not notices:
        return SILENT
    from leslie.guard.tripwire import describe

    model, user, acted = describe(notices, thread_id)
    document: dict[str, Any] = {"systemMessage": f"leslie: {user}"}
    if acted:
        document.update({"decision": "block", "reason": model})
    elif event != "Stop":  # Stop answers carry no hookSpecificOutput (Codex refuses one)
        document["hookSpecificOutput"] = {"hookEventName": event, "additionalContext": model}
    return HookAnswer(json.dumps(document, ensure_ascii=False), (user,))


def failure_answer(event: str, exc: Exception, payload: dict[str, Any]) -> HookAnswer:
    """The check after a call failed: a failure the agent reads when the call named `.leslie` or the
    guard's own records are damaged, else a warning to the user."""
    from leslie.errors import CorruptStateError

    what = f"{type(exc).__name__}: {exc}"
    text = (f"could not check what this shell command changed under .leslie/ ({what}); treat its effect on "
            "other threads' folders as unchecked (look with `git status .leslie`)")
    document = {"systemMessage": f"leslie: {text}"}
    if _mentions_leslie(payload) or isinstance(exc, CorruptStateError):
        document.update({"decision": "block", "reason": f"leslie: {text}"})
    return HookAnswer(json.dumps(document, ensure_ascii=False), (text,))


def after_shell_call(payload: dict[str, Any], agent: str) -> HookAnswer:
    """`PostToolUse` / `PostToolUseFailure` of a shell command: find, undo and report what it changed in
    files it may not write."""
    event = str(payload.get("hook_event_name"))
    try:
        where = _shell_context(payload, agent)
        if where is None:
            return SILENT
        from leslie.guard import tripwire

        notices = tripwire.after_shell_call(where[0], agent, where[1], where[2], where[3], _watcher())
    except Exception as exc:
        return failure_answer(event, exc, payload)
    return notices_answer(event, notices, where[2])


def turn_ended(payload: dict[str, Any], agent: str) -> HookAnswer:
    """`Stop`: close the session's windows; report what calls without a PostToolUse changed."""
    root, _cwd, session_id = locate(payload)
    if root is None:
        return SILENT
    from leslie.store import mutations

    if not mutations.guard_exists(root):
        return SILENT
    try:
        thread_id = injector.session_thread(root, agent=agent, session_id=session_id)
        if thread_id is None:
            return SILENT
        from leslie.guard import tripwire

        notices = tripwire.turn_ended(root, agent, session_id, thread_id, _watcher())
    except Exception as exc:
        return failure_answer("Stop", exc, payload)
    return notices_answer("Stop", notices, thread_id)


def note_activity(payload: dict[str, Any], agent: str, result: HookAnswer) -> HookAnswer:
    """After a context event: `SessionStart` makes sure the guard's folder exists, so that this session's
    prompts are recorded; `UserPromptSubmit` opens the session's prompt window (its agent may write its own
    thread's files from now on). A failure here is a warning: it never costs the agent its context."""
    event = payload.get("hook_event_name")
    try:
        root, _cwd, session_id = locate(payload)
        if root is None:
            return result
        from leslie.guard import snapshots
        from leslie.store import mutations

        if event == "SessionStart":
            snapshots.guard_dir(root)
            return result
        if not mutations.guard_exists(root):
            return result
        thread_id = injector.session_thread(root, agent=agent, session_id=session_id)
        if thread_id is not None:
            from leslie.guard import tripwire

            tripwire.prompt_started(root, agent, session_id, thread_id)
    except Exception as exc:
        return HookAnswer(result.stdout, (*result.warnings, f"the write guard could not record this prompt: "
                                                           f"{type(exc).__name__}: {exc}"))
    return result


def answer(payload: dict[str, Any], agent: str = AGENT) -> HookAnswer:
    """Claude Code's answer to one hook event (unknown events: silence)."""
    event = payload.get("hook_event_name")
    if event in CONTEXT_EVENTS:
        return note_activity(payload, agent, context_event(payload, agent))
    if event == "PreToolUse":
        return watched_pre_tool_use(payload, agent, pre_tool_use(payload, agent, answer_allow=True))
    if event in ("PostToolUse", "PostToolUseFailure"):
        return after_shell_call(payload, agent)
    if event == "Stop":
        return turn_ended(payload, agent)
    return SILENT
