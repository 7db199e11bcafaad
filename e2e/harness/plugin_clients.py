"""opencode and pi, run headless against the Chat Completions mock, with leslie's plugin files installed.

What each needs was read from its installed package and checked with a real run:
- opencode 1.18.33 (a Bun binary): a provider in ~/.config/opencode/opencode.json (`"npm":
  "@ai-sdk/openai-compatible"`, bundled, with `options.baseURL`); `opencode run PROMPT`, `--continue`; the
  project folder from $PWD. At start it installs `@opencode-ai/plugin` into `.opencode/` with an embedded npm:
  `offline=true` in ~/.npmrc keeps that from leaving the machine (the plugin imports nothing from it).
  OPENCODE_DISABLE_* switch off the update check, models.dev, LSP downloads, sharing and the default plugins.
- Kilo Code 7.7.9 (`@kilocode/cli-linux-x64`, opencode's fork): the same, with `kilo` for `opencode` in the
  names (~/.config/kilo/kilo.json, KILO_DISABLE_*); `"disabled_providers": ["kilo"]` (else it fetches Kilo's
  model list) and KILO_TELEMETRY_LEVEL=off (else it sends PostHog events).
- pi 0.73.1 (Node): a provider in ~/.pi/agent/models.json (`api: "openai-completions"`, `baseUrl`);
  `pi -p PROMPT`, `pi -c -p PROMPT`; PI_OFFLINE=1.
"""

from __future__ import annotations

import json
from typing import Any

from e2e.harness.clients import Session
from e2e.harness.server import MockModelServer
from e2e.harness.world import NODE_BIN, Run, World

OPENCODE = str(NODE_BIN / "opencode")
KILO = str(NODE_BIN.parent / "@kilocode" / "cli-linux-x64" / "bin" / "kilo")  # a platform package: no .bin link
PI = str(NODE_BIN / "pi")
MODEL = "mock-model"

OPENCODE_QUIET = {
    "OPENCODE_DISABLE_AUTOUPDATE": "1", "OPENCODE_DISABLE_MODELS_FETCH": "1", "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
    "OPENCODE_DISABLE_DEFAULT_PLUGINS": "1", "OPENCODE_DISABLE_SHARE": "1", "OPENCODE_DISABLE_CLAUDE_CODE": "1",
}


def offline_npm(world: World) -> None:
    """~/.npmrc: an npm that never fetches (opencode's dependency install into `.opencode/`)."""
    (world.home / ".npmrc").write_text("offline=true\nregistry=http://127.0.0.1:9/\n")


class OpencodeSession(Session):
    """`opencode run` turns (`kilo run` with `kilo=True`); `--continue` after the first."""

    def __init__(self, world: World, mock: MockModelServer, *, context: int = 100_000, kilo: bool = False) -> None:
        super().__init__(world, mock, "messages")
        offline_npm(world)
        name = "kilo" if kilo else "opencode"
        self.executable = KILO if kilo else OPENCODE
        folder = world.home / ".config" / name
        folder.mkdir(parents=True, exist_ok=True)
        extra: dict[str, Any] = {"disabled_providers": ["kilo"]} if kilo else {}
        (folder / f"{name}.json").write_text(json.dumps({**extra,
            "provider": {"mock": {"npm": "@ai-sdk/openai-compatible", "name": "Mock",
                                  "options": {"baseURL": f"{mock.url}/v1", "apiKey": "sk-e2e-mock"},
                                  "models": {MODEL: {"name": "Mock", "limit": {"context": context, "output": 1000}}}}},
            "model": f"mock/{MODEL}", "small_model": f"mock/{MODEL}", "autoupdate": False, "share": "disabled",
            "permission": {"edit": "allow", "bash": "allow"},
        }, indent=2))
        self.env = {"PWD": str(world.repo), **OPENCODE_QUIET}
        if kilo:
            self.env = {"PWD": str(world.repo), "KILO_TELEMETRY_LEVEL": "off", "KILO_NO_DAEMON": "1",
                        **{key.replace("OPENCODE_", "KILO_"): value for key, value in OPENCODE_QUIET.items()}}

    def prompt(self, text: str, *, timeout: float = 120) -> Run:
        """One turn."""
        self.next_turn()
        args = [self.executable, "run", *(["--continue"] if self.runs else []), text]
        run = self.world.run(*args, env=self.env, timeout=timeout)
        self.runs.append(run)
        return run


class PiSession(Session):
    """`pi -p` turns; `pi -c -p` after the first."""

    def __init__(self, world: World, mock: MockModelServer, *, window: int = 100_000,
                 keep_recent_tokens: int | None = None) -> None:
        super().__init__(world, mock, "messages")
        agent = world.home / ".pi" / "agent"
        agent.mkdir(parents=True, exist_ok=True)
        (agent / "models.json").write_text(json.dumps({"providers": {"mock": {
            "baseUrl": f"{mock.url}/v1", "api": "openai-completions", "apiKey": "sk-e2e-mock",
            "models": [{"id": MODEL, "name": "Mock", "contextWindow": window, "maxTokens": 1000}]}}}, indent=2))
        settings: dict[str, Any] = {"defaultProvider": "mock", "defaultModel": MODEL}
        if keep_recent_tokens is not None:
            settings["compaction"] = {"keepRecentTokens": keep_recent_tokens}
        (agent / "settings.json").write_text(json.dumps(settings, indent=2))
        self.env = {"PI_OFFLINE": "1"}

    def prompt(self, text: str, *, timeout: float = 120) -> Run:
        """One turn."""
        self.next_turn()
        args = [PI, *(["-c"] if self.runs else []), "-p", text]
        run = self.world.run(*args, env=self.env, timeout=timeout)
        self.runs.append(run)
        return run

