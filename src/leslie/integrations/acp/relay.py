"""The relay: the agent process, the two threads that copy its pipes to the client's and back, and its exit.

Two threads do blocking reads on the raw pipes (no re-serialisation) and hand each whole line to the
sessions (`sessions.SessionTracker`), whose policy calls run on a worker thread of their own; the main thread
waits for the agent, forwarding SIGINT, SIGTERM and SIGHUP to it. Every line goes through in order and, when
leslie does not change it, as its original bytes; with no policy (and none to wait for) the client's reads go
to the agent as they come, unsplit. Nothing here may break the relay: a line whose reading failed goes through
as it came, with one line on stderr (docs/security.md, "The ACP proxy").
"""

from __future__ import annotations

import contextlib
import signal
import subprocess
import threading
from collections.abc import Callable, Iterator, Sequence
from types import FrameType
from typing import IO

from leslie.errors import LeslieError
from leslie.integrations.acp.framing import LineSplitter, reads, write_all
from leslie.integrations.acp.policy import ContextPolicy
from leslie.integrations.acp.sessions import SessionTracker
from leslie.integrations.acp.stderr import describe, warn

DRAIN_TIMEOUT = 5.0  # seconds to forward what the agent wrote before it exited
FORWARDED_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class AgentStartError(LeslieError):
    """The agent command could not be started (exit codes as a shell gives them: 127 not found, 126 other)."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code


class AcpRelay:
    """One run of the proxy: the agent process, the two relay threads, and the sessions they carry."""

    def __init__(self, command: Sequence[str], policy: ContextPolicy | None, *,
                 late_policy: Callable[[str], ContextPolicy | None] | None = None,
                 env: dict[str, str] | None = None, client_in: int = 0, client_out: int = 1) -> None:
        """`late_policy`, when there is no `policy`, is asked once with the cwd of the first session."""
        if not command:
            raise ValueError("the agent command is empty")
        self.command = list(command)
        self.sessions = SessionTracker(policy, late_policy)
        self.env = env
        self.client_in = client_in
        self.client_out = client_out
        self.client_closed = threading.Event()  # the client closed our stdin

    @property
    def policy(self) -> ContextPolicy | None:
        """The injection policy: the one given, or the one the first session's cwd found; else None."""
        return self.sessions.policy

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
        self.sessions.start()
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
        self.sessions.close(DRAIN_TIMEOUT)
        return _report_exit(returncode, client_closed=self.client_closed.is_set())

    # -- client → agent ----------------------------------------------------------------------------------------
    def _client_to_agent(self, agent_stdin: IO[bytes]) -> None:
        agent_in = agent_stdin.fileno()
        splitter = (LineSplitter("client", "a prompt that long gets no thread context")
                    if self.sessions.injecting or self.sessions.awaits_policy else None)
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
        return self.sessions.client_line(line)

    # -- agent → client ----------------------------------------------------------------------------------------
    def _agent_to_client(self, agent_out: int) -> None:
        splitter = LineSplitter("agent") if self.sessions.injecting else None
        client_gone = False
        for data in reads(agent_out):
            if splitter is None and self.sessions.injecting:  # the policy came with the first session
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
        return self.sessions.agent_line(line)


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
