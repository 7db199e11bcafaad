"""The `leslie` command's first step: hand the command line to the warm process (SPEC §12).

The client sends the warm process (`leslie.server.warm`) its argv, its environment and its umask; the child
forked for it then gets the client's standard input, output and error and its working folder as file
descriptors. The warm process forks a
child that runs the command exactly as a cold `leslie` would (`leslie.server.child`); the client relays
Ctrl-C and SIGTERM to that child and exits with the child's exit code.

It imports only `os`, `sys` and `socket`: it runs on every prompt of every agent before anything else.

The conversation on one connection (lines of ASCII; the request is framed by its length):

    client -> warm     request: 4-byte length, then NUL-separated fields (see `_request`)
    warm   -> client   `ready` (a child was forked for it) | `stale` | `refused WHY`
    client -> child    `go`, with the descriptors of stdin, stdout, stderr and the working folder (the child
                       starts only then: a client that gave up never runs a command twice, and no stuck
                       process ever holds its descriptors, which would keep a caller waiting for its output)
    client -> child    `sig N` for every relayed signal
    child  -> client   `client` (run it in your own process, e.g. `leslie board`) | `exit N`
    warm   -> client   `exit N` | `signal N` once the child is reaped (the first status line counts)

`run` returns None whenever the command should run in the client's own process instead: `LESLIE_WARM=0`, no
Unix sockets, no private folder, no warm process (one is then started in the background for the next call),
another identity or code, no answer within `TIMEOUT`, any error.
"""

import os
import socket
import sys

from leslie.server import ENV_SWITCH, switched_off
from leslie.version import PACKAGE, __version__

PROTOCOL = b"leslie-warm/1"
TIMEOUT = 1.0  # seconds the client waits for the warm process to fork its child, then runs the command itself
MAX_REQUEST = 1 << 22  # bytes of a request (argv and environment)
IDENTITY_FIELDS = 4
RELAYED = ("SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT")


def enabled() -> bool:
    """False when `LESLIE_WARM` is 0/off/false/no, or on a platform without Unix sockets."""
    return not switched_off() and hasattr(socket, "AF_UNIX") and hasattr(os, "getuid")


def identity() -> list[str]:
    """What a warm process must share with its clients: leslie's version, its location, and the Python
    environment and version that run it (two virtual environments never share a warm process).

    The digest of the code is the warm process's own check (`leslie.version.code_signature`): it compares
    the files with the ones it loaded before every command and retires itself when they differ.
    """
    return [__version__, PACKAGE, sys.prefix, sys.version]


def socket_path(ident: list[str] | None = None) -> str | None:
    """The warm process's socket for this copy of leslie, or None when no private folder can be had."""
    key = "\0".join(ident if ident is not None else identity()).encode("utf-8", "surrogateescape")
    # A name short enough for sun_path (104-108 bytes); the request carries the full identity, which the warm
    # process compares, so two copies whose names collide only ever fall back to running cold.
    name = f"{int.from_bytes(key, 'big') % 0xFFFFFFFFFFFFFFC5:016x}.sock"
    for base in (os.environ.get("XDG_RUNTIME_DIR"), os.environ.get("TMPDIR"), "/tmp"):
        folder = private_folder(base) if base else None
        if folder is not None and len(os.fsencode(os.path.join(folder, name))) < 100:
            return os.path.join(folder, name)
    return None


def private_folder(base: str) -> str | None:
    """`base/leslie-<uid>`, made if missing; None unless it is a real folder of ours that nobody else may
    enter (anyone else could plant a fake warm process there)."""
    folder = os.path.join(base, f"leslie-{os.getuid()}")
    try:
        os.mkdir(folder, 0o700)
    except FileExistsError:
        pass
    except OSError:
        return None
    try:
        st = os.lstat(folder)
    except OSError:
        return None
    ok = st.st_mode & 0o170000 == 0o040000 and st.st_uid == os.getuid() and st.st_mode & 0o077 == 0
    return folder if ok else None


def run(argv: list[str]) -> int | None:
    """Run `argv` (without the program name) in a child of the warm process and return its exit code; None
    when the caller must run it in its own process."""
    found = _new_connection(TIMEOUT) if enabled() else None
    if found is None:
        return None
    conn, ident, path = found
    try:
        try:
            conn.connect(path)
        except OSError:  # no warm process (or a dead one's socket): start one for the next call
            start()
            return None
        return _converse(conn, ident, argv)
    except OSError:  # timed out, reset, a descriptor that cannot be passed...
        return None
    finally:
        conn.close()


def _new_connection(timeout: float) -> tuple[socket.socket, list[str], str] | None:
    """A socket (not yet connected) for this copy's warm process, its identity and its path; None when no
    private folder can be had."""
    ident = identity()
    path = socket_path(ident)
    if path is None:
        return None
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.settimeout(timeout)
    return conn, ident, path


def _converse(conn: socket.socket, ident: list[str], argv: list[str]) -> int | None:
    lines = _Lines(conn)
    conn.sendall(_request(b"run", ident, [sys.argv[0], *argv]))
    # Set up while the warm process readies the child: the working folder, and the relay of signals (which
    # must never outlive this function unless the child runs: the command may run here instead).
    cwd = os.open(".", getattr(os, "O_PATH", os.O_RDONLY) | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        relay = _Relay(conn)
        try:
            first = lines.next()
            if first != b"ready":
                relay.cancel()
                if first == b"stale":  # the warm process ran older code, and has retired: start a new one
                    start()
                return None
            conn.settimeout(None)  # from here on the command runs; however long it takes, it runs once
            # `go`, with stdin, stdout, stderr and the working folder passed as descriptors.
            socket.send_fds(conn, [b"go\n"], [0, 1, 2, cwd])
        except BaseException:
            relay.cancel()
            raise
    finally:
        os.close(cwd)
    try:
        relay.started()
        while True:
            line = lines.next()
            if line == b"client":
                return None
            word, _, number = line.partition(b" ")
            if word == b"exit" and number.isdigit():
                return int(number)
            if word == b"signal" and number.isdigit():
                return _die_by(int(number))
            if not line:
                sys.stderr.write("leslie: error: the warm process's child ended without an exit status\n")
                return 70
    finally:
        relay.restore()


def _request(kind: bytes, ident: list[str], argv: list[str]) -> bytes:
    """The request: NUL-separated fields (none of them can hold a NUL), framed by a 4-byte length.

    PROTOCOL, kind, the identity's `IDENTITY_FIELDS` fields, the umask (octal), the argument count, the arguments, then
    every `NAME=VALUE` of the environment."""
    umask = os.umask(0o022)
    os.umask(umask)
    fields = [PROTOCOL, kind, *(os.fsencode(part) for part in ident), b"%o" % umask, b"%d" % len(argv),
              *(os.fsencode(arg) for arg in argv),
              *(os.fsencode(name) + b"=" + os.fsencode(value) for name, value in os.environ.items())]
    body = b"\0".join(fields)
    if len(body) > MAX_REQUEST:
        raise OSError("request too large for the warm process")
    return len(body).to_bytes(4, "big") + body


def control(kind: bytes) -> bytes | None:
    """A control request (`status`, `stop`) to the running warm process: its one-line answer, or None when
    none runs (`LESLIE_WARM=0` keeps commands from using one, not `leslie warm` from seeing or stopping it)."""
    found = _new_connection(TIMEOUT * 5) if hasattr(socket, "AF_UNIX") and hasattr(os, "getuid") else None
    if found is None:
        return None
    conn, ident, path = found
    try:
        conn.connect(path)
        conn.sendall(_request(kind, ident, []))
        return _Lines(conn).next() or None
    except OSError:
        return None
    finally:
        conn.close()


def start() -> None:
    """Start a warm process in the background, detached (its own session, stdio on /dev/null); it exits at
    once if one is running already. Never raises."""
    argv = [sys.executable, "-m", "leslie", "warm", "serve"]
    # Not this command's LESLIE_ROOT, LESLIE_THREAD...: the warm process serves every repository alike.
    env = {name: value for name, value in os.environ.items() if not name.startswith("LESLIE_")}
    env[ENV_SWITCH] = "0"  # `warm serve` itself runs in its own process
    try:
        actions = [(os.POSIX_SPAWN_OPEN, fd, os.devnull, os.O_RDONLY if fd == 0 else os.O_WRONLY, 0)
                   for fd in (0, 1, 2)]
        os.posix_spawn(sys.executable, argv, env, file_actions=actions, setsid=True)
    except (OSError, AttributeError, NotImplementedError):  # no posix_spawn here: every command runs cold
        pass


class _Lines:
    """The lines a connection receives, one at a time (without the newline; b"" at the end)."""

    def __init__(self, conn: socket.socket) -> None:
        self.conn = conn
        self.buffer = b""

    def next(self) -> bytes:
        while b"\n" not in self.buffer:
            chunk = self.conn.recv(4096)
            if not chunk:
                return b""
            self.buffer += chunk
            if len(self.buffer) > 1 << 16:
                return b""
        line, _, self.buffer = self.buffer.partition(b"\n")
        return line


class _Relay:
    """Handlers that pass Ctrl-C, SIGTERM, SIGHUP and SIGQUIT on to the child (installed before the child
    runs: a signal that comes first is passed on once it does, or raised here if the command runs here)."""

    def __init__(self, conn: socket.socket) -> None:
        import signal

        self.conn = conn
        self.pending: list[int] | None = []  # None once the child runs
        self.previous: dict[int, object] = {}
        for name in RELAYED:
            number = getattr(signal, name, None)
            if number is not None:
                self.previous[number] = signal.signal(number, self._relay)

    def _relay(self, signum: int, _frame: object) -> None:
        if self.pending is not None:
            self.pending.append(signum)
            return
        try:  # noqa: SIM105 (a child that has ended needs no signal)
            self.conn.sendall(b"sig %d\n" % signum)
        except OSError:
            pass

    def started(self) -> None:
        """The child runs: pass on what came before."""
        pending, self.pending = self.pending or [], None
        for signum in pending:
            self._relay(signum, None)

    def restore(self) -> None:
        import signal

        for number, handler in self.previous.items():
            signal.signal(number, handler)  # type: ignore[arg-type]

    def cancel(self) -> None:
        """No child will run: the old handlers back, and what came meanwhile raised again for them."""
        import signal

        self.restore()
        pending, self.pending = self.pending or [], None
        for signum in pending:
            signal.raise_signal(signum)


def _die_by(signum: int) -> int:
    """End this process as the child ended, by signal `signum` (else exit 128 + `signum`, as a shell says)."""
    import signal

    try:
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)
    except (OSError, ValueError):
        pass
    return 128 + signum
