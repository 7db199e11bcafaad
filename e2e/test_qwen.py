"""Qwen Code 0.24.4 with leslie's hooks (`leslie hooks install qwen`), against the Chat Completions mock.

Qwen's folder trust is off by default (`security.folderTrust.enabled`), so the project's hooks load. Qwen
escapes `<` and `>` of every hook context: the model sees `&lt;thread_context ...&gt;`, behind leslie's note.
Qwen 0.24.4 says it needs Node 22; it runs here on Node 20.
"""

from __future__ import annotations

from typing import Any

import pytest

from e2e.harness.checks import answer_of, assert_unchanged, denials, tool_results_mention
from e2e.harness.clients import QwenSession
from e2e.harness.server import Logged, MockModelServer, Reply, ToolCall, count_in
from e2e.harness.world import NEEDLE, OTHER, OWN, World

pytestmark = pytest.mark.qwen

ESCAPED = f'&lt;thread_context thread="{OWN}"'  # what reaches the model


@pytest.fixture
def qwen(world: World, chat: MockModelServer) -> QwenSession:
    """A Qwen session in the repository, leslie's hooks installed through the logging wrapper."""
    world.leslie("hooks", "install", "qwen", "--executable", str(world.wrapper))
    world.commit("qwen hooks")
    return QwenSession(world, chat)


def blocks(request: Logged) -> int:
    body = request.body
    return count_in(body.get("messages", []) if isinstance(body, dict) else body, ESCAPED)


def turn_blocks(session: QwenSession) -> list[int]:
    return [blocks(r) for r in session.mock.main_requests(session.mock.turn)]


def context_calls(world: World) -> list[dict[str, Any]]:
    return [call for call in world.hook_calls()
            if "<thread_context" in str(answer_of(call).get("hookSpecificOutput", {}).get("additionalContext", ""))]


def test_block_reaches_the_model_once_at_start_escaped(qwen: QwenSession, world: World) -> None:
    qwen.prompt("hello")
    assert set(turn_blocks(qwen)) == {1}  # every request of the turn (Qwen may ask twice) holds one block
    request = qwen.mock.main_requests()[-1]
    assert count_in(request.body, NEEDLE) == 0  # Qwen escaped it
    assert "escapes angle brackets in hook context" in str(request.body)
    assert [call["payload"]["hook_event_name"] for call in context_calls(world)] == ["UserPromptSubmit"]


def test_nothing_more_on_an_unchanged_turn(qwen: QwenSession, world: World) -> None:
    qwen.prompt("hello")
    qwen.prompt("again")  # --continue: the first prompt's context part is kept in the history
    assert set(turn_blocks(qwen)) == {1}
    assert len(context_calls(world)) == 1


def test_once_more_after_a_change(qwen: QwenSession, world: World) -> None:
    qwen.prompt("hello")
    world.leslie("spawn", "--id", "thread-third", "--intent", "A third thread")
    world.leslie("reference", "--target", "thread-third")
    qwen.prompt("again")
    assert set(turn_blocks(qwen)) == {2}
    assert '&lt;ref thread="thread-third" ' in str(qwen.mock.main_requests()[-1].body)


def test_write_file_into_the_referenced_thread_is_denied(qwen: QwenSession, world: World) -> None:
    target = world.thread_file(OTHER, "plan.md")
    before = target.read_bytes()
    qwen.mock.script.push(Reply(tool_calls=(ToolCall("write_file", {"file_path": str(target), "content": "x"}),)),
                          Reply(text="done"))
    qwen.prompt("overwrite the other thread's plan")
    assert_unchanged(target, before)
    assert [call["payload"]["tool_name"] for call in denials(world)] == ["write_file"]
    assert tool_results_mention(qwen.mock.main_requests()[-1], f"belongs to thread {OTHER}")


def test_shell_write_into_the_referenced_thread_is_denied(qwen: QwenSession, world: World) -> None:
    target = world.thread_file(OTHER, "plan.md")
    before = target.read_bytes()
    qwen.mock.script.push(Reply(tool_calls=(ToolCall("run_shell_command", {
        "command": f"echo overwritten >> {target}", "description": "append", "is_background": False}),)),
        Reply(text="done"))
    qwen.prompt("append to the other thread's plan")
    assert_unchanged(target, before)
    assert [call["payload"]["tool_name"] for call in denials(world)] == ["run_shell_command"]


def test_a_new_file_in_the_own_thread_is_allowed(qwen: QwenSession, world: World) -> None:
    # (Qwen itself refuses to overwrite a file its session has not read: a new file here.)
    target = world.thread_file(OWN, "design/notes.md")
    qwen.mock.script.push(Reply(tool_calls=(ToolCall("write_file", {"file_path": str(target),
                                                                    "content": "# Notes\n"}),)),
                          Reply(text="done"))
    qwen.prompt("write my notes")
    assert target.read_text() == "# Notes\n"
    assert not denials(world)



def test_once_after_manual_compaction(qwen: QwenSession, world: World) -> None:
    """`/compress` (in `-p`): Qwen fires SessionStart `compact` after it; the next prompt carries the block again.
    (Long prompts, so that the mock's summary is shorter than the history Qwen compresses: it keeps the most
    recent 30 % as they are.)"""
    for n in range(4):
        qwen.prompt(f"prompt {n} " + "lorem ipsum dolor " * 1500)
    qwen.prompt("/compress")
    assert [r.turn for r in qwen.mock.of_kind("compact")][:1] == [5]
    sources = [call["payload"].get("source") for call in world.hook_calls()
               if call["payload"].get("hook_event_name") == "SessionStart"]
    assert "compact" in sources, sources
    qwen.prompt("after the compaction")
    assert set(turn_blocks(qwen)) == {1}
    assert len(context_calls(world)) == 2



@pytest.mark.skip(reason="the mock's reported usage and the history Qwen measures disagree: Qwen compresses and "
                         "then refuses the prompt as still over its hard limit; /compress is checked instead")
def test_once_after_automatic_compaction() -> None:
    """Placeholder so the report lists the check."""
