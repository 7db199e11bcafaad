"""The render server: one background process per user that renders `<thread_context>` blocks for hooks.

A hook is a new interpreter on every prompt. Importing Jinja2 and lxml alone costs several bare interpreter
starts, so a hook that had to render a changed context in its own process would miss SPEC §10's budget for an
injecting hook (≤ 5 × `python3 -c pass`). Instead, the short-lived commands (`leslie hook`, `leslie inject`)
ask this server, which keeps Jinja2, lxml and the compiled template loaded:

- a request (see `leslie.inject.render_client`, the hooks' side) names the repository, the thread, the
  client's inputs key and trust file;
- the server fingerprints and renders the thread's block from the files as they are now, with the same
  library code a hook would run (`leslie.inject.blocks.render_into_cache`), writes the thread's cache entry
  under the client's key, and answers `{"fingerprint": ..., "xml": ..., "warnings": [...]}` (or
  `{"error": ...}`) before the hook goes on; so every write to `.leslie/` still happens while the hook runs,
  never after it. It keeps no state a render can change: a repository with template overrides gets an
  environment of its own for that one request, sandboxed, and only with the overrides its user approved;
- likewise `{"identity": ..., "root": ..., "settings": true, "key": ...}` parses `config.toml` for a hook
  whose settings cache is stale (`leslie.inject.blocks.parse_settings`) and answers `{"config": ...}`;
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

Run as `python -P -m leslie.server.render_server [IDLE_SECONDS]` (what `start` does). Unix only.
"""

from __future__ import annotations

import json
import os
import sys

from leslie.inject.render_client import (
    CLIENT_TIMEOUT,
    IDLE_SECONDS,
    MAX_REQUEST,
    POLL_SECONDS,
    identity,
    read_line,
    socket_path,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    import socket
    from typing import TypeGuard


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
    from leslie.context.block import TEMPLATE_NAME
    from leslie.context.render import packaged_environment, parse_xml
    from leslie.inject import blocks  # noqa: F401

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
        line = read_line(conn, MAX_REQUEST)
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
    elif "guard" in doc:  # the write guard's watcher (its own module: this one only passes the request on)
        from leslie.guard.watcher import answer

        reply = answer(doc)
    else:
        reply = _render(doc.get("root"), doc.get("thread"), doc.get("key"), doc.get("trust"), doc.get("changed"))
    _send(conn, reply)
    return False


def _is_root(root: object) -> TypeGuard[str]:
    return isinstance(root, str) and os.path.isabs(root) and os.path.isdir(os.path.join(root, ".leslie"))


def _render(root: object, thread_id: object, key: object, trust_path: object,
            changed: object = None) -> dict[str, object]:
    """Render one block from the files as they are now, in an environment made for this request alone when
    the repository has template overrides (see `leslie.context.render.packaged_environment`): nothing one
    repository's templates do can outlive its request or reach another repository's block."""
    from leslie.context.trust import using_trust_file
    from leslie.inject.blocks import RepoHandle, is_thread_id, render_into_cache

    if not (_is_root(root) and isinstance(thread_id, str) and is_thread_id(thread_id) and isinstance(key, str)
            and isinstance(trust_path, str) and os.path.isabs(trust_path)):
        return {"error": "bad request"}
    if changed is not None and not (isinstance(changed, list) and all(isinstance(c, str) for c in changed)):
        return {"error": "bad request"}
    notes: list[str] = []
    try:
        with using_trust_file(trust_path):
            if changed:  # one session's markers: rendered for this request only, never cached
                from leslie.context.block import render_fingerprinted

                xml, fingerprint = render_fingerprinted(RepoHandle(root).repo(), thread_id, warnings=notes,
                                                        changed=changed, cache=False)
            else:
                xml, fingerprint = render_into_cache(RepoHandle(root), thread_id, key, notes)
    except Exception as exc:  # the client renders itself, and reports the error as it would have
        return {"error": f"{type(exc).__name__}: {exc}"}
    return {"fingerprint": fingerprint, "xml": xml, "warnings": notes}


def _settings(root: object, key: object) -> dict[str, object]:
    from leslie.inject.blocks import parse_settings

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
    """`python -m leslie.server.render_server [IDLE_SECONDS]`."""
    if len(argv) > 1:
        sys.stderr.write("usage: python -m leslie.server.render_server [IDLE_SECONDS]\n")
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
