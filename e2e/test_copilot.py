"""GitHub Copilot CLI 1.0.102 with leslie's hooks (`leslie hooks install copilot`), against the Chat Completions
mock (`COPILOT_OFFLINE` with a custom provider).

Copilot runs a repository's hooks only in a trusted folder; the harness lists the repository in
`trustedFolders` of ~/.copilot/config.json, as answering yes to Copilot's trust prompt does.
"""

from __future__ import annotations

from typing import Any

import pytest

from e2e.harness.checks import answer_of, assert_unchanged, last_block, tool_results_mention
from e2e.harness.clients import CopilotSession
from e2e.harness.server import MockModelServer, Reply, ToolCall
from e2e.harness.world import NEEDLE, OTHER, OWN, World

pytestmark = pytest.mark.copilot


@pytest.fixture
def copilot(world: World, chat: MockModelServer) -> CopilotSession:
    """A Copilot session in the repository, leslie's hooks installed through the logging wrapper."""
    world.leslie("hooks", "install", "copilot", "--executable", str(world.wrapper))
    world.commit("copilot hooks")
    return CopilotSession(world, chat)


def context_calls(world: World) -> list[dict[str, Any]]:
    """The hook calls whose (top-level) answer carried the session's block."""
    return [call for call in world.hook_calls() if NEEDLE in str(answer_of(call).get("additionalContext", ""))]


def denials(world: World) -> list[dict[str, Any]]:
    return [call for call in world.hook_calls() if answer_of(call).get("permissionDecision") == "deny"]


def test_block_reaches_the_model_once_at_start(copilot: CopilotSession, world: World) -> None:
    copilot.prompt("hello")
    assert copilot.turn_blocks() == [1]
    assert [call["argv"][-1] for call in context_calls(world)] == ["userPromptSubmitted"]
    events = {call["argv"][-1] for call in world.hook_calls()}
    assert {"sessionStart", "userPromptSubmitted", "agentStop"} <= events


def test_nothing_more_on_an_unchanged_turn(copilot: CopilotSession, world: World) -> None:
    copilot.prompt("hello")
    copilot.prompt("again")  # --continue: the first prompt's block is kept in the history
    assert copilot.turn_blocks() == [1]
    assert len(context_calls(world)) == 1


def test_once_more_after_a_change(copilot: CopilotSession, world: World) -> None:
    copilot.prompt("hello")
    world.leslie("spawn", "--id", "thread-third", "--intent", "A third thread")
    world.leslie("reference", "--target", "thread-third")
    copilot.prompt("again")
    assert copilot.turn_blocks() == [2]
    assert '<ref thread="thread-third" ' in last_block(copilot.mock.main_requests(copilot.mock.turn)[-1])
    copilot.prompt("and again")
    assert copilot.turn_blocks() == [2]


def test_create_into_the_referenced_thread_is_denied(copilot: CopilotSession, world: World) -> None:
    target = world.thread_file(OTHER, "plan.md")
    before = target.read_bytes()
    copilot.mock.script.push(Reply(tool_calls=(ToolCall("create", {"path": str(target), "file_text": "x"}),)),
                             Reply(text="done"))
    copilot.prompt("overwrite the other thread's plan")
    assert_unchanged(target, before)
    assert [call["argv"][-1] for call in denials(world)] == ["preToolUse"]
    assert tool_results_mention(copilot.mock.main_requests()[-1], f"belongs to thread {OTHER}")


def test_shell_write_into_the_referenced_thread_is_denied(copilot: CopilotSession, world: World) -> None:
    target = world.thread_file(OTHER, "plan.md")
    before = target.read_bytes()
    command = f"echo overwritten >> {target}"
    copilot.mock.script.push(Reply(tool_calls=(ToolCall("bash", {"command": command, "description": "append",
                                                                 "mode": "sync", "initial_wait": 10}),)),
                             Reply(text="done"))
    copilot.prompt("append to the other thread's plan")
    assert_unchanged(target, before)
    assert len(denials(world)) == 1
    assert tool_results_mention(copilot.mock.main_requests()[-1], f"belongs to thread {OTHER}")


def test_edit_of_the_own_plan_is_allowed(copilot: CopilotSession, world: World) -> None:
    target = world.thread_file(OWN, "plan.md")
    first_line = target.read_text().splitlines()[0]
    copilot.mock.script.push(Reply(tool_calls=(ToolCall("edit", {"path": str(target), "old_str": first_line,
                                                                 "new_str": "# Plan: do it"}),)),
                             Reply(text="done"))
    copilot.prompt("write my plan")
    assert target.read_text().splitlines()[0] == "# Plan: do it"
    assert not denials(world)


def test_once_after_manual_compaction(copilot: CopilotSession, world: World) -> None:
    """`/compact` fires preCompact (output ignored) and no hook after: the next prompt re-injects."""
    copilot.prompt("hello")
    copilot.prompt("/compact")
    assert [r.turn for r in copilot.mock.of_kind("compact")] == [2]
    assert "preCompact" in [call["argv"][-1] for call in world.hook_calls()]
    copilot.prompt("after the compaction")
    assert copilot.turn_blocks() == [1]
    assert len(context_calls(world)) == 2
    copilot.prompt("and again")
    assert copilot.turn_blocks() == [1]
