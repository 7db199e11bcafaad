"""The ACP agents behind `leslie acp`, each with a recorder (teewrap) between the proxy and the agent."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from e2e.harness.acp_client import AcpClient
from e2e.harness.clients import (
    CLAUDE_AGENT_ACP,
    CODEX_ACP,
    GEMINI,
    claude_env,
    codex_config,
    codex_env,
    gemini_env,
    gemini_settings,
)
from e2e.harness.server import MockModelServer, count_in
from e2e.harness.world import HARNESS, LESLIE, NEEDLE, World


@dataclass
class Agent:
    """How to start one ACP agent against its mock."""

    name: str
    command: list[str]
    env: dict[str, str]
    mock: MockModelServer
    conversation_key: str  # where a request to the model holds the conversation

    def blocks(self, turn: int) -> list[int]:
        """Blocks of the session's thread in each main request of a turn."""
        return [count_in(r.body.get(self.conversation_key, []), NEEDLE) for r in self.mock.main_requests(turn)]


def agent_for(name: str, world: World, mock: MockModelServer) -> Agent:
    """The ACP agent `name` (gemini, claude-agent-acp, codex-acp) set up in `world` against `mock`."""
    if name == "gemini":
        gemini_settings(world)
        return Agent(name, [GEMINI, "--acp"], gemini_env(mock), mock, "contents")
    if name == "claude-agent-acp":
        return Agent(name, [CLAUDE_AGENT_ACP], claude_env(world, mock), mock, "messages")
    if name == "codex-acp":
        codex_config(world, mock)
        return Agent(name, [CODEX_ACP], codex_env(world), mock, "input")
    raise ValueError(name)


class Proxied:
    """`leslie acp -- teewrap -- <agent>` driven by our ACP client; the recorder keeps what the agent saw."""

    def __init__(self, world: World, agent: Agent, *, through_leslie: bool = True) -> None:
        self.world = world
        self.agent = agent
        n = len(list(world.logs.glob("agent*.in")))
        self.record = world.logs / f"agent{n}"
        recorder = [sys.executable, str(HARNESS / "teewrap.py"), str(self.record), "--", *agent.command]
        command = [LESLIE, "acp", "--", *recorder] if through_leslie else recorder
        self.client = AcpClient(command, cwd=world.repo, env={**world.env, **agent.env},
                                stderr_path=world.logs / f"agent{n}.stderr")
        self.init = self.client.initialize()

    def agent_saw(self) -> list[dict[str, Any]]:
        """The JSON-RPC messages the agent read, in order."""
        path = Path(str(self.record) + ".in")
        return [json.loads(line) for line in path.read_bytes().splitlines() if line.strip()]

    def prompts_agent_saw(self) -> list[list[dict[str, Any]]]:
        """The prompt blocks of each `session/prompt` the agent received."""
        return [m["params"]["prompt"] for m in self.agent_saw() if m.get("method") == "session/prompt"]

    def close(self) -> int:
        """Close the client side and wait for the proxy and the agent."""
        return self.client.close()
