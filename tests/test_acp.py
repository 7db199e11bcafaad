"""`leslie acp`: the real proxy between a real client and a real agent process (SPEC §7.5).

Two agents live in tests/acp_agents/: one built with the reference SDK (`agent-client-protocol`), driven by
the SDK's own client; and a raw JSON-RPC agent that records every byte it receives and writes whatever bytes a
test asks for, driven by a raw client here, to check that what the proxy does not change passes byte for byte.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from conftest import LESLIE_EXE, run_leslie
from leslie.ops import threads
from leslie.store import sessions
from leslie.store.repository import Repository

AGENTS = Path(__file__).parent / "acp_agents"
SDK_AGENT = str(AGENTS / "sdk_agent.py")
RAW_AGENT = str(AGENTS / "raw_agent.py")
TIMEOUT = 30.0


@pytest.fixture
def thread_id(repo: Repository) -> str:
    """A live thread in the test repository."""
    return threads.spawn(repo, "Build the ACP proxy", thread_id="thread-acptest").thread.id


class RawClient:
    """`leslie acp -- python raw_agent.py` driven line by line, with the agent's received bytes on record."""

    def __init__(self, cwd: Path, tmp: Path, *, thread: str | None = None, env: dict[str, str] | None = None,
                 agent: list[str] | None = None) -> None:
        self.cwd = cwd
        self.log = tmp / "agent-received.bin"
        full_env = dict(os.environ, RAW_AGENT_LOG=str(self.log))
        full_env.update(env or {})
        options = ["--thread", thread] if thread else []
        command = agent if agent is not None else [sys.executable, RAW_AGENT]
        self.proc = subprocess.Popen([LESLIE_EXE, "acp", *options, "--", *command], cwd=cwd, env=full_env,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.lines: queue.Queue[bytes | None] = queue.Queue()
        self.stderr = bytearray()
        threading.Thread(target=self._read_stdout, daemon=True).start()
        threading.Thread(target=self._read_stderr, daemon=True).start()
        self.next_id = 0

    def _read_stdout(self) -> None:
        assert self.proc.stdout is not None
        for line in iter(self.proc.stdout.readline, b""):
            self.lines.put(line)
        self.lines.put(None)

    def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        for chunk in iter(lambda: self.proc.stderr.read1(65536), b""):  # type: ignore[union-attr]
            self.stderr += chunk

    def send(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def read_line(self, timeout: float = TIMEOUT) -> bytes:
        line = self.lines.get(timeout=timeout)
        assert line is not None, f"the proxy closed its stdout; stderr: {self.stderr.decode(errors='replace')}"
        return line

    def request(self, method: str, params: Any) -> tuple[dict[str, Any], list[bytes]]:
        """Send a request; its response and the lines that came before it."""
        self.next_id += 1
        request_id = self.next_id
        self.send(json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}).encode()
                  + b"\n")
        return self.until_response(request_id)

    def until_response(self, request_id: Any) -> tuple[dict[str, Any], list[bytes]]:
        before: list[bytes] = []
        while True:
            line = self.read_line()
            try:
                message = json.loads(line)
            except ValueError:
                before.append(line)
                continue
            if isinstance(message, dict) and message.get("id") == request_id and "method" not in message:
                return message, before
            before.append(line)

    def start_session(self, cwd: Path | None = None) -> str:
        self.request("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
        response, _ = self.request("session/new", {"cwd": str(cwd or self.cwd), "mcpServers": []})
        return str(response["result"]["sessionId"])

    def prompt(self, session_id: str, text: str) -> list[bytes]:
        response, before = self.request("session/prompt",
                                        {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]})
        assert response["result"] == {"stopReason": "end_turn"}
        return before

    def emit(self, data: bytes) -> list[bytes]:
        """Have the agent write `data` verbatim; the lines the client got before the answer."""
        _, before = self.request("test/emit", {"data": base64.b64encode(data).decode()})
        return before

    def received(self) -> list[bytes]:
        """Every line the agent received so far, verbatim."""
        return self.log.read_bytes().splitlines(keepends=True) if self.log.exists() else []

    def received_prompts(self) -> list[list[dict[str, Any]]]:
        prompts = []
        for line in self.received():
            try:
                message = json.loads(line)
            except ValueError:
                continue
            if isinstance(message, dict) and message.get("method") == "session/prompt":
                prompts.append(message["params"]["prompt"])
        return prompts

    def close(self, timeout: float = TIMEOUT) -> int:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        return self.wait(timeout)

    def wait(self, timeout: float = TIMEOUT) -> int:
        code = self.proc.wait(timeout)
        time.sleep(0.05)  # let the reader threads take the last bytes
        return code

    def stderr_text(self) -> str:
        return self.stderr.decode(errors="replace")

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture
def raw_clients() -> Any:
    """Every RawClient a test starts is killed at the end, whatever happened."""
    started: list[RawClient] = []

    def start(*args: Any, **kwargs: Any) -> RawClient:
        client = RawClient(*args, **kwargs)
        started.append(client)
        return client

    yield start
    for client in started:
        client.kill()


def is_context(block: dict[str, Any], thread: str) -> bool:
    return block.get("type") == "text" and block["text"].startswith(f'<thread_context thread="{thread}"')


def session_log(root: Path, session_id: str) -> list[dict[str, Any]]:
    """The leslie log of an ACP session (agent `acp`, keyed by the ACP sessionId)."""
    return sessions.read_log(sessions.SessionFiles(str(root), "acp", session_id).log)


def reasons(root: Path, session_id: str) -> list[str | None]:
    return [entry["reason"] for entry in session_log(root, session_id) if entry["kind"] == "input"]


# -- injection, driven by usage -----------------------------------------------------------------------------
def test_first_prompt_gets_the_context_block_and_the_second_does_not(repo_root: Path, tmp_path: Path,
                                                                      thread_id: str, raw_clients: Any) -> None:
    client = raw_clients(repo_root, tmp_path, thread=thread_id)
    session = client.start_session()
    client.prompt(session, "hello")
    client.prompt(session, "again")
    first, second = client.received_prompts()
    assert len(first) == 2 and is_context(first[0], thread_id)
    assert first[1] == {"type": "text", "text": "hello"}
    assert second == [{"type": "text", "text": "again"}]
    assert client.close() == 0


def test_usage_at_the_threshold_reinjects_at_the_next_prompt(repo_root: Path, tmp_path: Path, thread_id: str,
                                                             raw_clients: Any) -> None:
    client = raw_clients(repo_root, tmp_path, env={"LESLIE_THREAD": thread_id})
    session = client.start_session()
    client.prompt(session, "hello")
    before = client.prompt(session, "usage 100000 200000")  # half full: nothing to do
    assert any(b"usage_update" in line for line in before)  # the report itself reaches the client
    client.prompt(session, "quiet")
    client.prompt(session, "usage 185000 200000")  # 92.5 % of the window
    client.prompt(session, "after the full window")
    client.prompt(session, "and then")
    prompts = client.received_prompts()
    assert [is_context(p[0], thread_id) for p in prompts] == [True, False, False, False, True, False]
    assert prompts[4][1:] == [{"type": "text", "text": "after the full window"}]
    assert client.close() == 0
    assert reasons(repo_root, session) == ["start", None, None, None, "predicted", None]


def test_a_drop_to_zero_usage_means_compaction_and_reinjects(repo_root: Path, tmp_path: Path, thread_id: str,
                                                             raw_clients: Any) -> None:
    client = raw_clients(repo_root, tmp_path, thread=thread_id)
    session = client.start_session()
    client.prompt(session, "hello")
    client.prompt(session, "usage 60000 200000")
    client.prompt(session, "quiet")
    client.prompt(session, "usage 0 200000")  # the agent compacted its context
    client.prompt(session, "after compaction")
    prompts = client.received_prompts()
    assert [is_context(p[0], thread_id) for p in prompts] == [True, False, False, False, True]
    assert client.close() == 0
    assert reasons(repo_root, session) == ["start", None, None, None, "compacted"]


def test_an_injected_prompt_keeps_everything_else(repo_root: Path, tmp_path: Path, thread_id: str,
                                                 raw_clients: Any) -> None:
    client = raw_clients(repo_root, tmp_path, thread=thread_id)
    session = client.start_session()
    original = {"jsonrpc": "2.0", "id": "prompt-é-1", "method": "session/prompt", "_meta": {"top": True},
                "params": {"sessionId": session, "_meta": {"traceparent": "00-abc"}, "futureField": [1, {"x": None}],
                           "prompt": [{"type": "resource_link", "uri": "file:///a.py", "name": "a.py"},
                                      {"type": "text", "text": "fix it", "_meta": {"k": 1}}]}}
    client.send(json.dumps(original).encode() + b"\n")
    response, _ = client.until_response("prompt-é-1")
    assert response["result"] == {"stopReason": "end_turn"}
    received = json.loads(client.received()[-1])
    context, *rest = received["params"].pop("prompt")
    assert is_context(context, thread_id) and set(context) == {"type", "text"}
    assert rest == original["params"]["prompt"]
    del original["params"]["prompt"]
    assert received == original
    assert client.close() == 0


def test_outside_a_repository_the_first_session_s_cwd_finds_it(repo_root: Path, tmp_path: Path, thread_id: str,
                                                               raw_clients: Any) -> None:
    elsewhere = tmp_path / "elsewhere"  # an editor may start the agent in any folder
    elsewhere.mkdir()
    client = raw_clients(elsewhere, tmp_path, env={"LESLIE_THREAD": thread_id})
    session = client.start_session(cwd=repo_root / "src")
    client.prompt(session, "hello")
    assert is_context(client.received_prompts()[0][0], thread_id)
    assert client.close() == 0
    assert "leslie acp: warning" not in client.stderr_text()


def test_sessions_are_independent(repo_root: Path, tmp_path: Path, thread_id: str, raw_clients: Any) -> None:
    client = raw_clients(repo_root, tmp_path, thread=thread_id)
    one = client.start_session()
    two = client.request("session/new", {"cwd": str(repo_root), "mcpServers": []})[0]["result"]["sessionId"]
    client.prompt(one, "first of one")
    client.prompt(two, "first of two")
    client.prompt(one, "second of one")
    assert [is_context(p[0], thread_id) for p in client.received_prompts()] == [True, True, False]
    assert client.close() == 0


def test_a_failing_injection_warns_and_forwards_the_prompt_unchanged(repo: Repository, repo_root: Path,
                                                                     tmp_path: Path, thread_id: str,
                                                                     raw_clients: Any) -> None:
    repo.layout.thread_file(thread_id).write_text("{ not json", encoding="utf-8")
    client = raw_clients(repo_root, tmp_path, thread=thread_id)
    session = client.start_session()
    client.prompt(session, "hello")
    assert client.received_prompts() == [[{"type": "text", "text": "hello"}]]
    assert client.close() == 0
    assert "leslie acp: warning:" in client.stderr_text()


# -- pass-through ---------------------------------------------------------------------------------------------
ODD_CLIENT_LINES = [
    b'{"jsonrpc":"2.0","id":"str-id-1","method":"_vendor/unknown","params":{"x":[1,2.50,-0e0],"_meta":{"k":"v"}}}\n',
    b'{"jsonrpc": "2.0",   "method": "_vendor/notice", "params": {"nested": {"deep": [true, null]}}}\n',
    b'{"jsonrpc":"2.0","id":7,"result":{"outcome":{"outcome":"selected","optionId":"allow"},"_meta":{}}}\n',
    b'{"id":8,"jsonrpc":"2.0","error":{"code":-32000,"message":"caf\\u00e9 \xc3\xa9 \\ud83d\\ude00"}}\n',
    b'{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"s","unknownField":1}}\r\n',
    b'[{"jsonrpc":"2.0","method":"batch/notice"}]\n',
    b'{"jsonrpc":"2.0","method":"session/prompt","params":{"sessionId":"s","prompt":[]}}\n',  # a notification
    b'{"jsonrpc":"2.0","id":9,"method":"session/prompt","params":"not an object"}\n',
    b'  {"jsonrpc":"2.0","id":10,"method":"_x","params":{"text":"a \\"prompt\\" word"}}  \n',
    b"\n",
]


def test_unknown_messages_pass_byte_exact_from_client_to_agent(repo_root: Path, tmp_path: Path, thread_id: str,
                                                               raw_clients: Any) -> None:
    client = raw_clients(repo_root, tmp_path, thread=thread_id)
    session = client.start_session()
    client.prompt(session, "first")  # injected: from now on prompts pass unchanged
    odd_prompt = (b'{ "params" : {"prompt":[{"type":"text","text":"x","_meta":{"a":1}}],"sessionId":"'
                  + session.encode() + b'","_meta":{"trace":"t"}}, "id" : "p-2", "method":"session/prompt",'
                  b' "jsonrpc":"2.0", "extra": 1.0e3}\n')
    mark = len(client.received())
    client.send(b"".join(ODD_CLIENT_LINES) + odd_prompt)
    client.until_response("p-2")
    assert client.received()[mark:mark + len(ODD_CLIENT_LINES) + 1] == [*ODD_CLIENT_LINES, odd_prompt]
    assert client.close() == 0


ODD_AGENT_LINES = [
    b'{"jsonrpc":"2.0","method":"_vendor/progress","params":{"_meta":{"z":1},"pct":12.50}}\n',
    b'{"jsonrpc":"2.0","id":"agent-req-1","method":"fs/read_text_file","params":{"sessionId":"s","path":"/x"}}\n',
    b'{"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s", "update": '
    b'{"sessionUpdate": "usage_update", "used": 10, "size": 100, "cost": {"amount": 0.01, "currency": "EUR"},'
    b' "_meta": {"src": "x"}, "future": [1]}}}\n',
    b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":'
    b'"agent_message_chunk","content":{"type":"text","text":"caf\xc3\xa9 \\u00e9"}}}}\r\n',
    b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":'
    b'"usage_update","used":-5,"size":"big"}}}\n',
    b"\n",
]


def test_unknown_messages_pass_byte_exact_from_agent_to_client(repo_root: Path, tmp_path: Path, thread_id: str,
                                                               raw_clients: Any) -> None:
    client = raw_clients(repo_root, tmp_path, thread=thread_id)
    client.start_session()
    assert client.emit(b"".join(ODD_AGENT_LINES)) == ODD_AGENT_LINES
    assert client.close() == 0


def test_pure_relay_outside_a_repository_is_byte_exact(tmp_path: Path, raw_clients: Any) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    client = raw_clients(outside, tmp_path)
    client.start_session()
    assert client.emit(b"".join(ODD_AGENT_LINES)) == ODD_AGENT_LINES
    mark = len(client.received())
    client.send(b"".join(ODD_CLIENT_LINES))
    client.request("initialize", {"protocolVersion": 1})
    assert client.received()[mark:mark + len(ODD_CLIENT_LINES)] == ODD_CLIENT_LINES
    assert client.close() == 0
    warnings = [line for line in client.stderr_text().splitlines() if line.startswith("leslie acp: warning")]
    assert len(warnings) == 1 and "no .leslie" in warnings[0]


def test_no_current_thread_relays_prompts_unchanged_with_one_warning(repo_root: Path, tmp_path: Path,
                                                                     raw_clients: Any) -> None:
    client = raw_clients(repo_root, tmp_path)
    session = client.start_session()
    client.prompt(session, "hello")
    assert client.received_prompts() == [[{"type": "text", "text": "hello"}]]
    assert client.close() == 0
    warnings = [line for line in client.stderr_text().splitlines() if line.startswith("leslie acp: warning")]
    assert len(warnings) == 1 and "no current thread" in warnings[0]


@pytest.mark.parametrize("with_thread", [False, True], ids=["relay", "injecting"])
def test_malformed_lines_from_either_side_are_forwarded_and_survive(repo_root: Path, tmp_path: Path,
                                                                    thread_id: str, raw_clients: Any,
                                                                    with_thread: bool) -> None:
    client = raw_clients(repo_root, tmp_path, thread=thread_id if with_thread else None)
    junk = [b"not json at all\n", b'{"jsonrpc": "2.0", "method": "session/prompt", "params": {\n',
            b"\xff\xfe\x00 binary {}\n", b'{"unterminated": "string\n']
    client.send(b"".join(junk))
    session = client.start_session()  # the relay and the agent are still alive
    assert client.received()[:len(junk)] == junk
    assert client.emit(b"".join(junk)) == junk
    client.prompt(session, "still fine")
    assert client.close() == 0


def test_large_messages_and_bursts(repo_root: Path, tmp_path: Path, thread_id: str, raw_clients: Any) -> None:
    client = raw_clients(repo_root, tmp_path, thread=thread_id)
    session = client.start_session()
    client.prompt(session, "hello")
    big_text = "é" * 1_000_000  # 2 MB of UTF-8
    before = client.prompt(session, big_text)
    assert client.received_prompts()[-1] == [{"type": "text", "text": big_text}]
    echoed = json.loads(before[-1])["params"]["update"]["content"]["text"]
    assert json.loads(echoed) == [{"type": "text", "text": big_text}]
    before = client.prompt(session, "big 2500000")
    assert len(json.loads(before[-1])["params"]["update"]["content"]["text"]) == 2_500_000
    notice = b'{"jsonrpc":"2.0","method":"_big","params":{"blob":"' + b"a" * 3_000_000 + b'"}}\n'
    burst = [b'{"jsonrpc":"2.0","method":"_n","params":{"i":%d}}\n' % i for i in range(2000)]
    mark = len(client.received())
    client.send(notice + b"".join(burst))
    client.request("initialize", {"protocolVersion": 1})
    assert client.received()[mark:mark + 2001] == [notice, *burst]
    assert client.emit(b"".join(burst) + notice) == [*burst, notice]
    assert client.close() == 0


# -- lifecycle ------------------------------------------------------------------------------------------------
def test_client_eof_closes_the_agent_stdin_and_the_exit_code_is_the_agent_s(repo_root: Path, tmp_path: Path,
                                                                            thread_id: str,
                                                                            raw_clients: Any) -> None:
    client = raw_clients(repo_root, tmp_path, thread=thread_id, env={"RAW_AGENT_EOF_EXIT": "7"})
    client.start_session()
    assert client.close() == 7
    stderr = client.stderr_text()
    assert "raw agent: stdin closed" in stderr  # the agent's stderr passes through
    assert "the agent exited with code 7" in stderr


def test_client_eof_with_a_clean_agent_exits_zero_quietly(repo_root: Path, tmp_path: Path, thread_id: str,
                                                          raw_clients: Any) -> None:
    client = raw_clients(repo_root, tmp_path, thread=thread_id)
    client.start_session()
    assert client.close() == 0
    assert client.lines.get(timeout=5) is None  # stdout closed, nothing extra on it
    assert "leslie acp:" not in client.stderr_text()


def test_a_crashing_agent_ends_the_proxy_with_its_code_and_a_message(repo_root: Path, tmp_path: Path,
                                                                     thread_id: str, raw_clients: Any) -> None:
    client = raw_clients(repo_root, tmp_path, thread=thread_id)
    session = client.start_session()
    client.send(json.dumps({"jsonrpc": "2.0", "id": 99, "method": "session/prompt", "params": {
        "sessionId": session, "prompt": [{"type": "text", "text": "exit 3"}]}}).encode() + b"\n")
    assert client.wait() == 3  # the client's stdin is still open
    stderr = client.stderr_text()
    assert "raw agent: crashing with code 3" in stderr
    assert "the agent exited with code 3 while the client was still connected" in stderr


def test_sigterm_is_forwarded_to_the_agent(repo_root: Path, tmp_path: Path, thread_id: str,
                                           raw_clients: Any) -> None:
    client = raw_clients(repo_root, tmp_path, thread=thread_id)
    client.start_session()
    client.proc.send_signal(signal.SIGTERM)
    assert client.wait() == 42  # the agent's own SIGTERM handler ran and chose the code
    assert "raw agent: got SIGTERM" in client.stderr_text()


def test_sigint_is_forwarded_and_a_signal_death_is_128_plus_n(tmp_path: Path, raw_clients: Any) -> None:
    sleeper = [sys.executable, "-c", "import sys, time; print('{}', flush=True); time.sleep(60)"]
    client = raw_clients(tmp_path, tmp_path, agent=sleeper)
    assert client.read_line() == b"{}\n"  # the agent runs
    client.proc.send_signal(signal.SIGINT)
    assert client.wait() == 128 + signal.SIGINT  # Python dies of an unhandled SIGINT: 128 + 2, as a shell says
    assert "leslie acp:" in client.stderr_text()


def test_agent_command_not_found(tmp_path: Path) -> None:
    result = run_leslie("acp", "--", "no-such-agent-xyz", cwd=tmp_path, input="")
    assert result.code == 127
    assert "cannot start the agent: no-such-agent-xyz" in result.stderr
    assert "Traceback" not in result.stderr


def test_missing_agent_command_is_a_usage_error(tmp_path: Path) -> None:
    result = run_leslie("acp", cwd=tmp_path, input="")
    assert result.code == 2
    assert "no agent command" in result.stderr


@pytest.mark.parametrize("separator", [["--"], []], ids=["with --", "without --"])
def test_options_after_the_agent_command_belong_to_the_agent(tmp_path: Path, separator: list[str]) -> None:
    argv_printer = [sys.executable, "-c", "import json, sys; print(json.dumps(sys.argv[1:]))"]
    result = run_leslie("acp", *separator, *argv_printer, "--thread", "x", "-v", cwd=tmp_path, input="")
    assert result.code == 0, result.stderr
    assert json.loads(result.stdout) == ["--thread", "x", "-v"]


def test_the_agent_gets_a_named_thread_and_the_root_in_its_environment(repo: Repository, repo_root: Path,
                                                                        thread_id: str) -> None:
    env_printer = [sys.executable, "-c", "import json, os; print(json.dumps([os.environ.get('LESLIE_THREAD'), "
                   "os.environ.get('LESLIE_ROOT'), os.environ.get('LESLIE_INJECTED_BY')]))"]
    result = run_leslie("acp", "--thread", thread_id, "--", *env_printer, cwd=repo_root, input="")
    assert result.code == 0, result.stderr
    assert json.loads(result.stdout) == [thread_id, str(repo_root), "acp"]
    threads.switch(repo, thread_id)  # not named: sessions follow `leslie switch`, and so does the agent
    result = run_leslie("acp", "--", *env_printer, cwd=repo_root, input="")
    assert json.loads(result.stdout) == [None, str(repo_root), "acp"]


def test_without_a_named_thread_each_session_follows_leslie_switch(repo: Repository, repo_root: Path,
                                                                   tmp_path: Path, thread_id: str,
                                                                   raw_clients: Any) -> None:
    other = threads.spawn(repo, "Another line of work", thread_id="thread-other").thread.id
    threads.switch(repo, thread_id)
    client = raw_clients(repo_root, tmp_path)
    first = client.start_session()
    client.prompt(first, "on the first thread")
    threads.switch(repo, other)  # the user switches while the editor keeps running
    second = client.request("session/new", {"cwd": str(repo_root), "mcpServers": []})[0]["result"]["sessionId"]
    client.prompt(second, "a new session")
    client.prompt(first, "the first session again")
    prompts = client.received_prompts()
    assert is_context(prompts[0][0], thread_id)
    assert is_context(prompts[1][0], other)
    assert prompts[2] == [{"type": "text", "text": "the first session again"}]  # still bound to its thread
    assert client.close() == 0


# -- the reference SDK on both sides ----------------------------------------------------------------------------
class RecordingClient:
    """An SDK client that keeps every session update it gets."""

    def __init__(self) -> None:
        self.updates: list[Any] = []

    async def session_update(self, session_id: str, update: Any, **_kwargs: Any) -> None:
        self.updates.append(update)

    async def request_permission(self, *_args: Any, **_kwargs: Any) -> Any:
        raise NotImplementedError

    def echoed_prompts(self) -> list[list[dict[str, Any]]]:
        return [json.loads(update.content.text) for update in self.updates
                if getattr(update, "session_update", None) == "agent_message_chunk"]


async def sdk_session(repo_root: Path, tmp_path: Path, thread: str, script: Any) -> tuple[Any, int, str]:
    """Run `script(conn, session_id, client)` against `leslie acp -- python sdk_agent.py` with the SDK client."""
    from acp import spawn_agent_process
    from acp.schema import ClientCapabilities

    client = RecordingClient()
    stderr_path = tmp_path / "sdk-stderr.txt"
    env = dict(os.environ, ACP_TEST_RECORD=str(tmp_path / "sdk-record.jsonl"))
    with stderr_path.open("wb") as stderr:
        async with spawn_agent_process(client, LESLIE_EXE, "acp", "--thread", thread, "--", sys.executable,
                                       SDK_AGENT, env=env, cwd=repo_root,
                                       transport_kwargs={"stderr": stderr, "shutdown_timeout": 10}) as (conn, proc):
            await asyncio.wait_for(conn.initialize(protocol_version=1, client_capabilities=ClientCapabilities()),
                                   TIMEOUT)
            session = await asyncio.wait_for(conn.new_session(cwd=str(repo_root), mcp_servers=[]), TIMEOUT)
            result = await asyncio.wait_for(script(conn, session.session_id, client), TIMEOUT)
        code = await asyncio.wait_for(proc.wait(), TIMEOUT)
    return result, code, stderr_path.read_text(errors="replace")


def test_sdk_client_and_sdk_agent_through_the_proxy(repo_root: Path, tmp_path: Path, thread_id: str) -> None:
    from acp import text_block

    async def script(conn: Any, session_id: str, client: RecordingClient) -> Any:
        for text in ("hello", "second", "usage 190000 200000", "after a full window"):
            response = await conn.prompt(session_id=session_id, prompt=[text_block(text)])
            assert response.stop_reason == "end_turn"
        echo = await conn.ext_method("leslie.test/echo", {"n": 1, "_meta": {"k": "v"}})
        await conn.ext_notification("leslie.test/note", {"a": [1, 2]})
        await conn.prompt(session_id=session_id, prompt=[text_block("last")], trace="t-1")
        return session_id, echo, client.echoed_prompts()

    (session_id, echo, prompts), code, stderr = asyncio.run(sdk_session(repo_root, tmp_path, thread_id, script))
    assert code == 0, stderr
    assert [is_context(p[0], thread_id) for p in prompts] == [True, False, False, True, False]
    assert [p[-1]["text"] for p in prompts] == ["hello", "second", "usage 190000 200000", "after a full window",
                                                "last"]
    assert echo == {"method": "leslie.test/echo", "params": {"n": 1, "_meta": {"k": "v"}}}
    record = [json.loads(line) for line in (tmp_path / "sdk-record.jsonl").read_text().splitlines()]
    assert {"notification": "leslie.test/note", "params": {"a": [1, 2]}} in record
    assert all(entry["session"] == session_id for entry in record if "prompt" in entry)

    # The ACP session is a leslie agent session: its rounds, the agent's replies, the injections and why.
    states = [state for _, state in sessions.list_states(str(repo_root)) if state["agent"] == "acp"]
    assert [(state["session_id"], state["thread"]) for state in states] == [(session_id, thread_id)]
    assert states[0]["rounds"] == 5 and states[0]["assistant_messages"] == 5
    log = session_log(repo_root, session_id)
    assert [entry["kind"] for entry in log] == ["input", "assistant"] * 5
    assert [entry["reason"] for entry in log if entry["kind"] == "input"] == ["start", None, None, "predicted",
                                                                              None]
    assert log[0]["context"] == prompts[0][0]["text"]  # what the agent was told, stored verbatim
    assert all(entry["size"] > 0 for entry in log if entry["kind"] == "assistant")

    stats = run_leslie("stats", "--thread", thread_id, "--json", cwd=repo_root)
    assert stats.code == 0, stats.stderr
    assert session_id in stats.stdout


# -- slash commands, /clear, replays, Gemini's usage (found with the real adapters) ---------------------------
def test_a_slash_command_is_never_prefixed_and_the_pending_block_waits(repo_root: Path, tmp_path: Path,
                                                                       thread_id: str, raw_clients: Any) -> None:
    client = raw_clients(repo_root, tmp_path, thread=thread_id)
    session = client.start_session()
    client.prompt(session, "/status")  # the first prompt is a command: the start block waits for chat
    client.prompt(session, "hello")
    client.prompt(session, "usage 190000 200000")  # 95 %: a predicted re-injection is due...
    client.prompt(session, "/compact keep the plan")  # ...but it must not turn the user's /compact into chat
    client.prompt(session, "$skill run")
    client.prompt(session, "after")
    prompts = client.received_prompts()
    assert prompts[0] == [{"type": "text", "text": "/status"}]
    assert prompts[3] == [{"type": "text", "text": "/compact keep the plan"}]
    assert prompts[4] == [{"type": "text", "text": "$skill run"}]
    assert [is_context(p[0], thread_id) for p in prompts] == [False, True, False, False, False, True]
    assert client.close() == 0
    assert reasons(repo_root, session) == ["start", None, "predicted"]


def test_a_path_at_the_start_of_a_prompt_is_chat_not_a_command(repo_root: Path, tmp_path: Path, thread_id: str,
                                                                raw_clients: Any) -> None:
    client = raw_clients(repo_root, tmp_path, thread=thread_id)
    session = client.start_session()
    client.prompt(session, "/src/app.py crashes on start")
    assert is_context(client.received_prompts()[0][0], thread_id)
    assert client.close() == 0


def test_clear_makes_the_next_prompt_start_afresh(repo_root: Path, tmp_path: Path, thread_id: str,
                                                  raw_clients: Any) -> None:
    client = raw_clients(repo_root, tmp_path, thread=thread_id)
    session = client.start_session()
    client.prompt(session, "hello")
    client.prompt(session, "more")
    client.prompt(session, "/clear")
    client.prompt(session, "a new conversation")
    client.prompt(session, "and on")
    prompts = client.received_prompts()
    assert [is_context(p[0], thread_id) for p in prompts] == [True, False, False, True, False]
    assert prompts[2] == [{"type": "text", "text": "/clear"}]
    assert client.close() == 0
    assert reasons(repo_root, session) == ["start", None, "start", None]


def test_a_replayed_prompt_shows_the_user_s_words_without_the_block(repo_root: Path, tmp_path: Path,
                                                                     thread_id: str, raw_clients: Any) -> None:
    client = raw_clients(repo_root, tmp_path, thread=thread_id)
    session = client.start_session()
    client.prompt(session, "hello")
    block = client.received_prompts()[0][0]["text"]

    def chunk(text: str) -> bytes:
        return json.dumps({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": session, "update": {
            "sessionUpdate": "user_message_chunk", "content": {"type": "text", "text": text}}}}).encode() + b"\n"

    own_words = chunk("hello")
    agent_reply = json.dumps({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": session,
                              "update": {"sessionUpdate": "agent_message_chunk",
                                         "content": {"type": "text", "text": block}}}}).encode() + b"\n"
    before = client.emit(chunk(block) + own_words + chunk(block + "\n\nhello again") + agent_reply)
    assert before[0] == own_words  # the block alone is gone, the user's own chunk passes byte for byte
    merged = json.loads(before[1])["params"]["update"]["content"]["text"]
    assert merged == "hello again"
    assert before[2] == agent_reply  # only user messages are cleaned: the agent quoting a block is its business
    assert len(before) == 3
    assert client.close() == 0


def test_gemini_usage_in_the_prompt_result_detects_compression(repo_root: Path, tmp_path: Path, thread_id: str,
                                                               raw_clients: Any) -> None:
    client = raw_clients(repo_root, tmp_path, thread=thread_id)
    session = client.start_session()

    def gemini_prompt(text: str) -> dict[str, Any]:
        response, _ = client.request("session/prompt",
                                     {"sessionId": session, "prompt": [{"type": "text", "text": text}]})
        return response

    result = gemini_prompt("gemini 100000 0")
    assert result["result"]["_meta"]["quota"]["token_count"]["input_tokens"] == 100000  # relayed untouched
    gemini_prompt("gemini 480000 3")  # four model calls of ~120k: no compression, no drop
    client.prompt(session, "quiet")
    gemini_prompt("gemini 30000 0")  # the history was compressed
    client.prompt(session, "after compression")
    prompts = client.received_prompts()
    assert [is_context(p[0], thread_id) for p in prompts] == [True, False, False, False, True]
    assert client.close() == 0
    assert reasons(repo_root, session) == ["start", None, None, None, "compacted"]


def test_gemini_near_its_compression_point_reinjects(repo_root: Path, tmp_path: Path, thread_id: str,
                                                    raw_clients: Any) -> None:
    client = raw_clients(repo_root, tmp_path, thread=thread_id)
    session = client.start_session()
    client.request("session/prompt", {"sessionId": session, "prompt": [{"type": "text", "text": "gemini 480000 0"}]})
    client.prompt(session, "next")
    assert [is_context(p[0], thread_id) for p in client.received_prompts()] == [True, True]
    assert client.close() == 0
    assert reasons(repo_root, session) == ["start", "predicted"]


def test_codex_keeps_a_recent_block_through_compaction(repo_root: Path, tmp_path: Path, thread_id: str,
                                                       raw_clients: Any) -> None:
    # codex-acp: Codex keeps its last 20,000 tokens of user messages through a compaction, and behind the proxy
    # the block is part of one: re-injecting after /compact would give the agent the block twice.
    client = raw_clients(repo_root, tmp_path, thread=thread_id,
                         env={"RAW_AGENT_NAME": "@agentclientprotocol/codex-acp"})
    session = client.start_session()
    client.prompt(session, "hello")
    client.prompt(session, "usage 60000 258400")
    client.prompt(session, "usage 9000 258400")  # compacted: the first prompt, block and all, was kept
    client.prompt(session, "after")
    client.prompt(session, "x" * 80_000)  # 20,000 tokens of user messages since the block
    client.prompt(session, "usage 60000 258400")
    client.prompt(session, "usage 9000 258400")  # compacted again: the block is too far back to be kept
    client.prompt(session, "after the second")
    assert [is_context(p[0], thread_id) for p in client.received_prompts()] == [
        True, False, False, False, False, False, False, True]
    assert client.close() == 0


def test_other_agents_get_the_block_again_after_compaction(repo_root: Path, tmp_path: Path, thread_id: str,
                                                           raw_clients: Any) -> None:
    client = raw_clients(repo_root, tmp_path, thread=thread_id, env={"RAW_AGENT_NAME": "claude-agent-acp"})
    session = client.start_session()
    client.prompt(session, "hello")
    client.prompt(session, "usage 60000 200000")
    client.prompt(session, "usage 9000 200000")
    client.prompt(session, "after")
    assert [is_context(p[0], thread_id) for p in client.received_prompts()] == [True, False, False, True]
    assert client.close() == 0
