"""The two forms of leslie's hooks: personal (this machine's leslie, in a file kept out of git) and shared
(`--shared`: the leslie on PATH, one message and exit 0 without it), installed, recognised and removed."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from conftest import LESLIE_EXE, run_leslie
from leslie.integrations import hook_forms, hooks_status
from leslie.integrations import install as hooks_install

NO_LESLIE_PATH = {"PATH": "/usr/bin:/bin"}
LESLIE_ON_PATH = {"PATH": f"{Path(LESLIE_EXE).parent}:/usr/bin:/bin"}


def run_hook_command(command: str, cwd: Path, env: dict[str, str], payload: str = "{}",
                     plugin_argv: list[str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run an installed command as the agents do: a shell command line (or a plugin's argv)."""
    argv = ["/bin/sh", "-c", command] if plugin_argv is None else plugin_argv
    return subprocess.run(argv, cwd=cwd, input=payload, capture_output=True, text=True,
                          env={**os.environ, **env}, check=False, timeout=60)


@pytest.mark.parametrize("agent", ["claude-code", "codex", "qwen", "factory", "copilot"])
def test_the_shared_form_without_leslie_says_so_once_and_blocks_nothing(repo_root: Path, agent: str) -> None:
    command = hook_forms.shared_command(agent, "preToolUse" if agent == "copilot" else None)
    ran = run_hook_command(command, repo_root, NO_LESLIE_PATH)
    assert ran.returncode == 0 and ran.stdout == ""
    assert ran.stderr.splitlines() == [f"leslie: not installed (no leslie on PATH), so the {agent} hooks of this "
                                       "repository do nothing"]


def test_the_shared_form_for_gemini_answers_an_empty_object() -> None:
    # Gemini CLI reads stderr as the answer when stdout is empty: it gets `{}`, the message stays on stderr.
    ran = run_hook_command(hook_forms.shared_command("gemini"), Path("/"), NO_LESLIE_PATH)
    assert ran.returncode == 0 and ran.stdout == "{}\n" and len(ran.stderr.splitlines()) == 1


def test_the_shared_plugin_form_without_leslie(tmp_path: Path) -> None:
    argv = [*hook_forms.shared_plugin_argv("opencode"), "hook", "opencode"]  # as the plugin spawns it
    ran = run_hook_command("", tmp_path, NO_LESLIE_PATH, plugin_argv=argv)
    assert ran.returncode == 0 and ran.stdout == "" and "opencode hooks" in ran.stderr


def test_the_shared_form_runs_the_leslie_on_path(repo_root: Path, tmp_path: Path) -> None:
    # A `leslie` first on PATH that records its arguments: the shared form runs that one, as `leslie hook AGENT`.
    seen = tmp_path / "argv"
    fake = tmp_path / "bin" / "leslie"
    fake.parent.mkdir()
    fake.write_text(f'#!/bin/sh\necho "$@" > {seen}\necho "{{}}"\n')
    fake.chmod(0o755)
    env = {"PATH": f"{fake.parent}:/usr/bin:/bin"}
    ran = run_hook_command(hook_forms.shared_command("copilot", "preToolUse"), repo_root, env)
    assert ran.returncode == 0 and ran.stdout == "{}\n" and ran.stderr == ""
    assert seen.read_text() == "hook copilot preToolUse\n"
    argv = [*hook_forms.shared_plugin_argv("opencode"), "hook", "opencode"]
    plugin = run_hook_command("", repo_root, env, plugin_argv=argv)
    assert plugin.returncode == 0 and seen.read_text() == "hook opencode\n"


def claude(root: Path, name: str) -> dict[str, object]:
    return json.loads((root / ".claude" / name).read_text())


def commands(data: dict[str, object]) -> list[str]:
    hooks = data["hooks"]
    assert isinstance(hooks, dict)
    return [h["command"] for groups in hooks.values() for g in groups for h in g["hooks"]]


def test_shared_install_for_claude_code(repo_root: Path) -> None:
    assert run_leslie("hooks", "install", "claude-code", cwd=repo_root).code == 0  # personal first
    result = run_leslie("hooks", "install", "claude-code", "--shared", "--json", cwd=repo_root, env=LESLIE_ON_PATH)
    assert result.code == 0
    assert result.stderr == "note: leslie's entries moved from .claude/settings.local.json to .claude/settings.json\n"
    data = json.loads(result.stdout)
    assert data["path"] == ".claude/settings.json" and data["command"] == hook_forms.shared_command("claude-code")
    shared = claude(repo_root, "settings.json")
    assert commands(shared) == [hook_forms.shared_command("claude-code")] * 6
    assert "onFailure" not in json.dumps(shared)  # a missing leslie must never block a teammate's tools
    assert claude(repo_root, "settings.local.json") == {"hooks": {}}  # the personal set is gone: one set runs
    status = run_leslie("hooks", "status", "claude-code", cwd=repo_root, env=LESLIE_ON_PATH)
    assert status.code == 0, status.stdout
    assert status.stdout.startswith("claude-code: ok: 6 hooks in .claude/settings.json, running the leslie on "
                                    f"PATH, {LESLIE_EXE} (this leslie, ")
    missing = run_leslie("hooks", "status", "claude-code", cwd=repo_root, env=NO_LESLIE_PATH)
    assert missing.code == 1 and "this PATH has none" in missing.stdout
    # A personal install does not add a second set beside the team's.
    again = run_leslie("hooks", "install", "claude-code", cwd=repo_root)
    assert again.code == 0 and "already has leslie's shared hooks" in again.stderr
    assert claude(repo_root, "settings.local.json") == {"hooks": {}}
    removed = run_leslie("hooks", "uninstall", "claude-code", cwd=repo_root)
    assert removed.code == 0 and claude(repo_root, "settings.json") == {"hooks": {}}
    assert not hooks_status.check(repo_root, "claude-code").installed


def test_both_files_holding_leslie_s_hooks_is_a_finding(repo_root: Path) -> None:
    run_leslie("hooks", "install", "claude-code", "--shared", cwd=repo_root)
    local = repo_root / ".claude" / "settings.local.json"
    local.write_text((repo_root / ".claude" / "settings.json").read_text())  # copied by hand
    status = run_leslie("hooks", "status", "claude-code", cwd=repo_root, env=LESLIE_ON_PATH)
    assert status.code == 1 and "leslie runs twice per event" in status.stdout
    assert run_leslie("hooks", "uninstall", "claude-code", cwd=repo_root).code == 0
    assert claude(repo_root, "settings.json") == claude(repo_root, "settings.local.json") == {"hooks": {}}


def exclude_lines(root: Path) -> list[str]:
    path = root / ".git" / "info" / "exclude"
    return path.read_text().splitlines() if path.exists() else []


@pytest.mark.parametrize(("agent", "path"), [("copilot", ".github/hooks/leslie.json"),
                                             ("opencode", ".opencode/plugins/leslie.js")])
def test_uninstalling_a_personal_file_of_leslie_s_takes_its_exclude_line_too(repo_root: Path, agent: str,
                                                                           path: str) -> None:
    assert run_leslie("hooks", "install", agent, cwd=repo_root).code == 0
    assert "/" + path in exclude_lines(repo_root)
    assert run_leslie("hooks", "uninstall", agent, cwd=repo_root).code == 0
    assert "/" + path not in exclude_lines(repo_root)


@pytest.mark.parametrize(("agent", "path"), [("copilot", ".github/hooks/leslie.json"),
                                             ("opencode", ".opencode/plugins/leslie.js"),
                                             ("pi", ".pi/extensions/leslie.ts")])
def test_a_file_of_leslie_s_alone_is_personal_by_default_and_shared_on_demand(repo_root: Path, agent: str,
                                                                           path: str) -> None:
    assert run_leslie("hooks", "install", agent, cwd=repo_root).code == 0
    assert "/" + path in exclude_lines(repo_root)  # this machine's path: kept out of commits
    assert run_leslie("hooks", "install", agent, "--shared", cwd=repo_root, env=LESLIE_ON_PATH).code == 0
    assert "/" + path not in exclude_lines(repo_root)  # meant to be committed now
    assert LESLIE_EXE not in (repo_root / path).read_text()
    status = run_leslie("hooks", "status", agent, "--json", cwd=repo_root, env=LESLIE_ON_PATH)
    found = json.loads(status.stdout)["agents"][0]
    assert found["outdated"] == [] and found["missing"] == []
    assert [c["form"] for c in found["commands"]] == ["shared"] and found["commands"][0]["problem"] is None
    assert run_leslie("hooks", "uninstall", agent, cwd=repo_root).code == 0
    assert not hooks_status.check(repo_root, agent).installed


@pytest.mark.parametrize("agent", ["codex", "gemini", "qwen", "factory"])
def test_shared_install_in_a_project_settings_file(repo_root: Path, agent: str) -> None:
    spec = hooks_install.agent_hooks(agent)
    assert run_leslie("hooks", "install", agent, "--shared", cwd=repo_root, env=LESLIE_ON_PATH).code == 0
    text = (repo_root / spec.path).read_text()
    assert LESLIE_EXE not in text and "exec leslie hook " + agent in text
    status = hooks_status.check(repo_root, agent)
    assert status.installed and not status.missing and not status.outdated
    assert run_leslie("hooks", "install", agent, cwd=repo_root).code == 0  # back to the personal form
    assert LESLIE_EXE in (repo_root / spec.path).read_text() and "sh -c" not in (repo_root / spec.path).read_text()
    assert run_leslie("hooks", "uninstall", agent, cwd=repo_root).code == 0
    assert "hook " + agent not in (repo_root / spec.path).read_text()


def test_a_personal_install_in_a_committed_project_file_warns(repo_root: Path) -> None:
    (repo_root / ".codex").mkdir()
    (repo_root / ".codex" / "hooks.json").write_text('{"hooks": {}}\n')
    subprocess.run(["git", "add", ".codex/hooks.json"], cwd=repo_root, check=True)
    result = run_leslie("hooks", "install", "codex", cwd=repo_root, env=LESLIE_ON_PATH)
    assert result.code == 0 and "git tracks .codex/hooks.json" in result.stderr and "--shared" in result.stderr


def test_shared_takes_no_executable(repo_root: Path) -> None:
    result = run_leslie("hooks", "install", "claude-code", "--shared", "--executable", "/x/leslie", cwd=repo_root)
    assert result.code == 2 and "--shared" in result.stderr


@pytest.mark.parametrize(("command", "shared"), [
    (hook_forms.shared_command("claude-code"), True),
    ("sh -c 'exec leslie hook claude-code'", True),  # an older shared form: recognised, reported outdated
    ("sh -c 'exec leslie hook codex'", False),
    ("sh -c 'exec leslie hook claude-code; rm -rf ~'", False),
    ("leslie hook claude-code", False),
])
def test_recognising_the_shared_form(command: str, shared: bool) -> None:
    assert hook_forms.is_shared(command, "claude-code") is shared
    if shared:
        assert hooks_install.is_leslie_hook({"command": command}, "claude-code")
