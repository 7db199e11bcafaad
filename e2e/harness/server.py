"""A scripted mock model server on 127.0.0.1 that logs every request body as a JSON line.

Each protocol (Anthropic, OpenAI Responses, Gemini) subclasses `ModelHandler` and turns the next scripted
`Reply` into its own wire format. The script is a queue shared by all requests that reach the model proper
("main" requests); requests a client sends on the side (a title, a summary for compaction, a token count) are
recognised by the protocol and answered without consuming the queue.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar


@dataclass(frozen=True)
class ToolCall:
    """A tool call the model makes: `name` and `arguments` exactly as the client's tool list declares them."""

    name: str
    arguments: dict[str, Any]
    kind: str = "function"  # OpenAI Responses: "function" or "custom" (freeform input such as apply_patch)
    text_input: str | None = None  # the freeform input of a custom tool


@dataclass(frozen=True)
class Reply:
    """One answer of the model: some text, or tool calls (the client runs them and asks again)."""

    text: str = "ok"
    tool_calls: tuple[ToolCall, ...] = ()
    input_tokens: int | None = None  # reported usage; None: a small figure from the request size


@dataclass
class Logged:
    """One request the server received."""

    index: int
    path: str
    kind: str  # "main", or what the protocol recognised: "title", "compact", "count_tokens", ...
    body: Any
    time: float
    turn: int  # the test's turn counter when the request arrived


@dataclass
class Script:
    """The model's scripted answers to main requests; empty queue → `default` text."""

    queue: deque[Reply] = field(default_factory=deque)
    default: Reply = field(default_factory=Reply)
    usage: int | None = None  # input tokens reported for every reply that does not say otherwise
    summary: str = ("<analysis>The user sent short messages.</analysis>\n"
                    "<summary>Summary: the user and the assistant exchanged short messages.</summary>")

    def push(self, *replies: Reply) -> None:
        """Answer the next main requests with `replies`, in order."""
        self.queue.extend(replies)

    def next(self) -> Reply:
        """The reply for the next main request."""
        return self.queue.popleft() if self.queue else self.default

    def reply_for(self, kind: str, summary: str | None = None) -> Reply:
        """The reply to a request of `kind`: the script's next for a main request, the summary for a
        compaction (`summary` when the client wants it wrapped), a short title for the clients' side calls."""
        if kind == "main":
            return self.next()
        if kind == "compact":
            return Reply(text=summary if summary is not None else self.summary, input_tokens=1000)
        return Reply(text="Short title", input_tokens=100)


class MockModelServer:
    """A threaded HTTP server on 127.0.0.1 with a script and a request log (memory + JSON lines file)."""

    def __init__(self, handler: type[ModelHandler], log_path: Path) -> None:
        self.script = Script()
        self.requests: list[Logged] = []
        self.turn = 0
        self.log_path = log_path
        self._lock = threading.Lock()
        handler_class = type(handler.__name__, (handler,), {"mock": self})
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler_class)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name=handler.__name__, daemon=True)

    @property
    def port(self) -> int:
        """The port the server listens on."""
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        """http://127.0.0.1:PORT"""
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> MockModelServer:
        """Serve in a background thread."""
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the socket."""
        self._server.shutdown()
        self._server.server_close()

    def log(self, path: str, kind: str, body: Any) -> Logged:
        """Record one request, in memory and as a JSON line."""
        with self._lock:
            entry = Logged(len(self.requests), path, kind, body, time.time(), self.turn)
            self.requests.append(entry)
            with self.log_path.open("a", encoding="utf-8") as out:
                out.write(json.dumps({"index": entry.index, "turn": entry.turn, "path": path, "kind": kind,
                                      "time": entry.time, "body": body}, ensure_ascii=False) + "\n")
        return entry

    def main_requests(self, turn: int | None = None) -> list[Logged]:
        """The main requests (of one turn, if given), in order."""
        return [r for r in self.requests if r.kind == "main" and (turn is None or r.turn == turn)]

    def of_kind(self, kind: str) -> list[Logged]:
        """The requests recognised as `kind`."""
        return [r for r in self.requests if r.kind == kind]


class ModelHandler(BaseHTTPRequestHandler):
    """Reads the JSON body, logs it, and lets the protocol answer; SSE answers close the connection."""

    mock: ClassVar[MockModelServer]
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the JSON lines log is the record."""

    def read_body(self) -> Any:
        """The request body, parsed as JSON when it is JSON."""
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if self.headers.get("Content-Encoding") == "zstd" or self.headers.get("Content-Encoding") == "gzip":
            raw = _decompress(raw, self.headers.get("Content-Encoding", ""))
        try:
            return json.loads(raw) if raw else None
        except ValueError:
            return raw.decode("utf-8", "replace")

    def send_json(self, payload: Any, status: int = 200) -> None:
        """A complete JSON answer."""
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def send_sse(self, events: Iterator[tuple[str | None, Any]]) -> None:
        """A server-sent event stream: (event name or None, JSON data) pairs, then the connection closes."""
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        for name, data in events:
            chunk = (f"event: {name}\n" if name else "") + f"data: {json.dumps(data)}\n\n"
            self.wfile.write(chunk.encode())
            self.wfile.flush()
        self.close_connection = True

    def not_found(self, body: Any) -> None:
        """Log and answer 404 for anything the protocol does not know."""
        self.mock.log(self.path, "unknown", body)
        self.send_json({"error": {"message": f"mock: no route {self.command} {self.path}"}}, 404)

    def do_GET(self) -> None:
        """GETs are not part of any model protocol the clients need; logged and refused."""
        self.not_found(None)


def _decompress(raw: bytes, encoding: str) -> bytes:
    if encoding == "gzip":
        import gzip

        return gzip.decompress(raw)
    raise ValueError(f"mock: cannot decode Content-Encoding {encoding}")


def strings_in(value: Any) -> Iterator[str]:
    """Every string inside a JSON value (keys excluded)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from strings_in(item)
    elif isinstance(value, list):
        for item in value:
            yield from strings_in(item)


def count_in(value: Any, needle: str) -> int:
    """How often `needle` occurs in the strings of a JSON value."""
    return sum(text.count(needle) for text in strings_in(value))
