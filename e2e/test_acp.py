"""Behind `leslie acp`: Gemini CLI 0.61.0 (`--acp`), claude-agent-acp 0.101.0, codex-acp 2.6.0.

Our ACP client speaks to `leslie acp`, which starts a recorder that starts the real agent; the recorder keeps
the exact bytes the agent read and wrote, the mock keeps what reached the model.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from e2e.harness.acp_agents import Agent, Proxied, agent_for
from e2e.harness.server import MockModelServer
from e2e.harness.world import NEEDLE, World

pytestmark = pytest.mark.acp

ADAPTERS = [
    pytest.param("gemini", marks=pytest.mark.gemini),
    pytest.param("claude-agent-acp", marks=pytest.mark.claude),
    pytest.param("codex-acp", marks=pytest.mark.codex),
]
MOCK_OF = {"gemini": "gemini", "claude-agent-acp": "anthropic", "codex-acp": "openai"}


@pytest.fixture(params=ADAPTERS)
def agent(request: pytest.FixtureRequest, world: World) -> Agent:
    """One ACP agent, set up against its mock."""
    name = request.param
    mock: MockModelServer = request.getfixturevalue(MOCK_OF[name])
    return agent_for(name, world, mock)


@pytest.fixture
def proxied(world: World, agent: Agent) -> Iterator[Proxied]:
    """The agent behind `leslie acp`, initialized."""
    proxied = Proxied(world, agent)
    yield proxied
    proxied.close()


def xfail_for(request: pytest.FixtureRequest, names: tuple[str, ...], reason: str) -> None:
    """Mark the running test as a strict expected failure for these adapters."""
    if request.node.callspec.params["agent"] in names:
        request.node.add_marker(pytest.mark.xfail(strict=True, reason=reason))


def starts_with_block(prompt: list[dict[str, object]]) -> bool:
    """Whether a prompt's first block is the session's `<thread_context>`."""
    return bool(prompt) and str(prompt[0].get("text", "")).startswith(NEEDLE)


def test_injection_on_the_first_prompt_only(proxied: Proxied, agent: Agent, world: World) -> None:
    session = proxied.client.new_session(world.repo)
    agent.mock.turn = 1
    proxied.client.prompt(session, "hello")
    agent.mock.turn = 2
    proxied.client.prompt(session, "again")
    prompts = proxied.prompts_agent_saw()
    assert [starts_with_block(p) for p in prompts] == [True, False]
    assert [p[-1]["text"] for p in prompts] == ["hello", "again"]
    assert agent.blocks(1)[-1:] == [1]
    assert agent.blocks(2)[-1:] == [1]  # the first prompt's block, in the history


def test_unknown_messages_are_relayed_byte_exact(proxied: Proxied, agent: Agent, world: World) -> None:
    odd = b'{"method":"_e2e/unknown",  "jsonrpc":"2.0","params":{"z":1,"a":[1.0e0,"\\u00fc\xc3\xbc"],"_meta":{}}}\n'
    proxied.client.send_raw(odd)
    session = proxied.client.new_session(world.repo)
    agent.mock.turn = 1
    proxied.client.prompt(session, "hello")
    agent_in = Path(str(proxied.record) + ".in").read_bytes()
    assert odd in agent_in
    # Everything the agent wrote reached the client unchanged, in order.
    agent_out = Path(str(proxied.record) + ".out").read_bytes()
    assert b"".join(proxied.client.received) == agent_out[:len(b"".join(proxied.client.received))]
    # Everything the client sent reached the agent unchanged, except the one prompt leslie added the block to.
    seen = agent_in.splitlines(keepends=True)
    changed = [line for line in proxied.client.sent if line not in seen]
    assert [json.loads(line)["method"] for line in changed] == ["session/prompt"]


def test_a_slash_command_still_arrives_as_a_command(request: pytest.FixtureRequest, proxied: Proxied,
                                                     agent: Agent, world: World) -> None:
    command = {"gemini": "/about", "claude-agent-acp": "/context", "codex-acp": "/status"}[agent.name]
    session = proxied.client.new_session(world.repo)
    agent.mock.turn = 1
    proxied.client.prompt(session, command)
    agent.mock.turn = 2
    proxied.client.prompt(session, "hello")
    first, second = proxied.prompts_agent_saw()
    assert first == [{"type": "text", "text": command}]
    assert starts_with_block(second), "the block did not come with the next ordinary prompt"


WINDOW = {"gemini": 1_000_000, "claude-agent-acp": 1_000_000, "codex-acp": 258_400}


def test_usage_near_the_window_reinjects(request: pytest.FixtureRequest, proxied: Proxied, agent: Agent,
                                         world: World) -> None:
    session = proxied.client.new_session(world.repo)
    agent.mock.script.usage = int(WINDOW[agent.name] * 0.93)
    agent.mock.turn = 1
    first = proxied.client.prompt(session, "hello")
    agent.mock.script.usage = None
    reported = [u["used"] for u in first.of_kind("usage_update")]
    meta = first.result.get("_meta", {}).get("quota", {}).get("token_count", {}).get("input_tokens")
    assert max([*reported, meta or 0]) >= WINDOW[agent.name] * 0.9, (reported, meta)
    agent.mock.turn = 2
    proxied.client.prompt(session, "again")
    assert [starts_with_block(p) for p in proxied.prompts_agent_saw()] == [True, True]


def test_once_after_compaction(request: pytest.FixtureRequest, proxied: Proxied, agent: Agent,
                               world: World) -> None:
    session = proxied.client.new_session(world.repo)
    agent.mock.turn = 1
    proxied.client.prompt(session, "hello")
    agent.mock.turn = 2
    if agent.name == "gemini":  # no /compress over ACP: Gemini compresses by itself at half its window
        agent.mock.script.usage = WINDOW[agent.name] * 6 // 10
        proxied.client.prompt(session, "a long answer")
        agent.mock.script.usage = None
        agent.mock.turn = 3
        proxied.client.prompt(session, "after the compression")
    else:
        proxied.client.prompt(session, "/compact")
        agent.mock.turn = 3
        proxied.client.prompt(session, "after the compaction")
    assert agent.mock.of_kind("compact"), "the agent did not compact"
    assert agent.blocks(3)[-1:] == [1]


def test_the_block_after_clear(request: pytest.FixtureRequest, proxied: Proxied, agent: Agent,
                               world: World) -> None:
    if agent.name != "claude-agent-acp":
        pytest.skip(f"{agent.name} has no /clear command over ACP")
    session = proxied.client.new_session(world.repo)
    agent.mock.turn = 1
    proxied.client.prompt(session, "hello")
    agent.mock.turn = 2
    proxied.client.prompt(session, "/clear")
    agent.mock.turn = 3
    proxied.client.prompt(session, "after the clear")
    assert agent.blocks(3)[-1:] == [1]


def test_a_loaded_session_shows_the_user_their_own_message(request: pytest.FixtureRequest, world: World,
                                                           agent: Agent) -> None:
    if agent.name == "gemini":
        pytest.skip("Gemini CLI 0.61 answers session/load here with 'No previous sessions found for this "
                    "project' (its session store was not found in this set-up; not investigated further)")
    first = Proxied(world, agent)
    session = first.client.new_session(world.repo)
    agent.mock.turn = 1
    first.client.prompt(session, "hello")
    first.close()
    second = Proxied(world, agent)
    try:
        if not second.init.get("agentCapabilities", {}).get("loadSession"):
            pytest.skip(f"{agent.name} cannot load sessions")
        updates: list[dict[str, Any]] = []
        second.client.request("session/load", {"sessionId": session, "cwd": str(world.repo), "mcpServers": []},
                              updates=updates)
        replayed = "".join(str(u["update"].get("content", {}).get("text", ""))
                           for u in updates if u["update"].get("sessionUpdate") == "user_message_chunk")
        assert replayed, "the agent replayed no user message"
        assert NEEDLE not in replayed
    finally:
        second.close()


@pytest.mark.claude
def test_committed_claude_hooks_and_leslie_acp_inject_once(world: World, anthropic: MockModelServer) -> None:
    world.leslie("hooks", "install", "claude-code", "--executable", str(world.wrapper))
    world.commit("claude hooks")
    agent = agent_for("claude-agent-acp", world, anthropic)
    proxied = Proxied(world, agent)
    try:
        session = proxied.client.new_session(world.repo)
        anthropic.turn = 1
        proxied.client.prompt(session, "hello")
    finally:
        proxied.close()
    assert agent.blocks(1)[-1:] == [1]


@pytest.mark.codex
def test_codex_hooks_under_codex_acp_record_one_session(world: World, openai: MockModelServer) -> None:
    """Issue 12 item 7 (hooks fired for Codex's title-generation thread) would show here as a second session.

    Not reproduced with codex-acp 2.6.0 (its bundled Codex 0.166.0) against this mock: no title thread runs,
    every hook call carries the session's transcript_path. Kept as a guard of the one-session outcome.
    """
    from e2e.harness.clients import trust_codex_hooks

    world.leslie("hooks", "install", "codex", "--executable", str(world.wrapper))
    world.commit("codex hooks")
    agent = agent_for("codex-acp", world, openai)
    trust_codex_hooks(world, agent.env)
    direct = Proxied(world, agent, through_leslie=False)  # the hooks are the integration here
    try:
        session = direct.client.new_session(world.repo)
        openai.turn = 1
        direct.client.prompt(session, "hello")
    finally:
        direct.close()
    starts = [c["payload"] for c in world.hook_calls() if c["payload"].get("hook_event_name") == "SessionStart"]
    assert starts, "Codex ran no SessionStart hook under codex-acp"
    sessions = json.loads(world.leslie("sessions", "--json").stdout)
    assert len(sessions if isinstance(sessions, list) else sessions.get("sessions", [])) == 1, (sessions, starts)
