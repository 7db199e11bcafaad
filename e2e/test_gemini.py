"""Gemini CLI 0.61.0 with leslie's hooks (`leslie hooks install gemini`), against the Gemini API mock.

Each turn is one headless process (`gemini -p`), resumed with `--resume <session>` after the first, in a folder
trusted the way Gemini's trust dialog records it. Gemini replaces `<` and `>` of hook context by `&lt;`/`&gt;`,
so what reaches the model is the block escaped once: `&lt;thread_context thread="thread-own" ...&gt;`.
Gemini behind `leslie acp` is checked in test_acp.py.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from e2e.harness.acp_agents import Proxied, agent_for
from e2e.harness.checks import answer_of, assert_unchanged, context_answers
from e2e.harness.clients import GeminiSession
from e2e.harness.server import Logged, MockModelServer, Reply, ToolCall, count_in, strings_in
from e2e.harness.world import NEEDLE, OTHER, OWN, World
from leslie.store.sessions import sessions_dir

pytestmark = pytest.mark.gemini

SEEN = f'&lt;thread_context thread="{OWN}"'  # the block as the model reads it


class EscapedSession(GeminiSession):
    """Counts the blocks as Gemini delivers them (escaped)."""

    def blocks(self, request: Logged) -> int:
        """Blocks of the session's thread in a request's conversation."""
        body = request.body
        return count_in(body.get("contents", []) if isinstance(body, dict) else body, SEEN)


@pytest.fixture
def gemini_cli(world: World, gemini: MockModelServer) -> EscapedSession:
    """A Gemini CLI session in the repository, leslie's hooks installed (through the logging wrapper)."""
    world.leslie("hooks", "install", "gemini", "--executable", str(world.wrapper))
    world.commit("gemini hooks")
    return EscapedSession(world, gemini)


def last_block(request: Logged) -> str:
    """The newest block of the session's thread in a request, as the model reads it."""
    texts = [text for text in strings_in(request.body) if SEEN in text]
    assert texts, "no block of the session's thread in this request"
    return texts[-1][texts[-1].rindex(SEEN):]


def denials(world: World) -> list[dict[str, Any]]:
    """The hook calls leslie answered with Gemini's denial."""
    return [call for call in world.hook_calls() if answer_of(call).get("decision") == "deny"]


def test_every_answer_is_json(gemini_cli: EscapedSession, world: World) -> None:
    gemini_cli.prompt("hello")
    calls = world.hook_calls()
    assert {c["payload"]["hook_event_name"] for c in calls} >= {"SessionStart", "BeforeAgent", "PreCompress",
                                                                "AfterAgent"}
    for call in calls:
        assert isinstance(json.loads(call["stdout"]), dict), call


def test_block_reaches_the_model_once_at_start(gemini_cli: EscapedSession, world: World) -> None:
    gemini_cli.prompt("hello")
    assert gemini_cli.turn_blocks() == [1]
    assert [c["payload"]["hook_event_name"] for c in context_answers(world)] == ["BeforeAgent"]
    block = last_block(gemini_cli.mock.main_requests()[-1])
    assert "&lt;/thread_context&gt;" in block and "<thread_context" not in block


def test_nothing_more_on_an_unchanged_turn_and_resume_keeps_it(gemini_cli: EscapedSession, world: World) -> None:
    gemini_cli.prompt("hello")
    gemini_cli.prompt("again")  # --resume: Gemini rebuilds the conversation from its transcript
    assert ("SessionStart", "resume") in [(c["payload"]["hook_event_name"], c["payload"].get("source"))
                                          for c in world.hook_calls()]
    assert gemini_cli.turn_blocks() == [1]  # the first turn's block, kept in the resumed history
    request = gemini_cli.mock.main_requests()[-1]
    assert count_in(request.body["contents"], "hello") >= 1, "the first prompt was lost on resume"
    assert len(context_answers(world)) == 1


def test_once_more_after_a_change(gemini_cli: EscapedSession, world: World) -> None:
    gemini_cli.prompt("hello")
    world.leslie("spawn", "--id", "thread-third", "--intent", "A third thread")
    world.leslie("reference", "--target", "thread-third")
    gemini_cli.prompt("again")
    assert gemini_cli.turn_blocks() == [2]
    assert '&lt;ref thread="thread-third" ' in last_block(gemini_cli.mock.main_requests()[-1])
    gemini_cli.prompt("and again")
    assert gemini_cli.turn_blocks() == [2]


def test_once_after_clear(gemini_cli: EscapedSession, world: World) -> None:
    gemini_cli.prompt("hello")
    gemini_cli.prompt("a new conversation", resume=False)
    assert gemini_cli.turn_blocks() == [1]


def test_once_after_compression(gemini_cli: EscapedSession, gemini: MockModelServer, world: World) -> None:
    # Gemini compresses before a request when the previous one's prompt passed half its 1,048,576-token window
    # (PreCompress fires first, every time). Here the first model call of turn 3 reports 600,000 tokens: Gemini
    # compresses the older 70 % of the conversation, with the block, before its second call. The drop in the
    # transcript's usage tells leslie, and the next prompt carries the block again.
    gemini_cli.prompt("hello")
    gemini_cli.prompt("again")
    own_plan = world.thread_file(OWN, "plan.md")
    gemini.script.push(Reply(tool_calls=(ToolCall("read_file", {"file_path": str(own_plan)}),), input_tokens=600_000),
                       Reply(text="read it"))
    gemini_cli.prompt("read my plan")
    assert {r.turn for r in gemini.of_kind("compact")} == {3}
    after = gemini.main_requests(3)[-1]
    assert count_in(after.body["contents"], "<state_snapshot>") == 1
    assert gemini_cli.blocks(after) == 0  # compressed away with the first turn
    gemini_cli.prompt("after the compression")
    assert gemini_cli.turn_blocks() == [1]
    reasons = [json.loads(line)["reason"] for line in _session_log(world) if json.loads(line)["kind"] == "input"]
    assert reasons == ["start", None, None, "compacted"]
    gemini_cli.prompt("next")
    assert gemini_cli.turn_blocks() == [1]


def _session_log(world: World) -> list[str]:
    logs = sorted(Path(sessions_dir(str(world.repo))).glob("gemini.*.jsonl"))
    assert len(logs) == 1, logs
    return logs[0].read_text().splitlines()


def test_file_tool_write_into_the_referenced_thread_is_denied(gemini_cli: EscapedSession, world: World) -> None:
    target = world.thread_file(OTHER, "plan.md")
    before = target.read_bytes()
    gemini_cli.mock.script.push(
        Reply(tool_calls=(ToolCall("write_file", {"file_path": str(target), "content": "overwritten\n"}),)),
        Reply(tool_calls=(ToolCall("replace", {"file_path": str(target), "old_string": "#", "new_string": "X",
                                               "instruction": "edit"}),)),
        Reply(text="done"))
    gemini_cli.prompt("write the other thread's plan")
    assert_unchanged(target, before)
    assert [c["payload"]["tool_name"] for c in denials(world)] == ["write_file", "replace"]
    results = [s for s in strings_in(gemini_cli.mock.main_requests()[-1].body) if f"belongs to thread {OTHER}" in s]
    assert results, "the model was not told why"


def test_shell_write_into_the_referenced_thread_is_denied(gemini_cli: EscapedSession, world: World) -> None:
    target = world.thread_file(OTHER, "plan.md")
    before = target.read_bytes()
    gemini_cli.mock.script.push(
        Reply(tool_calls=(ToolCall("run_shell_command", {"command": "echo overwritten >> plan.md",
                                                         "dir_path": f".leslie/threads/{OTHER}",
                                                         "description": "append"}),)),
        Reply(text="done"))
    gemini_cli.prompt("append to the other thread's plan")
    assert_unchanged(target, before)
    assert [c["payload"]["tool_name"] for c in denials(world)] == ["run_shell_command"]


def test_second_line_puts_back_what_a_shell_command_changed(gemini_cli: EscapedSession, world: World) -> None:
    target = world.thread_file(OTHER, "plan.md")
    before = target.read_bytes()
    script = f"open('{target}', 'a').write('sneaked\\n')"
    gemini_cli.mock.script.push(
        Reply(tool_calls=(ToolCall("run_shell_command", {"command": f'python3 -c "{script}"',
                                                         "description": "python"}),)),
        Reply(text="done"))
    gemini_cli.prompt("run it")
    assert_unchanged(target, before)
    after = [c for c in world.hook_calls() if c["payload"]["hook_event_name"] == "AfterTool"]
    assert after and answer_of(after[-1]).get("decision") == "block"
    assert any("put back" in s or "restored" in s or OTHER in s
               for s in strings_in(gemini_cli.mock.main_requests()[-1].body))


def test_write_into_the_own_plan_is_allowed(gemini_cli: EscapedSession, world: World) -> None:
    target = world.thread_file(OWN, "plan.md")
    gemini_cli.mock.script.push(
        Reply(tool_calls=(ToolCall("write_file", {"file_path": str(target), "content": "# Plan\n\n1. do it\n"}),)),
        Reply(text="done"))
    gemini_cli.prompt("write my plan")
    assert target.read_text() == "# Plan\n\n1. do it\n"
    assert not denials(world)


def test_in_acp_mode_the_first_prompt_gets_the_block(world: World, gemini: MockModelServer) -> None:
    # `gemini --acp` fires no SessionStart; BeforeAgent still runs, and injects at the start.
    world.leslie("hooks", "install", "gemini", "--executable", str(world.wrapper))
    agent = agent_for("gemini", world, gemini)
    direct = Proxied(world, agent, through_leslie=False)
    try:
        session = direct.client.new_session(world.repo)
        gemini.turn = 1
        direct.client.prompt(session, "hello")
        gemini.turn = 2
        direct.client.prompt(session, "again")
    finally:
        direct.close()
    events = [c["payload"]["hook_event_name"] for c in world.hook_calls()]
    assert "SessionStart" not in events and events.count("BeforeAgent") == 2
    assert [c["payload"]["hook_event_name"] for c in context_answers(world)] == ["BeforeAgent"]
    seen = [count_in(r.body["contents"], SEEN) for r in gemini.main_requests()]
    assert seen[0] == 1 and seen[-1] == 1


def test_behind_leslie_acp_only_the_proxy_injects(world: World, gemini: MockModelServer) -> None:
    world.leslie("hooks", "install", "gemini", "--executable", str(world.wrapper))
    agent = agent_for("gemini", world, gemini)
    proxied = Proxied(world, agent)
    try:
        session = proxied.client.new_session(world.repo)
        gemini.turn = 1
        proxied.client.prompt(session, "hello")
    finally:
        proxied.close()
    assert [c["payload"]["hook_event_name"] for c in world.hook_calls()].count("BeforeAgent") == 1
    assert not context_answers(world)
    request = gemini.main_requests()[-1]
    assert count_in(request.body["contents"], NEEDLE) == 1 and count_in(request.body["contents"], SEEN) == 0


def test_at_half_the_window_the_block_goes_with_the_prompt_gemini_compresses_for(world: World,
                                                                                 gemini: MockModelServer) -> None:
    # One process (`--acp`), so Gemini keeps the last request's prompt size between prompts: 600,000 tokens after
    # the first, past half its window. The second prompt's BeforeAgent reads it in the transcript and sends the
    # block; Gemini then compresses the history before the request, and the block follows the summary.
    world.leslie("hooks", "install", "gemini", "--executable", str(world.wrapper))
    direct = Proxied(world, agent_for("gemini", world, gemini), through_leslie=False)
    try:
        session = direct.client.new_session(world.repo)
        gemini.turn, gemini.script.usage = 1, 600_000
        direct.client.prompt(session, "hello")
        gemini.turn, gemini.script.usage = 2, None
        direct.client.prompt(session, "the compression")
        gemini.turn = 3
        direct.client.prompt(session, "after it")
    finally:
        direct.close()
    assert {r.turn for r in gemini.of_kind("compact")} == {2}
    second = gemini.main_requests(2)[0]
    assert count_in(second.body["contents"], "<state_snapshot>") == 1
    assert [count_in(r.body["contents"], SEEN) for r in (second, gemini.main_requests(3)[0])] == [1, 1]
    reasons = [(e["kind"], e.get("reason"), e.get("covered")) for e in map(json.loads, _session_log(world))
               if e["kind"] in ("input", "compaction")]
    assert reasons == [("input", "start", None), ("input", "predicted", None), ("compaction", None, True),
                       ("input", None, None)]
