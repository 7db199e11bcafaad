"""`leslie hooks install|uninstall|status`: merging into .claude/settings.json and .codex/hooks.json, the
absolute command, fail-closed guard hooks, and telling when installed hooks no longer run."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from conftest import LESLIE_EXE, run_leslie
from leslie.integrations import install as hooks_install
from leslie.store.repository import Repository

COMMAND = f"{LESLIE_EXE} hook claude-code"  # the leslie that installs is the one the hooks run
NO_LESLIE_PATH = {"PATH": "/usr/bin:/bin"}


def settings(root: Path) -> dict[str, Any]:
    return json.loads((root / ".claude" / "settings.json").read_text())


def claude_hooks(command: str) -> dict[str, Any]:
    """What `leslie hooks install claude-code` writes into an empty settings file."""
    def entry(timeout: int, fail_closed: bool = False) -> list[dict[str, Any]]:
        hook: dict[str, Any] = {"type": "command", "command": command, "timeout": timeout}
        if fail_closed:
            hook["onFailure"] = "block"
        return [hook]

    return {
        "SessionStart": [{"hooks": entry(15)}],
        "UserPromptSubmit": [{"hooks": entry(15)}],
        "PreToolUse": [{"matcher": "Write|Edit|MultiEdit|NotebookEdit|Bash", "hooks": entry(10, True)}],
        "PostToolUse": [{"matcher": "Bash", "hooks": entry(10, True)}],
        "PostToolUseFailure": [{"matcher": "Bash", "hooks": entry(10, True)}],
        "Stop": [{"hooks": entry(10)}],
    }


def test_install_into_an_empty_repository(repo_root: Path) -> None:
    result = run_leslie("hooks", "install", "claude-code", cwd=repo_root)
    assert result.code == 0 and ".claude/settings.json" in result.stdout
    assert f"command: {COMMAND}" in result.stdout
    assert settings(repo_root) == {"hooks": claude_hooks(COMMAND)}
    assert hooks_install.installed(repo_root, "claude-code")


def test_the_command_is_absolute_and_runs_without_leslie_on_path(repo_root: Path) -> None:
    result = run_leslie("hooks", "install", "claude-code", cwd=repo_root, env=NO_LESLIE_PATH)
    assert result.code == 0
    assert "`leslie` is not on your PATH" in result.stderr and LESLIE_EXE in result.stderr
    command = settings(repo_root)["hooks"]["PreToolUse"][0]["hooks"][0]["command"]
    assert os.path.isabs(shlex.split(command)[0])
    payload = json.dumps({"session_id": "s", "cwd": str(repo_root), "hook_event_name": "PreToolUse",
                          "tool_name": "Write", "tool_input": {"file_path": "x.py"}})
    ran = subprocess.run(["bash", "-c", command], input=payload, capture_output=True, text=True,
                         env={**os.environ, **NO_LESLIE_PATH}, check=False)
    assert ran.returncode == 0 and ran.stderr == ""  # the agent's shell finds it with any PATH
    on_path = run_leslie("hooks", "install", "codex", cwd=repo_root,
                         env={"PATH": f"{Path(LESLIE_EXE).parent}:/usr/bin:/bin"})
    assert on_path.code == 0 and on_path.stderr == ""


def test_python_m_leslie_installs_the_interpreter_when_no_executable_is_found(repo_root: Path,
                                                                              tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "leslie", "hooks", "install", "claude-code"], cwd=repo_root,
                          capture_output=True, text=True, env={**os.environ, "PATH": str(tmp_path)}, check=False)
    assert proc.returncode == 0, proc.stderr
    command = settings(repo_root)["hooks"]["Stop"][0]["hooks"][0]["command"]
    assert command == f"{shlex.quote(sys.executable)} -m leslie hook claude-code"
    assert run_leslie("hooks", "status", "claude-code", cwd=repo_root).code == 0


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
    assert data["hooks"]["Stop"][0] == EXISTING["hooks"]["Stop"][0]
    assert data["hooks"]["PreToolUse"][0] == EXISTING["hooks"]["PreToolUse"][0]
    assert data["hooks"]["PreToolUse"][1]["hooks"][0]["command"] == COMMAND
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


OLD_FORM = {"hooks": {  # what leslie 0.1 installed: a bare command, no PostToolUse, no Stop, no onFailure
    "SessionStart": [{"hooks": [{"type": "command", "command": "leslie hook claude-code", "timeout": 15}]}],
    "UserPromptSubmit": [{"hooks": [{"type": "command", "command": "leslie hook claude-code", "timeout": 15}]}],
    "PreToolUse": [{"matcher": "Write|Edit|MultiEdit|NotebookEdit|Bash",
                    "hooks": [{"type": "command", "command": "leslie hook claude-code", "timeout": 5}]}],
}}


def test_reinstalling_over_the_old_form_replaces_it(repo_root: Path) -> None:
    path = repo_root / ".claude" / "settings.json"
    path.parent.mkdir()
    path.write_text(json.dumps(OLD_FORM))
    status = run_leslie("hooks", "status", "claude-code", cwd=repo_root, env=NO_LESLIE_PATH)
    assert status.code == 1
    assert "lacks leslie's PostToolUse, PostToolUseFailure, Stop hooks" in status.stdout
    assert "are older than this leslie's" in status.stdout and "leslie is not on this PATH" in status.stdout
    assert run_leslie("hooks", "install", "claude-code", cwd=repo_root).code == 0
    assert settings(repo_root) == {"hooks": claude_hooks(COMMAND)}  # replaced, never duplicated


def test_an_explicit_executable_replaces_the_installed_one(repo_root: Path) -> None:
    run_leslie("hooks", "install", "claude-code", cwd=repo_root)
    result = run_leslie("hooks", "install", "claude-code", "--executable", "/opt/my tools/leslie", "--json",
                        cwd=repo_root)
    assert result.code == 0 and json.loads(result.stdout)["changed"] is True
    commands = [h["command"] for groups in settings(repo_root)["hooks"].values() for g in groups
                for h in g["hooks"]]
    assert commands == ["'/opt/my tools/leslie' hook claude-code"] * 6
    run_leslie("hooks", "uninstall", "claude-code", cwd=repo_root)
    assert settings(repo_root) == {"hooks": {}}


def test_codex(repo_root: Path) -> None:
    path = repo_root / ".codex" / "hooks.json"
    path.parent.mkdir()
    path.write_text(json.dumps({"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "x"}]}]}}))
    assert run_leslie("hooks", "install", "codex", cwd=repo_root).code == 0
    data = json.loads(path.read_text())
    assert list(data) == ["hooks"]  # Codex refuses unknown top-level keys
    assert set(data["hooks"]) == {"Stop", "SessionStart", "UserPromptSubmit", "PostCompact", "PreToolUse",
                                  "PostToolUse"}
    command = f"{LESLIE_EXE} hook codex"
    assert data["hooks"]["PreToolUse"] == [{"matcher": "Bash|apply_patch|Write|Edit", "hooks": [
        {"type": "command", "command": command, "timeout": 10}]}]  # Codex has no fail-closed option
    assert data["hooks"]["PostToolUse"] == [{"matcher": "Bash", "hooks": [
        {"type": "command", "command": command, "timeout": 10}]}]
    assert data["hooks"]["Stop"] == [{"hooks": [{"type": "command", "command": "x"}]},
                                     {"hooks": [{"type": "command", "command": command, "timeout": 10}]}]
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
    status = run_leslie("hooks", "status", "claude-code", cwd=repo_root)
    assert status.code == 1 and "settings.json" in status.stdout


def test_unknown_agent_and_nothing_to_uninstall(repo_root: Path) -> None:
    bad = run_leslie("hooks", "install", "emacs", cwd=repo_root)
    assert bad.code == 2 and "emacs" in bad.stderr
    assert run_leslie("hooks", "status", "emacs", cwd=repo_root).code == 2
    nothing = run_leslie("hooks", "uninstall", "codex", "--json", cwd=repo_root)
    assert nothing.code == 0 and json.loads(nothing.stdout)["changed"] is False
    assert not (repo_root / ".codex").exists()


@pytest.mark.parametrize(("command", "mine"), [
    ("leslie hook claude-code", True),
    ("/home/me/.local/bin/leslie hook claude-code", True),
    ('"/opt/my tools/leslie" hook claude-code', True),
    ("'/opt/my tools/leslie' hook claude-code", True),
    ("/usr/bin/python3 -m leslie hook claude-code", True),
    ("leslie.exe hook claude-code", True),
    ("leslie hook codex", False),
    ("notleslie hook claude-code", False),
    ("leslie hook claude-code --extra", False),
    ("./guard.sh", False),
])
def test_recognising_leslie_s_entries(command: str, mine: bool) -> None:
    assert hooks_install.is_leslie_hook({"type": "command", "command": command}, "claude-code") is mine


# -- leslie hooks status, and doctor ------------------------------------------------------------------------

def test_status_of_working_hooks(repo_root: Path) -> None:
    assert run_leslie("hooks", "status", cwd=repo_root).code == 1  # nothing installed anywhere
    run_leslie("hooks", "install", "claude-code", cwd=repo_root)
    result = run_leslie("hooks", "status", cwd=repo_root)
    assert result.code == 0, result.stdout
    assert result.stdout.splitlines() == [
        f"claude-code: ok: 6 hooks in .claude/settings.json, running {LESLIE_EXE} (leslie "
        f"{hooks_install_version()})",
        "codex: not installed in .codex/hooks.json (run `leslie hooks install codex`)",
        "gemini: not installed in .gemini/settings.json (run `leslie hooks install gemini`)",
        "copilot: not installed in .github/hooks/leslie.json (run `leslie hooks install copilot`)",
        "qwen: not installed in .qwen/settings.json (run `leslie hooks install qwen`)",
        "factory: not installed in .factory/settings.json (run `leslie hooks install factory`)",
        "opencode: not installed in .opencode/plugins/leslie.js (run `leslie hooks install opencode`)",
        "kilo: not installed in .kilo/plugins/leslie.js (run `leslie hooks install kilo`)",
        "pi: not installed in .pi/extensions/leslie.ts (run `leslie hooks install pi`)"]
    assert run_leslie("hooks", "status", "codex", cwd=repo_root).code == 1
    data = json.loads(run_leslie("hooks", "status", "--json", cwd=repo_root).stdout)
    assert data["ok"] is True and [a["ok"] for a in data["agents"]] == [True] + [False] * 8
    assert data["agents"][0]["commands"][0]["executable"] == LESLIE_EXE
    assert run_leslie("doctor", cwd=repo_root).code == 0


def hooks_install_version() -> str:
    from leslie import __version__

    return __version__


def test_status_and_doctor_see_a_vanished_executable(repo_root: Path, tmp_path: Path) -> None:
    copy = tmp_path / "bin" / "leslie"
    copy.parent.mkdir()
    shutil.copy(LESLIE_EXE, copy)  # a console script: it runs leslie with this interpreter
    assert run_leslie("hooks", "install", "claude-code", "--executable", str(copy), cwd=repo_root).code == 0
    assert run_leslie("hooks", "status", "claude-code", cwd=repo_root).code == 0
    copy.unlink()  # uninstalled, or its virtualenv removed: the hooks now run nothing
    result = run_leslie("hooks", "status", "claude-code", cwd=repo_root)
    assert result.code == 1 and f"{copy} does not exist" in result.stdout
    doctor = run_leslie("doctor", cwd=repo_root)
    assert doctor.code == 1 and f"problem: claude-code: the hook command `{copy} hook claude-code` is broken" \
        in doctor.stdout


def test_status_sees_a_command_that_starts_but_fails(repo_root: Path, tmp_path: Path) -> None:
    fake = tmp_path / "leslie"
    fake.write_text("#!/bin/sh\necho 'Traceback: ModuleNotFoundError: leslie' >&2\nexit 1\n")
    fake.chmod(0o755)
    run_leslie("hooks", "install", "codex", "--executable", str(fake), cwd=repo_root)
    result = run_leslie("hooks", "status", "codex", "--json", cwd=repo_root)
    assert result.code == 1
    problem = json.loads(result.stdout)["agents"][0]["commands"][0]["problem"]
    assert problem == "`" + str(fake) + " --version` failed: Traceback: ModuleNotFoundError: leslie"
    assert run_leslie("doctor", cwd=repo_root).code == 0  # doctor starts no process: it only checks the file


def test_codex_context_hooks_lift_codex_s_context_limit(repo: Repository) -> None:
    # Codex cuts hook context over ~2,500 tokens in the middle; leslie's context hooks ask for no limit.
    hooks_install.install(repo.root, "codex", executable="leslie")
    data = json.loads((repo.root / ".codex/hooks.json").read_text())
    for event in ("SessionStart", "UserPromptSubmit"):
        assert data["hooks"][event][0]["hooks"][0]["additionalContextLimit"] == 0
    assert "additionalContextLimit" not in data["hooks"]["PreToolUse"][0]["hooks"][0]


def test_codex_install_says_each_hook_must_be_trusted_and_status_reads_codex_s_records(
        repo: Repository, tmp_path: Path) -> None:
    codex_home = tmp_path / "codex-home"
    codex_home.mkdir()
    env = {"CODEX_HOME": str(codex_home)}
    installed = run_leslie("hooks", "install", "codex", cwd=repo.root, env=env)
    assert installed.code == 0 and "trust" in installed.stdout and "/hooks" in installed.stdout
    status = run_leslie("hooks", "status", "codex", cwd=repo.root, env=env)
    assert status.code == 1
    assert "not trusted in" in status.stdout and "6 of leslie's 6 hooks are not trusted" in status.stdout
    # What Codex records when the user trusts the project and the hooks in /hooks (Codex 0.169.0's keys).
    real = os.path.realpath(repo.root)
    data = json.loads((repo.root / ".codex/hooks.json").read_text())
    lines = [f'[projects."{real}"]', 'trust_level = "trusted"']
    for event, groups in data["hooks"].items():
        snake = "".join("_" + c.lower() if c.isupper() else c for c in event).lstrip("_")
        lines += [f'[hooks.state."{real}/.codex/hooks.json:{snake}:{len(groups) - 1}:0"]',
                  'trusted_hash = "sha256:00"']
    (codex_home / "config.toml").write_text("\n".join(lines) + "\n")
    status = run_leslie("hooks", "status", "codex", cwd=repo.root, env=env)
    assert "not trusted" not in status.stdout, status.stdout
    doctor = run_leslie("doctor", cwd=repo.root, env={"CODEX_HOME": str(tmp_path / "nowhere")})
    assert doctor.code == 0 and "note: codex:" in doctor.stdout  # Codex's trust is a note for doctor
