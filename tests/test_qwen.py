"""`leslie hook qwen` and `leslie hooks install qwen` through the real executable.

The payloads are the ones Qwen Code 0.24.4 sent to a logging hook (captured against a mock model server on
127.0.0.1, `qwen --yolo -p ...`): Claude Code's shapes with Qwen's tool ids.
"""

from __future__ import annotations

import json
import shlex
import subprocess
from pathlib import Path
from typing import Any

import pytest

from conftest import run_leslie
from leslie.integrations import install as hooks_install
from leslie.store import sessions

OWN = "thread-own"
OTHER = "thread-other"
SESSION = "da0e4476-2fa1-4d95-8507-0f2c6fea2afb"


@pytest.fixture
def root(two_threads: Path) -> Path:
    return two_threads


def payload(root: Path, event: str, **extra: Any) -> dict[str, Any]:
    """What Qwen Code 0.24.4 sends for `event` (captured), with `extra` fields."""
    doc: dict[str, Any] = {
        "session_id": SESSION, "cwd": str(root), "hook_event_name": event, "timestamp": "2026-11-23T19:45:37.915Z",
        "transcript_path": f"/home/u/.qwen/projects/-repo/chats/{SESSION}.jsonl", "permission_mode": "yolo"}
    if event == "SessionStart":
        doc.update({"source": "startup", "model": "mock-model"})
    elif event == "UserPromptSubmit":
        doc.update({"prompt_id": f"{SESSION}########0", "prompt": "write x", "submitted_prompt": "write x"})
    elif event == "Stop":
        doc.update({"prompt_id": f"{SESSION}########0", "stop_hook_active": False,
                    "last_assistant_message": "done", "background_tasks": [], "crons": [],
                    "context_usage": 0.098775, "context_limit": 200000, "input_tokens": 19755})
    doc.update(extra)
    return doc


def continuation(root: Path) -> dict[str, Any]:
    """The UserPromptSubmit Qwen sends before it hands tool results back to the model."""
    doc = payload(root, "UserPromptSubmit", prompt="")
    del doc["submitted_prompt"]
    return doc


def tool(root: Path, event: str, name: str, args: dict[str, Any]) -> dict[str, Any]:
    doc = payload(root, event, prompt_id=f"{SESSION}########0", tool_name=name, tool_input=args,
                  tool_use_id="toolu_1795463139619_43cly93n5", tool_call_id="call_mock000002")
    if event == "PostToolUse":
        doc.update({"tool_response": {"llmContent": "ok"}, "duration_ms": 66})
    return doc


def hook(root: Path, doc: dict[str, Any], thread: str = OWN) -> dict[str, Any] | None:
    result = run_leslie("hook", "qwen", cwd=root, input=json.dumps(doc), env={"LESLIE_THREAD": thread})
    assert result.code == 0, result.stderr
    assert "Traceback" not in result.stderr
    return json.loads(result.stdout) if result.stdout.strip() else None


def context(answer: dict[str, Any] | None) -> str:
    assert answer is not None and answer["hookSpecificOutput"]["hookEventName"] == "UserPromptSubmit", answer
    return str(answer["hookSpecificOutput"]["additionalContext"])


def reasons(root: Path) -> list[str | None]:
    return [e["reason"] for e in sessions.read_log(sessions.SessionFiles(str(root), "qwen", SESSION).log)
            if e["kind"] == "input"]


# -- context ------------------------------------------------------------------------------------------------

def test_the_first_prompt_gets_the_block_with_a_note_on_qwen_s_escaping(root: Path) -> None:
    assert hook(root, payload(root, "SessionStart")) is None
    text = context(hook(root, payload(root, "UserPromptSubmit")))
    note, block = text.split("\n", 1)
    assert block.startswith(f'<thread_context thread="{OWN}"') and f'<ref thread="{OTHER}" ' in block
    # Qwen escapes < and > of the whole context: the line in front must read the same after that.
    assert "escapes angle brackets" in note and not set(note) & set("<>&")
    assert hook(root, payload(root, "UserPromptSubmit", prompt="again", submitted_prompt="again")) is None


def test_a_tool_result_continuation_is_no_round(root: Path) -> None:
    assert hook(root, payload(root, "UserPromptSubmit")) is not None
    assert hook(root, continuation(root)) is None
    assert hook(root, continuation(root)) is None
    assert reasons(root) == ["start"]


def test_a_compaction_re_injects_at_the_next_prompt(root: Path) -> None:
    assert hook(root, payload(root, "UserPromptSubmit")) is not None
    assert hook(root, payload(root, "SessionStart", source="compact")) is None  # Qwen does not wait for it
    assert hook(root, continuation(root)) is None
    assert "<thread_context" in context(hook(root, payload(root, "UserPromptSubmit")))
    assert hook(root, payload(root, "UserPromptSubmit")) is None
    assert reasons(root) == ["start", "compacted", None]


def test_a_cleared_conversation_gets_the_block_again(root: Path) -> None:
    assert hook(root, payload(root, "UserPromptSubmit")) is not None
    assert hook(root, payload(root, "SessionStart", source="clear")) is None
    assert hook(root, payload(root, "UserPromptSubmit")) is not None
    assert reasons(root) == ["start", "start"]


def test_a_resumed_session_keeps_its_block_in_the_history(root: Path) -> None:
    """`qwen --continue` replays the prompts with their context parts: no second block."""
    assert hook(root, payload(root, "UserPromptSubmit")) is not None
    assert hook(root, payload(root, "SessionStart", source="resume")) is None
    assert hook(root, payload(root, "UserPromptSubmit")) is None


# -- the write guard ----------------------------------------------------------------------------------------

def decision(answer: dict[str, Any] | None) -> str | None:
    return None if answer is None else str(answer["hookSpecificOutput"]["permissionDecision"])


def test_qwen_s_file_tools_into_the_referenced_thread_are_denied(root: Path) -> None:
    target = str(root / ".leslie" / "threads" / OTHER / "plan.md")
    for name, args in (("write_file", {"file_path": target, "content": "hijacked"}),
                       ("edit", {"file_path": target, "old_string": "#", "new_string": "# hijacked"})):
        answer = hook(root, tool(root, "PreToolUse", name, args))
        assert decision(answer) == "deny", answer
        assert answer is not None
        reason = answer["hookSpecificOutput"]["permissionDecisionReason"]
        assert reason.startswith(f"leslie: .leslie/threads/{OTHER}/plan.md belongs to thread {OTHER}")


def test_own_assets_are_allowed(root: Path) -> None:
    target = str(root / ".leslie" / "threads" / OWN / "plan.md")
    assert decision(hook(root, tool(root, "PreToolUse", "write_file", {"file_path": target, "content": "x"}))) \
        == "allow"


def test_shell_writes_into_the_referenced_thread_are_denied(root: Path) -> None:
    command = f"echo hijacked >> .leslie/threads/{OTHER}/plan.md"
    assert decision(hook(root, tool(root, "PreToolUse", "run_shell_command", {"command": command}))) == "deny"


def test_a_shell_command_runs_in_its_directory(root: Path) -> None:
    """`run_shell_command`'s `directory` is where the command runs: `> plan.md` there is the other's plan."""
    args = {"command": "echo hijacked > plan.md", "directory": f".leslie/threads/{OTHER}",
            "description": "write", "is_background": False}
    assert decision(hook(root, tool(root, "PreToolUse", "run_shell_command", args))) == "deny"
    own = {**args, "directory": f".leslie/threads/{OWN}"}
    assert decision(hook(root, tool(root, "PreToolUse", "run_shell_command", own))) != "deny"


def test_a_hidden_shell_write_is_put_back_after_the_call(root: Path) -> None:
    target = root / ".leslie" / "threads" / OTHER / "plan.md"
    before = target.read_bytes()
    assert hook(root, payload(root, "SessionStart")) is None
    assert hook(root, payload(root, "UserPromptSubmit")) is not None
    code = f"open('.leslie/threads/{OTHER}/plan.md', 'a').write('hijacked\\n')"
    args = {"command": f"python3 -c {shlex.quote(code)}"}
    assert decision(hook(root, tool(root, "PreToolUse", "run_shell_command", args))) is None
    subprocess.run(["bash", "-c", args["command"]], cwd=root, check=True)
    answer = hook(root, tool(root, "PostToolUse", "run_shell_command", args))
    assert target.read_bytes() == before
    assert answer is not None and answer["decision"] == "block"
    assert f".leslie/threads/{OTHER}/plan.md" in answer["reason"]


# -- leslie hooks install qwen ------------------------------------------------------------------------------

def test_install_merges_into_the_project_settings(root: Path) -> None:
    path = root / ".qwen" / "settings.json"
    path.parent.mkdir()
    theirs = {"model": {"name": "qwen3-coder-plus"},
              "hooks": {"Stop": [{"hooks": [{"type": "command", "command": "./notify.sh"}]}]}}
    path.write_text(json.dumps(theirs))
    result = run_leslie("hooks", "install", "qwen", "--executable", "/opt/leslie", cwd=root)
    assert result.code == 0, result.stderr
    assert "trust" in result.stdout
    data = json.loads(path.read_text())
    assert data["model"] == theirs["model"]
    assert data["hooks"]["Stop"][0] == theirs["hooks"]["Stop"][0]
    assert data["hooks"]["PreToolUse"] == [{"matcher": "^(write_file|edit|run_shell_command)$", "hooks": [
        {"type": "command", "command": "/opt/leslie hook qwen", "timeout": 10}]}]
    assert data["hooks"]["UserPromptSubmit"][0]["hooks"][0]["timeout"] == 15  # seconds (< 1000)
    hooks_install.uninstall(root, "qwen")
    assert json.loads(path.read_text()) == theirs


def test_install_refuses_an_invalid_settings_file(root: Path) -> None:
    path = root / ".qwen" / "settings.json"
    path.parent.mkdir()
    path.write_text('{"model": {"name": "x"}, "model": {}}')  # a duplicate key
    result = run_leslie("hooks", "install", "qwen", cwd=root)
    assert result.code == 4 and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert path.read_text() == '{"model": {"name": "x"}, "model": {}}'


def test_stop_reports_the_real_usage_and_a_drop_is_no_compaction(root: Path) -> None:
    assert hook(root, payload(root, "UserPromptSubmit")) is not None
    assert hook(root, payload(root, "Stop")) is None
    state = json.loads(Path(sessions.SessionFiles(str(root), "qwen", SESSION).state).read_text())
    assert state["usage"] == [19755, 200000] and state["usage_source"] == "reported"
    assert hook(root, payload(root, "Stop", input_tokens=185000)) is None
    assert hook(root, payload(root, "Stop", input_tokens=3000)) is None  # Qwen compacted: it says so itself
    assert hook(root, payload(root, "UserPromptSubmit")) is None
    assert hook(root, payload(root, "SessionStart", source="compact")) is None
    assert hook(root, payload(root, "UserPromptSubmit")) is not None
    assert reasons(root) == ["start", None, "compacted"]


def test_usage_near_the_window_predicts_a_compaction(root: Path) -> None:
    assert hook(root, payload(root, "UserPromptSubmit")) is not None
    assert hook(root, payload(root, "Stop", input_tokens=181000)) is None  # over 0.9 of 200,000
    assert hook(root, payload(root, "UserPromptSubmit")) is not None
    assert reasons(root) == ["start", "predicted"]
