"""A child of the warm process: it becomes the client's command, runs it, and reports how it ended.

Forked ahead of need (`leslie.server.warm`), a child waits for one request, then
- tells the client it is `ready` and waits for `go`, which comes with the client's descriptors (a client
  that timed out and ran the command itself sends none: the child then ends without running anything);
- takes the client's standard input, output and error (so a terminal stays a terminal: `isatty`, its width,
  `rm`'s question), its working folder, environment, umask and argv, and opens `sys.stdin`, `sys.stdout`
  and `sys.stderr` as Python would have for that environment;
- relays the client's signals (`sig N`) to itself and ends itself when the client's connection closes
  before the command has (a client killed by a hook's timeout takes its child with it);
- runs the ordinary Typer application, sends `exit N`, and ends with `os._exit`, the documented way for a
  forked child to end without running the parent's cleanup a second time.

A command that serves until stopped, or hands the terminal to an editor, calls `run_in_client()` before it
does anything: the child then answers `client` and the client runs the command in its own process.
"""

from __future__ import annotations

import contextlib
import gc
import io
import os
import signal
import socket
import sys
import threading
import time
import types
from collections.abc import Callable
from dataclasses import dataclass
from typing import NoReturn

from leslie.server.client import IDENTITY_FIELDS, PROTOCOL

PRIMED = b"+"  # what a spare says once it has made its copies of the parent's pages
GO_TIMEOUT = 5.0  # seconds the child waits for the client's `go`
KILL_GRACE = 2.0  # seconds between the SIGTERM and the SIGKILL a child sends itself when its client is gone
_connection: socket.socket | None = None  # the client's connection, in a warm child only


@dataclass(frozen=True)
class Request:
    """A client's request, as `leslie.server.client._request` encodes it."""

    kind: str
    identity: list[str]
    umask: int
    argv: list[str]
    environ: dict[str, str]

    @classmethod
    def parse(cls, body: bytes) -> Request:
        """The request in `body`; ValueError when it is not one."""
        fields = body.split(b"\0")
        first = 4 + IDENTITY_FIELDS  # protocol, kind, identity..., umask, count: the arguments start here
        if len(fields) < first or fields[0] != PROTOCOL:
            raise ValueError("not a leslie-warm request")
        count = int(fields[first - 1])
        if not 0 <= count <= len(fields) - first:
            raise ValueError("bad argument count")
        argv = [os.fsdecode(arg) for arg in fields[first:first + count]]
        environ: dict[str, str] = {}
        for entry in fields[first + count:]:
            name, sep, value = entry.partition(b"=")
            if sep and name:
                environ[os.fsdecode(name)] = os.fsdecode(value)
        return cls(fields[1].decode("ascii"), [os.fsdecode(part) for part in fields[2:2 + IDENTITY_FIELDS]],
                   int(fields[first - 2], 8), argv, environ)


def in_warm_child() -> bool:
    """True in a child of the warm process, while it runs a client's command."""
    return _connection is not None


def run_in_client() -> None:
    """In a warm child, hand the command back to the client, which runs it in its own process (the child
    ends here); elsewhere, do nothing. Call it before the command has done anything."""
    if _connection is None:
        return
    _end(_connection, b"client\n", 0)


def wait_for_request(channel: socket.socket, run: Callable[[list[str]], int], close: list[int],
                     prefault: bool) -> NoReturn:
    """A spare child: wait for the parent to hand over one request and its client's connection, run it,
    and end (at once, running nothing, when the parent closes the channel first). With `prefault` (a spare
    forked while nothing waits), first make its own copies of the parent's pages, then say so (`PRIMED`)."""
    try:
        for fd in close:
            with contextlib.suppress(OSError):
                os.close(fd)
        _default_signals()
        if prefault:
            # A reference to every object the parent made, and to the code of every function, dropped at
            # once: the copy-on-write copies of the pages they live on are made now, while no command waits,
            # instead of one page fault at a time while the command runs (docs/design.md, "The warm
            # process": a quiet hook's child took 4-5 ms without them, 2.5-3 ms with them).
            objects = gc.get_objects()
            code = [obj.__code__ for obj in objects if isinstance(obj, types.FunctionType)]
            del objects, code
            channel.sendall(PRIMED)  # the parent hands requests to a primed spare only (`leslie.server.warm`)
        conn, request = _receive(channel)
    except BaseException:  # the parent closed the channel (it is ending), or sent no request
        _end(None, b"", 0)
    run_child(conn, request, run)


def _receive(channel: socket.socket) -> tuple[socket.socket, Request]:
    """The client's connection and its request, as the parent hands them over (ValueError when it does not)."""
    header, fds, _flags, _addr = socket.recv_fds(channel, 4, 1)
    if len(header) != 4 or len(fds) != 1:
        raise ValueError("no request")
    conn = socket.socket(fileno=fds[0])
    size = int.from_bytes(header, "big")
    body = b""
    while len(body) < size:
        chunk = channel.recv(size - len(body))
        if not chunk:
            raise ValueError("request cut short")
        body += chunk
    channel.close()
    return conn, Request.parse(body)


def run_child(conn: socket.socket, request: Request, run: Callable[[list[str]], int]) -> NoReturn:
    """Everything the child does for its request; it never returns."""
    code = 70
    try:
        conn.settimeout(GO_TIMEOUT)
        conn.sendall(b"ready\n")
        go, fds, _flags, _addr = socket.recv_fds(conn, 3, 4)
        if go != b"go\n" or len(fds) != 4:  # the client timed out and runs the command itself
            _end(conn, b"", 0)
        conn.settimeout(None)
        _adopt(fds, request)
        global _connection
        _connection = conn
        threading.Thread(target=_relay, args=(conn,), name="leslie-warm-relay", daemon=True).start()
        code = run(request.argv[1:])
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except KeyboardInterrupt:  # as an interpreter ends on an uncaught Ctrl-C: killed by SIGINT
        _flush()
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    except BaseException:  # a bug here must still end the child, and tell the client
        with contextlib.suppress(Exception):
            sys.stderr.write("leslie: internal error in the warm process's child (run with LESLIE_WARM=0)\n")
    _end(conn, b"exit %d\n" % code, code)


_finished = threading.Event()


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()


def _end(conn: socket.socket | None, line: bytes, code: int) -> NoReturn:
    """The one way a child ends: its output flushed and closed, `line` to its client, then `os._exit`.

    The child is a fork of the warm process, still inside the parent's `serve` loop: returning or raising
    `SystemExit` would run the parent's `finally` blocks (unlinking the parent's socket, stopping its
    watcher) and its `atexit` handlers. `os._exit` is how the Python documentation says a forked child ends,
    and how `multiprocessing` ends its own."""
    _flush()
    # Closed before the client is told: the client then exits, and a pipe reading the output sees its end.
    for fd in (0, 1, 2):
        with contextlib.suppress(OSError):
            os.close(fd)
    _finished.set()
    if conn is not None and line:
        with contextlib.suppress(OSError):
            conn.sendall(line)
    os._exit(code)


def _default_signals() -> None:
    """The signal handling of a fresh interpreter, not the warm parent's."""
    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    for name in ("SIGTERM", "SIGCHLD", "SIGHUP", "SIGQUIT"):
        signal.signal(getattr(signal, name), signal.SIG_DFL)


def _adopt(fds: list[int], request: Request) -> None:
    """Become the client: its descriptors, folder, umask, environment (its time zone too), argv and standard
    streams."""
    for target, fd in enumerate(fds[:3]):
        os.dup2(fd, target)
        os.close(fd)
    os.fchdir(fds[3])
    os.close(fds[3])
    os.umask(request.umask)
    os.environ.clear()
    os.environ.update(request.environ)
    time.tzset()  # the client's TZ: local times (`list`'s table) are the client's, not the parent's
    sys.argv = list(request.argv)
    _open_streams(request.environ)


def _open_streams(environ: dict[str, str]) -> None:
    """`sys.stdin`, `sys.stdout` and `sys.stderr` on descriptors 0-2, encoded as a new interpreter would
    encode them in `environ` (PYTHONIOENCODING, PYTHONUTF8, the locale; stdout line-buffered on a terminal,
    stderr always). `sys.__stdout__` and its siblings stay the parent's objects: they too wrap descriptors
    0-2, which are the client's now."""
    import locale

    with contextlib.suppress(locale.Error):
        locale.setlocale(locale.LC_CTYPE, "")
    encoding, _, errors = environ.get("PYTHONIOENCODING", "").partition(":")
    if environ.get("PYTHONUTF8") == "1" or sys.flags.utf8_mode:
        encoding = encoding or "utf-8"
    encoding = encoding or locale.getencoding()
    posix = locale.setlocale(locale.LC_CTYPE) in ("C", "POSIX")
    errors = errors or ("surrogateescape" if posix or sys.flags.utf8_mode else "strict")
    unbuffered = bool(environ.get("PYTHONUNBUFFERED"))
    sys.stdin = _stream(0, "r", encoding, errors, False, False)
    sys.stdout = _stream(1, "w", encoding, errors, os.isatty(1), unbuffered)
    sys.stderr = _stream(2, "w", encoding, "backslashreplace", True, unbuffered)


def _stream(fd: int, mode: str, encoding: str, errors: str, line_buffering: bool,
            write_through: bool) -> io.TextIOWrapper:
    buffer = open(fd, mode + "b", closefd=False)  # noqa: SIM115 (the stream lives as long as the process)
    return io.TextIOWrapper(buffer, encoding=encoding, errors=errors, line_buffering=line_buffering,
                            write_through=write_through)


def _relay(conn: socket.socket) -> None:
    """The client's signals, raised here; its end (killed, or gone) ends this child too."""
    pending = b""
    while True:
        try:
            chunk = conn.recv(256)
        except OSError:
            chunk = b""
        if not chunk:
            break
        pending += chunk
        while b"\n" in pending:
            line, _, pending = pending.partition(b"\n")
            word, _, number = line.partition(b" ")
            if word == b"sig" and number.isdigit() and int(number) in _RELAYABLE:
                # To the main thread itself: a signal sent to the process may land on this thread, and then a
                # main thread blocked in a read (`rm`'s question) would never see its Ctrl-C.
                signal.pthread_kill(threading.main_thread().ident or 0, int(number))
    if _finished.is_set():
        return
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(KILL_GRACE)
    if not _finished.is_set():
        os.kill(os.getpid(), signal.SIGKILL)


_RELAYABLE = frozenset(int(getattr(signal, name)) for name in ("SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT")
                       if hasattr(signal, name))
