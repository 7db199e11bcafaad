"""`leslie hook factory` and `leslie hooks install factory` through the real executable.

The payloads are the ones Factory's droid 0.225.2 sent to a logging hook (captured against a Chat Completions
mock on 127.0.0.1, `droid exec --auto high -m custom:mock-model`): Claude Code's shapes with Factory's tool
names `Create`, `Edit` and `Execute`.
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
from leslie.ops.threads import reference, spawn
from leslie.store.repository import Repository

OWN = "thread-own"
OTHER = "thread-other"
SESSION = "801e5711-91a4-49ae-a1a8-b24dc007b0f4"


@pytest.fixture
def root(two_threads: Path) -> Path:
    return two_threads


def payload(root: Path, event: str, **extra: Any) -> dict[str, Any]:
    """What droid 0.225.2 sends for `event` (captured), with `extra` fields."""
    doc: dict[str, Any] = {
        "session_id": SESSION, "cwd": str(root), "hook_event_name": event, "permission_mode": "auto-high",
        "transcript_path": f"/home/u/.factory/sessions/-repo/{SESSION}.jsonl"}
    if event == "SessionStart":
        doc.update({"permission_mode": "off", "source": "startup",
                    "CLAUDE_ENV_FILE": f"/home/u/.factory/temp/env/droid-env-{SESSION}-5ce44109.sh"})
    elif event == "Stop":
        doc.update({"message_id": "81c64289-48c3-4575-a9fe-77d3d5843812", "stop_hook_active": False,
                    "tool_execution_count": 0, "elapsed_time": 262})
    doc.update(extra)
    return doc


def tool(root: Path, event: str, name: str, args: dict[str, Any]) -> dict[str, Any]:
    doc = payload(root, event, tool_name=name, tool_input=args)
    if event == "PostToolUse":
        doc["tool_response"] = "Command completed successfully\n\n[Process exited with code 0]"
    return doc


def execute(command: str) -> dict[str, Any]:
    """`Execute`'s input: droid refuses a call without the risk fields."""
    return {"command": command, "riskLevelReason": "r", "riskLevel": "low"}


def hook(root: Path, doc: dict[str, Any], thread: str = OWN) -> dict[str, Any] | None:
    result = run_leslie("hook", "factory", cwd=root, input=json.dumps(doc), env={"LESLIE_THREAD": thread})
    assert result.code == 0, result.stderr
    assert "Traceback" not in result.stderr
    return json.loads(result.stdout) if result.stdout.strip() else None


def decision(answer: dict[str, Any] | None) -> str | None:
    return None if answer is None else str(answer["hookSpecificOutput"]["permissionDecision"])


# -- context ------------------------------------------------------------------------------------------------

def test_session_start_injects_the_block_once(root: Path) -> None:
    answer = hook(root, payload(root, "SessionStart"))
    assert answer is not None and answer["hookSpecificOutput"]["hookEventName"] == "SessionStart"
    block = answer["hookSpecificOutput"]["additionalContext"]
    assert block.startswith(f'<thread_context thread="{OWN}"') and f'<ref thread="{OTHER}" ' in block
    assert hook(root, payload(root, "Stop")) is None
    assert hook(root, payload(root, "UserPromptSubmit", prompt="again")) is None  # nothing changed


def test_a_change_is_injected_once_at_the_next_prompt(root: Path) -> None:
    assert hook(root, payload(root, "SessionStart")) is not None
    spawn(Repository(root), "Third", thread_id="thread-third")
    reference(Repository(root), OWN, "thread-third", [])
    answer = hook(root, payload(root, "UserPromptSubmit", prompt="again"))
    assert answer is not None and '<ref thread="thread-third" ' in answer["hookSpecificOutput"]["additionalContext"]
    assert hook(root, payload(root, "UserPromptSubmit", prompt="more")) is None


# -- the write guard ----------------------------------------------------------------------------------------

def test_factory_s_tools_into_the_referenced_thread_are_denied(root: Path) -> None:
    """Before the mapping, `Create`, `Edit` and `Execute` were unknown tools: let through."""
    target = str(root / ".leslie" / "threads" / OTHER / "plan.md")
    for name, args in (("Create", {"file_path": target, "content": "x"}),
                       ("Edit", {"file_path": target, "old_str": "# Plan", "new_str": "# Mine"}),
                       ("Execute", execute(f"echo overwritten >> {target}"))):
        answer = hook(root, tool(root, "PreToolUse", name, args))
        assert decision(answer) == "deny", (name, answer)
        assert answer is not None
        reason = answer["hookSpecificOutput"]["permissionDecisionReason"]
        assert reason.startswith(f"leslie: .leslie/threads/{OTHER}/plan.md belongs to thread {OTHER}")


def test_apply_patch_into_the_referenced_thread_is_denied(root: Path) -> None:
    """`ApplyPatch` is in droid's bundle (not offered to a custom model, so not captured): its patch text."""
    patch = f"*** Begin Patch\n*** Update File: .leslie/threads/{OTHER}/plan.md\n@@\n-# Plan\n+# Mine\n*** End Patch"
    assert decision(hook(root, tool(root, "PreToolUse", "ApplyPatch", {"input": patch}))) == "deny"
    own = patch.replace(OTHER, OWN)
    assert decision(hook(root, tool(root, "PreToolUse", "ApplyPatch", {"input": own}))) != "deny"


def test_own_assets_are_allowed(root: Path) -> None:
    target = str(root / ".leslie" / "threads" / OWN / "design" / "notes.md")
    assert decision(hook(root, tool(root, "PreToolUse", "Create", {"file_path": target, "content": "x"}))) \
        == "allow"
    assert decision(hook(root, tool(root, "PreToolUse", "Execute", execute(f"echo hi > {target}")))) != "deny"


def test_a_hidden_shell_write_is_put_back_after_the_call(root: Path) -> None:
    target = root / ".leslie" / "threads" / OTHER / "plan.md"
    before = target.read_bytes()
    assert hook(root, payload(root, "SessionStart")) is not None
    code = f"open('.leslie/threads/{OTHER}/plan.md', 'a').write('hijacked\\n')"
    args = execute(f"python3 -c {shlex.quote(code)}")
    assert decision(hook(root, tool(root, "PreToolUse", "Execute", args))) is None
    subprocess.run(["bash", "-c", args["command"]], cwd=root, check=True)
    answer = hook(root, tool(root, "PostToolUse", "Execute", args))
    assert target.read_bytes() == before
    assert answer is not None and answer["decision"] == "block"
    assert f".leslie/threads/{OTHER}/plan.md" in answer["reason"]


# -- leslie hooks install factory ---------------------------------------------------------------------------

def test_install_merges_into_the_project_settings(root: Path) -> None:
    path = root / ".factory" / "settings.json"
    path.parent.mkdir()
    theirs = {"model": "custom:mine",
              "hooks": {"Stop": [{"hooks": [{"type": "command", "command": "./notify.sh"}]}]}}
    path.write_text(json.dumps(theirs))
    result = run_leslie("hooks", "install", "factory", "--executable", "/opt/leslie", cwd=root)
    assert result.code == 0, result.stderr
    data = json.loads(path.read_text())
    assert data["model"] == theirs["model"]
    assert data["hooks"]["Stop"][0] == theirs["hooks"]["Stop"][0]
    assert data["hooks"]["PreToolUse"] == [{"matcher": "Create|Edit|MultiEdit|ApplyPatch|Execute", "hooks": [
        {"type": "command", "command": "/opt/leslie hook factory", "timeout": 10}]}]
    assert data["hooks"]["SessionStart"][0]["hooks"][0]["timeout"] == 15
    status = run_leslie("hooks", "status", "factory", "--json", cwd=root)
    report = json.loads(status.stdout)["agents"][0]
    assert report["missing"] == [] and report["outdated"] == [], report  # (/opt/leslie itself does not exist)
    hooks_install.uninstall(root, "factory")
    assert json.loads(path.read_text()) == theirs


def test_install_refuses_an_invalid_settings_file(root: Path) -> None:
    path = root / ".factory" / "settings.json"
    path.parent.mkdir()
    path.write_text('{"model": "x", "model": "y"}')  # a duplicate key
    result = run_leslie("hooks", "install", "factory", cwd=root)
    assert result.code == 4 and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert path.read_text() == '{"model": "x", "model": "y"}'
