"""A small ACP client (newline-delimited JSON-RPC 2.0 over stdio) that drives `leslie acp -- <agent>`.

Raw lines, not the SDK's typed client: the checks compare bytes (unknown messages relayed byte-exact) and look
at fields the SDK's models do not carry (`_meta` in a prompt result). It answers the agent's permission
requests with the first "allow" option and refuses file-system and terminal requests (it advertises neither).
"""

from __future__ import annotations

import json
import queue
import subprocess
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


class AcpError(AssertionError):
    """The agent answered with a JSON-RPC error, or not in time."""


@dataclass
class PromptResult:
    """What one `session/prompt` produced."""

    result: dict[str, Any]
    updates: list[dict[str, Any]] = field(default_factory=list)  # the session/update params, in order

    @property
    def text(self) -> str:
        """The agent's reply text (its agent_message_chunk updates joined)."""
        return "".join(u["update"].get("content", {}).get("text", "") for u in self.updates
                       if u.get("update", {}).get("sessionUpdate") == "agent_message_chunk")

    def of_kind(self, kind: str) -> list[dict[str, Any]]:
        """The updates whose `sessionUpdate` is `kind`."""
        return [u["update"] for u in self.updates if u.get("update", {}).get("sessionUpdate") == kind]


class AcpClient:
    """One agent process behind `leslie acp`, driven line by line; every line both ways is kept (bytes)."""

    def __init__(self, command: Sequence[str], *, cwd: Path, env: dict[str, str], stderr_path: Path) -> None:
        self._stderr = stderr_path.open("wb")
        self.proc = subprocess.Popen(list(command), cwd=cwd, env=env, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=self._stderr)
        self.sent: list[bytes] = []
        self.received: list[bytes] = []
        self._lines: queue.Queue[bytes | None] = queue.Queue()
        self._next_id = 1
        self._reader = threading.Thread(target=self._read, daemon=True, name="acp-client-reader")
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.received.append(line)
            self._lines.put(line)
        self._lines.put(None)

    def send_raw(self, line: bytes) -> None:
        """Write one line (must end with a newline) as is."""
        assert self.proc.stdin is not None
        self.sent.append(line)
        self.proc.stdin.write(line)
        self.proc.stdin.flush()

    def send(self, message: dict[str, Any]) -> None:
        """Write one JSON-RPC message."""
        self.send_raw(json.dumps(message).encode() + b"\n")

    def request(self, method: str, params: dict[str, Any], *, timeout: float = 60,
                updates: list[dict[str, Any]] | None = None) -> dict[str, Any]:
        """Send a request and wait for its response, answering the agent's requests meanwhile."""
        request_id = self._next_id
        self._next_id += 1
        self.send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AcpError(f"no answer to {method} within {timeout} s")
            try:
                line = self._lines.get(timeout=remaining)
            except queue.Empty:
                continue
            if line is None:
                raise AcpError(f"the agent closed its output while {method} was pending")
            try:
                message = json.loads(line)
            except ValueError:
                continue
            if not isinstance(message, dict):
                continue
            if message.get("id") == request_id and "method" not in message:
                if "error" in message:
                    raise AcpError(f"{method} failed: {message['error']}")
                result = message.get("result")
                return result if isinstance(result, dict) else {"value": result}
            if "method" in message and "id" in message:
                self._answer(message)
            elif message.get("method") == "session/update" and updates is not None:
                updates.append(message.get("params") or {})

    def _answer(self, message: dict[str, Any]) -> None:
        """The agent asks the client something: allow tool calls, refuse the rest."""
        if message["method"] == "session/request_permission":
            options = message.get("params", {}).get("options") or []
            allow = next((o for o in options if str(o.get("kind", "")).startswith("allow")), None)
            outcome = ({"outcome": "selected", "optionId": allow["optionId"]} if allow
                       else {"outcome": "cancelled"})
            self.send({"jsonrpc": "2.0", "id": message["id"], "result": {"outcome": outcome}})
        else:
            self.send({"jsonrpc": "2.0", "id": message["id"],
                       "error": {"code": -32601, "message": f"e2e client: no {message['method']}"}})

    def initialize(self) -> dict[str, Any]:
        """`initialize` with no client capabilities (the agent uses its own file system and shell)."""
        return self.request("initialize", {
            "protocolVersion": 1,
            "clientCapabilities": {"fs": {"readTextFile": False, "writeTextFile": False}, "terminal": False},
            "clientInfo": {"name": "leslie-e2e", "version": "1"}})

    def new_session(self, cwd: Path) -> str:
        """`session/new` in `cwd`; returns the session ID."""
        result = self.request("session/new", {"cwd": str(cwd), "mcpServers": []})
        return str(result["sessionId"])

    def prompt(self, session_id: str, text: str, *, timeout: float = 90) -> PromptResult:
        """One `session/prompt` with a single text block; collects the session's updates."""
        updates: list[dict[str, Any]] = []
        result = self.request("session/prompt", {"sessionId": session_id,
                                                 "prompt": [{"type": "text", "text": text}]},
                              timeout=timeout, updates=updates)
        return PromptResult(result, updates)

    def close(self, timeout: float = 20) -> int:
        """Close the agent's input and wait for it; kill it if it does not exit in time."""
        try:
            if self.proc.stdin:
                self.proc.stdin.close()
        except OSError:
            pass
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait(10)
        self._stderr.close()
        return code
