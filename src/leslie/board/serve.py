"""Run the board: listen on 127.0.0.1 (a free port by default), watch `.leslie/`, serve until interrupted."""

from __future__ import annotations

import ipaddress
import secrets
import socket
import threading
from collections.abc import Callable
from contextlib import suppress
from types import FrameType

from leslie.board.app import create_app
from leslie.board.data import Reads, read_board
from leslie.board.live import ChangeCounter, LiveWatch
from leslie.errors import StorageError, UsageError
from leslie.store.repository import Repository
from leslie.store.sessions import sessions_dir

DEFAULT_HOST = "127.0.0.1"
LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "[::1]", "::1"})


def _family(host: str) -> socket.AddressFamily:
    if host == "localhost":
        return socket.AF_INET
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        raise UsageError(f"invalid --host {host!r}: give an IP address (127.0.0.1, ::1, 0.0.0.0) or localhost") \
            from None
    return socket.AF_INET6 if address.version == 6 else socket.AF_INET


def listen(host: str, port: int) -> socket.socket:
    """A listening socket on `host`:`port` (0: a free port the system picks)."""
    if not 0 <= port <= 65535:
        raise UsageError(f"invalid --port {port}: expected 0 to 65535")
    family = _family(host)
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1" if host == "localhost" else host, port))
        sock.listen(128)
    except OSError as exc:
        sock.close()
        raise StorageError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    return sock


def board_url(host: str, sock: socket.socket, token: str) -> str:
    """The address to open: the host as given (IPv6 in brackets), the port the socket got, and the token
    (URL-safe base64: it needs no quoting)."""
    port = sock.getsockname()[1]
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}/?token={token}"


def allowed_hosts(host: str) -> frozenset[str] | None:
    """The Host header values to accept: the loopback names when bound to loopback or the given address,
    any when bound to every address (0.0.0.0 or ::, the user chose to share the board)."""
    if host in ("0.0.0.0", "::"):
        return None
    names = {host.lower(), f"[{host.lower()}]"}
    if host in LOOPBACK_NAMES or host.startswith("127."):
        names |= LOOPBACK_NAMES
    return frozenset(names)


REDIRECT_PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><meta http-equiv="refresh" content="0;url={url}">
<title>leslie board</title></head>
<body><p>Opening the board: <a href="{url}">{url}</a></p></body></html>
"""


def open_browser_privately(url: str) -> str:
    """Open `url` in the default browser by way of a redirect page only this user can read, as Jupyter does:
    the command line that starts a browser (`xdg-open URL`, the browser's own) is visible to every user of
    the machine, the token in `url` would be too. Returns the folder of the page, to remove when done."""
    import html
    import os
    import tempfile
    import webbrowser

    folder = tempfile.mkdtemp(prefix="leslie-board-")  # mode 0700
    path = os.path.join(folder, "open.html")
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as page:
        page.write(REDIRECT_PAGE.format(url=html.escape(url)))
    webbrowser.open("file://" + path)
    return folder


def serve(repo: Repository, *, host: str = DEFAULT_HOST, port: int = 0, open_browser: bool = True,
          ready: Callable[[str], None] | None = None, polling: bool = False) -> int:
    """Serve the board of `repo` until interrupted (Ctrl-C); `ready(url)` is called once it listens.

    `url` carries a new secret token (256 bits): without it, or the cookie the first request with it sets,
    every request is refused (docs/security.md, "The board"). The browser is opened (Python's `webbrowser`,
    through a private redirect page: see open_browser_privately) unless `open_browser` is False. Returns 0.
    """
    import uvicorn

    repo.read_index()  # a repository the board cannot read fails here, before anything listens
    reads = Reads()
    read_board(repo, reads)  # read everything once now, so the first page is as quick as the next
    sock = listen(host, port)
    token = secrets.token_urlsafe(32)
    url = board_url(host, sock, token)
    counter = ChangeCounter()
    watch = LiveWatch(str(repo.layout.leslie_dir), counter, polling=polling,
                      sessions=sessions_dir(str(repo.root)))
    redirect: str | None = None
    try:
        stopping = threading.Event()
        app = create_app(str(repo.root), counter, token=token, port=sock.getsockname()[1],
                         allowed_hosts=allowed_hosts(host), reads=reads, stopping=stopping)
        config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off",
                                timeout_graceful_shutdown=3, server_header=False, date_header=False)

        class Server(uvicorn.Server):
            def handle_exit(self, sig: int, frame: FrameType | None) -> None:
                stopping.set()  # open pages' event streams end, so nothing is left to cancel
                super().handle_exit(sig, frame)

        server = Server(config)
        if ready is not None:
            ready(url)
        if open_browser:
            redirect = open_browser_privately(url)
        # uvicorn re-raises the Ctrl-C it handled: it is how the board ends, not an error
        with suppress(KeyboardInterrupt):
            server.run(sockets=[sock])
    finally:
        watch.stop()
        sock.close()
        if redirect is not None:
            import shutil

            shutil.rmtree(redirect, ignore_errors=True)
    return 0
