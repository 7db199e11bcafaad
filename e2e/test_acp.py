"""Behind `leslie acp`: Gemini CLI 0.61.0 (`--acp`), claude-agent-acp 0.101.0, codex-acp 2.6.0.

Our ACP client speaks to `leslie acp`, which starts a recorder that starts the real agent; the recorder keeps
the exact bytes the agent read and wrote, the mock keeps what reached the model.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

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
    agent_in = (str(proxied.record) + ".in")
    assert odd in open(agent_in, "rb").read()
    # Everything the agent wrote reached the client unchanged, in order.
    agent_out = open(str(proxied.record) + ".out", "rb").read()
    assert b"".join(proxied.client.received) == agent_out[:len(b"".join(proxied.client.received))]
    # Everything the client sent reached the agent unchanged, except the one prompt leslie added the block to.
    seen = open(agent_in, "rb").read().splitlines(keepends=True)
    changed = [line for line in proxied.client.sent if line not in seen]
    assert [json.loads(line)["method"] for line in changed] == ["session/prompt"]


def test_a_slash_command_still_arrives_as_a_command(request: pytest.FixtureRequest, proxied: Proxied,
                                                     agent: Agent, world: World) -> None:
    xfail_for(request, ("gemini", "claude-agent-acp", "codex-acp"),
              "issue 12 item 1: the block is prepended to a prompt starting with `/`, so the command reaches "
              "the agent as chat")
    command = {"gemini": "/about", "claude-agent-acp": "/context", "codex-acp": "/status"}[agent.name]
    session = proxied.client.new_session(world.repo)
    agent.mock.turn = 1
    proxied.client.prompt(session, command)
    agent.mock.turn = 2
    proxied.client.prompt(session, "hello")
    first, second = proxied.prompts_agent_saw()
    assert first == [{"type": "text", "text": command}]
    assert starts_with_block(second), "the block did not come with the next ordinary prompt"
