"""Fixtures of the end-to-end suite: a world per test (temp home, refusing proxy, repository), the mock servers.

The suite needs the real clients in e2e/node_modules (`e2e/run` installs them with `npm ci`); without them
every test is skipped with that reason.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from e2e.harness.anthropic import AnthropicHandler
from e2e.harness.chat import ChatHandler
from e2e.harness.gemini import GeminiHandler
from e2e.harness.openai import ResponsesHandler
from e2e.harness.server import MockModelServer, ModelHandler
from e2e.harness.world import NODE_BIN, World

MARKERS = {
    "claude": "Claude Code (hooks) and claude-agent-acp",
    "codex": "Codex CLI (hooks) and codex-acp",
    "gemini": "Gemini CLI",
    "acp": "behind `leslie acp`",
    "copilot": "GitHub Copilot CLI (hooks)",
    "qwen": "Qwen Code (hooks)",
    "factory": "Factory's droid (hooks)",
    "opencode": "opencode (leslie's plugin)",
    "pi": "pi (leslie's extension)",
}


def pytest_configure(config: pytest.Config) -> None:
    """Register the per-client markers (the project runs pytest with --strict-markers)."""
    for name, text in MARKERS.items():
        config.addinivalue_line("markers", f"{name}: {text}")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip everything when the clients are not installed."""
    if (NODE_BIN / "claude").exists() and (NODE_BIN / "codex").exists() and (NODE_BIN / "gemini").exists():
        return
    skip = pytest.mark.skip(reason="the agent clients are not installed: run e2e/run (npm ci in e2e/)")
    for item in items:
        if Path(str(item.fspath)).is_relative_to(Path(__file__).parent):
            item.add_marker(skip)


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    """A repository with thread-own referencing thread-other; fails the test if any request left for the proxy."""
    world = World(tmp_path)
    world.make_repo()
    yield world
    world.close()
    assert not world.proxy.seen, f"a client tried to reach the network: {world.proxy.seen}"


def _mock(world: World, handler: type[ModelHandler], name: str) -> Iterator[MockModelServer]:
    server = MockModelServer(handler, world.logs / f"{name}.requests.jsonl").start()
    yield server
    server.stop()
    unknown = server.of_kind("unknown")
    assert not unknown, f"the {name} mock got requests it does not know: {[r.path for r in unknown]}"


@pytest.fixture
def anthropic(world: World) -> Iterator[MockModelServer]:
    """The Anthropic Messages mock."""
    yield from _mock(world, AnthropicHandler, "anthropic")


@pytest.fixture
def openai(world: World) -> Iterator[MockModelServer]:
    """The OpenAI Responses mock."""
    yield from _mock(world, ResponsesHandler, "openai")


@pytest.fixture
def gemini(world: World) -> Iterator[MockModelServer]:
    """The Gemini API mock."""
    yield from _mock(world, GeminiHandler, "gemini")


@pytest.fixture
def chat(world: World) -> Iterator[MockModelServer]:
    """The OpenAI Chat Completions mock (Copilot CLI, Qwen Code, opencode, Kilo Code, pi)."""
    yield from _mock(world, ChatHandler, "chat")
