"""The real clients, run headless against the mock servers: Claude Code, Codex, Gemini CLI, and the ACP adapters.

What each needs was read from its installed bundle (`strings` of the native binaries, grep of the JS):
- Claude Code 2.1.330 (native binary): ANTHROPIC_BASE_URL + ANTHROPIC_API_KEY; CLAUDE_CONFIG_DIR; `-p` with
  `--output-format stream-json --verbose`, `--resume <session>`; `/compact` and `/clear` work in `-p`.
- Codex 0.169.0 (native binary): a `model_providers.mock` entry in $CODEX_HOME/config.toml (`wire_api =
  "responses"`); `codex exec --json` and `codex exec resume <id>`; project hooks run only when trusted by hash,
  recorded as `[hooks.state."<hooks.json>:<event>:<group>:<hook>"] trusted_hash = "sha256:..."` in
  config.toml, the hash being the one `codex app-server` reports in `hooks/list` (what `/hooks` shows).
- Gemini CLI 0.61.0 (JS bundle): GEMINI_API_KEY + GOOGLE_GEMINI_BASE_URL; settings in ~/.gemini/settings.json;
  `--acp` for ACP; `-p` with `--output-format json` (its `session_id`), `--resume <session>`; project hooks run
  only in a trusted folder (`~/.gemini/trustedFolders.json`; headless in an untrusted one it exits 55).
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

from e2e.harness.server import Logged, MockModelServer, count_in
from e2e.harness.world import NEEDLE, NODE_BIN, Run, World

CLAUDE = str(NODE_BIN / "claude")
CODEX = str(NODE_BIN / "codex")
GEMINI = str(NODE_BIN / "gemini")
CLAUDE_AGENT_ACP = str(NODE_BIN / "claude-agent-acp")
CODEX_ACP = str(NODE_BIN / "codex-acp")

# Every switch Claude Code has for traffic that is not the model: telemetry, error reports, update checks,
# feature flags, feedback surveys, marketplace and IDE auto-installs.
CLAUDE_QUIET = {
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_AUTOUPDATER": "1", "DISABLE_UPDATES": "1",
    "DISABLE_TELEMETRY": "1", "DISABLE_ERROR_REPORTING": "1", "DISABLE_GROWTHBOOK": "1",
    "DISABLE_BUG_COMMAND": "1", "DISABLE_FEEDBACK_COMMAND": "1", "CLAUDE_CODE_DISABLE_FEEDBACK_SURVEY": "1",
    "CLAUDE_CODE_DISABLE_OFFICIAL_MARKETPLACE_AUTOINSTALL": "1", "CLAUDE_CODE_IDE_SKIP_AUTO_INSTALL": "1",
    "DISABLE_INSTALLATION_CHECKS": "1", "CLAUDE_CODE_ENABLE_TELEMETRY": "0",
}


def claude_env(world: World, mock: MockModelServer) -> dict[str, str]:
    """Claude Code (and the Agent SDK behind claude-agent-acp) against the Anthropic mock."""
    return {"CLAUDE_CONFIG_DIR": str(world.home / ".claude"), "ANTHROPIC_BASE_URL": mock.url,
            "ANTHROPIC_API_KEY": "sk-ant-e2e-mock", **CLAUDE_QUIET}


def codex_config(world: World, mock: MockModelServer, **extra: str) -> Path:
    """$CODEX_HOME/config.toml: the mock provider, the repository trusted, every network extra off."""
    codex_home = world.home / ".codex"
    codex_home.mkdir(exist_ok=True)
    lines = [
        'model = "gpt-5.5"', 'model_provider = "mock"', 'approval_policy = "never"',
        'sandbox_mode = "danger-full-access"',  # no bubblewrap/landlock in a container; the hooks still guard
        "check_for_update_on_startup = false", 'web_search = "disabled"',
        *(f"{key} = {value}" for key, value in extra.items()),
        "[features]",
        # plugins/apps/remote_plugin reach github.com and chatgpt.com at start (seen by the refusing proxy)
        "plugins = false", "remote_plugin = false", "apps = false", "tool_suggest = false",
        "in_app_updates = false", "plugin_sharing = false", "unbounded_connection_retries = false",
        "[analytics]", "enabled = false", "[feedback]", "enabled = false",
        "[model_providers.mock]", 'name = "mock"', f'base_url = "{mock.url}/v1"', 'wire_api = "responses"',
        'env_key = "E2E_MOCK_API_KEY"', "request_max_retries = 0", "stream_max_retries = 0",
        f"[projects.{json.dumps(str(world.repo))}]", 'trust_level = "trusted"',
    ]
    path = codex_home / "config.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def codex_env(world: World) -> dict[str, str]:
    """Codex's home and the mock provider's key."""
    return {"CODEX_HOME": str(world.home / ".codex"), "E2E_MOCK_API_KEY": "sk-e2e-mock"}


def codex_hooks(world: World, env: dict[str, str]) -> list[dict[str, Any]]:
    """The project's hooks as Codex sees them (`hooks/list` of `codex app-server`: key, hash, trust)."""
    proc = subprocess.Popen([CODEX, "app-server"], cwd=world.repo, env={**world.env, **env},
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert proc.stdin is not None and proc.stdout is not None
    try:
        def call(request_id: int, method: str, params: dict[str, Any]) -> Any:
            assert proc.stdin is not None and proc.stdout is not None
            proc.stdin.write(json.dumps({"id": request_id, "method": method, "params": params}) + "\n")
            proc.stdin.flush()
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                line = proc.stdout.readline()
                if not line:
                    break
                message = json.loads(line)
                if message.get("id") == request_id:
                    return message.get("result")
            raise AssertionError(f"codex app-server gave no answer to {method}")

        call(0, "initialize", {"clientInfo": {"name": "leslie-e2e", "version": "1"}})
        proc.stdin.write(json.dumps({"method": "initialized"}) + "\n")
        result = call(1, "hooks/list", {"cwds": [str(world.repo)]})
        return [hook for entry in result["data"] for hook in entry["hooks"]]
    finally:
        proc.stdin.close()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def trust_codex_hooks(world: World, env: dict[str, str]) -> list[dict[str, Any]]:
    """Trust the project's current hooks as `/hooks` would: their hashes into config.toml's hook state."""
    hooks = codex_hooks(world, env)
    config = world.home / ".codex" / "config.toml"
    with config.open("a") as out:
        for hook in hooks:
            out.write(f"[hooks.state.{json.dumps(hook['key'])}]\ntrusted_hash = {json.dumps(hook['currentHash'])}\n")
    return hooks


def gemini_settings(world: World) -> dict[str, str]:
    """~/.gemini/settings.json with usage statistics, telemetry, updates and IDE off; the env it needs."""
    folder = world.home / ".gemini"
    folder.mkdir(exist_ok=True)
    (folder / "settings.json").write_text(json.dumps({
        "general": {"enableAutoUpdate": False, "enableAutoUpdateNotification": False},
        "privacy": {"usageStatisticsEnabled": False},
        "telemetry": {"enabled": False},
        "security": {"auth": {"selectedType": "gemini-api-key"}, "folderTrust": {"enabled": False}},
        "ide": {"enabled": False},
    }, indent=2))
    return {}


def gemini_env(mock: MockModelServer) -> dict[str, str]:
    """Gemini CLI against the Gemini mock."""
    return {"GEMINI_API_KEY": "e2e-mock-key", "GOOGLE_GEMINI_BASE_URL": mock.url}


class Session:
    """A headless client session driven turn by turn; each turn is one process, the mock counts turns."""

    def __init__(self, world: World, mock: MockModelServer, conversation_key: str) -> None:
        self.world = world
        self.mock = mock
        self.session_id: str | None = None
        self._conversation_key = conversation_key  # where a request holds the conversation
        self.runs: list[Run] = []

    def next_turn(self) -> int:
        """Start a new turn on the mock's clock."""
        self.mock.turn += 1
        return self.mock.turn

    def blocks(self, request: Logged) -> int:
        """Blocks of the session's thread in a request's conversation."""
        body = request.body
        return count_in(body.get(self._conversation_key, []) if isinstance(body, dict) else body, NEEDLE)

    def turn_blocks(self, turn: int | None = None) -> list[int]:
        """Blocks in each main request of a turn (default: the last turn)."""
        return [self.blocks(r) for r in self.mock.main_requests(self.mock.turn if turn is None else turn)]

    def keep_session_of(self, run: Run) -> Run:
        """Record the run, and the `session_id` of its JSON output (a client's `-o json` result) if it has one."""
        self.runs.append(run)
        try:
            result = json.loads(run.stdout)
        except ValueError:
            result = {}
        if isinstance(result, dict) and result.get("session_id"):
            self.session_id = str(result["session_id"])
        return run


class ClaudeSession(Session):
    """`claude -p` turns; `--resume` after the first."""

    def __init__(self, world: World, mock: MockModelServer) -> None:
        super().__init__(world, mock, "messages")
        self.env = claude_env(world, mock)

    def prompt(self, text: str, *, timeout: float = 120) -> Run:
        """One turn: the prompt, the tool calls the mock scripts, the answer."""
        self.next_turn()
        args = [CLAUDE, "-p", text, "--output-format", "stream-json", "--verbose",
                "--allowedTools", "Bash,Write,Edit"]
        if self.session_id:
            args += ["--resume", self.session_id]
        run = self.world.run(*args, env=self.env, timeout=timeout)
        self.runs.append(run)
        for event in run.events:
            if event.get("type") == "result" and event.get("session_id"):
                self.session_id = str(event["session_id"])
        return run


class CodexSession(Session):
    """`codex exec` turns; `codex exec resume <id>` after the first."""

    def __init__(self, world: World, mock: MockModelServer, **config: str) -> None:
        super().__init__(world, mock, "input")
        codex_config(world, mock, **config)
        self.env = codex_env(world)

    def trust_hooks(self) -> list[dict[str, Any]]:
        """Trust the installed project hooks, as a user does in `/hooks`."""
        return trust_codex_hooks(self.world, self.env)

    def prompt(self, text: str, *, timeout: float = 120) -> Run:
        """One turn."""
        self.next_turn()
        args = [CODEX, "exec", "--json", "--skip-git-repo-check"]
        args += ["resume", self.session_id, text] if self.session_id else [text]
        run = self.world.run(*args, env=self.env, timeout=timeout)
        self.runs.append(run)
        for event in run.events:
            if event.get("type") == "thread.started" and event.get("thread_id"):
                self.session_id = str(event["thread_id"])
        return run


class GeminiSession(Session):
    """`gemini -p` turns (headless, `--approval-mode yolo`); `--resume <session>` after the first. The repository
    is trusted the way Gemini's trust dialog records it (`~/.gemini/trustedFolders.json`), folder trust on."""

    def __init__(self, world: World, mock: MockModelServer) -> None:
        super().__init__(world, mock, "contents")
        gemini_settings(world)
        settings = world.home / ".gemini" / "settings.json"
        data = json.loads(settings.read_text())
        data["security"]["folderTrust"] = {"enabled": True}
        settings.write_text(json.dumps(data, indent=2))
        (world.home / ".gemini" / "trustedFolders.json").write_text(json.dumps({str(world.repo): "TRUST_FOLDER"}))
        self.env = gemini_env(mock)

    def prompt(self, text: str, *, timeout: float = 120, resume: bool = True) -> Run:
        """One turn (a new conversation when `resume` is false)."""
        self.next_turn()
        args = [GEMINI, "-p", text, "--output-format", "json", "--approval-mode", "yolo"]
        if self.session_id and resume:
            args += ["--resume", self.session_id]
        return self.keep_session_of(self.world.run(*args, env=self.env, timeout=timeout))


# -- GitHub Copilot CLI 1.0.102 and Qwen Code 0.24.4 (both against the Chat Completions mock) --------------

COPILOT = str(NODE_BIN / "copilot")
QWEN = str(NODE_BIN / "qwen")


def copilot_env(world: World, mock: MockModelServer) -> dict[str, str]:
    """Copilot CLI offline with a custom provider (the mock); the repository trusted in ~/.copilot/config.json
    (`trustedFolders`: Copilot runs a repository's hooks only in a trusted folder)."""
    folder = world.home / ".copilot"
    folder.mkdir(exist_ok=True)
    (folder / "config.json").write_text(json.dumps({"trustedFolders": [str(world.repo)]}))
    return {"COPILOT_OFFLINE": "true", "COPILOT_PROVIDER_BASE_URL": f"{mock.url}/v1",
            "COPILOT_PROVIDER_API_KEY": "sk-e2e-mock", "COPILOT_MODEL": "mock-model", "COPILOT_AUTO_UPDATE": "false"}


def qwen_env(world: World, mock: MockModelServer) -> dict[str, str]:
    """Qwen Code with an OpenAI-compatible provider (the mock); usage statistics and updates off."""
    folder = world.home / ".qwen"
    folder.mkdir(exist_ok=True)
    (folder / "settings.json").write_text(json.dumps({
        "security": {"auth": {"selectedType": "openai"}}, "privacy": {"usageStatisticsEnabled": False},
        "telemetry": {"enabled": False}, "general": {"enableAutoUpdate": False, "disableAutoUpdate": True}}))
    return {"OPENAI_API_KEY": "sk-e2e-mock", "OPENAI_BASE_URL": f"{mock.url}/v1", "OPENAI_MODEL": "mock-model",
            "QWEN_CODE_SUPPRESS_YOLO_WARNING": "1"}


class CopilotSession(Session):
    """`copilot -p` turns; `--continue` after the first."""

    def __init__(self, world: World, mock: MockModelServer) -> None:
        super().__init__(world, mock, "messages")
        self.env = copilot_env(world, mock)

    def prompt(self, text: str, *, timeout: float = 120) -> Run:
        """One turn."""
        self.next_turn()
        args = [COPILOT, "-p", text, "--allow-all-tools", "-s"]
        if self.runs:
            args.append("--continue")
        run = self.world.run(*args, env=self.env, timeout=timeout)
        self.runs.append(run)
        return run


class QwenSession(Session):
    """`qwen --yolo -p` turns; `--continue` after the first."""

    def __init__(self, world: World, mock: MockModelServer) -> None:
        super().__init__(world, mock, "messages")
        self.env = qwen_env(world, mock)

    def prompt(self, text: str, *, timeout: float = 120) -> Run:
        """One turn."""
        self.next_turn()
        args = [QWEN, "--yolo", "-p", text]
        if self.runs:
            args.append("--continue")
        run = self.world.run(*args, env=self.env, timeout=timeout)
        self.runs.append(run)
        return run
