"""pi 0.73.1 with leslie's extension (`leslie hooks install pi`), against the Chat Completions mock.

The block arrives as a message of its own after the prompt (`customType: "leslie"`), stored in the session.
"""

from __future__ import annotations

from typing import Any

import pytest

from e2e.harness.checks import answer_of, assert_unchanged, last_block, tool_results_mention
from e2e.harness.plugin_clients import PI, PiSession
from e2e.harness.server import MockModelServer, Reply, ToolCall
from e2e.harness.world import NEEDLE, OTHER, OWN, World

pytestmark = [pytest.mark.pi, pytest.mark.skipif(not __import__("os").path.exists(PI),
                                                 reason="pi is not installed: run e2e/run")]


def install(world: World) -> None:
    """leslie's extension, through the logging wrapper, committed."""
    world.leslie("hooks", "install", "pi", "--executable", str(world.wrapper))
    world.commit("pi extension")


@pytest.fixture
def pi(world: World, chat: MockModelServer) -> PiSession:
    """A pi session in the repository with leslie's extension."""
    install(world)
    return PiSession(world, chat)


def injections(world: World) -> list[dict[str, Any]]:
    """The extension's calls that leslie answered with the session's block."""
    return [c for c in world.hook_calls() if NEEDLE in str(answer_of(c).get("context", ""))]


def test_block_reaches_the_model_once_at_start(pi: PiSession, world: World) -> None:
    pi.prompt("hello")
    assert pi.turn_blocks() == [1]
    assert [c["payload"]["event"] for c in injections(world)] == ["before_agent_start"]


def test_nothing_more_on_an_unchanged_turn(pi: PiSession, world: World) -> None:
    pi.prompt("hello")
    pi.prompt("again")
    assert pi.turn_blocks() == [1]  # the first block, kept in the session by `pi -c`
    assert len(injections(world)) == 1


def test_once_more_after_a_change(pi: PiSession, world: World) -> None:
    pi.prompt("hello")
    world.leslie("spawn", "--id", "thread-third", "--intent", "A third thread")
    world.leslie("reference", "--target", "thread-third")
    pi.prompt("again")
    assert pi.turn_blocks() == [2]
    assert '<ref thread="thread-third" ' in last_block(pi.mock.main_requests(pi.mock.turn)[-1])
    pi.prompt("and again")
    assert pi.turn_blocks() == [2]


def test_once_after_compaction(world: World, chat: MockModelServer) -> None:
    install(world)
    # pi compacts when the context passes its window minus 16,384 reserved tokens, keeping the most recent
    # `keepRecentTokens` verbatim: with 1 only the last turn is kept, the first turn (and its block) is summarized.
    pi = PiSession(world, chat, window=40_000, keep_recent_tokens=1)
    pi.prompt("hello")
    chat.script.usage = 30_000
    pi.prompt("fill the context")  # compacted after this prompt (`pi -p` shuts down meanwhile: a stale ctx)
    chat.script.usage = None
    assert {r.turn for r in chat.of_kind("compact")} == {2}  # one summary request, or two when it splits a turn
    pi.prompt("after the compaction")
    compactions = [c for c in world.hook_calls() if c["payload"]["event"] == "session_compact"]
    assert [c["payload"]["context_kept"] for c in compactions] == [False]
    assert pi.turn_blocks() == [1]
    assert [c["payload"]["event"] for c in injections(world)] == ["before_agent_start"] * 2
    pi.prompt("and again")
    assert pi.turn_blocks() == [1]  # the smaller usage after the compaction is no second one


def test_predicted_compaction_from_the_real_usage(world: World, chat: MockModelServer) -> None:
    install(world)
    config = world.repo / ".leslie" / "config.toml"
    config.write_text((config.read_text() if config.exists() else "") + "\n[injection]\nusage_threshold = 0.5\n")
    world.commit("usage threshold")
    pi = PiSession(world, chat, window=100_000)
    pi.prompt("hello")
    chat.script.usage = 60_000  # past 50 % of the window, below pi's own trigger (100,000 - 16,384)
    pi.prompt("grow")
    chat.script.usage = None
    pi.prompt("next")
    assert not chat.of_kind("compact")
    prompts = [c["payload"] for c in world.hook_calls() if c["payload"]["event"] == "before_agent_start"]
    assert prompts[-1]["usage"]["tokens"] >= 60_000
    assert pi.turn_blocks() == [2]


def test_write_into_the_referenced_thread_is_denied(pi: PiSession, world: World) -> None:
    target = world.thread_file(OTHER, "plan.md")
    before = target.read_bytes()
    pi.mock.script.push(Reply(tool_calls=(ToolCall("write", {"path": str(target), "content": "overwritten"}),)),
                        Reply(text="done"))
    pi.prompt("overwrite the other thread's plan")
    assert_unchanged(target, before)
    blocked = [c for c in world.hook_calls() if "block" in answer_of(c)]
    assert [c["payload"]["tool"] for c in blocked] == ["write"]
    assert tool_results_mention(pi.mock.main_requests()[-1], f"belongs to thread {OTHER}")


def test_shell_write_into_the_referenced_thread_is_denied(pi: PiSession, world: World) -> None:
    target = world.thread_file(OTHER, "plan.md")
    before = target.read_bytes()
    pi.mock.script.push(Reply(tool_calls=(ToolCall("bash", {"command": f"echo overwritten >> {target}"}),)),
                        Reply(text="done"))
    pi.prompt("append to the other thread's plan")
    assert_unchanged(target, before)
    assert [c["payload"]["tool"] for c in world.hook_calls() if "block" in answer_of(c)] == ["bash"]


def test_write_into_the_own_plan_is_allowed(pi: PiSession, world: World) -> None:
    target = world.thread_file(OWN, "plan.md")
    pi.mock.script.push(Reply(tool_calls=(ToolCall("write", {"path": str(target), "content": "# mine\n"}),)),
                        Reply(text="done"))
    pi.prompt("write my plan")
    assert target.read_text() == "# mine\n"
