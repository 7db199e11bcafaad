"""The render server: one background process per user that renders `<thread_context>` blocks for hooks.

A hook is a new interpreter on every prompt. Importing Jinja2 and lxml alone costs several bare interpreter
starts, so a hook that had to render a changed context in its own process would miss SPEC §10's budget for an
injecting hook (≤ 5 × `python3 -c pass`). Instead, the short-lived commands (`leslie hook`, `leslie inject`)
ask this server, which keeps Jinja2, lxml and the compiled template loaded:

- request (one JSON line): `{"identity": ..., "root": ..., "thread": ..., "key": ..., "trust": ...}` with the
  client's inputs key (`leslie.injector.inputs_key`, taken before anything is read) and trust file (the
  approvals of template overrides are the client's user's, `leslie.trust`);
- the server fingerprints and renders the thread's block from the files as they are now, with the same
  library code a hook would run (`leslie.context_cache.render_into_cache`), writes the thread's cache entry
  under the client's key, and answers `{"fingerprint": ..., "xml": ..., "warnings": [...]}` (or
  `{"error": ...}`) before the hook goes on; so every write to `.leslie/` still happens while the hook runs,
  never after it. It keeps no state a render can change: a repository with template overrides gets an
  environment of its own for that one request, sandboxed, and only with the overrides its user approved;
- likewise `{"identity": ..., "root": ..., "settings": true, "key": ...}` parses `config.toml` for a hook
  whose settings cache is stale (`leslie.injector.parse_settings`) and answers `{"config": ...}`;
  `{"ping": true}` answers the server's process ID, `{"stop": true}` stops it.

When no server answers, the hook starts one (detached, in its own session, stdio on /dev/null) for the next
prompts and renders in its own process this time; a `SessionStart` hook starts one ahead of need (`ensure`).
Any failure (a refused connection, a timeout, a server of another version, an error reply) falls back to
rendering in-process: the server only ever makes a hook faster, never different. `LESLIE_RENDER_SERVER=0`
turns it off.

One server serves every repository of its user (one process, not one per repository: a test suite or a
busy machine would otherwise pile them up). Its socket lives outside any repository, in
`$XDG_RUNTIME_DIR/leslie-<uid>/` (else `$TMPDIR` or `/tmp`), a folder only its owner may enter, named after a
digest of the leslie version, its location and its code; so a second install or an edited
development copy gets a server of its own. A server holds a `flock` on `<socket>.lock` for its whole life
(only one per socket), and exits after `idle` seconds without a request, or within a second once its socket
file is gone or replaced.

Run as `python -P -m leslie.render_server [IDLE_SECONDS]` (what `start` does). Unix only.
"""

from __future__ import annotations

import json
import os
import sys

from leslie import __version__

TYPE_CHECKING = False  # not `typing.TYPE_CHECKING`: the hook path imports this module
if TYPE_CHECKING:
    import socket
    from typing import TypeGuard

ENV_SWITCH = "LESLIE_RENDER_SERVER"
IDLE_SECONDS = 900.0  # a server nobody asked for 15 minutes exits
POLL_SECONDS = 1.0  # how often an idle server checks that its socket is still there
CLIENT_TIMEOUT = 2.0  # a hook waits at most this long for an answer, then renders itself
MAX_REQUEST = 1 << 16  # bytes of a request line
MAX_ANSWER = 1 << 26  # bytes of an answer (a rendered block)
_PACKAGE = os.path.dirname(os.path.abspath(__file__))
_no_server = False  # this process found no server (and started one) or may not have one: stop asking


def enabled() -> bool:
    """False when `LESLIE_RENDER_SERVER` is 0/off/false/no, or on a platform without Unix sockets."""
    value = os.environ.get(ENV_SWITCH, "").strip().lower()
    return value not in ("0", "off", "false", "no") and hasattr(os, "getuid") and sys.platform != "win32"


def identity() -> str:
    """What a server must share with its clients: leslie's version and location, and the stat signatures of
    its modules and template (so an edited development copy never meets a server running the old code)."""
    parts: list[object] = [__version__, _PACKAGE]
    for folder, suffix in ((_PACKAGE, ".py"), (os.path.join(_PACKAGE, "templates"), ".j2")):
        try:
            with os.scandir(folder) as entries:
                for entry in sorted(entries, key=lambda e: e.name):
                    if entry.name.endswith(suffix):
                        st = entry.stat()
                        parts.append([entry.name, st.st_mtime_ns, st.st_size])
        except OSError:
            parts.append(folder)
    return json.dumps(parts, separators=(",", ":"))


def socket_path(ident: str | None = None) -> str | None:
    """The socket of the server for this leslie, or None when no private folder for it can be had."""
    import zlib  # not hashlib: importing it costs milliseconds; the request carries the full identity anyway

    data = (ident if ident is not None else identity()).encode("utf-8", "surrogatepass")
    name = f"{zlib.crc32(data):08x}{zlib.adler32(data):08x}.sock"
    for base in (os.environ.get("XDG_RUNTIME_DIR"), os.environ.get("TMPDIR"), "/tmp"):
        folder = _private_folder(base) if base else None
        if folder is not None and len(os.path.join(folder, name).encode()) < 100:  # sun_path: 104-108 bytes
            return os.path.join(folder, name)
    return None


def _private_folder(base: str) -> str | None:
    """`base/leslie-<uid>`, made if missing; None unless it is a real folder of ours that nobody else may
    enter (anyone else could plant a fake server there)."""
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


# -- client ---------------------------------------------------------------------------------------------

def request(root: str, thread_id: str, key: str) -> tuple[str, str, list[str]] | None:
    """`(xml, fingerprint, warnings)` of the thread's block rendered by the server (which also wrote the
    thread's cache entry under `key`); None when no server could answer, after starting one if none was
    running. The request names this process's trust file: the server reads the approvals the hook would."""
    from leslie.trust import trust_file

    doc = _ask({"root": os.path.abspath(root), "thread": thread_id, "key": key, "trust": trust_file()})
    if doc is None:
        return None
    xml, fingerprint, notes = doc.get("xml"), doc.get("fingerprint"), doc.get("warnings")
    if not (isinstance(xml, str) and isinstance(fingerprint, str)):
        return None
    return xml, fingerprint, [n for n in notes if isinstance(n, str)] if isinstance(notes, list) else []


def request_settings(root: str, key: str) -> dict[str, object] | None:
    """The `[injection]` and `[[context.commands]]` settings of `root`, parsed by the server (which also wrote
    the settings cache under `key`); None when no server could answer, after starting one if none was running."""
    doc = _ask({"root": os.path.abspath(root), "settings": True, "key": key})
    config = doc.get("config") if doc is not None else None
    return config if isinstance(config, dict) else None


def _ask(payload: dict[str, object]) -> dict[str, object] | None:
    """The server's answer to a hook's request; None, and no more asking in this process, when no server
    answered (one is started for the next processes)."""
    global _no_server
    if _no_server or not enabled():
        return None
    doc = _exchange(payload, start_if_absent=True)
    if doc is None:
        _no_server = True  # rendered here this time; asking again in this process would not help
    return doc


def ensure() -> None:
    """Start a server unless one answers (for session starts, ahead of the first render they may need)."""
    if enabled() and not _no_server:
        _exchange({"ping": True}, start_if_absent=True)


def ping() -> int | None:
    """The process ID of the running server, or None."""
    doc = _exchange({"ping": True}) if enabled() else None
    pid = doc.get("pid") if doc is not None else None
    return pid if isinstance(pid, int) else None


def stop() -> bool:
    """Ask the running server (if any) to exit; True when one was asked."""
    return _exchange({"stop": True}) is not None


def start(idle: float = IDLE_SECONDS) -> None:
    """Start a detached server; it exits at once if one is running already. Never raises."""
    argv = [sys.executable, "-P", "-m", "leslie.render_server", repr(idle)]
    # Not the session's LESLIE_ROOT, LESLIE_THREAD, ...: the server serves every repository alike.
    env = {name: value for name, value in os.environ.items() if not name.startswith("LESLIE_")}
    # posix_spawn, not subprocess: importing subprocess would cost the hook more than spawning does
    try:
        actions = [(os.POSIX_SPAWN_OPEN, fd, os.devnull, os.O_RDONLY if fd == 0 else os.O_WRONLY, 0)
                   for fd in (0, 1, 2)]
        os.posix_spawn(sys.executable, argv, env, file_actions=actions, setsid=True)
    except Exception:  # no posix_spawn (or no setsid for it) here: hooks just render themselves
        pass


def _exchange(payload: dict[str, object], *, start_if_absent: bool = False) -> dict[str, object] | None:
    """Send one request to this leslie's server and return its answer; None when none answered in time."""
    ident = identity()
    path = socket_path(ident)
    if path is None:
        return None
    import socket

    client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    client.settimeout(CLIENT_TIMEOUT)
    try:
        try:
            client.connect(path)
        except OSError:  # no server (or a dead one's socket)
            if start_if_absent:
                start()
            return None
        client.sendall(json.dumps({"identity": ident, **payload}).encode() + b"\n")
        answer = _read_line(client, MAX_ANSWER)
    except OSError:  # timed out or reset
        return None
    finally:
        client.close()
    try:
        doc = json.loads(answer)
    except ValueError:
        return None
    return doc if isinstance(doc, dict) else None


def _read_line(conn: socket.socket, limit: int) -> bytes:
    """Bytes up to the first newline (or the end), at most about `limit`."""
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


# -- server ---------------------------------------------------------------------------------------------

def serve(idle: float = IDLE_SECONDS) -> int:
    """Answer render requests until idle for `idle` seconds, or until the socket file is gone or replaced."""
    import contextlib
    import fcntl
    import signal
    import socket
    import time

    ident = identity()
    path = socket_path(ident)
    if path is None:
        return 1
    lock_fd = os.open(path + ".lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:  # another server has this socket
        os.close(lock_fd)
        return 0
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # `kill` cleans up like an idle exit does
    _warm_up()
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)  # a dead server's socket (we hold the lock: no live one has it)
    old_umask = os.umask(0o177)
    try:
        server.bind(path)
    finally:
        os.umask(old_umask)
    inode = os.stat(path).st_ino
    server.listen(64)
    server.settimeout(POLL_SECONDS)
    last = time.monotonic()
    try:
        while True:
            try:
                conn, _ = server.accept()
            except TimeoutError:
                if time.monotonic() - last > idle or not _still_wanted(path, inode):
                    return 0
                continue
            last = time.monotonic()
            with conn:
                if _answer(conn, ident):
                    return 0
    finally:
        server.close()
        try:
            if os.stat(path).st_ino == inode:
                os.unlink(path)
                os.unlink(path + ".lock")  # still held: a server starting now waits for no one
        except OSError:
            pass
        os.close(lock_fd)


def _warm_up() -> None:
    """Import and compile now what every render needs, so that the first request is as fast as the next."""
    from leslie import config, context_cache  # noqa: F401
    from leslie.context import TEMPLATE_NAME
    from leslie.render import packaged_environment, parse_xml

    packaged_environment().get_template(TEMPLATE_NAME)
    parse_xml("<warm-up/>", TEMPLATE_NAME)


def _still_wanted(path: str, inode: int) -> bool:
    try:
        return os.stat(path).st_ino == inode
    except OSError:
        return False


def _answer(conn: socket.socket, ident: str) -> bool:
    """Answer one request; True when it asked the server to stop."""
    conn.settimeout(CLIENT_TIMEOUT)
    try:
        line = _read_line(conn, MAX_REQUEST)
        doc = json.loads(line) if len(line) <= MAX_REQUEST else None
    except (OSError, ValueError):
        return False
    if not isinstance(doc, dict) or doc.get("identity") != ident:
        reply: dict[str, object] = {"error": "not a request for this leslie"}
    elif doc.get("stop") is True:
        _send(conn, {"stopping": True})
        return True
    elif doc.get("ping") is True:
        reply = {"pid": os.getpid()}
    elif doc.get("settings") is True:
        reply = _settings(doc.get("root"), doc.get("key"))
    else:
        reply = _render(doc.get("root"), doc.get("thread"), doc.get("key"), doc.get("trust"))
    _send(conn, reply)
    return False


def _is_root(root: object) -> TypeGuard[str]:
    return isinstance(root, str) and os.path.isabs(root) and os.path.isdir(os.path.join(root, ".leslie"))


def _render(root: object, thread_id: object, key: object, trust_path: object) -> dict[str, object]:
    """Render one block from the files as they are now, in an environment made for this request alone when
    the repository has template overrides (see `leslie.render.packaged_environment`): nothing one
    repository's templates do can outlive its request or reach another repository's block."""
    from leslie.context_cache import render_into_cache
    from leslie.injector import RepoHandle, is_thread_id
    from leslie.trust import using_trust_file

    if not (_is_root(root) and isinstance(thread_id, str) and is_thread_id(thread_id) and isinstance(key, str)
            and isinstance(trust_path, str) and os.path.isabs(trust_path)):
        return {"error": "bad request"}
    notes: list[str] = []
    try:
        with using_trust_file(trust_path):
            xml, fingerprint = render_into_cache(RepoHandle(root), thread_id, key, notes)
    except Exception as exc:  # the client renders itself, and reports the error as it would have
        return {"error": f"{type(exc).__name__}: {exc}"}
    return {"fingerprint": fingerprint, "xml": xml, "warnings": notes}


def _settings(root: object, key: object) -> dict[str, object]:
    from leslie.injector import parse_settings

    if not (_is_root(root) and isinstance(key, str)):
        return {"error": "bad request"}
    try:
        return {"config": parse_settings(root, key)}
    except Exception as exc:  # the client parses itself, and reports the error as it would have
        return {"error": f"{type(exc).__name__}: {exc}"}


def _send(conn: socket.socket, doc: dict[str, object]) -> None:
    try:  # noqa: SIM105 (a client that went away needs no answer)
        conn.sendall(json.dumps(doc).encode() + b"\n")
    except OSError:
        pass


def main(argv: list[str]) -> int:
    """`python -m leslie.render_server [IDLE_SECONDS]`."""
    if len(argv) > 1:
        sys.stderr.write("usage: python -m leslie.render_server [IDLE_SECONDS]\n")
        return 2
    try:
        idle = float(argv[0]) if argv else IDLE_SECONDS
    except ValueError:
        sys.stderr.write(f"not a number of seconds: {argv[0]}\n")
        return 2
    os.closerange(3, 1 << 16)  # descriptors a hook's caller let it inherit: never hold their pipes open
    os.chdir("/")  # nor the hook's working folder (a repository someone may delete or unmount)
    return serve(idle)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
