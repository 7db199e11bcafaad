"""`leslie hooks install|uninstall`: merging into .claude/settings.json and .codex/hooks.json."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from conftest import run_leslie
from leslie import hooks_install


def settings(root: Path) -> dict[str, Any]:
    return json.loads((root / ".claude" / "settings.json").read_text())


def test_install_into_an_empty_repository(repo_root: Path) -> None:
    result = run_leslie("hooks", "install", "claude-code", cwd=repo_root)
    assert result.code == 0 and ".claude/settings.json" in result.stdout
    assert settings(repo_root) == {"hooks": {
        "SessionStart": [{"hooks": [{"type": "command", "command": "leslie hook claude-code", "timeout": 15}]}],
        "UserPromptSubmit": [{"hooks": [{"type": "command", "command": "leslie hook claude-code", "timeout": 15}]}],
        "PreToolUse": [{"matcher": "Write|Edit|MultiEdit|NotebookEdit|Bash",
                        "hooks": [{"type": "command", "command": "leslie hook claude-code", "timeout": 5}]}],
    }}
    assert hooks_install.installed(repo_root, "claude-code")


EXISTING = {
    "permissions": {"allow": ["Bash(npm test)"]},
    "model": "opus",
    "hooks": {
        "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "./guard.sh"}]}],
        "Stop": [{"hooks": [{"type": "command", "command": "notify-send done", "timeout": 3}]}],
    },
}


def test_install_keeps_everything_else_and_is_idempotent(repo_root: Path) -> None:
    path = repo_root / ".claude" / "settings.json"
    path.parent.mkdir()
    path.write_text(json.dumps(EXISTING, indent=4))
    assert run_leslie("hooks", "install", "claude-code", cwd=repo_root).code == 0
    data = settings(repo_root)
    assert list(data) == ["permissions", "model", "hooks"]  # key order kept
    assert data["permissions"] == EXISTING["permissions"] and data["model"] == "opus"
    assert data["hooks"]["Stop"] == EXISTING["hooks"]["Stop"]
    assert data["hooks"]["PreToolUse"][0] == EXISTING["hooks"]["PreToolUse"][0]
    assert data["hooks"]["PreToolUse"][1]["hooks"][0]["command"] == "leslie hook claude-code"
    first = path.read_bytes()
    again = run_leslie("hooks", "install", "claude-code", cwd=repo_root)
    assert again.code == 0 and "already up to date" in again.stdout
    assert path.read_bytes() == first

    removed = run_leslie("hooks", "uninstall", "claude-code", cwd=repo_root)
    assert removed.code == 0
    assert settings(repo_root) == EXISTING
    assert not hooks_install.installed(repo_root, "claude-code")
    assert run_leslie("hooks", "install", "claude-code", "--uninstall", cwd=repo_root).code == 0
    assert settings(repo_root) == EXISTING


def test_an_explicit_executable_replaces_the_plain_one(repo_root: Path) -> None:
    run_leslie("hooks", "install", "claude-code", cwd=repo_root)
    result = run_leslie("hooks", "install", "claude-code", "--executable", "/opt/my tools/leslie", "--json",
                        cwd=repo_root)
    assert result.code == 0 and json.loads(result.stdout)["changed"] is True
    commands = [h["command"] for groups in settings(repo_root)["hooks"].values() for g in groups
                for h in g["hooks"]]
    assert commands == ['"/opt/my tools/leslie" hook claude-code'] * 3
    run_leslie("hooks", "uninstall", "claude-code", cwd=repo_root)
    assert settings(repo_root) == {"hooks": {}}


def test_codex(repo_root: Path) -> None:
    path = repo_root / ".codex" / "hooks.json"
    path.parent.mkdir()
    path.write_text(json.dumps({"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "x"}]}]}}))
    assert run_leslie("hooks", "install", "codex", cwd=repo_root).code == 0
    data = json.loads(path.read_text())
    assert list(data) == ["hooks"]  # Codex refuses unknown top-level keys
    assert set(data["hooks"]) == {"Stop", "SessionStart", "UserPromptSubmit", "PostCompact", "PreToolUse"}
    assert data["hooks"]["PreToolUse"] == [{"matcher": "Bash|apply_patch|Write|Edit", "hooks": [
        {"type": "command", "command": "leslie hook codex", "timeout": 5}]}]
    assert all(isinstance(h["timeout"], int) for g in data["hooks"].values() for x in g for h in x["hooks"]
               if "timeout" in h)
    assert run_leslie("hooks", "uninstall", "codex", cwd=repo_root).code == 0
    assert json.loads(path.read_text()) == {"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "x"}]}]}}


def test_claude_and_codex_entries_do_not_touch_each_other(repo_root: Path) -> None:
    run_leslie("hooks", "install", "claude-code", cwd=repo_root)
    run_leslie("hooks", "install", "codex", cwd=repo_root)
    run_leslie("hooks", "uninstall", "codex", cwd=repo_root)
    assert hooks_install.installed(repo_root, "claude-code")


@pytest.mark.parametrize("content", ["{not json", "[]", '{"hooks": []}', '{"hooks": {"Stop": {}}}'])
def test_a_malformed_settings_file_is_left_alone(repo_root: Path, content: str) -> None:
    path = repo_root / ".claude" / "settings.json"
    path.parent.mkdir()
    path.write_text(content)
    result = run_leslie("hooks", "install", "claude-code", cwd=repo_root)
    assert result.code == 4 and "settings.json" in result.stderr
    assert path.read_text() == content


def test_unknown_agent_and_nothing_to_uninstall(repo_root: Path) -> None:
    bad = run_leslie("hooks", "install", "emacs", cwd=repo_root)
    assert bad.code == 2 and "emacs" in bad.stderr
    nothing = run_leslie("hooks", "uninstall", "codex", "--json", cwd=repo_root)
    assert nothing.code == 0 and json.loads(nothing.stdout)["changed"] is False
    assert not (repo_root / ".codex").exists()


@pytest.mark.parametrize(("command", "mine"), [
    ("leslie hook claude-code", True),
    ("/home/me/.local/bin/leslie hook claude-code", True),
    ('"/opt/my tools/leslie" hook claude-code', True),
    ("leslie.exe hook claude-code", True),
    ("leslie hook codex", False),
    ("notleslie hook claude-code", False),
    ("leslie hook claude-code --extra", False),
    ("./guard.sh", False),
])
def test_recognising_leslie_s_entries(command: str, mine: bool) -> None:
    assert hooks_install.is_leslie_hook({"type": "command", "command": command}, "claude-code") is mine
