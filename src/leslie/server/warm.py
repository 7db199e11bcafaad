"""The warm process (SPEC §12): one per user and copy of leslie, it forks a child for every command.

`leslie warm serve` (started in the background by the first client that found none, `leslie.server.client`)
imports leslie, Typer, Jinja2 and lxml once, then answers requests on its socket:

- `run`: hand the request to a child that runs the command line from the files on disk, with the client's
  descriptors, folder, environment and umask (`leslie.server.child`), and report the child's end to the
  client. The child is forked ahead of need (a *spare*, forked once no command has run for `SPARE_DELAY`:
  it copies the parent's pages while nothing else needs the processor; while a long command runs, after
  `POLL_SECONDS` of quiet; `SPARES` of them, one primed while the next makes its copies), so a command waits
  neither for a fork nor for those copies; a request that finds no primed spare (a burst, or one right after
  a command started) gets a child forked on demand;
- `status`: one JSON line (process ID, identity, code digest, uptime, memory, commands served, watcher);
- `stop`: end now.

The parent keeps no repository state: it never reads a repository, and what it imported holds nothing a
command computes. It runs a single thread, so a fork copies a consistent interpreter. Before every fork it
asks whether the code on disk is still what it loaded (`leslie.server.codewatch`): an upgrade or an edited
development copy answers `stale`, retires the process, and the client runs cold and starts a new one.

It answers only its own user: the socket is in a folder only its owner may enter, and the peer's uid is
checked (`SO_PEERCRED`) where the platform has it. It holds a `flock` on `<socket>.lock` for its whole life
(one per socket), exits after `IDLE_SECONDS` without a request, on SIGTERM, or within a second once its
socket file is gone or replaced. It manages one resident helper process, the write guard's watcher
(`leslie.server.watcher`), which it starts with itself and ends with itself.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import selectors
import signal
import socket
import struct
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from leslie.server import client
from leslie.server.child import PRIMED, Request, wait_for_request
from leslie.server.codewatch import CodeWatch
from leslie.version import loaded_code

IDLE_SECONDS = 900.0  # 15 minutes without a request: exit
POLL_SECONDS = 1.0  # how often an idle process checks its socket is still its own
SPARE_DELAY = 0.002  # seconds of quiet, no command running, before the next spare is forked
SPARES = 2  # spares kept: one primed for the next request while another makes its copies
READ_TIMEOUT = 2.0  # seconds a client has to send its whole request


@dataclass
class Spare:
    """A child forked ahead of need, waiting on `channel` for one request and its client's connection."""

    pid: int
    channel: socket.socket
    primed: bool = False  # it has made its copies of the parent's pages (`child.PRIMED` came)
    ended: bool = False  # its channel closed: it is gone

    def ready(self) -> bool:
        """True once the spare has said it made its copies; never waits."""
        if not self.primed and not self.ended:
            try:
                said = self.channel.recv(1, socket.MSG_DONTWAIT)
            except (BlockingIOError, InterruptedError):
                return False
            except OSError:
                said = b""
            self.primed, self.ended = said == PRIMED, said != PRIMED
        return self.primed


@dataclass
class Warm:
    """The parent's own bookkeeping (nothing about any repository)."""

    path: str
    identity: list[str]
    code: CodeWatch  # the code it loaded, and whether the files still are that code
    started: float = field(default_factory=time.time)
    served: int = 0
    last: float = field(default_factory=time.monotonic)
    children: dict[int, socket.socket] = field(default_factory=dict)
    stopping: bool = False
    watcher: object = None
    spares: list[Spare] = field(default_factory=list)
    own: list[int] = field(default_factory=list)  # the parent's own descriptors (listener, lock, wakeup pipe)

    def inherited(self) -> list[int]:
        """The descriptors a new child must close: the parent's own, and the other clients' connections."""
        channels = [spare.channel.fileno() for spare in self.spares]
        watch = [] if self.code.fd is None else [self.code.fd]
        return [*self.own, *watch, *channels, *(conn.fileno() for conn in self.children.values())]

    def wants_spare(self) -> bool:
        """Whether to fork a spare once quiet: fewer than `SPARES`, and none still making its copies (one at
        a time: two at once would take both processors)."""
        self.drop_ended()
        return len(self.spares) < SPARES and all(spare.ready() for spare in self.spares)

    def drop_ended(self) -> None:
        """Forget the spares that ended (their channel closed)."""
        for spare in [spare for spare in self.spares if not spare.ready() and spare.ended]:
            spare.channel.close()
            self.spares.remove(spare)

    def let_go(self) -> None:
        """At the end: the code's watch closed, the watcher stopped, the spares and the clients let go (a spare
        ends when its channel closes; a running child finishes its command)."""
        from leslie.server import watcher

        self.code.close()
        watcher.stop(self.watcher)
        for spare in self.spares:
            spare.channel.close()
        for conn in self.children.values():
            conn.close()

    def digest(self) -> str:
        return hashlib.sha256(repr(self.code.signature).encode()).hexdigest()[:16]


def serve(run: Callable[[list[str]], int], preload: Callable[[], None], idle: float = IDLE_SECONDS) -> int:
    """Serve requests until idle for `idle` seconds, stopped, stale, or the socket is gone; the exit code."""
    ident = client.identity()
    path = client.socket_path(ident)
    if path is None:
        return 1
    lock_fd = os.open(path + ".lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:  # another warm process has this socket
        os.close(lock_fd)
        return 0
    state = Warm(path, ident, CodeWatch(loaded_code()))  # before the imports: an edit made while loading is seen
    preload()
    listener = _listen(path)
    inode = os.stat(path).st_ino
    wake_r, wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)  # wakes the loop (through the wakeup fd) to reap
    signal.signal(signal.SIGTERM, lambda *_: setattr(state, "stopping", True))
    signal.signal(signal.SIGINT, lambda *_: setattr(state, "stopping", True))
    from leslie.server import watcher

    state.watcher = watcher.start(path)
    state.own = [listener.fileno(), lock_fd, wake_r, wake_w]
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ)
    selector.register(wake_r, selectors.EVENT_READ)
    try:
        while not state.stopping:
            quiet = SPARE_DELAY if len(state.spares) < SPARES and not state.children else POLL_SECONDS
            events = selector.select(quiet)
            for key, _ in events:
                if key.fileobj is listener:
                    _accept(listener, state, run)
                else:
                    with contextlib.suppress(OSError):
                        os.read(wake_r, 512)
            _reap(state)
            # Quiet for SPARE_DELAY with no command running, or for POLL_SECONDS while a long one still runs.
            if not events and not state.stopping and state.wants_spare():
                state.spares.append(_fork_spare(state, run))
            if time.monotonic() - state.last > idle or not _still_ours(path, inode):
                break
    finally:
        signal.set_wakeup_fd(-1)
        selector.close()
        listener.close()
        with contextlib.suppress(OSError):
            if os.stat(path).st_ino == inode:
                os.unlink(path)
        os.close(lock_fd)  # a new warm process may start now, while the children still running finish
        state.let_go()
    return 0


def _listen(path: str) -> socket.socket:
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)  # a dead process's socket (we hold the lock: no live one has it)
    old_umask = os.umask(0o177)
    try:
        listener.bind(path)
    finally:
        os.umask(old_umask)
    listener.listen(128)
    listener.setblocking(False)
    return listener


def _still_ours(path: str, inode: int) -> bool:
    try:
        return os.stat(path).st_ino == inode
    except OSError:
        return False


def _peer(conn: socket.socket) -> tuple[int, int] | None:
    """The peer's process ID and user ID, where the platform tells them (`SO_PEERCRED`); else None (the
    socket's folder is the owner's alone)."""
    option = getattr(socket, "SO_PEERCRED", None)
    if option is None:
        return None
    pid, uid, _gid = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, option, struct.calcsize("3i")))
    return pid, uid


def _accept(listener: socket.socket, state: Warm, run: Callable[[list[str]], int]) -> None:
    try:
        conn, _ = listener.accept()
    except (BlockingIOError, InterruptedError):
        return
    keep = False
    try:
        conn.setblocking(True)
        conn.settimeout(READ_TIMEOUT)
        peer = _peer(conn)
        if peer is not None and peer[1] != os.getuid():  # another user: never answered
            return
        body = _read_request(conn)
        state.last = time.monotonic()
        keep = _answer(conn, body, state, run, peer[0] if peer is not None else None)
    except (OSError, ValueError):
        pass
    finally:
        if not keep:
            conn.close()


def _read_request(conn: socket.socket) -> bytes:
    """The request's body, read to its announced length (ValueError beyond `client.MAX_REQUEST`)."""
    size = int.from_bytes(_read_exactly(conn, 4), "big")
    if size > client.MAX_REQUEST:
        raise ValueError("request too large")
    return _read_exactly(conn, size)


def _read_exactly(conn: socket.socket, size: int) -> bytes:
    chunks: list[bytes] = []
    while size > 0:
        chunk = conn.recv(min(size, 1 << 20))
        if not chunk:
            raise ValueError("request cut short")
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


def _answer(conn: socket.socket, body: bytes, state: Warm, run: Callable[[list[str]], int],
            asker: int | None = None) -> bool:
    """Answer one request (from process `asker`, when known); True when the connection now belongs to a
    child."""
    request = Request.parse(body)
    if request.identity != state.identity:
        conn.sendall(b"refused another leslie\n")
    elif request.kind == "status":
        conn.sendall(json.dumps(status(state, asker)).encode() + b"\n")
    elif request.kind == "stop":
        conn.sendall(b"stopping\n")
        state.stopping = True
    elif request.kind != "run":
        conn.sendall(b"refused bad request\n")
    elif state.code.changed():
        conn.sendall(b"stale\n")
        state.stopping = True
    else:
        spare = _take_spare(state, run)
        try:
            socket.send_fds(spare.channel, [len(body).to_bytes(4, "big")], [conn.fileno()])
            spare.channel.sendall(body)
        finally:
            spare.channel.close()
        state.served += 1
        state.children[spare.pid] = conn
        return True
    return False


def _take_spare(state: Warm, run: Callable[[list[str]], int]) -> Spare:
    """The child for a request: a spare that is primed; without one, a child forked now without the copies (a
    request never waits for them: they take ~20-30 ms of processor), the spares left to finish them for the
    next requests. A spare that ended is dropped."""
    state.drop_ended()
    for spare in state.spares:
        if spare.ready():
            state.spares.remove(spare)
            return spare
    return _fork_spare(state, run, prefault=False)


def _fork_spare(state: Warm, run: Callable[[list[str]], int], *, prefault: bool = True) -> Spare:
    """Fork a child that waits for one request (`leslie.server.child.wait_for_request`); `prefault`: it
    copies the parent's pages first (a spare forked while nothing waits)."""
    ours, theirs = socket.socketpair()
    pid = os.fork()
    if pid == 0:
        ours.close()
        wait_for_request(theirs, run, close=state.inherited(), prefault=prefault)
    theirs.close()
    return Spare(pid, ours)


def _reap(state: Warm) -> None:
    """Collect every ended child and tell its client how it ended (the child said so first, normally)."""
    while state.children:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        conn = state.children.pop(pid, None)
        if conn is None:
            continue
        if os.WIFSIGNALED(status):
            line = b"signal %d\n" % os.WTERMSIG(status)
        else:
            line = b"exit %d\n" % os.waitstatus_to_exitcode(status)
        with contextlib.suppress(OSError):
            conn.sendall(line)
        conn.close()


def status(state: Warm, asker: int | None = None) -> dict[str, object]:
    """What `leslie warm` shows; `asker`, a child running `leslie warm` itself, is not counted as running."""
    from leslie.server import watcher

    return {"pid": os.getpid(), "version": state.identity[0], "location": state.identity[1],
            "prefix": state.identity[2], "python": state.identity[3].split()[0], "code": state.digest(),
            "socket": state.path,
            "uptime": round(time.time() - state.started, 1), "memory": resident_bytes(),
            "served": state.served, "commands_running": len(state.children.keys() - {asker}),
            "watcher": watcher.describe(state.watcher)}


def resident_bytes(pid: int | str = "self") -> int | None:
    """The resident memory of a process in bytes (Linux's /proc), or None where it cannot be read."""
    try:
        with open(f"/proc/{pid}/status", "rb") as handle:
            for line in handle:
                if line.startswith(b"VmRSS:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def main_serve(run: Callable[[list[str]], int], preload: Callable[[], None], idle: float) -> int:
    """`leslie warm serve`: detach from whatever started us, then serve."""
    os.closerange(3, 1 << 16)  # descriptors a hook's caller let it inherit: never hold their pipes open
    os.chdir("/")  # nor the starting folder (a repository someone may delete or unmount)
    sys.stdout.flush()
    return serve(run, preload, idle)
