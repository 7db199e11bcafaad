"""`leslie hooks install|uninstall|status opencode|pi`: leslie's plugin file in the project."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from conftest import LESLIE_EXE, run_leslie, tree_digest

FILES = {"opencode": ".opencode/plugins/leslie.js", "kilo": ".kilo/plugins/leslie.js", "pi": ".pi/extensions/leslie.ts"}
AGENTS = pytest.mark.parametrize("agent", sorted(FILES))


@AGENTS
def test_install_writes_the_plugin_with_this_leslie_s_absolute_path(repo_root: Path, agent: str) -> None:
    result = run_leslie("hooks", "install", agent, cwd=repo_root)
    assert result.code == 0, result.stderr
    text = (repo_root / FILES[agent]).read_text()
    assert f"= {json.dumps([LESLIE_EXE])};" in text
    assert "__" not in text.replace("__dirname", "")  # every placeholder filled
    assert "CONTEXT_TIMEOUT_MS = 15000;" in text and "GUARD_TIMEOUT_MS = 10000;" in text
    assert f'const AGENT = "{agent}";' in text
    assert "import " not in text.replace('import { spawn } from "node:child_process";', "")  # no SDK at run time
    again = run_leslie("hooks", "install", agent, cwd=repo_root)
    assert again.code == 0 and "already up to date" in again.stdout


@AGENTS
def test_status_ok_outdated_and_broken(repo_root: Path, agent: str) -> None:
    assert run_leslie("hooks", "status", agent, cwd=repo_root).code == 1
    run_leslie("hooks", "install", agent, cwd=repo_root)
    status = run_leslie("hooks", "status", agent, cwd=repo_root)
    assert status.code == 0 and status.stdout.startswith(f"{agent}: ok: 3 hooks in {FILES[agent]}, running")
    path = repo_root / FILES[agent]
    path.write_text(path.read_text() + "\n// edited\n")
    outdated = run_leslie("hooks", "status", agent, cwd=repo_root)
    assert outdated.code == 1 and "older than this leslie's" in outdated.stdout
    run_leslie("hooks", "install", agent, "--executable", "/nonexistent/leslie", cwd=repo_root)
    broken = run_leslie("hooks", "status", agent, cwd=repo_root)
    assert broken.code == 1 and "/nonexistent/leslie does not exist" in broken.stdout
    doctor = run_leslie("doctor", cwd=repo_root)
    assert doctor.code != 0 and "/nonexistent/leslie does not exist" in doctor.stdout + doctor.stderr


@AGENTS
def test_uninstall_removes_only_leslie_s_file(repo_root: Path, agent: str) -> None:
    run_leslie("hooks", "install", agent, cwd=repo_root)
    neighbour = (repo_root / FILES[agent]).parent / "mine.js"
    neighbour.write_text("export const Mine = async () => ({});\n")
    result = run_leslie("hooks", "uninstall", agent, cwd=repo_root)
    assert result.code == 0 and not (repo_root / FILES[agent]).exists() and neighbour.exists()
    assert "already up to date" in run_leslie("hooks", "uninstall", agent, cwd=repo_root).stdout


@AGENTS
def test_a_file_leslie_did_not_write_is_refused(repo_root: Path, agent: str) -> None:
    path = repo_root / FILES[agent]
    path.parent.mkdir(parents=True)
    path.write_text("export default function (pi) {}\n")
    before = tree_digest(repo_root)
    for args in (("install", agent), ("uninstall", agent)):
        result = run_leslie("hooks", *args, cwd=repo_root)
        assert result.code == 4 and "is not leslie's plugin file" in result.stderr, result.stderr
        assert len(result.stderr.strip().splitlines()) <= 2
    assert tree_digest(repo_root) == before
    assert "is not leslie's plugin file" in run_leslie("hooks", "status", agent, cwd=repo_root).stdout


@AGENTS
def test_links_out_of_the_repository_and_oversized_files_are_refused(repo_root: Path, tmp_path: Path,
                                                                     agent: str) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    folder = (repo_root / FILES[agent]).parent
    folder.parent.mkdir(parents=True)
    os.symlink(outside, folder)
    result = run_leslie("hooks", "install", agent, cwd=repo_root)
    assert result.code == 4 and "leads outside the repository" in result.stderr
    assert list(outside.iterdir()) == []
    folder.unlink()
    folder.mkdir()
    (repo_root / FILES[agent]).write_bytes(b"/" * (300 * 1024))
    result = run_leslie("hooks", "install", agent, cwd=repo_root)
    assert result.code == 4 and len((repo_root / FILES[agent]).read_bytes()) == 300 * 1024, result.stderr


def test_unknown_agent_names_the_known_ones(repo_root: Path) -> None:
    result = run_leslie("hooks", "install", "cursor", cwd=repo_root)
    assert result.code == 2
    assert "claude-code, codex, gemini, copilot, qwen, factory, opencode, kilo, pi" in result.stderr


@pytest.mark.skipif(subprocess.run(["node", "--version"], capture_output=True, check=False).returncode != 0,
                    reason="node is not installed")
def test_the_opencode_plugin_is_valid_javascript(repo_root: Path) -> None:
    run_leslie("hooks", "install", "opencode", cwd=repo_root)
    check = subprocess.run(["node", "--check", str(repo_root / FILES["opencode"])], capture_output=True, text=True,
                           check=False)
    assert check.returncode == 0, check.stderr
