"""`leslie board` over HTTP, without a browser: the real server on 127.0.0.1, its headers, what it serves and
what it refuses (docs/security.md, "The board")."""

from __future__ import annotations

import http.client
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from board_server import HOSTILE_TITLE, PWNED, plant_hostile, plant_slow_markdown, running_board
from conftest import LESLIE_EXE, run_leslie, tree_digest
from leslie.ops.threads import RefSpec, spawn
from leslie.store.repository import Repository

PAGES = ["/", "/graph", "/thread/thread-a", "/static/board.js", "/static/board.css"]


@pytest.fixture
def served(three_threads: Repository) -> Repository:
    spawn(three_threads, "reads a", title="Reader", thread_id="thread-d",
          refs=[RefSpec("thread-a", ("plan.md",))])
    return three_threads


def test_it_listens_on_127_0_0_1_and_a_free_port_by_default(served: Repository) -> None:
    with running_board(served.root) as board, running_board(served.root) as second:
        assert board.host == "127.0.0.1"
        assert board.port != second.port  # port 0: the system picks a free one each time
        assert board.request("GET", "/").status == 200


def test_every_response_carries_a_strict_content_security_policy(served: Repository) -> None:
    with running_board(served.root) as board:
        for path in [*PAGES, "/nowhere", "/thread/thread-zzz"]:
            response = board.request("GET", path)
            csp = response.getheader("Content-Security-Policy") or ""
            assert "default-src 'none'" in csp and "script-src 'self'" in csp, (path, csp)
            assert "unsafe-inline" not in csp and "unsafe-eval" not in csp
            assert "frame-ancestors 'none'" in csp and "form-action 'none'" in csp
            assert response.getheader("X-Content-Type-Options") == "nosniff"
            assert response.getheader("Referrer-Policy") == "no-referrer"
        assert board.request("POST", "/").getheader("Content-Security-Policy")


def test_pages_show_titles_statuses_and_scoped_edges(served: Repository) -> None:
    with running_board(served.root) as board:
        home = board.request("GET", "/").body.decode()  # type: ignore[attr-defined]
        for title in ("thread a", "thread b", "thread c", "Reader"):
            assert title in home
        graph = board.request("GET", "/graph").body.decode()  # type: ignore[attr-defined]
        assert "<svg" in graph and "Reader" in graph and "active" in graph
        assert 'class="edge-label"' in graph and ">plan.md</text>" in graph  # the scoped edges are labelled
        page = board.request("GET", "/thread/thread-a").body.decode()  # type: ignore[attr-defined]
        assert "thread b" in page and "Reader" in page  # a reference and a referrer
        assert "&lt;thread_context" in page  # the block its agent gets, as text


def test_only_get_and_head_are_served(served: Repository) -> None:
    with running_board(served.root) as board:
        assert board.request("HEAD", "/").status == 200
        for method in ("POST", "PUT", "DELETE", "PATCH"):
            for path in PAGES:
                assert board.request(method, path).status == 405, (method, path)
        assert board.request("GET", "/thread/thread-a").status == 200
        assert served.read_thread("thread-a").status == "active"


def test_paths_outside_the_board_are_not_found(served: Repository) -> None:
    (served.root / "secret.txt").write_text("REPO-SECRET\n", encoding="utf-8")
    with running_board(served.root) as board:
        for path in ["/../../etc/passwd", "/..%2f..%2fetc%2fpasswd", "/static/../../../etc/passwd",
                     "/static/..%2f..%2fcli%2fapp.py", "/static/board.py", "/static/", "/thread/..%2fsecret.txt",
                     "/thread/../secret.txt", "/thread/thread-a/plan.md", "/thread/thread-a%2fthread.json",
                     "/.leslie/config.toml", "/secret.txt", "/.git/config", "/thread/%2e%2e",
                     "/thread/thread-zzz", "/static/%2e%2e%2fapp.py", "//etc/passwd"]:
            response = board.request("GET", path)
            body = response.body  # type: ignore[attr-defined]
            assert response.status == 404, (path, response.status)
            assert b"REPO-SECRET" not in body and b"root:" not in body


def test_a_thread_id_must_be_a_live_thread_of_the_index(served: Repository) -> None:
    # A folder that looks like a thread but is not in the index (a hand-made one) is not served.
    stray = served.layout.thread_dir("thread-stray")
    stray.mkdir()
    (stray / "plan.md").write_text("STRAY-PLAN\n", encoding="utf-8")
    run_leslie("rm", "thread-c", "--force", cwd=served.root)
    with running_board(served.root) as board:
        assert board.request("GET", "/thread/thread-stray").status == 404
        assert board.request("GET", "/thread/thread-c").status == 404  # deleted: a tombstone
        assert board.request("GET", "/thread/thread-b").status == 200


def test_hostile_text_is_escaped_and_markdown_sanitized(repo: Repository) -> None:
    evil = plant_hostile(repo)
    with running_board(repo.root) as board:
        for path in ("/", "/graph", f"/thread/{evil}"):
            html = board.request("GET", path).body.decode()  # type: ignore[attr-defined]
            # The only script element is the board's own, and nothing of the repository becomes markup.
            assert html.count("<script") == 1, path
            assert re.search(r"<a\s[^>]*href=.(javascript|data|vbscript):", html, re.IGNORECASE) is None, path
            assert "<img" not in html and "<iframe" not in html and "<svg onload" not in html
            assert re.search(r"<[a-zA-Z][^>]*\son[a-z]+\s*=", html) is None, path  # no event handler attribute
            assert "&lt;/script&gt;&lt;script&gt;" in html, path  # the title is there, as text
        page = board.request("GET", f"/thread/{evil}").body.decode()  # type: ignore[attr-defined]
        assert "<strong>bold</strong>" in page  # Markdown is still rendered
        assert ">click me</a>" not in page and "click me" in page  # the javascript: link lost its link
        assert "TOP-SECRET-OUTSIDE" not in page  # a link out of the repository is never followed
        assert "design/notes.md" in page and "design/secret.md" not in page  # the link is skipped, as in a block
    assert HOSTILE_TITLE and PWNED


def test_a_foreign_host_header_is_refused(served: Repository) -> None:
    with running_board(served.root) as board:
        assert board.request("GET", "/", {"Host": "attacker.example"}).status == 400
        assert board.request("GET", "/", {"Host": f"attacker.example:{board.port}"}).status == 400
        assert board.request("GET", "/", {"Host": f"localhost:{board.port}"}).status == 200
        assert board.request("GET", "/", {"Host": f"127.0.0.1:{board.port}"}).status == 200


def _cookie_of(response: http.client.HTTPResponse) -> str:
    return response.getheader("Set-Cookie") or ""


def test_nothing_is_served_without_the_token(served: Repository) -> None:
    # Another user of the machine reaches 127.0.0.1 too: without the token every route is 403, the event
    # stream and the board's own static files included, and nothing of the repository is in the answer.
    with running_board(served.root) as board:
        wrong = "x" * len(board.token)
        for path in [*PAGES, "/events", "/favicon.ico", "/nowhere", "/thread/thread-zzz"]:
            for query, cookie in [("", None), (f"?token={wrong}", None), ("?token=", None), ("?token", None),
                                  ("", f"leslie-board-{board.port}={wrong}"),
                                  ("", f"leslie-board-{board.port + 1}={board.token}"),  # another port's
                                  (f"?token={board.token[:-1]}", None), (f"?token={board.token}x", None),
                                  (f"?Token={board.token}", None)]:
                headers = {"Cookie": cookie} if cookie else None
                response = board.request("GET", path + query, headers, authorized=False, timeout=5)
                body = response.body  # type: ignore[attr-defined]
                assert response.status == 403, (path, query, cookie, response.status)
                assert b"thread a" not in body and b"<html" not in body.lower(), path
                assert not _cookie_of(response), path
                assert "default-src 'none'" in (response.getheader("Content-Security-Policy") or "")
        assert board.request("HEAD", "/", authorized=False).status == 403
        assert board.request("POST", "/", authorized=False).status == 403  # refused before the method is looked at


def test_the_token_in_the_url_opens_the_board_and_leaves_a_strict_cookie(served: Repository) -> None:
    with running_board(served.root) as board:
        assert board.url == f"{board.base}?token={board.token}"
        assert board.base == f"http://127.0.0.1:{board.port}/"
        first = board.request("GET", f"/?token={board.token}", authorized=False)
        assert first.status == 200
        assert "thread a" in first.body.decode()  # type: ignore[attr-defined]
        cookie = _cookie_of(first)
        name_value, *attributes = [part.strip() for part in cookie.split(";")]
        assert name_value == board.cookie  # named after the port: two boards keep their own
        assert {a.lower() for a in attributes} == {"path=/", "httponly", "samesite=strict"}
        assert first.getheader("Content-Security-Policy")  # the security headers are still there
        # From then on the cookie alone opens every route, the event stream included.
        for path in [*PAGES, "/thread/thread-b"]:
            response = board.request("GET", path, {"Cookie": name_value}, authorized=False)
            assert response.status == 200, path
            assert not _cookie_of(response), path  # set once, not on every answer
        connection = http.client.HTTPConnection(board.host, board.port, timeout=10)
        connection.request("GET", "/events", headers={"Cookie": f"other=1; {name_value}"})
        stream = connection.getresponse()
        assert stream.status == 200 and stream.readline() == b"retry: 1000\n"
        connection.close()
        # The token also opens any other route directly (a script's first request, `curl URL`).
        assert board.request("GET", f"/graph?token={board.token}", authorized=False).status == 200


def test_two_boards_have_their_own_tokens(served: Repository) -> None:
    with running_board(served.root) as one, running_board(served.root) as two:
        assert one.token != two.token
        assert one.request("GET", f"/?token={two.token}", authorized=False).status == 403
        assert two.request("GET", "/", {"Cookie": one.cookie}, authorized=False).status == 403
        both = f"{one.cookie}; {two.cookie}"  # a browser sends both boards' cookies to either port
        assert one.request("GET", "/", {"Cookie": both}, authorized=False).status == 200
        assert two.request("GET", "/", {"Cookie": both}, authorized=False).status == 200


def test_the_event_stream_is_refused_without_the_token(served: Repository) -> None:
    with running_board(served.root) as board:
        connection = http.client.HTTPConnection(board.host, board.port, timeout=5)
        connection.request("GET", "/events")
        response = connection.getresponse()
        assert response.status == 403
        assert not response.getheader("Content-Type", "").startswith("text/event-stream")
        assert b"event:" not in response.read()
        connection.close()


def test_a_page_of_slow_markdown_answers_within_its_budget(repo: Repository) -> None:
    # Twelve 250 KB files of the text markdown-it-py is slowest on: about 5 s each, a minute for the page,
    # before the budget. Now each is over the size cap and shown as plain text, escaped, with the reason.
    thread = plant_slow_markdown(repo)
    (repo.layout.thread_dir(thread) / "plan.md").write_text("# The plan\n\n- **first** step\n", encoding="utf-8")
    with running_board(repo.root) as board:
        started = time.monotonic()
        response = board.request("GET", f"/thread/{thread}", timeout=120)
        took = time.monotonic() - started
        page = response.body.decode()  # type: ignore[attr-defined]
    assert response.status == 200
    assert took < 10, f"the page took {took:.1f} s"  # a generous bound: the budget is 1 s, see bench_markdown
    assert page.count("Shown as plain text: larger than 128 KB.") == 12
    assert "<h1>The plan</h1>" in page and "<strong>first</strong>" in page  # the plan is still Markdown
    assert "<pre>![![![" in page and "<pre>[a\n[a\n" in page  # the hostile text, as text
    assert "<td>" not in page and "<li>a</li>" not in page


_RECORDING_BROWSER = """#!/bin/sh
# A stand-in browser ($BROWSER): what it was given, and what that file held while the board ran.
printf '%s\\n' "$@" > "$RECORD/args"
page="${1#file://}"
cat "$page" > "$RECORD/page"
stat -c %a "$page" > "$RECORD/mode"
stat -c %a "$(dirname "$page")" > "$RECORD/folder-mode"
"""


def test_the_browser_is_given_a_private_redirect_page_not_the_token(served: Repository, tmp_path: Path) -> None:
    # A browser's command line is visible to every user of the machine (ps, /proc/PID/cmdline): the token
    # goes in a page only this user can read, and the browser is given that page's path.
    import signal

    record = tmp_path / "record"
    record.mkdir()
    browser = tmp_path / "browser.sh"
    browser.write_text(_RECORDING_BROWSER, encoding="utf-8")
    browser.chmod(0o755)
    env = dict(os.environ, BROWSER=str(browser), RECORD=str(record), PYTHONUNBUFFERED="1")
    env.pop("DISPLAY", None)
    env.pop("WAYLAND_DISPLAY", None)
    process = subprocess.Popen([LESLIE_EXE, "board"], cwd=served.root, env=env, text=True,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert process.stdout is not None
        printed = process.stdout.readline()
        deadline = time.monotonic() + 20
        while not (record / "folder-mode").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=15) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        for stream in (process.stdout, process.stderr):
            if stream is not None:
                stream.close()
    token = re.search(r"\?token=(\S+)", printed)
    assert token is not None, printed
    given = (record / "args").read_text(encoding="utf-8").split()
    assert len(given) == 1 and given[0].startswith("file:///") and given[0].endswith("/open.html")
    assert token.group(1) not in given[0]
    page = (record / "page").read_text(encoding="utf-8")
    assert 'content="0;url=http://127.0.0.1:' in page and f"?token={token.group(1)}" in page
    assert (record / "mode").read_text().strip() == "600"
    assert (record / "folder-mode").read_text().strip() == "700"
    assert not Path(given[0].removeprefix("file://")).parent.exists()  # removed when the board stopped


def test_browsing_the_board_writes_nothing(served: Repository) -> None:
    before = tree_digest(served.root)
    with running_board(served.root) as board:
        for path in [*PAGES, "/thread/thread-b", "/thread/thread-d"]:
            assert board.request("GET", path).status == 200
    assert tree_digest(served.root) == before


def announced_change(response: http.client.HTTPResponse, seconds: float = 8) -> bool:
    """Whether the event stream says `change` within `seconds`."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if response.readline() == b"event: change\n":
            return True
    return False


def test_the_event_stream_announces_a_change(served: Repository) -> None:
    with running_board(served.root) as board:
        connection = http.client.HTTPConnection(board.host, board.port, timeout=10)
        connection.request("GET", "/events", headers={"Cookie": board.cookie})
        response = connection.getresponse()
        assert response.getheader("Content-Type", "").startswith("text/event-stream")
        assert "default-src 'none'" in (response.getheader("Content-Security-Policy") or "")
        assert response.readline() == b"retry: 1000\n"
        assert response.readline() == b"event: hello\n"
        response.readline(), response.readline()
        assert run_leslie("retitle", "thread-b", "Renamed b", cwd=served.root).code == 0
        changed = announced_change(response)
        connection.close()
        assert changed
        assert "Renamed b" in board.request("GET", "/").body.decode()  # type: ignore[attr-defined]


@pytest.mark.parametrize("first", [True, False], ids=["sessions-folder-exists", "first-session"])
def test_the_event_stream_announces_an_agent_session(served: Repository, first: bool) -> None:
    """Sessions live in the machine state (`.git/leslie/sessions/`), outside `.leslie/`: watched too, from the
    folder that will hold them when none exists yet."""
    if not first:
        assert run_leslie("inject", "--thread", "thread-b", "--session", "s0", "--agent", "wrapper", "--message",
                          "hi", cwd=served.root).code == 0
    with running_board(served.root) as board:
        connection = http.client.HTTPConnection(board.host, board.port, timeout=10)
        connection.request("GET", "/events", headers={"Cookie": board.cookie})
        response = connection.getresponse()
        for _ in range(4):  # retry, hello and its data, the blank line
            response.readline()
        result = run_leslie("inject", "--thread", "thread-a", "--session", "s1", "--agent", "wrapper", "--message",
                            "hello", cwd=served.root)
        assert result.code == 0, result.stderr
        changed = announced_change(response)
        connection.close()
        assert changed


def test_bad_options_are_usage_errors(served: Repository) -> None:
    assert run_leslie("board", "--no-open", "--host", "not a host", cwd=served.root).code == 2
    assert run_leslie("board", "--no-open", "--port", "70000", cwd=served.root).code == 2
    outside = served.root.parent / "elsewhere"
    outside.mkdir()
    assert run_leslie("board", "--no-open", cwd=outside).code == 3  # no .leslie/ here


_IMPORT_PROBE = """
import json, sys
from leslie.__main__ import main
codes = [main(args) for args in json.loads(sys.argv[1])]
print(json.dumps({"codes": codes, "heavy": sorted(m for m in sys.modules if m.split(".")[0] in sys.argv[2:])}))
"""


def test_other_commands_do_not_import_the_board_libraries(served: Repository, tmp_path: Path) -> None:
    commands = [["--help"], ["board", "--help"], ["list"], ["show", "thread-a"], ["context", "--thread", "thread-a"]]
    # not markdown_it: Rich, which draws --help, imports it too
    out = subprocess.run([sys.executable, "-c", _IMPORT_PROBE, json.dumps(commands), "starlette", "uvicorn",
                          "nh3", "anyio", "leslie.board.markdown"], cwd=served.root, capture_output=True, text=True,
                         check=True)
    result = json.loads(out.stdout.splitlines()[-1])
    assert result["codes"] == [0] * len(commands)
    assert result["heavy"] == []


def test_a_thread_page_lists_its_agent_sessions(served: Repository) -> None:
    for _ in range(2):
        result = run_leslie("inject", "--thread", "thread-a", "--session", "s-<b>1</b>", "--agent", "wrapper",
                            "--message", "hello", cwd=served.root)
        assert result.code == 0, result.stderr
    with running_board(served.root) as board:
        page = board.request("GET", "/thread/thread-a").body.decode()  # type: ignore[attr-defined]
        home = board.request("GET", "/").body.decode()  # type: ignore[attr-defined]
    rows = re.findall(r"<tr><td>wrapper</td>.*?</tr>", page)
    assert len(rows) == 1, page
    assert "<td>2</td>" in rows[0]  # two rounds
    assert "start 1" in rows[0]  # injections by reason
    assert "s-&lt;b&gt;1&lt;/b&gt;" in rows[0]  # the agent's session ID, as text
    assert "1 session" in home


def test_a_port_in_use_is_exit_6(served: Repository) -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        result = run_leslie("board", "--no-open", "--port", str(port), cwd=served.root)
    assert result.code == 6, result.stderr
    assert "cannot listen on 127.0.0.1" in result.stderr


def test_ctrl_c_with_a_page_open_stops_cleanly(served: Repository) -> None:
    import http.client
    import signal

    with running_board(served.root) as board:
        connection = http.client.HTTPConnection(board.host, board.port, timeout=10)
        connection.request("GET", "/events", headers={"Cookie": board.cookie})
        response = connection.getresponse()
        assert response.readline() == b"retry: 1000\n"  # the page is following the board
        board.process.send_signal(signal.SIGINT)
        code = board.process.wait(timeout=15)
        assert board.process.stderr is not None
        errors = board.process.stderr.read()
        connection.close()
    assert code == 0
    assert errors == ""  # no "Exception in ASGI application", no traceback


def test_a_corrupt_objective_is_a_problem_line_on_every_page(served: Repository) -> None:
    served.layout.objective_file("obj-default").write_text("{broken", encoding="utf-8")
    with running_board(served.root) as board:
        for path in ("/", "/graph"):
            response = board.request("GET", path)
            body = response.body.decode()  # type: ignore[attr-defined]
            assert response.status == 200, path
            assert 'class="problem"' in body and "objective.json" in body, path
            assert "thread a" in body, path


def test_cards_and_pages_name_a_threads_holder(served: Repository) -> None:
    from leslie.ops.claims import claim

    claim(served, "thread-a", session="sess-<b>", agent="codex")  # the session ID is escaped like any text
    with running_board(served.root) as board:
        home = board.request("GET", "/").body.decode()  # type: ignore[attr-defined]
        assert home.count("held by codex session sess-&lt;b&gt;") == 1
        page = board.request("GET", "/thread/thread-a").body.decode()  # type: ignore[attr-defined]
        assert "Held by codex session" in page and "sess-&lt;b&gt;" in page and "<b>" not in page
        assert "Held by" not in board.request("GET", "/thread/thread-b").body.decode()  # type: ignore[attr-defined]


def test_a_plan_shows_checkboxes_and_no_scaffold_comment(repo: Repository) -> None:
    """Issue 33: the plan's task list as disabled checkboxes; an old scaffold's instruction comment not shown."""
    spawn(repo, "Rotate keys", thread_id="thread-k")
    folder = repo.root / ".leslie" / "threads" / "thread-k"
    (folder / "plan.md").write_text(
        "# Plan: Rotate keys\n\n<!-- Thread thread-k. Intent: Rotate keys\n     Write the steps you will take to "
        "fulfil the intent, as a checklist. Keep it current:\n     tick steps off, add new ones, strike what no "
        "longer applies. -->\n\n- [x] pick the cadence\n- [ ] write the job\n", encoding="utf-8")
    with running_board(repo.root) as board:
        page = board.request("GET", "/thread/thread-k").body.decode()  # type: ignore[attr-defined]
    files = page[:page.index('<section class="block">')]  # the block below quotes the file as it is
    assert "<h1>Plan: Rotate keys</h1>" in files
    assert "Write the steps" not in files and "&lt;!--" not in files
    boxes = re.findall(r"<input ([^>]*)> (pick the cadence|write the job)", files)
    assert [(sorted(attrs.split()), text) for attrs, text in boxes] == [
        (['checked="checked"', 'disabled="disabled"', 'type="checkbox"'], "pick the cadence"),
        (['disabled="disabled"', 'type="checkbox"'], "write the job")]
