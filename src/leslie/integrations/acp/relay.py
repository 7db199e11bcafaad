"""The relay: the agent process, the two threads that copy its pipes to the client's and back, and its exit.

Two threads do blocking reads on the raw pipes (no re-serialisation), a policy worker runs the policy calls one
at a time (`policy.PolicyWorker`), and the main thread waits for the agent, forwarding SIGINT, SIGTERM and
SIGHUP to it. Every line goes through in order and, when leslie does not change it, as its original bytes;
with no policy (and none to wait for) the client's reads go to the agent as they come, unsplit. Nothing here
may break the relay: a policy failure is a warning and the line goes through, and so does a line whose reading
failed (docs/security.md, "The ACP proxy").
"""

from __future__ import annotations

import contextlib
import signal
import subprocess
import threading
from collections.abc import Callable, Iterator, Sequence
from types import FrameType
from typing import IO, Any

from leslie.errors import LeslieError
from leslie.integrations.acp.framing import LineSplitter, reads, write_all
from leslie.integrations.acp.messages import (
    CLEAR_COMMANDS,
    GEMINI_COMPRESSION_POINT,
    SESSION_OPENERS,
    SLASH_COMMAND,
    gemini_context_tokens,
    id_key,
    is_count,
    kept_user_tokens,
    line_ending,
    parse,
    prompt_text,
    serialise,
    without_injected_block,
)
from leslie.integrations.acp.policy import ContextPolicy, PolicyWorker
from leslie.integrations.acp.stderr import describe, warn

PROMPT_DECISION_TIMEOUT = 20.0  # seconds a prompt waits for the policy before it is forwarded unchanged
DRAIN_TIMEOUT = 5.0  # seconds to forward what the agent wrote before it exited
FORWARDED_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class AgentStartError(LeslieError):
    """The agent command could not be started (exit codes as a shell gives them: 127 not found, 126 other)."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code


class AcpRelay:
    """One run of the proxy: the agent process, the two relay threads, the policy worker."""

    def __init__(self, command: Sequence[str], policy: ContextPolicy | None, *,
                 late_policy: Callable[[str], ContextPolicy | None] | None = None,
                 env: dict[str, str] | None = None, client_in: int = 0, client_out: int = 1) -> None:
        """`late_policy`, when there is no `policy`, is asked once with the cwd of the first session."""
        if not command:
            raise ValueError("the agent command is empty")
        self.command = list(command)
        self.policy = policy
        self._late_policy = late_policy if policy is None else None
        self.env = env
        self.client_in = client_in
        self.client_out = client_out
        self.client_closed = threading.Event()  # the client closed our stdin
        self._worker: PolicyWorker | None = None
        self._awaiting: dict[str, str] = {}  # prompt request id → its sessionId, until the agent answers
        self._reply_bytes: dict[str, int] = {}  # sessionId → bytes of agent text since its last reply ended
        self._tool_calls: dict[str, int] = {}  # sessionId → tool calls the agent started in the current prompt
        self._commands: set[str] = set()  # request ids of prompts forwarded as slash commands
        self._initialize_id: str | None = None  # the client's `initialize` request, whose answer names the agent
        self._kept_user_tokens = 0  # what the agent keeps of its user messages through a compaction
        self._lock = threading.Lock()

    # -- lifecycle ---------------------------------------------------------------------------------------------
    def run(self) -> int:
        """Start the agent, relay until it exits, and return its exit code (128+N when killed by signal N)."""
        try:
            proc = subprocess.Popen(self.command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=None,
                                    bufsize=0, env=self.env)
        except FileNotFoundError:
            raise AgentStartError(f"cannot start the agent: {self.command[0]}: command not found", 127) from None
        except OSError as exc:
            raise AgentStartError(f"cannot start the agent: {self.command[0]}: {exc.strerror or exc}",
                                  126) from None
        assert proc.stdin is not None and proc.stdout is not None
        if self.policy is not None:
            self._worker = PolicyWorker()
        to_agent = threading.Thread(target=self._client_to_agent, args=(proc.stdin,),
                                    name="leslie-acp-to-agent", daemon=True)
        to_client = threading.Thread(target=self._agent_to_client, args=(proc.stdout.fileno(),),
                                     name="leslie-acp-to-client", daemon=True)
        with _forwarding_signals(proc):
            to_agent.start()
            to_client.start()
            returncode = proc.wait()
        # What the agent wrote before it exited still reaches the client (bounded: a grandchild may hold the pipe).
        to_client.join(DRAIN_TIMEOUT)
        if self._worker is not None:
            self._worker.close(DRAIN_TIMEOUT)
        return _report_exit(returncode, client_closed=self.client_closed.is_set())

    # -- client → agent ----------------------------------------------------------------------------------------
    def _client_to_agent(self, agent_stdin: IO[bytes]) -> None:
        agent_in = agent_stdin.fileno()
        splitter = (LineSplitter("client", "a prompt that long gets no thread context")
                    if self._worker is not None or self._late_policy is not None else None)
        agent_gone = False
        for data in reads(self.client_in):
            if splitter is None:  # nothing to inject: forward each read as it comes
                agent_gone = agent_gone or not self._send(agent_in, data)
                continue
            pieces = splitter.feed(data)
            if pieces and not agent_gone:
                agent_gone = not self._send(agent_in, b"".join(
                    [self._read_safely("client", self._client_line, piece) if whole else piece
                     for piece, whole in pieces]))
        rest = splitter.rest() if splitter is not None else b""
        if rest and not agent_gone:
            self._send(agent_in, self._read_safely("client", self._client_line, rest))
        self.client_closed.set()
        with contextlib.suppress(OSError):
            agent_stdin.close()  # the agent sees end of file, as if the client had been connected to it directly

    @staticmethod
    def _read_safely(side: str, read: Callable[[bytes], bytes], line: bytes) -> bytes:
        """`read(line)`, the bytes to forward; when reading fails, one line on stderr and `line` as it came."""
        try:
            return read(line)
        except Exception as exc:  # a message no one foresaw (or a bug) never stops the relay
            reason = describe(exc)
            reason = reason if len(reason) <= 200 else reason[:200] + "..."
            warn(f"warning: reading a message from the {side} failed ({reason}); it is forwarded unchanged")
            return line

    @staticmethod
    def _send(fd: int, data: bytes) -> bool:
        try:
            write_all(fd, data)
        except OSError:  # the agent is gone: keep reading the client so it never blocks; the main thread ends
            return False
        return True

    def _client_line(self, line: bytes) -> bytes:
        """The line to send to the agent: the same bytes, or a prompt with the context block in front."""
        if self._late_policy is not None and b"cwd" in line:
            self._policy_from_session_cwd(line)
        if self._initialize_id is None and b"initialize" in line:
            opened = parse(line)
            if isinstance(opened, dict) and opened.get("method") == "initialize" and "id" in opened:
                self._initialize_id = id_key(opened["id"])
        if self._worker is None or b"prompt" not in line:
            return line
        message = parse(line)
        if not isinstance(message, dict) or message.get("method") != "session/prompt" or "id" not in message:
            return line
        params = message.get("params")
        if not isinstance(params, dict):
            return line
        session_id, prompt = params.get("sessionId"), params.get("prompt")
        if not isinstance(session_id, str) or not isinstance(prompt, list):
            return line
        text = prompt_text(prompt)
        policy = self.policy
        assert policy is not None
        command = SLASH_COMMAND.match(text)
        with self._lock:
            self._awaiting[id_key(message["id"])] = session_id
            self._tool_calls[session_id] = 0
            if command is not None:
                self._commands.add(id_key(message["id"]))
        if command is not None:
            # Forwarded as is: a pending injection waits for the next ordinary prompt (no round is recorded).
            if command.group(0).split()[0] in CLEAR_COMMANDS:
                self._worker.submit("clear", lambda: policy.conversation_cleared(session_id))
            return line
        context = self._worker.ask(
            "injection", lambda: policy.context_for_prompt(session_id, text, len(text.encode("utf-8", "replace"))),
            PROMPT_DECISION_TIMEOUT)
        if not context:
            return line
        params["prompt"] = [{"type": "text", "text": context}, *prompt]
        return serialise(message) + line_ending(line)

    def _policy_from_session_cwd(self, line: bytes) -> None:
        """No repository around the proxy: look from the folder of the client's first session instead."""
        message = parse(line)
        if not isinstance(message, dict) or message.get("method") not in SESSION_OPENERS:
            return
        params = message.get("params")
        cwd = params.get("cwd") if isinstance(params, dict) else None
        if not isinstance(cwd, str) or self._late_policy is None:
            return
        late_policy, self._late_policy = self._late_policy, None
        try:
            policy = late_policy(cwd)
        except Exception as exc:
            warn(f"warning: {describe(exc)}; relaying without thread context")
            return
        if policy is not None:
            self.policy = policy
            self._worker = PolicyWorker()

    # -- agent → client ----------------------------------------------------------------------------------------
    def _agent_to_client(self, agent_out: int) -> None:
        splitter = LineSplitter("agent") if self._worker is not None else None
        client_gone = False
        for data in reads(agent_out):
            if splitter is None and self._worker is not None:  # the policy came with the first session
                splitter = LineSplitter("agent")
            out = data
            if splitter is not None:  # whole lines only, so a replayed prompt can lose the block leslie added
                out = b"".join([self._read_safely("agent", self._agent_line, piece) if whole else piece
                                for piece, whole in splitter.feed(data)])
            if out and not client_gone:
                client_gone = not self._send(self.client_out, out)
        rest = splitter.rest() if splitter is not None else b""
        if rest and not client_gone:
            self._send(self.client_out, rest)

    def _agent_line(self, line: bytes) -> bytes:
        """The line to forward to the client, once what it reports is queued for the policy (see `PolicyWorker`)."""
        self._note_agent_line(line)
        return without_injected_block(line)

    def _note_agent_line(self, line: bytes) -> None:
        """Report a usage update, count the agent's reply text, and notice the end of a prompt turn."""
        with self._lock:
            awaiting = bool(self._awaiting)
        if (b"usage_update" not in line and b"agent_message_chunk" not in line and b'"tool_call"' not in line
                and b"agentInfo" not in line and not (awaiting and (b'"result"' in line or b'"error"' in line))):
            return
        message = parse(line)
        if not isinstance(message, dict):
            return
        if self._initialize_id is not None and "id" in message and id_key(message["id"]) == self._initialize_id:
            self._kept_user_tokens = kept_user_tokens(message.get("result"))
            return
        if message.get("method") == "session/update":
            self._session_update(message.get("params"))
        elif "method" not in message and "id" in message:
            self._response(message)

    def _session_update(self, params: Any) -> None:
        if not isinstance(params, dict) or not isinstance(params.get("sessionId"), str):
            return
        session_id: str = params["sessionId"]
        update = params.get("update")
        if not isinstance(update, dict):
            return
        kind = update.get("sessionUpdate")
        if kind == "usage_update":
            used, size = update.get("used"), update.get("size")
            if is_count(used) and is_count(size) and self._worker is not None and self.policy is not None:
                policy = self.policy
                kept = self._kept_user_tokens
                self._worker.submit("usage report", lambda: policy.usage(session_id, used, size, kept))
        elif kind == "tool_call":
            with self._lock:
                if session_id in self._tool_calls:
                    self._tool_calls[session_id] += 1
        elif kind == "agent_message_chunk":
            content = update.get("content")
            if isinstance(content, dict) and content.get("type") == "text" and isinstance(content.get("text"), str):
                with self._lock:
                    if session_id in self._awaiting.values():  # a reply, not the replay of a loaded session
                        self._reply_bytes[session_id] = (self._reply_bytes.get(session_id, 0)
                                                         + len(content["text"].encode("utf-8", "replace")))

    def _response(self, message: dict[str, Any]) -> None:
        key = id_key(message["id"])
        with self._lock:
            session_id = self._awaiting.pop(key, None)
            if session_id is None:
                return
            size = self._reply_bytes.pop(session_id, 0)
            tool_calls = self._tool_calls.pop(session_id, 0)
            was_command = key in self._commands
            self._commands.discard(key)
        if self._worker is None or self.policy is None:
            return
        policy = self.policy
        if size or "result" in message:
            self._worker.submit("reply log", lambda: policy.assistant_message(session_id, size))
        used = None if was_command else gemini_context_tokens(message.get("result"), tool_calls)
        if used is not None:
            self._worker.submit("usage report", lambda: policy.usage(session_id, used, GEMINI_COMPRESSION_POINT))


@contextlib.contextmanager
def _forwarding_signals(proc: subprocess.Popen[bytes]) -> Iterator[None]:
    """SIGINT, SIGTERM and SIGHUP sent to the proxy go to the agent, which decides how to end."""
    if threading.current_thread() is not threading.main_thread():
        yield  # signal handlers can only be set from the main thread; an embedding program keeps its own
        return

    def forward(signum: int, _frame: FrameType | None) -> None:
        with contextlib.suppress(OSError):
            proc.send_signal(signum)

    previous = {sig: signal.signal(sig, forward) for sig in FORWARDED_SIGNALS}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _report_exit(returncode: int, *, client_closed: bool) -> int:
    """The proxy's exit code from the agent's, with one line on stderr when the agent failed."""
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        warn(f"the agent was killed by {name}")
        return 128 - returncode
    if returncode != 0:
        when = "" if client_closed else " while the client was still connected"
        warn(f"the agent exited with code {returncode}{when}")
    return returncode
