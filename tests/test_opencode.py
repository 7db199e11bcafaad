"""`leslie hook opencode` through the real executable, with the payloads leslie's opencode plugin sends.

The payloads are those the plugin (`leslie/integrations/plugins/opencode.js`) built in real opencode 1.18.33
runs (e2e/test_opencode.py): the event name, opencode's session ID, the project folder, and the prompt text
or the tool's own name and arguments.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from conftest import run_leslie
from leslie.ops.threads import spawn
from leslie.store.repository import Repository

THREAD = "thread-oc"
OTHER = "thread-od"
SESSION = "ses_df6082460ffeaHHex0u2BZqbVq"


@pytest.fixture
def root(repo: Repository) -> Path:
    spawn(repo, "opencode's thread", thread_id=THREAD)
    spawn(repo, "Another thread", thread_id=OTHER)
    return repo.root


def hook(root: Path, payload: dict[str, Any], *, cwd: Path | None = None) -> dict[str, Any]:
    """leslie's answer (always one JSON object)."""
    result = run_leslie("hook", "opencode", cwd=cwd or root, input=json.dumps(payload), env={"LESLIE_THREAD": THREAD})
    assert result.code == 0, result.stderr
    answer = json.loads(result.stdout)
    assert isinstance(answer, dict)
    return answer


def message(root: Path, text: str = "refactor the parser") -> dict[str, Any]:
    return {"event": "chat.message", "session_id": SESSION, "cwd": str(root), "prompt": text}


def tool(root: Path, name: str, args: dict[str, Any]) -> dict[str, Any]:
    return {"event": "tool.execute.before", "session_id": SESSION, "cwd": str(root), "tool": name, "args": args}


def test_first_prompt_gets_the_block_then_nothing_until_a_change(root: Path, repo: Repository) -> None:
    first = hook(root, message(root))
    assert first["context"].startswith(f'<thread_context thread="{THREAD}"')
    assert hook(root, message(root, "again")) == {}
    spawn(repo, "A third thread", thread_id="thread-oe")
    run_leslie("reference", "--thread", THREAD, "--target", "thread-oe", cwd=root)
    assert '<ref thread="thread-oe" ' in hook(root, message(root, "and now"))["context"]


def test_compaction_reinjects_at_the_next_prompt(root: Path) -> None:
    hook(root, message(root))
    assert hook(root, {"event": "session.compacted", "session_id": SESSION, "cwd": str(root)}) == {}
    assert "context" in hook(root, message(root, "after"))
    assert hook(root, message(root, "later")) == {}


def test_plugin_payload_from_a_subfolder_finds_the_repository(root: Path) -> None:
    sub = root / "src"
    sub.mkdir()
    assert "context" in hook(root, {**message(root), "cwd": str(sub)}, cwd=sub)


@pytest.mark.parametrize(("name", "args"), [
    ("write", {"filePath": "{other}/plan.md", "content": "x"}),
    ("edit", {"filePath": "{other}/plan.md", "oldString": "a", "newString": "b"}),
    ("bash", {"command": "echo x >> {other}/plan.md", "description": "append"}),
    ("bash", {"command": "echo x >> plan.md", "workdir": "{other}", "description": "append"}),
    ("apply_patch", {"patchText": "*** Begin Patch\n*** Update File: {other}/plan.md\n@@\n-a\n+b\n*** End Patch"}),
])
def test_writes_into_another_thread_are_blocked(root: Path, name: str, args: dict[str, Any]) -> None:
    other = str(root / ".leslie" / "threads" / OTHER)
    filled = {k: v.replace("{other}", other) for k, v in args.items()}
    answer = hook(root, tool(root, name, filled))
    assert answer["block"].startswith("leslie: ") and f"belongs to thread {OTHER}" in answer["block"]


@pytest.mark.parametrize(("name", "args"), [
    ("write", {"filePath": "{own}/plan.md", "content": "x"}),
    ("bash", {"command": "cat {other}/plan.md"}),
    ("read", {"filePath": "{other}/plan.md"}),
    ("write", {"filePath": "src/main.py", "content": "x"}),
])
def test_other_calls_pass(root: Path, name: str, args: dict[str, Any]) -> None:
    own, other = (str(root / ".leslie" / "threads" / t) for t in (THREAD, OTHER))
    filled = {k: v.replace("{own}", own).replace("{other}", other) for k, v in args.items()}
    assert hook(root, tool(root, name, filled)) == {}


def test_outside_a_repository_the_answer_is_empty(tmp_path: Path) -> None:
    folder = tmp_path / "elsewhere"
    folder.mkdir()
    assert hook(folder, message(folder)) == {}
    assert hook(folder, tool(folder, "write", {"filePath": str(folder / "a.txt")})) == {}


def test_garbage_is_a_warning_and_no_answer(root: Path) -> None:
    result = run_leslie("hook", "opencode", cwd=root, input="not json")
    assert result.code == 0 and result.stdout == "" and "not JSON" in result.stderr  # the plugin reads "" as {}
    assert hook(root, {"event": "session.idle", "session_id": SESSION}) == {}
