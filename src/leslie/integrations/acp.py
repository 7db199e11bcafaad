"""The ACP proxy (SPEC §7.5): relays the Agent Client Protocol between a client (an editor) and an agent process.

A protocol adapter only. ACP is newline-delimited JSON-RPC 2.0 over stdio; the relay forwards every line in
order and, when it does not change a line, forwards its original bytes. It changes exactly one thing: a
`session/prompt` request gets a text block with `<thread_context>` in front of its prompt when the injection
policy says so. It also reports what it sees to the policy: the agent's `usage_update` notifications (real
token usage) and the size of the agent's replies. What to inject and when is decided in `leslie.inject.injector`.

Two threads do blocking reads on the raw pipes (no re-serialisation), a third runs the policy calls one at a
time, and the main thread waits for the agent, forwarding SIGINT, SIGTERM and SIGHUP to it. Nothing here may
break the relay: a policy failure is a warning and the line goes through. Nor may what either side sends
(docs/security.md, "The ACP proxy"): a line that is not JSON, nests deeper than the parser goes or is not an
object is forwarded as it came; a line over `MAX_LINE` is forwarded in pieces as it comes, never held or read;
any other failure to read one message is one line on stderr, and the message goes through unchanged.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import re
import signal
import subprocess
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from types import FrameType
from typing import IO, TYPE_CHECKING, Any, Protocol, TypeGuard, TypeVar

from leslie.errors import LeslieError
from leslie.inject.blocks import RepoHandle

if TYPE_CHECKING:
    from leslie.store.repository import Repository

AGENT_NAME = "acp"  # every ACP session is a leslie agent session of this agent, keyed by its sessionId
READ_SIZE = 1 << 18  # one read from a pipe; lines may be any length, they are reassembled up to MAX_LINE
# The longest line the relay holds to read it; a longer one is forwarded in pieces as it comes, unread. A
# prompt's text past 4 MB is past every model's window (1M tokens); what makes a real one longer is images in
# base64 (5 MB each, Anthropic's limit), which leslie need not read, and such a prompt goes without its block.
# The bound on memory: about twice this per direction for the line itself (the pieces held, then joined),
# plus what reading a line below it takes (its decoded text, and MAX_BRACKETS).
MAX_LINE = 16 << 20
# The most `[` and `{` a line may hold to be read: a line of 16 MiB of `{}` would take 0.4 GB and 4 s to parse
# (measured); at this bound, about 70 MB and under a second. Real messages are text and base64, far below it;
# one above it (10 MB of minified JSON pasted into a prompt) is forwarded unread, and goes without its block.
MAX_BRACKETS = 1 << 20
PROMPT_DECISION_TIMEOUT = 20.0  # seconds a prompt waits for the policy before it is forwarded unchanged
DRAIN_TIMEOUT = 5.0  # seconds to forward what the agent wrote before it exited
FORWARDED_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
INJECTED_BY_VARIABLE = "LESLIE_INJECTED_BY"
SESSION_OPENERS = frozenset({"session/new", "session/load", "session/resume", "session/fork"})
# A prompt the agent runs as a command, not as chat: `/compact`, `/clear`, `/status` (Claude Code, Codex and
# Gemini CLI adapters), `$skill` (Gemini CLI). A block in front of it would turn it into chat: the adapters
# only see a command when the prompt's text *starts* with it.
SLASH_COMMAND = re.compile(r"\s*(?:/[A-Za-z][\w:.-]*|\$[A-Za-z][\w:.-]*)(?:\s|$)")
CLEAR_COMMANDS = frozenset({"/clear", "/new", "/reset"})
INJECTED_START = "<thread_context"
INJECTED_END = "</thread_context>"
# Gemini CLI reports usage only in the `session/prompt` result (`_meta.quota.token_count.input_tokens`, the sum
# of the prompt sizes of every model call of the turn), never the window; it compresses its history at half of
# its models' 1,048,576-token window, so that is the window the policy is given for it (docs/integrations.md).
GEMINI_COMPRESSION_POINT = 1_048_576 // 2
# Codex's compaction keeps the most recent user messages, up to 20,000 tokens of them (codex-rs
# `COMPACT_USER_MESSAGE_MAX_TOKENS`), and leslie's block is part of a user message behind the proxy: when that
# message is among them, the block survived (a little margin for the two token estimates).
CODEX_KEPT_USER_TOKENS = 18_000

T = TypeVar("T")


class AgentStartError(LeslieError):
    """The agent command could not be started (exit codes as a shell gives them: 127 not found, 126 other)."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code


class ContextPolicy(Protocol):
    """What the relay asks of the injection policy; `LesliePolicy` is the real one."""

    def context_for_prompt(self, session_id: str, message: str, message_size: int) -> str | None:
        """The `<thread_context>` text to put in front of this prompt, or None."""

    def usage(self, session_id: str, used: int, size: int, keeps_user_tokens: int = 0) -> None:
        """The agent reported its real context usage (tokens used of the window size); `keeps_user_tokens`:
        how many tokens of its most recent user messages the agent keeps through a compaction."""

    def assistant_message(self, session_id: str, size: int) -> None:
        """The agent finished a reply of `size` bytes of text."""

    def conversation_cleared(self, session_id: str) -> None:
        """The user cleared the conversation (`/clear`): the next ordinary prompt starts afresh."""


class LesliePolicy:
    """The injection policy of a leslie repository for the proxy's ACP sessions.

    With `follows_switch`, the thread was not named (no `--thread`, no `LESLIE_THREAD`): each session then
    takes its recorded binding, else the thread `leslie switch` records when the session first shows up
    (SPEC §7.4), so a long-running editor follows the user's switches in new sessions. Otherwise every
    session works on `thread_id`.
    """

    def __init__(self, repo: Repository, thread_id: str, *, follows_switch: bool = False) -> None:
        self.repo = repo
        self.handle = RepoHandle.of(repo)
        self.thread_id = thread_id
        self.follows_switch = follows_switch
        self._threads: dict[str, str] = {}
        self._warned: set[str] = set()

    def thread_of(self, session_id: str) -> str:
        """The thread of an ACP session, chosen once per session."""
        if not self.follows_switch:
            return self.thread_id
        if session_id not in self._threads:
            from leslie.inject import injector

            chosen = injector.session_thread(str(self.repo.root), agent=AGENT_NAME, session_id=session_id)
            self._threads[session_id] = chosen or self.thread_id
        return self._threads[session_id]

    def context_for_prompt(self, session_id: str, message: str, message_size: int) -> str | None:
        """Record a round of the session; the context block when the policy injects."""
        from leslie.inject import injector

        decision = injector.on_user_message(self.handle, agent=AGENT_NAME, session_id=session_id,
                                            thread_id=self.thread_of(session_id), message=message,
                                            message_size=message_size)
        for note in decision.warnings:
            if note not in self._warned:  # e.g. untrusted context commands: once per run, not at every prompt
                self._warned.add(note)
                warn(f"warning: {note}")
        return decision.text if decision.reason is not None else None

    def usage(self, session_id: str, used: int, size: int, keeps_user_tokens: int = 0) -> None:
        """Record real usage: a full window re-injects at the next prompt, a sharp drop means compaction."""
        from leslie.inject import injector

        injector.on_usage(self.handle, agent=AGENT_NAME, session_id=session_id,
                          thread_id=self.thread_of(session_id), used=used, size=size,
                          keeps_user_tokens=keeps_user_tokens)

    def assistant_message(self, session_id: str, size: int) -> None:
        """Log the agent's reply in the session's log."""
        from leslie.inject import injector

        injector.on_assistant_message(self.handle, agent=AGENT_NAME, session_id=session_id,
                                      thread_id=self.thread_of(session_id), size=size)

    def conversation_cleared(self, session_id: str) -> None:
        """Forget what the session was told: its next ordinary prompt gets the whole block (reason `start`)."""
        from leslie.inject import injector

        injector.on_conversation_cleared(self.handle, agent=AGENT_NAME, session_id=session_id,
                                         thread_id=self.thread_of(session_id))


def warn(text: str) -> None:
    """One line on stderr; a raw write, so no stream lock is held by a thread at interpreter exit."""
    line = text.replace("\r", " ").replace("\n", " ")
    with contextlib.suppress(OSError):
        os.write(2, f"leslie acp: {line}\n".encode(errors="replace"))


def _describe(exc: BaseException) -> str:
    return exc.message if isinstance(exc, LeslieError) else f"{type(exc).__name__}: {exc}"


class _PolicyWorker:
    """Runs the policy calls one at a time, in the order they were queued, off the relay threads.

    A usage report is queued before the line that carries it is forwarded to the client, and a prompt waits for
    its own call: so the call for a prompt always runs after those for every report the client saw before it.
    A failing call is a warning, never a broken relay.
    """

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="leslie-acp-policy", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while (job := self._jobs.get()) is not None:
            job()

    def submit(self, what: str, call: Callable[[], object]) -> None:
        """Queue `call`; a failure is reported on stderr."""

        def job() -> None:
            try:
                call()
            except Exception as exc:
                warn(f"warning: {what} failed: {_describe(exc)}")

        self._jobs.put(job)

    def ask(self, what: str, call: Callable[[], T], timeout: float) -> T | None:
        """Queue `call` and wait for its result; None (with a warning) when it fails or takes too long."""
        done = threading.Event()
        result: list[T] = []

        def job() -> None:
            try:
                result.append(call())
            except Exception as exc:
                warn(f"warning: {what} failed: {_describe(exc)}; the prompt is forwarded unchanged")
            finally:
                done.set()

        self._jobs.put(job)
        if not done.wait(timeout):
            warn(f"warning: {what} took over {timeout:g} s; the prompt is forwarded unchanged")
            return None
        return result[0] if result else None

    def close(self, timeout: float) -> None:
        """Let the queued calls finish (bounded), then stop."""
        self._jobs.put(None)
        self._thread.join(timeout)


class _LineSplitter:
    """Cuts a byte stream into lines (each keeping its `\\n`); a line may span any number of reads.

    A line longer than `limit` is never held whole: what was held of it, and the rest of it as it comes, is
    given back in pieces to forward unread (with one line on stderr naming `side`), so a relay thread holds at
    most `limit` bytes of a line, however long the line and whether or not it ever ends.
    """

    def __init__(self, side: str, consequence: str = "", limit: int = MAX_LINE) -> None:
        self._side = side
        self._consequence = f" ({consequence})" if consequence else ""
        self._limit = limit
        self._partial: list[bytes] = []
        self._held = 0
        self._overlong = False  # in the middle of a line over the limit

    def feed(self, data: bytes) -> list[tuple[bytes, bool]]:
        """What `data` completes, in order: `(line, True)`, a whole line to read, or `(piece, False)`, bytes of
        a line over the limit to forward unread."""
        pieces: list[tuple[bytes, bool]] = []
        start = 0
        while start < len(data):
            end = data.find(b"\n", start)
            stop = len(data) if end < 0 else end + 1
            piece = data[start:stop]
            start = stop
            if self._overlong:
                pieces.append((piece, False))
            elif self._held + len(piece) > self._limit:
                self._overlong = True
                warn(f"warning: a line from the {self._side} is over {self._limit >> 20} MiB: it is forwarded"
                     f" unread{self._consequence}")
                pieces.extend((held, False) for held in self._partial)
                pieces.append((piece, False))
                self._partial, self._held = [], 0
            elif end < 0:
                self._partial.append(piece)
                self._held += len(piece)
            else:
                if self._partial:
                    self._partial.append(piece)
                    piece = b"".join(self._partial)
                    self._partial, self._held = [], 0
                pieces.append((piece, True))
            if end >= 0:
                self._overlong = False
        return pieces

    def rest(self) -> bytes:
        """What followed the last newline (the stream ended without one), when it was held."""
        rest, self._partial, self._held = b"".join(self._partial), [], 0
        return rest


def _reads(fd: int) -> Iterator[bytes]:
    """Chunks read from `fd` until end of file (or until it fails, which ends the stream the same way)."""
    while True:
        try:
            data = os.read(fd, READ_SIZE)
        except OSError:
            return
        if not data:
            return
        yield data


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _parse(line: bytes) -> Any:
    """The JSON value of a line, or None when leslie does not read it (it is then forwarded as is): not JSON,
    not UTF-8, nested deeper than the parser goes, or with more brackets than `MAX_BRACKETS`."""
    if line.count(b"[") + line.count(b"{") > MAX_BRACKETS:
        return None
    try:
        return json.loads(line)
    except (ValueError, RecursionError):  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        return None


def _serialise(message: Any) -> bytes:
    try:
        return json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate escaped in the input: keep it escaped
        return json.dumps(message, separators=(",", ":")).encode("ascii")


def _line_ending(line: bytes) -> bytes:
    if line.endswith(b"\r\n"):
        return b"\r\n"
    return b"\n" if line.endswith(b"\n") else b""


def _id_key(request_id: Any) -> str:
    return json.dumps(request_id, sort_keys=True)


def prompt_text(prompt: list[Any]) -> str:
    """The user's words in a prompt: its text blocks, one after the other."""
    return "\n".join(block["text"] for block in prompt
                     if isinstance(block, dict) and block.get("type") == "text" and isinstance(block.get("text"), str))


def _is_count(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


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
        self._worker: _PolicyWorker | None = None
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
            self._worker = _PolicyWorker()
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
        splitter = (_LineSplitter("client", "a prompt that long gets no thread context")
                    if self._worker is not None or self._late_policy is not None else None)
        agent_gone = False
        for data in _reads(self.client_in):
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
            reason = _describe(exc)
            reason = reason if len(reason) <= 200 else reason[:200] + "..."
            warn(f"warning: reading a message from the {side} failed ({reason}); it is forwarded unchanged")
            return line

    @staticmethod
    def _send(fd: int, data: bytes) -> bool:
        try:
            _write_all(fd, data)
        except OSError:  # the agent is gone: keep reading the client so it never blocks; the main thread ends
            return False
        return True

    def _client_line(self, line: bytes) -> bytes:
        """The line to send to the agent: the same bytes, or a prompt with the context block in front."""
        if self._late_policy is not None and b"cwd" in line:
            self._policy_from_session_cwd(line)
        if self._initialize_id is None and b"initialize" in line:
            opened = _parse(line)
            if isinstance(opened, dict) and opened.get("method") == "initialize" and "id" in opened:
                self._initialize_id = _id_key(opened["id"])
        if self._worker is None or b"prompt" not in line:
            return line
        message = _parse(line)
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
            self._awaiting[_id_key(message["id"])] = session_id
            self._tool_calls[session_id] = 0
            if command is not None:
                self._commands.add(_id_key(message["id"]))
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
        return _serialise(message) + _line_ending(line)

    def _policy_from_session_cwd(self, line: bytes) -> None:
        """No repository around the proxy: look from the folder of the client's first session instead."""
        message = _parse(line)
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
            warn(f"warning: {_describe(exc)}; relaying without thread context")
            return
        if policy is not None:
            self.policy = policy
            self._worker = _PolicyWorker()

    # -- agent → client ----------------------------------------------------------------------------------------
    def _agent_to_client(self, agent_out: int) -> None:
        splitter = _LineSplitter("agent") if self._worker is not None else None
        client_gone = False
        for data in _reads(agent_out):
            if splitter is None and self._worker is not None:  # the policy came with the first session
                splitter = _LineSplitter("agent")
            out = data
            if splitter is not None:  # whole lines only, so a replayed prompt can lose the block leslie added
                out = b"".join([self._read_safely("agent", self._agent_line, piece) if whole else piece
                                for piece, whole in splitter.feed(data)])
            if out and not client_gone:
                client_gone = not self._send(self.client_out, out)
        rest = splitter.rest() if splitter is not None else b""
        if rest and not client_gone:
            self._send(self.client_out, rest)

    @staticmethod
    def _without_injected_block(line: bytes) -> bytes:
        """A replayed user message (`session/load`) without the block leslie put in front of it.

        The editor shows the history the agent replays as the user's own words: the block leslie added to a
        prompt must not appear there. A chunk that is only the block is dropped; one that starts with it
        keeps the user's text after it. Every other line passes unchanged.
        """
        if b"user_message_chunk" not in line or INJECTED_START.encode() not in line:
            return line
        message = _parse(line)
        params = message.get("params") if isinstance(message, dict) else None
        update = params.get("update") if isinstance(params, dict) else None
        content = update.get("content") if isinstance(update, dict) else None
        if (not isinstance(update, dict) or update.get("sessionUpdate") != "user_message_chunk"
                or not isinstance(content, dict) or content.get("type") != "text"
                or not isinstance(content.get("text"), str)):
            return line
        text: str = content["text"]
        stripped = text.lstrip()
        end = stripped.find(INJECTED_END)
        if not stripped.startswith(INJECTED_START + " ") or end < 0:
            return line
        rest = stripped[end + len(INJECTED_END):].lstrip("\r\n")
        if not rest:
            return b""
        content["text"] = rest
        return _serialise(message) + _line_ending(line)

    def _agent_line(self, line: bytes) -> bytes:
        """The line to forward to the client, once what it reports is queued for the policy (see `_PolicyWorker`)."""
        self._note_agent_line(line)
        return self._without_injected_block(line)

    def _note_agent_line(self, line: bytes) -> None:
        """Report a usage update, count the agent's reply text, and notice the end of a prompt turn."""
        with self._lock:
            awaiting = bool(self._awaiting)
        if (b"usage_update" not in line and b"agent_message_chunk" not in line and b'"tool_call"' not in line
                and b"agentInfo" not in line and not (awaiting and (b'"result"' in line or b'"error"' in line))):
            return
        message = _parse(line)
        if not isinstance(message, dict):
            return
        if self._initialize_id is not None and "id" in message and _id_key(message["id"]) == self._initialize_id:
            self._kept_user_tokens = _kept_user_tokens(message.get("result"))
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
            if _is_count(used) and _is_count(size) and self._worker is not None and self.policy is not None:
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
        key = _id_key(message["id"])
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
        used = None if was_command else _gemini_context_tokens(message.get("result"), tool_calls)
        if used is not None:
            self._worker.submit("usage report", lambda: policy.usage(session_id, used, GEMINI_COMPRESSION_POINT))


def _kept_user_tokens(result: Any) -> int:
    """From the agent's `initialize` answer: the tokens of recent user messages it keeps through a compaction."""
    info = result.get("agentInfo") if isinstance(result, dict) else None
    names = " ".join(str(info.get(key, "")) for key in ("name", "title")) if isinstance(info, dict) else ""
    return CODEX_KEPT_USER_TOKENS if "codex" in names.lower() else 0


def _gemini_context_tokens(result: Any, tool_calls: int) -> int | None:
    """The context size a Gemini CLI prompt result reports, estimated; None when it reports none.

    `input_tokens` adds up the prompt of every model call of the turn, and each tool call the agent started
    means one more model call at most: the average over the calls is the estimate (it lies between the
    context's size at the start and at the end of the turn). Zero is what a handled command reports: no figure.
    """
    meta = result.get("_meta") if isinstance(result, dict) else None
    quota = meta.get("quota") if isinstance(meta, dict) else None
    count = quota.get("token_count") if isinstance(quota, dict) else None
    total = count.get("input_tokens") if isinstance(count, dict) else None
    if not _is_count(total) or total == 0:
        return None
    return total // (1 + tool_calls)


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


def agent_environment(policy: LesliePolicy | None) -> dict[str, str]:
    """The agent's environment: ours, plus the root (and a named thread) so leslie commands it runs agree."""
    env = dict(os.environ)
    # The adapters (claude-agent-acp, codex-acp) load the project's hooks: leslie's hooks there must leave the
    # context to this proxy, or the agent would be told twice. The write guard hooks still run.
    env[INJECTED_BY_VARIABLE] = "acp"
    if policy is not None:
        env["LESLIE_ROOT"] = str(policy.repo.root)
        if not policy.follows_switch:
            env["LESLIE_THREAD"] = policy.thread_id
    return env


def find_policy(root: str | None, thread: str | None,
                start: Path | None = None) -> tuple[Repository | None, str | None, str | None]:
    """The repository and thread to inject for; else what is missing, as a message (the proxy then only relays)."""
    from leslie.ops.threads import current_thread_id
    from leslie.store.files import find_root
    from leslie.store.repository import Repository

    try:
        repo = Repository(find_root(start, explicit=root))
    except LeslieError as exc:
        return None, None, exc.message
    try:
        thread_id = current_thread_id(repo, thread)
    except LeslieError as exc:
        return repo, None, exc.message
    if not repo.thread_exists(thread_id):
        return repo, None, f"no such thread: {thread_id}"
    return repo, thread_id, None


def run_proxy(command: Sequence[str], *, root: str | None = None, thread: str | None = None) -> int:
    """`leslie acp`: relay between this process's stdio and the agent `command`; returns the exit code.

    The repository is the one around the working directory (or `root`); when there is none and no root was
    named, the cwd of the client's first session is tried (an editor may start agents anywhere). With no
    repository or no thread, the proxy only relays, after one line of warning.
    """
    explicit = root if root is not None else os.environ.get("LESLIE_ROOT") or None
    follows_switch = not (thread or os.environ.get("LESLIE_THREAD"))
    repo, thread_id, problem = find_policy(explicit, thread)
    if repo is not None and thread_id is not None:
        policy = LesliePolicy(repo, thread_id, follows_switch=follows_switch)
        return AcpRelay(command, policy, env=agent_environment(policy)).run()
    if repo is None and explicit is None:
        def late_policy(cwd: str) -> ContextPolicy | None:
            late_repo, late_thread, late_problem = find_policy(None, thread, Path(cwd))
            if late_repo is None or late_thread is None:
                warn(f"warning: {late_problem or problem}; relaying without thread context")
                return None
            return LesliePolicy(late_repo, late_thread, follows_switch=follows_switch)

        return AcpRelay(command, None, late_policy=late_policy, env=agent_environment(None)).run()
    warn(f"warning: {problem}; relaying without thread context")
    return AcpRelay(command, None, env=agent_environment(None)).run()
