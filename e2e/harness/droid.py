"""Factory's droid CLI 0.225.2 (`@factory/cli-linux-x64`, a native binary) against the Chat Completions mock.

What it needs (read from its bundle, checked with the binary): a custom model in ~/.factory/config.json
(`custom_models`: `model`, `base_url`, `api_key`, `provider: "generic-chat-completion-api"`), chosen with
`-m custom:<model>`; `droid exec --auto high -o json PROMPT` runs one turn headless (no Factory login for a
custom model), `-s <session>` continues a session.
"""

from __future__ import annotations

import json

from e2e.harness.clients import Session
from e2e.harness.server import MockModelServer
from e2e.harness.world import NODE_BIN, Run, World

DROID = str(NODE_BIN.parent / "@factory" / "cli-linux-x64" / "bin" / "droid")  # a platform package: no .bin link
MODEL = "mock-model"


def droid_env(world: World, mock: MockModelServer) -> dict[str, str]:
    """droid with the mock as its custom model. (No switch for its calls to api.factory.ai and
    telemetry.factory.ai was found in the bundle: the proxy refuses them.)"""
    folder = world.home / ".factory"
    folder.mkdir(exist_ok=True)
    (folder / "config.json").write_text(json.dumps({"custom_models": [{
        "model_display_name": MODEL, "model": MODEL, "base_url": f"{mock.url}/v1", "api_key": "sk-e2e-mock",
        "provider": "generic-chat-completion-api", "max_tokens": 4096}]}))
    return {}


class DroidSession(Session):
    """`droid exec --auto high` turns; `-s <session>` after the first."""

    def __init__(self, world: World, mock: MockModelServer) -> None:
        super().__init__(world, mock, "messages")
        self.env = droid_env(world, mock)
        self.check = True

    def prompt(self, text: str, *, timeout: float = 120) -> Run:
        """One turn."""
        self.next_turn()
        args = [DROID, "exec", "--auto", "high", "-m", f"custom:{MODEL}", "-o", "json"]
        if self.session_id:
            args += ["-s", self.session_id]
        return self.keep_session_of(self.world.run(*args, text, env=self.env, timeout=timeout, check=self.check))
