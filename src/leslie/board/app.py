"""The board's web application (Starlette): three pages, one event stream, two files of our own. Read-only.

What it refuses, on purpose (docs/security.md): there is no route that takes a file path, so nothing outside
`.leslie/` (nor any file of it by name) can be asked for; a thread ID in a URL must be a live thread of the
index; only GET and HEAD are served (405 otherwise), there is no write endpoint; a request whose Host is not
the address the board listens on is refused (a DNS-rebinding page cannot read the board); a request without the
board's secret token (in the URL it prints, then in a cookie) is refused with 403, every route alike (another
user of the machine can reach 127.0.0.1 too); and every response carries a strict Content-Security-Policy:
scripts, styles and everything else only from the board itself, no inline script or style, no frames, no forms.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import threading
import time
from collections.abc import AsyncIterator
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from leslie.board.data import AssetFile, Reads, read_board, thread_page
from leslie.board.graph import layout
from leslie.board.live import ChangeCounter
from leslie.board.markdown import PageBudget
from leslie.errors import LeslieError, NotFoundError
from leslie.store.repository import Repository

if TYPE_CHECKING:
    import jinja2
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
       "base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
SECURITY_HEADERS = [
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
    (b"cross-origin-opener-policy", b"same-origin"),
    (b"cross-origin-resource-policy", b"same-origin"),
    (b"cache-control", b"no-store"),
]
STATIC = {"board.js": "text/javascript; charset=utf-8", "board.css": "text/css; charset=utf-8"}
QUIET = 0.15  # seconds without a change before the page is told: a `spawn` writes several files
PING = 15.0  # seconds between keep-alive comments on the event stream
_HERE = os.path.dirname(os.path.abspath(__file__))


class SecurityHeaders:
    """ASGI middleware: the security headers on every response (pages, errors, the event stream, refusals),
    the Host check (a browser's Host header names what it thinks it is talking to), then the token check."""

    def __init__(self, app: ASGIApp, allowed_hosts: frozenset[str] | None, gate: TokenGate) -> None:
        self.app = app
        self.allowed_hosts = allowed_hosts
        self.gate = gate

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Refuse a foreign Host, else pass the request on; add the headers to the response either way."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *SECURITY_HEADERS]
            await send(message)

        app = self.app
        if self.allowed_hosts is not None and _host(scope) not in self.allowed_hosts:
            from starlette.responses import PlainTextResponse

            app = PlainTextResponse("unknown host\n", status_code=400)
        else:
            app = self.gate.admit(scope, app)
        await app(scope, receive, with_headers)


class TokenGate:
    """The board's one key: a secret token, as Jupyter's. The URL the board prints (and opens) carries it as
    `?token=`; a request with it gets a cookie holding it (HttpOnly, SameSite=Strict, path /, named after the
    port so two boards do not overwrite each other's), so links, the page's fetches and its event stream carry
    it from then on. Anything else is 403, whatever the route: pages, the event stream, the static files."""

    def __init__(self, token: str, port: int) -> None:
        self.token = token.encode()
        self.cookie = f"leslie-board-{port}"

    def _matches(self, given: str | None) -> bool:
        # compare_digest on bytes: a str argument must be ASCII, and a header need not be
        return given is not None and secrets.compare_digest(given.encode("utf-8", "surrogateescape"), self.token)

    def admit(self, scope: Scope, app: ASGIApp) -> ASGIApp:
        """`app` when the request carries the token (with the cookie set when it came in the URL), else a 403."""
        from urllib.parse import parse_qs

        from starlette.requests import cookie_parser

        cookies = [cookie_parser(value.decode("latin-1")).get(self.cookie)
                   for name, value in scope.get("headers", []) if name == b"cookie"]
        if any(self._matches(given) for given in cookies):
            return app
        query = parse_qs(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True)
        if any(self._matches(given) for given in query.get("token", [])):
            return self._with_cookie(app)
        from starlette.responses import PlainTextResponse

        return PlainTextResponse("forbidden: open the address `leslie board` printed (it carries the token)\n",
                                 status_code=403)

    def _with_cookie(self, app: ASGIApp) -> ASGIApp:
        cookie = f"{self.cookie}={self.token.decode()}; Path=/; HttpOnly; SameSite=Strict".encode()

        async def setting_cookie(scope: Scope, receive: Receive, send: Send) -> None:
            async def with_cookie(message: Message) -> None:
                if message["type"] == "http.response.start":
                    message["headers"] = [*message.get("headers", []), (b"set-cookie", cookie)]
                await send(message)

            await app(scope, receive, with_cookie)

        return setting_cookie


def _host(scope: Scope) -> str:
    for name, value in scope.get("headers", []):
        if name == b"host":
            host = str(value.decode("latin-1")).lower()
            return host.rsplit(":", 1)[0] if not host.endswith("]") else host
    return ""


@lru_cache(maxsize=1)
def environment() -> jinja2.Environment:
    """The board's templates (packaged with leslie, never a repository's), everything they print escaped."""
    from leslie.context.render import html_environment

    return html_environment(os.path.join(_HERE, "templates"))


def _shown_files(files: list[AssetFile], budget: PageBudget) -> list[tuple[AssetFile, Any, str | None]]:
    """Each asset file with its Markdown as sanitized HTML (Markup, None for plain text) and, when a Markdown
    file is shown as plain text, why: its size, or the page's budget spent (leslie.board.markdown)."""
    from markupsafe import Markup

    shown: list[tuple[AssetFile, Any, str | None]] = []
    for file in files:
        if file.text is None or not file.markdown:
            shown.append((file, None, None))
            continue
        result = budget.show(file.text)  # HTML sanitized by nh3 (leslie.board.markdown): Markup, not escaped
        shown.append((file, None if result.html is None else Markup(result.html), result.note))
    return shown


def _page(name: str, status: int = 200, **variables: Any) -> Response:
    from starlette.responses import HTMLResponse

    variables.setdefault("page", "")  # the templates are strict: every name they print must be given
    return HTMLResponse(environment().get_template(name).render(**variables), status_code=status)


def _static(name: str) -> tuple[bytes, str]:
    with open(os.path.join(_HERE, "static", name), "rb") as handle:
        return handle.read(), STATIC[name]


class Pages:
    """The board's endpoints for the repository at `root` (a fresh Repository per request: config.toml may
    change); page handlers are plain functions, which Starlette runs in its worker threads."""

    def __init__(self, root: str, counter: ChangeCounter, reads: Reads, stopping: threading.Event) -> None:
        self.root = root
        self.counter = counter
        self.reads = reads
        self.stopping = stopping
        self.static = {name: _static(name) for name in STATIC}  # read once: no file is looked up from a URL

    def repository(self) -> Repository:
        """The repository, as it is now."""
        return Repository(_path(self.root))

    def board(self, request: Request) -> Response:
        """`/`: objectives as groups, threads as cards."""
        try:
            board = read_board(self.repository(), self.reads)
        except LeslieError as exc:
            return _page("error.html.j2", 500, title="Cannot read the board", message=exc.message)
        return _page("board.html.j2", board=board, total=len(board.threads), page="board")

    def graph(self, request: Request) -> Response:
        """`/graph`: the reference graph."""
        repo = self.repository()
        try:
            board = read_board(repo, self.reads)
        except LeslieError as exc:
            return _page("error.html.j2", 500, title="Cannot read the graph", message=exc.message)
        try:
            objectives = {o.id: o for o in repo.objectives()}
        except LeslieError:  # already a problem line of `board`: the nodes just go without objective titles
            objectives = {}
        return _page("graph.html.j2", graph=layout(board.threads, objectives), problems=board.problems,
                     page="graph")

    def thread(self, request: Request) -> Response:
        """`/thread/ID`: a live thread of the index, its files, links, sessions and block; 404 otherwise."""
        from leslie.context.block import render_context

        budget = PageBudget()  # the page's time starts now
        repo = self.repository()
        thread_id = str(request.path_params["thread_id"])
        try:
            page = thread_page(repo, thread_id, self.reads)
        except NotFoundError:
            return _page("error.html.j2", 404, title="Not found", message=f"No live thread {thread_id}.")
        except LeslieError as exc:
            return _page("error.html.j2", 500, title="Cannot read the thread", message=exc.message)
        files = _shown_files(page.files, budget)
        notes: list[str] = []
        block: str | None = None
        block_error: str | None = None
        try:
            # Exactly what `leslie context` prints (without running [[context.commands]]). Never cached here:
            # the board writes nothing, not even the disposable block cache.
            block = render_context(repo, thread_id, cache=False, warnings=notes)
        except LeslieError as exc:
            block_error = exc.message
        return _page("thread.html.j2", p=page, files=files, block=block, block_error=block_error, notes=notes,
                     page="thread")

    def static_file(self, request: Request) -> Response:
        """`/static/NAME`: one of the board's own two files, by name from a fixed table (never a path)."""
        from starlette.responses import Response

        found = self.static.get(str(request.path_params["name"]))
        if found is None:
            return _not_found()
        return Response(found[0], media_type=found[1])

    def no_icon(self, request: Request) -> Response:
        """`/favicon.ico`: browsers ask; the board has none, and says so without a 404."""
        from starlette.responses import Response

        return Response(status_code=204)

    async def events(self, request: Request) -> Response:
        """`/events`: Server-Sent Events, `change` once the files have been quiet for QUIET seconds."""
        from starlette.responses import StreamingResponse

        counter = self.counter
        stopping = self.stopping

        async def stream() -> AsyncIterator[str]:
            seen, _ = counter.read()
            yield f"retry: 1000\nevent: hello\ndata: {seen}\n\n"
            pinged = time.monotonic()
            while not stopping.is_set():  # Ctrl-C ends the stream, so the server can stop without cancelling it
                generation, changed_at = counter.read()
                now = time.monotonic()
                if generation != seen and now - changed_at >= QUIET:
                    seen = generation
                    yield f"event: change\ndata: {generation}\n\n"
                elif now - pinged >= PING:
                    pinged = now
                    yield ": ping\n\n"
                await asyncio.sleep(0.05)

        return StreamingResponse(stream(), media_type="text/event-stream")


def _not_found() -> Response:
    return _page("error.html.j2", 404, title="Not found", message="There is no such page on the board.")


async def _not_found_handler(request: Request, exc: Exception) -> Response:
    return _not_found()


def create_app(root: str, counter: ChangeCounter, *, token: str, port: int,
               allowed_hosts: frozenset[str] | None = None, reads: Reads | None = None,
               stopping: threading.Event | None = None) -> ASGIApp:
    """The ASGI application serving the board of the repository at `root`; `counter` drives live updates.

    `token`: the secret every request must carry (`?token=`, then the cookie of `port`, see TokenGate);
    `allowed_hosts`: the Host header values accepted (None: any); `reads`: the reads to start from (warm);
    `stopping`: set when the server stops, which ends every event stream.
    Only GET (and HEAD) routes: any other method is 405, any other path 404.
    """
    from starlette.applications import Starlette
    from starlette.routing import Route

    pages = Pages(root, counter, reads if reads is not None else Reads(),
                  stopping if stopping is not None else threading.Event())
    routes = [
        Route("/", pages.board, methods=["GET"]),
        Route("/graph", pages.graph, methods=["GET"]),
        Route("/thread/{thread_id}", pages.thread, methods=["GET"]),
        Route("/events", pages.events, methods=["GET"]),
        Route("/static/{name}", pages.static_file, methods=["GET"]),
        Route("/favicon.ico", pages.no_icon, methods=["GET"]),
    ]
    app: Starlette = Starlette(routes=routes, exception_handlers={404: _not_found_handler})
    return SecurityHeaders(app, allowed_hosts, TokenGate(token, port))


def _path(root: str) -> Any:
    from pathlib import Path

    return Path(root)
