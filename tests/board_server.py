"""A real `leslie board --no-open` process for the board's tests, and the hostile repository they serve.

`running_board(root)` starts the installed executable on a free port of 127.0.0.1, waits for the address it
prints (with its token), and stops it (SIGINT, as Ctrl-C) when the block ends. `plant_hostile(repo)` writes a
thread whose every field and file tries to run a script in the page; `PWNED` is the flag any of them would set.
"""

from __future__ import annotations

import http.client
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from conftest import LESLIE_EXE
from leslie.ops.threads import RefSpec, spawn
from leslie.store.repository import Repository

PWNED = "window.__pwned=1"  # no space: a Markdown link target cannot hold one
HOSTILE_TITLE = "</script><script>window.__pwned=1</script> title"
HOSTILE_PLAN = f"""# Plan <script>{PWNED}</script>

<img src=x onerror="{PWNED}">

[click me](javascript:{PWNED}) and [data](data:text/html,<script>{PWNED}</script>)

<a href="javascript:{PWNED}">raw link</a> <svg onload="{PWNED}"></svg>

- [x] a real list item with **bold** text
"""


@dataclass
class Board:
    """A running board: the address it printed (with `?token=`), its base (`http://host:port/`), host, port,
    token, and the process."""

    url: str
    base: str
    host: str
    port: int
    token: str
    process: subprocess.Popen[str]

    @property
    def cookie(self) -> str:
        """The Cookie header a browser sends once it has opened `url`."""
        return f"leslie-board-{self.port}={self.token}"

    def request(self, method: str, path: str, headers: dict[str, str] | None = None, *,
                authorized: bool = True, timeout: float = 10) -> http.client.HTTPResponse:
        """Send `path` exactly as given (no normalisation of `..`), return the response (body read).
        `authorized`: with the board's cookie, as the browser that opened its address (unless `headers` has one)."""
        headers = dict(headers or {})
        if authorized:
            headers.setdefault("Cookie", self.cookie)
        connection = http.client.HTTPConnection(self.host, self.port, timeout=timeout)
        connection.putrequest(method, path, skip_host="Host" in headers, skip_accept_encoding=True)
        for name, value in headers.items():
            connection.putheader(name, value)
        connection.endheaders()
        response = connection.getresponse()
        response.body = response.read()  # type: ignore[attr-defined]
        connection.close()
        return response


@contextmanager
def running_board(root: Path, *args: str) -> Iterator[Board]:
    """`leslie board --no-open` in `root` until the block ends."""
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    process = subprocess.Popen([LESLIE_EXE, "board", "--no-open", *args], cwd=root, env=env, text=True,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        match = re.search(r"(http://\S+/)\?token=([A-Za-z0-9_-]{43})\s", line)
        if match is None:
            process.kill()
            _, err = process.communicate(timeout=10)
            raise AssertionError(f"leslie board did not start: {line!r} {err}")
        parts = urlsplit(match.group(1))
        assert parts.hostname is not None and parts.port is not None
        yield Board(match.group(0).strip(), match.group(1), parts.hostname, parts.port, match.group(2), process)
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        for stream in (process.stdout, process.stderr):
            if stream is not None:
                stream.close()


def plant_hostile(repo: Repository) -> str:
    """A thread whose title, intent, plan and design try to run `PWNED` in the page; returns its ID. Its design
    folder also holds a link to a file outside the repository, which the board must not show."""
    spawn(repo, f"<img src=x onerror=\"{PWNED}\"> intent", title=HOSTILE_TITLE, thread_id="thread-evil")
    spawn(repo, "a neighbour", title="Neighbour", thread_id="thread-good", refs=[RefSpec("thread-evil", ())])
    folder = repo.layout.thread_dir("thread-evil")
    (folder / "plan.md").write_text(HOSTILE_PLAN, encoding="utf-8")
    (folder / "design").mkdir(exist_ok=True)
    (folder / "design" / "notes.md").write_text("## Notes\n\n<iframe src=\"https://example.com\"></iframe>\n",
                                                 encoding="utf-8")
    secret = repo.root.parent / "outside-secret.txt"
    secret.write_text("TOP-SECRET-OUTSIDE\n", encoding="utf-8")
    (folder / "design" / "secret.md").symlink_to(secret)
    return "thread-evil"


def chromium_or_skip() -> str:
    """The path of Debian's chromium, or skip loudly; under CI (CI=true) a missing chromium fails instead."""
    import pytest

    path = "/usr/bin/chromium"
    if os.path.exists(path):
        try:
            import playwright  # noqa: F401
        except ImportError:
            reason = "the playwright package is missing (pip install -e '.[test]')"
        else:
            return path
    else:
        reason = f"{path} is missing (apt-get install chromium chromium-driver)"
    message = f"BROWSER TESTS NOT RUN: {reason}"
    if os.environ.get("CI") == "true":
        pytest.fail(message + " (CI=true: the board must be tested in a real browser)")
    sys.stderr.write(message + "\n")
    pytest.skip(message)
    raise AssertionError("unreachable")


def table_bomb(columns: int = 500) -> str:
    """A GFM table markdown-it fills in to 65,536 cells (its own per-table limit) from about 2 KB: a wide
    header over one-character rows; each empty cell a row leaves out is still a cell to build and render."""
    return "|" + "a|" * columns + "\n|" + "-|" * columns + "\n" + "x\n" * (65536 // columns + 1) + "\n"


# Text that makes markdown-it-py slow for its size (CPU time at 250 KB on the development machine, see
# docs/benchmarks.md "Hostile Markdown"): each unit is repeated to fill a file.
SLOW_MARKDOWN = {
    "images": "![",  # an image opener per two characters, none closed: ~7 s
    "refdefs": "[a\n",  # a line per unclosed link label, each tried as a reference definition: ~5 s
    "list_items": "- a\n",  # a list item per line: ~4 s
    "links_and_emphasis": "[ a_",  # link openers and emphasis closers that never meet: ~4 s
    "tables": table_bomb(),  # 65,536 cells per 2 KB: minutes
}


def slow_markdown(kind: str, size: int) -> str:
    """`size` bytes (at most) of the hostile Markdown `kind`."""
    unit = SLOW_MARKDOWN[kind]
    return unit * (size // len(unit))


def plant_slow_markdown(repo: Repository, files: int = 12, size: int = 250_000) -> str:
    """A thread whose design folder holds `files` hostile Markdown files of `size` bytes (under the 256 KiB an
    asset file may have), each of the kinds in turn; returns its ID."""
    spawn(repo, "slow to render", title="Slow Markdown", thread_id="thread-slow")
    design = repo.layout.thread_dir("thread-slow") / "design"
    design.mkdir(exist_ok=True)
    kinds = sorted(SLOW_MARKDOWN)
    for number in range(files):
        (design / f"slow-{number:02d}.md").write_text(slow_markdown(kinds[number % len(kinds)], size),
                                                      encoding="utf-8")
    return "thread-slow"
