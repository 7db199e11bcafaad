"""`leslie hooks install|uninstall|status`: merging into .claude/settings.local.json (personal), .claude/settings.json
(shared) and .codex/hooks.json, the absolute command, fail-closed guard hooks, and telling when installed hooks no
longer run, without ever running a command a repository names."""

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
from leslie.integrations import hook_forms, hooks_status
from leslie.integrations import install as hooks_install
from leslie.store.repository import Repository

COMMAND = f"{LESLIE_EXE} hook claude-code"  # the leslie that installs is the one the hooks run
NO_LESLIE_PATH = {"PATH": "/usr/bin:/bin"}
LESLIE_ON_PATH = {"PATH": f"{Path(LESLIE_EXE).parent}:/usr/bin:/bin"}
PORTABLE = hook_forms.shared_command("claude-code")


def settings(root: Path) -> dict[str, Any]:
    """The personal file, where `leslie hooks install claude-code` writes by default."""
    return json.loads((root / ".claude" / "settings.local.json").read_text())


def shared_settings(root: Path) -> dict[str, Any]:
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
    assert result.code == 0 and ".claude/settings.local.json" in result.stdout
    assert f"command: {COMMAND}" in result.stdout
    assert settings(repo_root) == {"hooks": claude_hooks(COMMAND)}
    assert not (repo_root / ".claude" / "settings.json").exists()  # the shared file is the team's
    # The personal file names this machine's leslie: kept out of git (this clone's exclude file).
    assert "/.claude/settings.local.json" in (repo_root / ".git" / "info" / "exclude").read_text().splitlines()
    assert subprocess.run(["git", "check-ignore", "-q", ".claude/settings.local.json"], cwd=repo_root,
                          check=False).returncode == 0
    assert hooks_status.installed(repo_root, "claude-code")


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


@pytest.mark.parametrize("shared", [False, True])
def test_install_keeps_everything_else_and_is_idempotent(repo_root: Path, shared: bool) -> None:
    path = repo_root / ".claude" / ("settings.json" if shared else "settings.local.json")
    path.parent.mkdir()
    path.write_text(json.dumps(EXISTING, indent=4))
    form = ["--shared"] if shared else []
    read = shared_settings if shared else settings
    command = PORTABLE if shared else COMMAND
    assert run_leslie("hooks", "install", "claude-code", *form, cwd=repo_root).code == 0
    data = read(repo_root)
    assert list(data) == ["permissions", "model", "hooks"]  # key order kept
    assert data["permissions"] == EXISTING["permissions"] and data["model"] == "opus"
    assert data["hooks"]["Stop"][0] == EXISTING["hooks"]["Stop"][0]
    assert data["hooks"]["PreToolUse"][0] == EXISTING["hooks"]["PreToolUse"][0]
    assert data["hooks"]["PreToolUse"][1]["hooks"][0]["command"] == command
    first = path.read_bytes()
    again = run_leslie("hooks", "install", "claude-code", *form, cwd=repo_root)
    assert again.code == 0 and "already up to date" in again.stdout
    assert path.read_bytes() == first
    assert run_leslie("hooks", "status", "claude-code", cwd=repo_root, env=LESLIE_ON_PATH).code == 0

    removed = run_leslie("hooks", "uninstall", "claude-code", cwd=repo_root)
    assert removed.code == 0
    assert read(repo_root) == EXISTING
    assert not hooks_status.installed(repo_root, "claude-code")
    assert run_leslie("hooks", "install", "claude-code", "--uninstall", cwd=repo_root).code == 0
    assert read(repo_root) == EXISTING


OLD_FORM = {"hooks": {  # what leslie 0.1 installed: a bare command, no PostToolUse, no Stop, no onFailure
    "SessionStart": [{"hooks": [{"type": "command", "command": "leslie hook claude-code", "timeout": 15}]}],
    "UserPromptSubmit": [{"hooks": [{"type": "command", "command": "leslie hook claude-code", "timeout": 15}]}],
    "PreToolUse": [{"matcher": "Write|Edit|MultiEdit|NotebookEdit|Bash",
                    "hooks": [{"type": "command", "command": "leslie hook claude-code", "timeout": 5}]}],
}}


def test_reinstalling_over_the_old_form_replaces_it(repo_root: Path) -> None:
    path = repo_root / ".claude" / "settings.json"
    path.parent.mkdir()
    path.write_text(json.dumps({**OLD_FORM, "model": "opus"}))
    status = run_leslie("hooks", "status", "claude-code", cwd=repo_root, env=NO_LESLIE_PATH)
    assert status.code == 1
    assert "lacks leslie's PostToolUse, PostToolUseFailure, Stop hooks" in status.stdout
    assert "are older than this leslie's" in status.stdout and "leslie is not on this PATH" in status.stdout
    assert run_leslie("hooks", "install", "claude-code", cwd=repo_root).code == 0
    assert settings(repo_root) == {"hooks": claude_hooks(COMMAND)}  # replaced, never duplicated
    assert shared_settings(repo_root) == {"hooks": {}, "model": "opus"}  # moved out of the shared file


def test_an_install_of_an_older_leslie_in_the_shared_file_is_reported_and_moved(repo_root: Path) -> None:
    # What `leslie hooks install claude-code` wrote before it had a personal file: this machine's path, in the
    # file a repository shares, fail-closed: a teammate without leslie there gets every tool call blocked.
    path = repo_root / ".claude" / "settings.json"
    path.parent.mkdir()
    path.write_text(json.dumps({"hooks": claude_hooks(COMMAND)}))
    status = run_leslie("hooks", "status", "claude-code", cwd=repo_root)
    assert status.code == 1
    assert ".claude/settings.json, the settings a repository shares, holds leslie hooks that run this machine's " \
           f"path ({COMMAND})" in status.stdout
    assert "hooks: claude-code: .claude/settings.json, the settings a repository shares" in \
        run_leslie("status", cwd=repo_root).stdout
    doctor = run_leslie("doctor", cwd=repo_root)
    assert doctor.code == 0 and "note: claude-code: .claude/settings.json, the settings" in doctor.stdout
    moved = run_leslie("hooks", "install", "claude-code", cwd=repo_root)
    assert moved.code == 0 and ".claude/settings.local.json" in moved.stdout
    assert "note: leslie's entries moved from .claude/settings.json to .claude/settings.local.json" in moved.stderr
    assert shared_settings(repo_root) == {"hooks": {}} and settings(repo_root) == {"hooks": claude_hooks(COMMAND)}
    assert run_leslie("hooks", "status", "claude-code", cwd=repo_root).code == 0


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
    assert hooks_status.installed(repo_root, "claude-code")


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
        f"claude-code: ok: 6 hooks in .claude/settings.local.json, running {LESLIE_EXE} (this leslie, "
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


# -- hooks status never runs what a repository names ------------------------------------------------------

def marker_script(path: Path, marker: Path) -> None:
    """An executable that, if anything ever runs it, leaves `marker` behind (and answers like a leslie)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/bin/sh\ntouch {shlex.quote(str(marker))}\necho 'leslie 9.9.9'\n")
    path.chmod(0o755)


def test_status_never_runs_a_hook_command_of_the_repository(repo_root: Path, tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    # A committed ./tools/leslie, named by a committed .claude/settings.json, .codex/hooks.json (by its absolute
    # path) and .opencode/plugins/leslie.js: what a hostile repository ships.
    marker_script(repo_root / "tools" / "leslie", marker)
    hostile = repo_root / "tools" / "leslie"
    (repo_root / ".claude").mkdir()
    (repo_root / ".claude" / "settings.json").write_text(json.dumps({"hooks": claude_hooks(
        f"{hostile} hook claude-code")}))
    (repo_root / ".claude" / "settings.local.json").write_text(json.dumps({"hooks": claude_hooks(
        "./tools/leslie hook claude-code")}))
    assert run_leslie("hooks", "install", "codex", "--executable", str(hostile), cwd=repo_root).code == 0
    assert run_leslie("hooks", "install", "opencode", "--executable", str(hostile), cwd=repo_root).code == 0
    for args in (("hooks", "status"), ("hooks", "status", "--json"), ("hooks", "status", "claude-code"),
                 ("hooks", "status", "opencode"), ("status",), ("status", "--json"), ("doctor",)):
        run_leslie(*args, cwd=repo_root)
        assert not marker.exists(), f"`leslie {' '.join(args)}` ran the repository's script"
    status = run_leslie("hooks", "status", cwd=repo_root)
    assert status.code == 1
    assert f"{hostile} is inside the repository: a file that came with it, not an installed leslie" \
        in status.stdout
    assert "./tools/leslie is a relative path" in status.stdout
    assert not marker.exists()


def test_status_never_runs_a_plugin_s_command(repo_root: Path, tmp_path: Path) -> None:
    # The LESLIE constant of a plugin file is the repository's to write: pointed at a script outside it.
    marker = tmp_path / "ran"
    script = tmp_path / "elsewhere" / "leslie"
    marker_script(script, marker)
    plugin = hooks_install.plugin_file(hooks_install.agent_hooks("opencode"))
    (repo_root / ".opencode" / "plugins").mkdir(parents=True)
    (repo_root / ".opencode" / "plugins" / "leslie.js").write_text(plugin.render([str(script)]))
    (repo_root / ".pi" / "extensions").mkdir(parents=True)
    pi = hooks_install.plugin_file(hooks_install.agent_hooks("pi"))
    (repo_root / ".pi" / "extensions" / "leslie.ts").write_text(pi.render(["/bin/sh", "-c", f"touch {marker}"]))
    result = run_leslie("hooks", "status", "--json", cwd=repo_root)
    assert not marker.exists()
    agents = {a["agent"]: a for a in json.loads(result.stdout)["agents"]}
    opencode = agents["opencode"]["commands"][0]
    assert opencode["executable"] == str(script) and opencode["this_leslie"] is False
    assert opencode["version"] is None and opencode["problem"] is None  # another leslie: found, never run
    assert agents["pi"]["commands"][0]["problem"] == "/bin/sh is not a leslie executable"
    human = run_leslie("hooks", "status", "opencode", cwd=repo_root)
    assert f"running {script} (another leslie, not run to check it)" in human.stdout
    assert not marker.exists()


def test_status_prints_a_hostile_command_on_one_line(repo_root: Path) -> None:
    (repo_root / ".claude").mkdir()
    forged = "/nowhere/leslie\nclaude-code: ok: forged\x1b[2J hook claude-code"
    (repo_root / ".claude" / "settings.json").write_text(json.dumps({"hooks": claude_hooks(forged)}))
    result = run_leslie("hooks", "status", "claude-code", cwd=repo_root)
    assert result.code == 1 and "\x1b" not in result.stdout
    assert not any(line.startswith("claude-code: ok") for line in result.stdout.splitlines())


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
