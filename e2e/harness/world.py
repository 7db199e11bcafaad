"""One test's world: a temp home, a refusing proxy, a git repository with leslie and two threads.

Every client runs with HOME, XDG_*, CODEX_HOME, CLAUDE_CONFIG_DIR and GEMINI_CLI_HOME inside the test's temp
folder, HTTP(S)_PROXY/ALL_PROXY at the refusing proxy and NO_PROXY limited to 127.0.0.1: nothing the clients
send can leave the machine, and whatever they try is on record (the test fails when the proxy saw anything).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from e2e.harness.proxy import RefusingProxy

E2E = Path(__file__).resolve().parent.parent
NODE_BIN = E2E / "node_modules" / ".bin"
VENV_BIN = Path(sys.executable).parent
LESLIE = str(VENV_BIN / "leslie")
OWN, OTHER = "thread-own", "thread-other"
NEEDLE = f'<thread_context thread="{OWN}"'  # the block of the session's thread (AGENTS.md shows another example)
HARNESS = Path(__file__).resolve().parent


@dataclass
class Run:
    """A finished client process."""

    code: int
    stdout: str
    stderr: str
    events: list[dict[str, Any]] = field(default_factory=list)  # JSON lines of stdout


def json_lines(text: str) -> list[dict[str, Any]]:
    """The JSON objects among the lines of `text`."""
    out = []
    for raw in text.splitlines():
        line = raw.strip()
        if line.startswith("{"):
            try:
                value = json.loads(line)
            except ValueError:
                continue
            if isinstance(value, dict):
                out.append(value)
    return out


class World:
    """Temp folders, environment, the repository, the proxy, and the log of hook calls."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.home = tmp / "home"
        self.repo = tmp / "repo"
        self.bin = tmp / "bin"
        self.logs = tmp / "logs"
        for folder in (self.home, self.repo, self.bin, self.logs):
            folder.mkdir(parents=True)
        self.proxy = RefusingProxy(self.logs / "proxy.jsonl").start()
        self.hook_log = self.logs / "hooks.jsonl"
        self.env = self._base_env()
        self.wrapper = self._hook_wrapper()

    def _base_env(self) -> dict[str, str]:
        home = self.home
        proxy = self.proxy.url
        env = {
            "PATH": os.pathsep.join([str(VENV_BIN), str(NODE_BIN),
                                     os.path.dirname(shutil.which("node") or "/usr/bin/node"),
                                     "/usr/local/bin", "/usr/bin", "/bin"]),
            "HOME": str(home), "USER": "e2e", "LANG": "C.UTF-8", "TERM": "dumb", "SHELL": "/bin/bash",
            "TMPDIR": str(self.tmp / "t"),
            "XDG_CONFIG_HOME": str(home / ".config"), "XDG_CACHE_HOME": str(home / ".cache"),
            "XDG_DATA_HOME": str(home / ".local/share"), "XDG_STATE_HOME": str(home / ".local/state"),
            # Short (a socket path has about 100 bytes): the warm process of this world's own, as users have it.
            "XDG_RUNTIME_DIR": tempfile.mkdtemp(prefix="le2e-", dir="/tmp"),
            "HTTP_PROXY": proxy, "HTTPS_PROXY": proxy, "ALL_PROXY": proxy,
            "http_proxy": proxy, "https_proxy": proxy, "all_proxy": proxy,
            "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost",
            "GIT_AUTHOR_NAME": "E2E", "GIT_AUTHOR_EMAIL": "e2e@example.invalid",
            "GIT_COMMITTER_NAME": "E2E", "GIT_COMMITTER_EMAIL": "e2e@example.invalid", "GIT_CONFIG_NOSYSTEM": "1",
            "LESLIE_THREAD": OWN,
            "LESLIE_E2E_REAL": LESLIE, "LESLIE_E2E_HOOK_LOG": str(self.hook_log),
        }
        for name in ("TMPDIR", "XDG_RUNTIME_DIR"):
            Path(env[name]).mkdir(mode=0o700, exist_ok=True)
        return env

    def _hook_wrapper(self) -> Path:
        """`<tmp>/bin/leslie`: the real leslie behind a logging wrapper (what the hooks are installed with)."""
        wrapper = self.bin / "leslie"
        wrapper.write_text(f"#!{sys.executable} -I\n" + (HARNESS / "hookwrap.py").read_text())
        wrapper.chmod(0o755)
        return wrapper

    def run(self, *args: str, timeout: float = 120, input: str | None = None,
            env: dict[str, str] | None = None, check: bool = True) -> Run:
        """Run a command in the repository with the world's environment."""
        full_env = {**self.env, **(env or {})}
        try:
            proc = subprocess.run(list(args), cwd=self.repo, env=full_env, capture_output=True, text=True,
                                  timeout=timeout, input=input if input is not None else "", check=False)
        except subprocess.TimeoutExpired as exc:
            raise AssertionError(f"{args[0]} did not finish within {timeout} s: {exc.stderr!r}") from None
        run = Run(proc.returncode, proc.stdout, proc.stderr, json_lines(proc.stdout))
        if check:
            assert run.code == 0, f"{' '.join(args)} exited {run.code}:\n{run.stderr[-3000:]}\n{run.stdout[-2000:]}"
        return run

    def leslie(self, *args: str) -> Run:
        """The real leslie, in the repository."""
        return self.run(LESLIE, *args)

    def make_repo(self) -> None:
        """git init, leslie init, thread-other, thread-own referencing it, one commit."""
        self.run("git", "init", "-q", "-b", "main")
        self.leslie("init")
        self.leslie("spawn", "--id", OTHER, "--intent", "Another thread's work")
        self.leslie("spawn", "--id", OWN, "--intent", "This session's work", "--ref", OTHER)
        self.commit("leslie: two threads")

    def commit(self, message: str) -> None:
        """Commit everything (keeps Codex's and Claude's git status short)."""
        self.run("git", "add", "-A")
        self.run("git", "commit", "-q", "-m", message, "--allow-empty")

    def hook_calls(self) -> list[dict[str, Any]]:
        """Every hook call so far: the payload the client sent and leslie's answer."""
        if not self.hook_log.exists():
            return []
        return [json.loads(line) for line in self.hook_log.read_text().splitlines() if line.strip()]

    def thread_file(self, thread: str, name: str) -> Path:
        """A file in a thread's folder."""
        return self.repo / ".leslie" / "threads" / thread / name

    def close(self) -> None:
        """Stop the proxy and this world's warm process."""
        self.proxy.stop()
        subprocess.run([LESLIE, "warm", "stop"], env={**self.env, "LESLIE_WARM": "0"}, capture_output=True,
                       check=False, timeout=60)
        shutil.rmtree(self.env["XDG_RUNTIME_DIR"], ignore_errors=True)
