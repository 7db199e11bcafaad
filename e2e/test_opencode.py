"""opencode 1.18.33 with leslie's plugin (`leslie hooks install opencode`), against the Chat Completions mock.

The block arrives as a synthetic text part of the user's message (`chat.message`), stored with the session.
"""

from __future__ import annotations

import os
from typing import Any

import pytest

from e2e.harness.checks import answer_of, assert_unchanged, last_block, tool_results_mention
from e2e.harness.plugin_clients import OPENCODE, OpencodeSession
from e2e.harness.server import MockModelServer, Reply, ToolCall
from e2e.harness.world import NEEDLE, OTHER, OWN, World

pytestmark = [pytest.mark.opencode,
              pytest.mark.skipif(not os.path.exists(OPENCODE), reason="opencode is not installed: run e2e/run")]


def install(world: World) -> None:
    """leslie's plugin, through the logging wrapper, committed."""
    world.leslie("hooks", "install", "opencode", "--executable", str(world.wrapper))
    world.commit("opencode plugin")


@pytest.fixture
def opencode(world: World, chat: MockModelServer) -> OpencodeSession:
    """An opencode session in the repository with leslie's plugin."""
    install(world)
    return OpencodeSession(world, chat)


def injections(world: World) -> list[dict[str, Any]]:
    """The plugin's calls that leslie answered with the session's block."""
    return [c for c in world.hook_calls() if NEEDLE in str(answer_of(c).get("context", ""))]


def test_block_reaches_the_model_once_at_start(opencode: OpencodeSession, world: World) -> None:
    opencode.prompt("hello")
    assert opencode.turn_blocks() == [1]
    assert [c["payload"]["event"] for c in injections(world)] == ["chat.message"]


def test_nothing_more_on_an_unchanged_turn(opencode: OpencodeSession, world: World) -> None:
    opencode.prompt("hello")
    opencode.prompt("again")
    assert opencode.turn_blocks() == [1]  # the first block, kept with the session by `--continue`
    assert len(injections(world)) == 1


def test_once_more_after_a_change(opencode: OpencodeSession, world: World) -> None:
    opencode.prompt("hello")
    world.leslie("spawn", "--id", "thread-third", "--intent", "A third thread")
    world.leslie("reference", "--target", "thread-third")
    opencode.prompt("again")
    assert opencode.turn_blocks() == [2]
    assert '<ref thread="thread-third" ' in last_block(opencode.mock.main_requests(opencode.mock.turn)[-1])
    opencode.prompt("and again")
    assert opencode.turn_blocks() == [2]


def test_once_after_compaction(world: World, chat: MockModelServer) -> None:
    install(world)
    opencode = OpencodeSession(world, chat, context=20_000)
    # A reply that fills the window: opencode compacts the whole conversation into a summary and goes on
    # with a message of its own ("Continue if you have next steps"), which no plugin hook sees.
    chat.script.push(Reply(text="ok", input_tokens=19_500))
    opencode.prompt("hello")
    assert [r.turn for r in chat.of_kind("compact")] == [1]
    assert [c["payload"]["event"] for c in world.hook_calls() if c["payload"]["event"] == "session.compacted"] \
        == ["session.compacted"]
    opencode.prompt("after the compaction")
    assert opencode.turn_blocks() == [1]
    assert [c["payload"]["event"] for c in injections(world)] == ["chat.message"] * 2
    opencode.prompt("and again")
    assert opencode.turn_blocks() == [1]


def test_write_into_the_referenced_thread_is_denied(opencode: OpencodeSession, world: World) -> None:
    target = world.thread_file(OTHER, "plan.md")
    before = target.read_bytes()
    opencode.mock.script.push(
        Reply(tool_calls=(ToolCall("write", {"filePath": str(target), "content": "overwritten"}),)), Reply(text="done"))
    opencode.prompt("overwrite the other thread's plan")
    assert_unchanged(target, before)
    assert [c["payload"]["tool"] for c in world.hook_calls() if "block" in answer_of(c)] == ["write"]
    assert tool_results_mention(opencode.mock.main_requests()[-1], f"belongs to thread {OTHER}")


def test_shell_write_into_the_referenced_thread_is_denied(opencode: OpencodeSession, world: World) -> None:
    target = world.thread_file(OTHER, "plan.md")
    before = target.read_bytes()
    opencode.mock.script.push(
        Reply(tool_calls=(ToolCall("bash", {"command": f"echo overwritten >> {target}",
                                            "description": "append"}),)), Reply(text="done"))
    opencode.prompt("append to the other thread's plan")
    assert_unchanged(target, before)
    assert [c["payload"]["tool"] for c in world.hook_calls() if "block" in answer_of(c)] == ["bash"]


def test_write_into_the_own_plan_is_allowed(opencode: OpencodeSession, world: World) -> None:
    target = world.thread_file(OWN, "plan.md")
    opencode.mock.script.push(
        Reply(tool_calls=(ToolCall("write", {"filePath": str(target), "content": "# mine\n"}),)), Reply(text="done"))
    opencode.prompt("write my plan")
    assert target.read_text() == "# mine\n"
