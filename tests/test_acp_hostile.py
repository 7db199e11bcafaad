"""`leslie acp` against hostile input from either side: deep, huge, invalid or odd JSON never stops the relay.

The agent here is a tiny script written into the test's folder: it records the length and SHA-256 of every
line it receives (it never holds a long one whole), answers the requests it can read, and on `hostile/emit`
writes the bytes of a file the test prepared. The client is this test, through the proxy's real stdio.
Lines leslie does not read must pass byte for byte; the next ordinary message must still arrive (and the next
prompt still get its block); nothing may hang (every wait has a timeout) and no traceback may reach stderr.
"""

from __future__ import annotations

import hashlib
import json
import os
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import LESLIE_EXE
from leslie.integrations import acp
from leslie.ops import threads
from leslie.store.repository import Repository

TIMEOUT = 30.0
DEEP = 100_000
MIB = 1 << 20

AGENT = r'''
import hashlib, json, os, sys

SMALL = 32 << 20  # lines up to this long are held and read as requests; longer ones are only measured
out = sys.stdout.buffer
log = open(os.environ["HOSTILE_LOG"], "a", buffering=1)


def answer(request_id, result):
    out.write(json.dumps({"jsonrpc": "2.0", "id": request_id, "result": result}).encode() + b"\n")
    out.flush()


def handle(line):
    try:
        message = json.loads(line)
    except Exception:  # too deep, not UTF-8, not JSON: this agent is not under test, the proxy is
        return
    if not isinstance(message, dict) or "id" not in message or not isinstance(message.get("method"), str):
        return
    method, params, request_id = message["method"], message.get("params"), message["id"]
    if method == "hostile/emit":
        with open(params["file"], "rb") as emitted:
            while chunk := emitted.read(1 << 20):
                out.write(chunk)
        out.flush()
        answer(request_id, {"emitted": True})
    elif method == "session/new":
        answer(request_id, {"sessionId": "hostile-session"})
    elif method == "session/prompt":
        first = params["prompt"][0].get("text", "") if params["prompt"] else ""
        answer(request_id, {"stopReason": "end_turn", "_meta": {"first": first[:40]}})
    else:
        answer(request_id, {"method": method})


digest, size, held = hashlib.sha256(), 0, bytearray()
while data := os.read(0, 1 << 16):
    start = 0
    while start < len(data):
        end = data.find(b"\n", start)
        stop = len(data) if end < 0 else end + 1
        piece = data[start:stop]
        start = stop
        digest.update(piece)
        size += len(piece)
        if size <= SMALL:
            held += piece
        if end >= 0:
            log.write(f"{size} {digest.hexdigest()}\n")
            if size <= SMALL:
                handle(bytes(held))
            digest, size, held = hashlib.sha256(), 0, bytearray()
if size:
    log.write(f"{size} {digest.hexdigest()}\n")
log.close()
sys.exit(int(os.environ.get("HOSTILE_EXIT", "0")))
'''


def fingerprints(lines: list[bytes]) -> list[str]:
    """What the agent records of each line it receives: its length and SHA-256."""
    return [f"{len(line)} {hashlib.sha256(line).hexdigest()}" for line in lines]


class Proxy:
    """`leslie acp --thread THREAD -- python agent.py`, with the client's side driven from here."""

    def __init__(self, cwd: Path, tmp: Path, thread: str, env: dict[str, str] | None = None) -> None:
        self.tmp = tmp
        agent = tmp / "hostile_agent.py"
        agent.write_text(AGENT)
        self.log = tmp / "agent-received.log"
        full_env = dict(os.environ, HOSTILE_LOG=str(self.log), **(env or {}))
        self.proc = subprocess.Popen([LESLIE_EXE, "acp", "--thread", thread, "--", sys.executable, str(agent)],
                                     cwd=cwd, env=full_env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE)
        self.lines: queue.Queue[bytes | None] = queue.Queue()
        self.stderr = bytearray()
        threading.Thread(target=self._read_stdout, daemon=True).start()
        threading.Thread(target=self._read_stderr, daemon=True).start()
        self.next_id = 0
        self.emitted = 0

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
        view = memoryview(data)
        for start in range(0, len(view), MIB):  # in pieces, as a client writes a long message
            self.proc.stdin.write(view[start:start + MIB])
        self.proc.stdin.flush()

    def request(self, method: str, params: Any) -> tuple[dict[str, Any], list[bytes]]:
        """Send a request; its answer and the lines that came before it (each wait bounded)."""
        self.next_id += 1
        request_id = f"req-{self.next_id}"
        self.send(json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}).encode()
                  + b"\n")
        before: list[bytes] = []
        while True:
            try:
                line = self.lines.get(timeout=TIMEOUT)
            except queue.Empty:
                pytest.fail(f"no answer to {method} within {TIMEOUT:g} s; stderr: {self.stderr_text()[-2000:]}")
            assert line is not None, f"the proxy closed its stdout; stderr: {self.stderr_text()[-2000:]}"
            try:
                message = json.loads(line)
            except (ValueError, RecursionError):
                message = None
            if isinstance(message, dict) and message.get("id") == request_id and "method" not in message:
                return message, before
            before.append(line)

    def start_session(self) -> str:
        self.request("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
        response, _ = self.request("session/new", {"cwd": str(self.tmp), "mcpServers": []})
        return str(response["result"]["sessionId"])

    def prompt(self, session: str, text: str) -> str:
        """Send a prompt; the start of the first text block the agent got (the block, when one was injected)."""
        response, _ = self.request("session/prompt", {"sessionId": session,
                                                      "prompt": [{"type": "text", "text": text}]})
        return str(response["result"]["_meta"]["first"])

    def emit(self, data: bytes) -> list[bytes]:
        """Have the agent write `data` verbatim; the lines the client got before the agent's answer."""
        self.emitted += 1
        path = self.tmp / f"emit-{self.emitted}.bin"
        path.write_bytes(data)
        _, before = self.request("hostile/emit", {"file": str(path)})
        return before

    def received(self) -> list[str]:
        """Length and SHA-256 of every line the agent received so far."""
        return self.log.read_text().splitlines() if self.log.exists() else []

    def peak_memory(self) -> int:
        """The proxy's peak resident memory so far, in bytes (VmHWM)."""
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
        raise AssertionError("no VmHWM")

    def close(self) -> int:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        code = self.proc.wait(TIMEOUT)
        time.sleep(0.05)  # let the reader threads take the last bytes
        return code

    def stderr_text(self) -> str:
        return self.stderr.decode(errors="replace")

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture
def proxy(repo: Repository, repo_root: Path, tmp_path: Path) -> Iterator[Callable[..., Proxy]]:
    """Start proxies injecting for a live thread; each is killed at the end, whatever happened."""
    thread = threads.spawn(repo, "Survive hostile input", thread_id="thread-hostile").thread.id
    started: list[Proxy] = []

    def start(env: dict[str, str] | None = None) -> Proxy:
        started.append(Proxy(repo_root, tmp_path, thread, env))
        return started[-1]

    yield start
    for each in started:
        each.kill()


def deep_arrays(inside: bytes) -> bytes:
    return b"[" * DEEP + inside + b"]" * DEEP


def deep_objects() -> bytes:
    return b'{"a":' * DEEP + b"1" + b"}" * DEEP


def update(body: bytes) -> bytes:
    return b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"hostile-session","update":' + body


# Each holds the words that make the proxy read a line (`usage_update`, `user_message_chunk` with the block...).
FROM_AGENT = {
    "deep-arrays": [deep_arrays(b'"usage_update agent_message_chunk"') + b"\n"],
    "deep-objects": [update(b'{"sessionUpdate":"usage_update","used":1,"size":2,"x":' + deep_objects()
                            + b"}}}\n")],
    "deep-replay": [update(b'{"sessionUpdate":"user_message_chunk","content":{"type":"text","text":'
                           b'"<thread_context thread=\\"x\\">"},"x":' + deep_objects() + b"}}}\n")],
    "invalid-utf8": [update(b'{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":'
                            b'"\xff\xfe\xc3( usage_update"}}}}\n'), b"\xc3\x28\xa0\xa1 usage_update\r\n"],
    "not-objects": [b'[1,"usage_update"]\n', b'"agent_message_chunk"\n', b"42\n", b"null\n", b"\n"],
    "brackets": [update(b'{"sessionUpdate":"usage_update","used":1,"size":2,"x":[' + b"{}," * 1_200_000
                        + b"{}]}}}\n")],
    "huge": [update(b'{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"'
                    + b"x" * 20_000_000 + b'"}}}}\n')],
}


@pytest.mark.parametrize("kind", list(FROM_AGENT))
def test_hostile_lines_from_the_agent_pass_byte_for_byte_and_the_relay_goes_on(
        proxy: Callable[..., Proxy], kind: str) -> None:
    client = proxy()
    session = client.start_session()
    assert client.emit(b"".join(FROM_AGENT[kind])) == FROM_AGENT[kind]
    assert client.prompt(session, "after them").startswith("<thread_context")  # the first read prompt
    assert client.prompt(session, "and again") == "and again"  # the policy is still in step
    assert client.close() == 0
    stderr = client.stderr_text()
    assert "Traceback" not in stderr
    warnings = [line for line in stderr.splitlines() if line.startswith("leslie acp:")]
    assert warnings == (["leslie acp: warning: a line from the agent is over 16 MiB: it is forwarded unread"]
                        if kind == "huge" else [])


def prompt_line(request_id: str, text: bytes, extra: bytes = b"") -> bytes:
    return (b'{"jsonrpc":"2.0","id":"' + request_id.encode() + b'","method":"session/prompt","params":'
            b'{"sessionId":"hostile-session","prompt":[{"type":"text","text":"' + text + b'"}]' + extra + b"}}\n")


FROM_CLIENT = {
    "deep-arrays": [deep_arrays(b'"initialize session/prompt cwd"') + b"\n"],
    "deep-objects": [prompt_line("deep", b"hello", b',"_meta":' + deep_objects())],
    "invalid-utf8": [prompt_line("utf8", b"\xff\xfe\xc3("), b"\xc3\x28 session/prompt initialize\n"],
    "not-objects": [b'["session/prompt"]\n', b'"initialize"\n', b"7\n", b"null\n"],
    "brackets": [prompt_line("brackets", b"hello", b',"_meta":[' + b"{}," * 1_200_000 + b"{}]")],
    "huge": [prompt_line("huge", b"x" * 20_000_000)],
}


@pytest.mark.parametrize("kind", list(FROM_CLIENT))
def test_hostile_lines_from_the_client_reach_the_agent_byte_for_byte_and_the_relay_goes_on(
        proxy: Callable[..., Proxy], kind: str) -> None:
    client = proxy()
    session = client.start_session()
    mark = len(client.received())
    client.send(b"".join(FROM_CLIENT[kind]))
    assert client.prompt(session, "after them").startswith("<thread_context")  # none of them was a round
    assert client.received()[mark:mark + len(FROM_CLIENT[kind])] == fingerprints(FROM_CLIENT[kind])
    assert client.prompt(session, "and again") == "and again"
    assert client.close() == 0
    stderr = client.stderr_text()
    assert "Traceback" not in stderr
    warnings = [line for line in stderr.splitlines() if line.startswith("leslie acp:")]
    assert warnings == (["leslie acp: warning: a line from the client is over 16 MiB: it is forwarded unread"
                         " (a prompt that long gets no thread context)"] if kind == "huge" else [])


@pytest.mark.parametrize("side", ["client", "agent"])
def test_a_line_of_128_mib_is_relayed_in_pieces_with_bounded_memory(proxy: Callable[..., Proxy],
                                                                     side: str) -> None:
    client = proxy()
    session = client.start_session()
    client.prompt(session, "first")  # rendering the block: its imports and memory are counted before
    before = client.peak_memory()
    line = b'{"jsonrpc":"2.0","method":"_big","params":{"blob":"' + b"a" * (128 * MIB) + b'"}}\n'
    if side == "client":
        mark = len(client.received())
        client.send(line)
        client.request("initialize", {"protocolVersion": 1})
        assert client.received()[mark] == fingerprints([line])[0]
    else:
        assert client.emit(line) == [line]
    grown = client.peak_memory() - before
    assert grown < 64 * MIB, f"the proxy grew by {grown >> 20} MiB relaying one line of 128 MiB"
    assert client.prompt(session, "after it") == "after it"
    assert client.close() == 0
    assert "Traceback" not in client.stderr_text()


def test_a_client_that_closes_inside_a_long_line_ends_the_proxy_with_the_agent_s_code(
        proxy: Callable[..., Proxy]) -> None:
    client = proxy(env={"HOSTILE_EXIT": "5"})
    client.start_session()
    mark = len(client.received())
    unfinished = b'{"jsonrpc":"2.0","id":"cut","method":"session/prompt","params":{"text":"' + b"y" * 20_000_000
    client.send(unfinished)  # no newline: the client goes away in the middle of the line
    assert client.close() == 5  # the agent saw end of file after every byte, and its code is the proxy's
    assert client.received()[mark:] == fingerprints([unfinished])
    stderr = client.stderr_text()
    assert "Traceback" not in stderr
    assert "the agent exited with code 5" in stderr


class NoContext:
    """A policy that never injects (the relay then reads every line, as with a real one)."""

    def context_for_prompt(self, session_id: str, message: str, message_size: int) -> str | None:
        return None

    def usage(self, session_id: str, used: int, size: int, keeps_user_tokens: int = 0) -> None:
        pass

    def assistant_message(self, session_id: str, size: int) -> None:
        pass

    def conversation_cleared(self, session_id: str) -> None:
        pass


class FailingRelay(acp.AcpRelay):
    """The real relay, made to fail on lines holding `boom`: a stand-in for a failure no input is known to cause
    (every hostile line above is handled before it could), to show what any such failure does."""

    def _client_line(self, line: bytes) -> bytes:
        if b"boom" in line:
            raise ValueError("boom\nacross lines")
        return super()._client_line(line)

    def _agent_line(self, line: bytes) -> bytes:
        if b"boom" in line:
            raise RecursionError("boom")
        return super()._agent_line(line)


def test_a_failure_reading_one_message_is_one_line_on_stderr_and_the_message_goes_through(
        capfd: pytest.CaptureFixture[str]) -> None:
    echo = [sys.executable, "-c", "import sys\nfor line in sys.stdin.buffer:\n"
            "    sys.stdout.buffer.write(line)\n    sys.stdout.buffer.flush()"]
    client_in, to_relay = os.pipe()
    from_relay, client_out = os.pipe()
    relay = FailingRelay(echo, NoContext(), client_in=client_in, client_out=client_out)
    codes: list[int] = []
    runner = threading.Thread(target=lambda: codes.append(relay.run()), daemon=True)
    runner.start()
    lines = [b'{"jsonrpc":"2.0","method":"_x","params":{"boom":1}}\n', b'{"jsonrpc":"2.0","method":"_y"}\n']
    os.write(to_relay, b"".join(lines))
    os.close(to_relay)  # the agent echoes both lines, then sees end of file and exits 0
    runner.join(TIMEOUT)
    assert codes == [0]
    os.close(client_out)
    echoed = b""
    while chunk := os.read(from_relay, 65536):
        echoed += chunk
    os.close(from_relay)
    os.close(client_in)
    assert echoed == b"".join(lines)  # through both failures, unchanged, in order, and the next line after them
    assert capfd.readouterr().err.splitlines() == [
        "leslie acp: warning: reading a message from the client failed (ValueError: boom across lines);"
        " it is forwarded unchanged",
        "leslie acp: warning: reading a message from the agent failed (RecursionError: boom); it is forwarded"
        " unchanged"]


@settings(max_examples=300)
@given(st.lists(st.binary(max_size=200).map(lambda data: data.replace(b"\n", b"")), min_size=1, max_size=12),
       st.lists(st.integers(min_value=1, max_value=90), min_size=1, max_size=20), st.booleans())
def test_the_splitter_gives_back_every_byte_in_order_and_whole_lines_only_up_to_its_limit(
        lines: list[bytes], cuts: list[int], ends_with_newline: bool) -> None:
    limit = 64
    stream = b"\n".join(lines) + (b"\n" if ends_with_newline else b"")
    splitter = acp._LineSplitter("agent", limit=limit)
    pieces: list[tuple[bytes, bool]] = []
    start = 0
    for size in cuts * (len(stream) // sum(cuts) + 1):  # the stream cut into reads of these sizes
        if start >= len(stream):
            break
        pieces += splitter.feed(stream[start:start + size])
        start += size
    rest = splitter.rest()
    assert b"".join(piece for piece, _ in pieces) + rest == stream
    whole = [piece for piece, read in pieces if read]
    expected = [line + b"\n" for line in (lines if ends_with_newline else lines[:-1]) if len(line) < limit]
    assert whole == expected  # each line that fits, exactly; none of a line over the limit
    assert rest == (b"" if ends_with_newline or len(lines[-1]) > limit else lines[-1])  # an unended line
