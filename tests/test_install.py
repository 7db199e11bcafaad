"""`pip`, `pipx` and `uv tool install` of the checkout each give a working `leslie` (SPEC §12: a
`[project.scripts]` entry point), which starts its warm process and is served by it.

Each installer makes an environment of its own and fetches the dependencies from the package index (the one
network access CI allows); without it, outside CI, the test is skipped.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
pytestmark = pytest.mark.stress


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(out), str(ROOT)],
                           capture_output=True, text=True, check=False)
    if built.returncode != 0:
        unavailable(f"could not build the wheel: {built.stderr[-2000:]}")
    (found,) = out.glob("leslie_threads-*.whl")
    return found


def unavailable(why: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(why)
    pytest.skip(why)


@pytest.fixture
def runtime(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    folder = Path(tempfile.mkdtemp(prefix="li-", dir="/tmp"))
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(folder))
    monkeypatch.delenv("LESLIE_WARM")
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def install(args: list[str], env: dict[str, str]) -> None:
    done = subprocess.run(args, capture_output=True, text=True, env={**os.environ, **env}, check=False,
                          timeout=900)
    if done.returncode != 0:
        unavailable(f"{' '.join(args[:3])} failed: {done.stderr[-2000:]}")


def works(leslie: Path, tmp_path: Path) -> None:
    """The installed command answers, runs a repository's commands, and is served warm after the first."""
    assert leslie.exists(), leslie
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(leslie), *args], cwd=repo, capture_output=True, text=True, check=False,
                              timeout=120)

    version = run("--version")
    assert version.returncode == 0 and version.stdout.startswith("leslie "), version
    assert run("init").returncode == 0
    deadline = time.monotonic() + 60
    while not json.loads(run("warm", "--json").stdout)["running"]:
        assert time.monotonic() < deadline, "no warm process started"
        time.sleep(0.1)
    before = json.loads(run("warm", "--json").stdout)
    spawned = run("spawn", "--intent", "Installed", "--id", "thread-installed")
    assert spawned.returncode == 0, spawned
    listed = run("list", "--plain")
    assert "thread-installed" in listed.stdout
    after = json.loads(run("warm", "--json").stdout)
    assert after["pid"] == before["pid"] and after["served"] >= before["served"] + 3
    assert Path(after["location"]).resolve() != (ROOT / "src" / "leslie").resolve()  # the installed copy
    run("warm", "stop")


def test_pip_install_gives_a_working_leslie(wheel: Path, tmp_path: Path, runtime: Path) -> None:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    install([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", str(wheel)], {})
    works(venv / "bin" / "leslie", tmp_path)


def test_pipx_install_gives_a_working_leslie(wheel: Path, tmp_path: Path, runtime: Path) -> None:
    env = {"PIPX_HOME": str(tmp_path / "pipx"), "PIPX_BIN_DIR": str(tmp_path / "bin"),
           "PIPX_MAN_DIR": str(tmp_path / "man")}
    install([str(BIN / "pipx"), "install", "--python", sys.executable, str(wheel)], env)
    works(tmp_path / "bin" / "leslie", tmp_path)


def test_uv_tool_install_gives_a_working_leslie(wheel: Path, tmp_path: Path, runtime: Path) -> None:
    env = {"UV_TOOL_DIR": str(tmp_path / "uv-tools"), "UV_TOOL_BIN_DIR": str(tmp_path / "bin"),
           "UV_PYTHON_DOWNLOADS": "never"}
    install([str(BIN / "uv"), "tool", "install", "--python", sys.executable, str(wheel)], env)
    works(tmp_path / "bin" / "leslie", tmp_path)
