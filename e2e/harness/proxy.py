"""A proxy on 127.0.0.1 that refuses every request and remembers it: the clients' HTTP(S)_PROXY.

Every client runs with HTTP_PROXY/HTTPS_PROXY/ALL_PROXY pointing here and NO_PROXY=127.0.0.1,localhost, so a
request for any other address (telemetry, update checks, feedback...) ends here, is logged, and fails. A test
fails when this proxy saw anything.
"""

from __future__ import annotations

import contextlib
import json
import socketserver
import threading
import time
from pathlib import Path


class RefusingProxy:
    """Accepts connections, reads the request line and headers, logs them, answers 403 and closes."""

    def __init__(self, log_path: Path) -> None:
        self.log_path = log_path
        self.seen: list[dict[str, str]] = []
        lock = threading.Lock()
        outer = self

        class Handler(socketserver.StreamRequestHandler):
            timeout = 5

            def handle(self) -> None:
                try:
                    line = self.rfile.readline(8192).decode("latin-1").strip()
                    headers = []
                    while True:
                        header = self.rfile.readline(8192).decode("latin-1").strip()
                        if not header:
                            break
                        headers.append(header)
                except OSError:
                    line, headers = "<unreadable>", []
                entry = {"time": str(time.time()), "request": line,
                         "host": next((h.split(":", 1)[1].strip() for h in headers
                                       if h.lower().startswith("host:")), "")}
                with lock:
                    outer.seen.append(entry)
                    with outer.log_path.open("a", encoding="utf-8") as out:
                        out.write(json.dumps(entry) + "\n")
                with contextlib.suppress(OSError):
                    self.wfile.write(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")

        self._server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="refusing-proxy", daemon=True)

    @property
    def url(self) -> str:
        """http://127.0.0.1:PORT"""
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def start(self) -> RefusingProxy:
        """Serve in a background thread."""
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving."""
        self._server.shutdown()
        self._server.server_close()
