"""The write guard's watcher as a resident process that the warm process manages (SPEC §12).

The watcher (`leslie.guard.watcher`) keeps inotify watches and their reading threads, and remembers what
changed in each repository it watches. Neither may live in the warm process itself, which forks a child for
every command (a fork while another thread runs copies a half-held lock) and keeps no repository state.
So the warm process starts this program beside itself (`start`), and ends it with itself (`stop`):

    python -m leslie.server.watcher SOCKET PARENT_PID

It answers the hooks' questions on `<warm socket>-watcher.sock`, in the same private folder, one JSON line
each way: `{"guard": "check", "root": ..., "since": ...}` is answered by `leslie.guard.watcher.answer`. It
exits when its parent is gone, on SIGTERM, or when its socket file is gone or replaced. A hook that finds no
watcher (a cold command, `LESLIE_WARM=0`) sweeps the guarded files itself, with the same result.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import signal
import socket
import struct
import subprocess
import sys
from typing import TYPE_CHECKING

from leslie.server.client import enabled, identity, socket_path

if TYPE_CHECKING:
    from leslie.ops.watched import Ask

ASK_TIMEOUT = 2.0  # a hook waits at most this long for an answer, then sweeps itself
MAX_LINE = 1 << 16
MAX_ANSWER = 1 << 24


def watcher_socket(warm_socket: str) -> str:
    """The watcher's socket beside the warm process's one."""
    return warm_socket.removesuffix(".sock") + "-watcher.sock"


def start(warm_socket: str) -> subprocess.Popen[bytes] | None:
    """Start the watcher process for the warm process at `warm_socket`; None when it cannot run here."""
    if not sys.platform.startswith("linux"):  # inotify
        return None
    try:
        return subprocess.Popen([sys.executable, "-m", "leslie.server.watcher", warm_socket, str(os.getpid())],
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                cwd="/", close_fds=True)
    except OSError:
        return None


def stop(process: object) -> None:
    """End the watcher process (and collect it)."""
    if isinstance(process, subprocess.Popen):
        process.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(2.0)
        if process.poll() is None:
            process.kill()
            process.wait()


def describe(process: object) -> dict[str, object] | None:
    """The watcher's process ID and whether it runs, for `leslie warm`."""
    if not isinstance(process, subprocess.Popen):
        return None
    return {"pid": process.pid, "running": process.poll() is None}


def asker() -> Ask | None:
    """`ask`, or None when the warm process is turned off (`LESLIE_WARM=0`): the callers (the guard's hooks,
    `list`, `find`) then look at every file themselves."""
    return ask if enabled() else None


def ask(root: str, since: object) -> dict[str, object] | None:
    """The watcher's answer for `root` (`leslie.guard.watcher.answer`); None when no watcher answers."""
    warm = socket_path(identity())
    if warm is None:
        return None
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.settimeout(ASK_TIMEOUT)
    try:
        conn.connect(watcher_socket(warm))
        conn.sendall(json.dumps({"guard": "check", "root": os.path.abspath(root), "since": since}).encode() + b"\n")
        doc = json.loads(_read_line(conn, MAX_ANSWER))
    except (OSError, ValueError):
        return None
    finally:
        conn.close()
    return doc if isinstance(doc, dict) else None


def _read_line(conn: socket.socket, limit: int) -> bytes:
    chunks: list[bytes] = []
    size = 0
    while size <= limit:
        chunk = conn.recv(65536)
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
        if chunk.endswith(b"\n"):
            break
    return b"".join(chunks)


def _peer_is_us(conn: socket.socket) -> bool:
    option = getattr(socket, "SO_PEERCRED", None)
    if option is None:
        return True
    _pid, uid, _gid = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, option, struct.calcsize("3i")))
    return bool(uid == os.getuid())


def serve(warm_socket: str, parent: int) -> int:
    """Answer the hooks until the parent is gone, SIGTERM, or the socket is gone or replaced."""
    from leslie.guard import watcher

    path = watcher_socket(warm_socket)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)  # a dead watcher's (the warm process holds the lock of this name)
    old_umask = os.umask(0o177)
    try:
        listener.bind(path)
    finally:
        os.umask(old_umask)
    inode = os.stat(path).st_ino
    listener.listen(64)
    listener.settimeout(1.0)
    try:
        while os.getppid() == parent and _still_ours(path, inode):
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            with conn:
                _answer(conn, functools.partial(watcher.answer, barriers=os.path.dirname(path)))
    finally:
        listener.close()
        with contextlib.suppress(OSError):
            if os.stat(path).st_ino == inode:
                os.unlink(path)
        watcher.stop_all()
    return 0


def _still_ours(path: str, inode: int) -> bool:
    try:
        return os.stat(path).st_ino == inode
    except OSError:
        return False


def _answer(conn: socket.socket, answer: object) -> None:
    conn.settimeout(ASK_TIMEOUT)
    try:
        if not _peer_is_us(conn):
            return
        line = _read_line(conn, MAX_LINE)
        doc = json.loads(line) if len(line) <= MAX_LINE else None
        reply = answer(doc) if isinstance(doc, dict) and callable(answer) else {"error": "bad request"}
        conn.sendall(json.dumps(reply).encode() + b"\n")
    except (OSError, ValueError):
        pass


if __name__ == "__main__":
    if len(sys.argv) != 3 or not sys.argv[2].isdigit():
        sys.stderr.write("usage: python -m leslie.server.watcher SOCKET PARENT_PID\n")
        sys.exit(2)
    sys.exit(serve(sys.argv[1], int(sys.argv[2])))
