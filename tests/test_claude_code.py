"""`leslie hook claude-code` through the real executable, with Claude Code's real hook payloads.

Payload and answer shapes: https://code.claude.com/docs/en/hooks (see docs/integrations.md).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from lxml import etree

from conftest import Result, run_leslie
from leslie.ops.threads import reference, spawn, switch
from leslie.store import sessions
from leslie.store.repository import Repository

THREAD = "thread-cc"
OTHER = "thread-ref"


@pytest.fixture
def root(repo: Repository) -> Path:
    spawn(repo, "Claude's thread", thread_id=THREAD)
    spawn(repo, "Referenced thread", thread_id=OTHER)
    reference(repo, THREAD, OTHER, ["plan.md"])
    return repo.root


def base(root: Path, event: str, session: str = "0f7c2a4e-9d1b-4c8e-8a51-3c2d1e0f9b7a") -> dict[str, Any]:
    return {"session_id": session, "transcript_path": str(root / "transcript.jsonl"), "cwd": str(root),
            "permission_mode": "default", "hook_event_name": event}


def session_start(root: Path, source: str, **kw: Any) -> dict[str, Any]:
    return {**base(root, "SessionStart", **kw), "source": source, "model": "claude-sonnet-4-5"}


def prompt(root: Path, text: str = "Fix the login bug", **kw: Any) -> dict[str, Any]:
    return {**base(root, "UserPromptSubmit", **kw), "prompt": text}


def tool(root: Path, name: str, tool_input: dict[str, Any], **kw: Any) -> dict[str, Any]:
    return {**base(root, "PreToolUse", **kw), "tool_name": name, "tool_input": tool_input,
            "tool_use_id": "toolu_01ABC123"}


def hook(root: Path, payload: dict[str, Any] | str, env: dict[str, str] | None = None,
         cwd: Path | None = None) -> Result:
    text = payload if isinstance(payload, str) else json.dumps(payload)
    result = run_leslie("hook", "claude-code", cwd=cwd or root, input=text,
                        env={"LESLIE_THREAD": THREAD} if env is None else env)
    assert result.code == 0, result.stderr
    return result


def context_of(result: Result, event: str) -> str:
    answer = json.loads(result.stdout)
    assert list(answer) == ["hookSpecificOutput"]
    assert answer["hookSpecificOutput"]["hookEventName"] == event
    assert set(answer["hookSpecificOutput"]) == {"hookEventName", "additionalContext"}
    text = answer["hookSpecificOutput"]["additionalContext"]
    element = etree.fromstring(text.encode())
    assert element.tag == "thread_context" and element.get("thread") == THREAD
    return str(text)


def reasons(root: Path, session: str = "0f7c2a4e-9d1b-4c8e-8a51-3c2d1e0f9b7a") -> list[object]:
    log = sessions.read_log(sessions.SessionFiles(str(root), "claude-code", session).log)
    return [(e["kind"], e.get("source"), e["reason"]) for e in log]


# -- context injection -------------------------------------------------------------------------------------
def test_a_session_gets_its_context_at_startup_and_after_compaction(root: Path) -> None:
    started = hook(root, session_start(root, "startup"))
    block = context_of(started, "SessionStart")
    assert f'<ref thread="{OTHER}" ' in block and f".leslie/threads/{OTHER}/plan.md" in block
    assert hook(root, prompt(root)).stdout == ""  # already told
    assert hook(root, prompt(root, "next")).stdout == ""
    compacted = hook(root, session_start(root, "compact"))
    assert context_of(compacted, "SessionStart") == block
    assert hook(root, prompt(root, "after")).stdout == ""
    assert reasons(root) == [("session_start", "startup", "start"), ("input", None, None), ("input", None, None),
                             ("session_start", "compact", "compacted"), ("input", None, None)]


def test_without_a_session_start_the_first_prompt_gets_it(root: Path) -> None:
    first = hook(root, prompt(root))
    context_of(first, "UserPromptSubmit")
    assert first.stderr == ""
    assert hook(root, prompt(root)).stdout == ""


def test_a_changed_context_is_sent_with_the_next_prompt(root: Path) -> None:
    hook(root, prompt(root))
    third = spawn(Repository(root), "Third", thread_id="thread-third").thread.id
    assert run_leslie("reference", "--thread", THREAD, "--target", third, cwd=root).code == 0
    block = context_of(hook(root, prompt(root)), "UserPromptSubmit")
    assert f'<ref thread="{third}" ' in block


def test_resume_and_clear(root: Path) -> None:
    hook(root, session_start(root, "startup"))
    assert hook(root, session_start(root, "resume")).stdout == ""
    context_of(hook(root, session_start(root, "clear")), "SessionStart")


def test_sessions_are_separate(root: Path) -> None:
    context_of(hook(root, prompt(root, session="one")), "UserPromptSubmit")
    context_of(hook(root, prompt(root, session="two")), "UserPromptSubmit")
    assert hook(root, prompt(root, session="one")).stdout == ""


def test_the_thread_comes_from_the_switch_and_sticks_to_the_session(root: Path) -> None:
    switch(Repository(root), THREAD)
    context_of(hook(root, prompt(root), env={}), "UserPromptSubmit")
    switch(Repository(root), OTHER)
    assert hook(root, prompt(root), env={}).stdout == ""  # the session stays on the thread it started with


def test_the_root_is_found_from_the_payload_cwd(root: Path, tmp_path: Path) -> None:
    sub = root / "src" / "deep"
    sub.mkdir(parents=True)
    payload = {**prompt(root), "cwd": str(sub)}
    context_of(hook(root, payload, cwd=tmp_path), "UserPromptSubmit")


# -- silence and warnings ----------------------------------------------------------------------------------
@pytest.mark.parametrize("stdin", ["", "not json", "[1, 2]", "{\"hook_event_name\": ", "\xff"])
def test_garbage_on_stdin_is_one_warning_and_no_output(root: Path, stdin: str) -> None:
    result = hook(root, stdin)
    assert result.stdout == "" and result.stderr.count("\n") == 1 and "leslie: warning:" in result.stderr


def test_without_a_thread_the_hook_is_silent(root: Path) -> None:
    result = hook(root, prompt(root), env={})
    assert (result.stdout, result.stderr) == ("", "")


def test_outside_a_leslie_repository_the_hook_is_silent(tmp_path: Path) -> None:
    payload = {**prompt(tmp_path), "cwd": str(tmp_path)}
    result = hook(tmp_path, payload, env={"LESLIE_THREAD": THREAD})
    assert (result.stdout, result.stderr) == ("", "")


@pytest.mark.parametrize("thread", ["thread-missing", "not-a-thread-id"])
def test_a_missing_or_invalid_thread_is_one_warning(root: Path, thread: str) -> None:
    result = hook(root, prompt(root), env={"LESLIE_THREAD": thread})
    assert result.stdout == "" and result.stderr.count("\n") == 1 and thread in result.stderr


def test_a_corrupt_session_state_is_one_warning_then_a_fresh_start(root: Path) -> None:
    hook(root, prompt(root))
    files = sessions.SessionFiles(str(root), "claude-code", prompt(root)["session_id"])
    Path(files.state).write_text("{\"version\": 1, \"rounds\": NaN}")
    broken = hook(root, prompt(root))
    assert broken.stdout == "" and broken.stderr.count("\n") == 1 and "json" in broken.stderr.lower()
    context_of(hook(root, prompt(root)), "UserPromptSubmit")


def test_unknown_events_and_agents_are_silent(root: Path) -> None:
    assert hook(root, {**base(root, "Stop"), "stop_hook_active": False}).stdout == ""
    assert hook(root, {**base(root, "Notification"), "message": "hi"}).stdout == ""
    unknown = run_leslie("hook", "cursor", cwd=root, input=json.dumps(prompt(root)))
    assert unknown.code == 0 and unknown.stdout == "" and "unknown agent" in unknown.stderr
    usage = run_leslie("hook", cwd=root, input="")
    assert usage.code == 2 and "Usage: leslie hook" in usage.stderr


# -- the write guard -----------------------------------------------------------------------------------------
def decision(result: Result) -> tuple[str, str] | None:
    if not result.stdout:
        return None
    answer = json.loads(result.stdout)["hookSpecificOutput"]
    assert answer["hookEventName"] == "PreToolUse"
    assert set(answer) == {"hookEventName", "permissionDecision", "permissionDecisionReason"}
    return answer["permissionDecision"], answer["permissionDecisionReason"]


@pytest.mark.parametrize(("name", "make_input"), [
    ("Write", lambda p: {"file_path": p, "content": "# hijacked\n"}),
    ("Edit", lambda p: {"file_path": p, "old_string": "a", "new_string": "b", "replace_all": False}),
    ("MultiEdit", lambda p: {"file_path": p, "edits": [{"old_string": "a", "new_string": "b"}]}),
    ("NotebookEdit", lambda p: {"notebook_path": p, "new_source": "print(1)", "cell_id": "c1"}),
])
def test_file_tools(root: Path, name: str, make_input: Any) -> None:
    other = str(root / ".leslie" / "threads" / OTHER / "plan.md")
    denied = decision(hook(root, tool(root, name, make_input(other))))
    assert denied is not None and denied[0] == "deny"
    assert denied[1].startswith("leslie: ") and OTHER in denied[1] and THREAD in denied[1]
    own = str(root / ".leslie" / "threads" / THREAD / "plan.md")
    allowed = decision(hook(root, tool(root, name, make_input(own))))
    assert allowed is not None and allowed[0] == "allow"
    assert decision(hook(root, tool(root, name, make_input(str(root / "src" / "app.py"))))) is None


def test_bash(root: Path) -> None:
    other = f".leslie/threads/{OTHER}/plan.md"
    for command in (f"echo hi >> {other}", f"sed -i 's/x/y/' {other}", f"cp notes.md {other}"):
        result = decision(hook(root, tool(root, "Bash", {"command": command, "description": "edit"})))
        assert result is not None and result[0] == "deny", command
    for command in (f"cat {other}", f"echo mine > .leslie/threads/{THREAD}/plan.md", "npm test"):
        assert decision(hook(root, tool(root, "Bash", {"command": command}))) is None, command


def test_other_tools_and_no_thread_get_no_opinion(root: Path) -> None:
    other = str(root / ".leslie" / "threads" / OTHER / "plan.md")
    assert decision(hook(root, tool(root, "Read", {"file_path": other}))) is None
    assert decision(hook(root, tool(root, "Write", {"file_path": other}), env={})) is None


def test_the_guard_fails_closed_inside_threads_only(root: Path) -> None:
    other = str(root / ".leslie" / "threads" / OTHER / "plan.md")
    bad_env = {"LESLIE_THREAD": "garbage id"}  # the guard cannot know whose thread this is
    denied = decision(hook(root, tool(root, "Write", {"file_path": other}), env=bad_env))
    assert denied is not None and denied[0] == "deny" and "denied to be safe" in denied[1]
    elsewhere = hook(root, tool(root, "Write", {"file_path": str(root / "x.py")}), env=bad_env)
    assert elsewhere.stdout == "" and "garbage id" in elsewhere.stderr


def test_behind_the_acp_proxy_the_hooks_leave_the_context_to_it(root: Path) -> None:
    # claude-agent-acp and codex-acp load the project's hooks: with leslie's hooks committed and the agent run
    # behind `leslie acp`, the block would otherwise arrive twice. The guard keeps working.
    env = {"LESLIE_THREAD": THREAD, "LESLIE_INJECTED_BY": "acp"}
    assert hook(root, session_start(root, "startup"), env=env).stdout == ""
    assert hook(root, prompt(root), env=env).stdout == ""
    denied = hook(root, tool(root, "Write", {"file_path": str(root / ".leslie/threads" / OTHER / "plan.md"),
                                            "content": "x"}), env=env)
    assert '"deny"' in denied.stdout
    assert '"additionalContext"' in hook(root, prompt(root)).stdout  # the same session, on its own: injected
