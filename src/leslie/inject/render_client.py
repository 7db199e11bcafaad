"""The client side of the render server (`leslie.server.render_server`): find it, ask it, start it.

Hooks import this module on their hot path, so it imports only `os`, `sys` and `json` at the top.

- request (one JSON line): `{"identity": ..., "root": ..., "thread": ..., "key": ..., "trust": ...}` with the
  client's inputs key (`leslie.inject.blocks.inputs_key`, taken before anything is read) and trust file (the
  approvals of template overrides are the client's user's, `leslie.context.trust`); answered
  `{"fingerprint": ..., "xml": ..., "warnings": [...]}` or `{"error": ...}`;
- `{"identity": ..., "root": ..., "settings": true, "key": ...}` asks for the parsed `config.toml` settings
  (`leslie.inject.blocks.parse_settings`), answered `{"config": ...}`;
- `{"ping": true}` answers the server's process ID, `{"stop": true}` stops it.

When no server answers, the client starts one (detached, in its own session, stdio on /dev/null) for the next
prompts and the caller renders in its own process this time. Any failure (a refused connection, a timeout, a
server of another version, an error reply) falls back to rendering in-process: the server only ever makes a
hook faster, never different. `LESLIE_RENDER_SERVER=0` turns it off.

The socket lives outside any repository, in `$XDG_RUNTIME_DIR/leslie-<uid>/` (else `$TMPDIR` or `/tmp`), a
folder only its owner may enter, named after a digest of the leslie version, its location and its code; so a
second install or an edited development copy gets a server of its own.
"""

from __future__ import annotations

import json
import os
import sys

from leslie.version import __version__

TYPE_CHECKING = False  # not `typing.TYPE_CHECKING`: the hook path imports this module
if TYPE_CHECKING:
    import socket

ENV_SWITCH = "LESLIE_RENDER_SERVER"
IDLE_SECONDS = 900.0  # a server nobody asked for 15 minutes exits
POLL_SECONDS = 1.0  # how often an idle server checks that its socket is still there
CLIENT_TIMEOUT = 2.0  # a hook waits at most this long for an answer, then renders itself
MAX_REQUEST = 1 << 16  # bytes of a request line
MAX_ANSWER = 1 << 26  # bytes of an answer (a rendered block)
_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_no_server = False  # this process found no server (and started one) or may not have one: stop asking


def enabled() -> bool:
    """False when `LESLIE_RENDER_SERVER` is 0/off/false/no, or on a platform without Unix sockets."""
    value = os.environ.get(ENV_SWITCH, "").strip().lower()
    return value not in ("0", "off", "false", "no") and hasattr(os, "getuid") and sys.platform != "win32"


def identity() -> str:
    """What a server must share with its clients: leslie's version and location, and the stat signatures of
    its modules and template (so an edited development copy never meets a server running the old code)."""
    parts: list[object] = [__version__, _PACKAGE]
    folders = [_PACKAGE]
    while folders:  # the package's modules and templates, subpackages included (one scandir per folder)
        folder = folders.pop()
        try:
            with os.scandir(folder) as entries:
                for entry in sorted(entries, key=lambda e: e.name):
                    if entry.name.endswith((".py", ".j2")):
                        st = entry.stat()
                        parts.append([entry.path[len(_PACKAGE) + 1:], st.st_mtime_ns, st.st_size])
                    elif entry.name != "__pycache__" and entry.is_dir(follow_symlinks=False):
                        folders.append(entry.path)
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


# -- requests ---------------------------------------------------------------------------------------------

MAX_CHANGED = 256  # changed markers a request may carry (more: the hook renders itself)


def request(root: str, thread_id: str, key: str,
            changed: list[str] | None = None) -> tuple[str, str, list[str]] | None:
    """`(xml, fingerprint, warnings)` of the thread's block rendered by the server (which also wrote the
    thread's cache entry under `key`); None when no server could answer, after starting one if none was
    running. The request names this process's trust file: the server reads the approvals the hook would."""
    from leslie.context.trust import trust_file

    payload: dict[str, object] = {"root": os.path.abspath(root), "thread": thread_id, "key": key,
                                  "trust": trust_file()}
    if changed:
        if len(changed) > MAX_CHANGED:
            return None
        payload["changed"] = changed
    doc = _ask(payload)
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


def guard_request(root: str, since: object) -> dict[str, object] | None:
    """The write guard watcher's answer for `root` (`leslie.guard.watcher.answer`, in the server); None when
    no server could answer, after starting one if none was running."""
    return _ask({"guard": "check", "root": os.path.abspath(root), "since": since})


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
    argv = [sys.executable, "-P", "-m", "leslie.server.render_server", repr(idle)]
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
        answer = read_line(client, MAX_ANSWER)
    except OSError:  # timed out or reset
        return None
    finally:
        client.close()
    try:
        doc = json.loads(answer)
    except ValueError:
        return None
    return doc if isinstance(doc, dict) else None


def read_line(conn: socket.socket, limit: int) -> bytes:
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
