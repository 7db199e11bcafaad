"""`leslie board` in a real headless browser: Debian's chromium driven by Playwright (never `playwright install`).

Without /usr/bin/chromium (or the playwright package) these tests skip with a loud reason; with CI=true they
fail instead. Install: `apt-get install -y chromium chromium-driver`.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from board_server import PWNED, plant_hostile, running_board
from conftest import run_leslie
from leslie.store.repository import Repository

CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from board_server import chromium_or_skip

    path = chromium_or_skip()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as driver:
        launched = driver.chromium.launch(executable_path=path, args=CHROMIUM_ARGS)
        yield launched
        launched.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context()
    opened = context.new_page()
    errors: list[str] = []
    opened.on("pageerror", lambda exc: errors.append(str(exc)))
    opened.errors = errors
    yield opened
    context.close()


@pytest.fixture
def demo(tmp_path: Path) -> Path:
    root = tmp_path / "demo"
    result = run_leslie("demo", "--keep", str(root), cwd=tmp_path)
    assert result.code == 0, result.stderr
    return root


def test_the_demo_board_shows_its_threads_and_follows_a_spawn_without_reload(demo: Path, page: Any) -> None:
    repo = Repository(demo)
    titles = [repo.read_thread(t).title for t in repo.thread_ids()]
    objective = repo.objectives()[0]
    with running_board(demo) as board:
        page.goto(board.url)
        for title in titles:
            if not repo.read_thread(next(t for t in repo.thread_ids() if repo.read_thread(t).title == title)
                                    ).is_tombstone:
                assert page.get_by_text(title, exact=True).count() >= 1, title
        assert page.locator(f"section#{objective.id} h2").inner_text().startswith(objective.title)
        page.wait_for_function("document.getElementById('live').textContent === 'live'")
        page.evaluate("window.__same_page = true")  # gone if the page reloads
        spawned = run_leslie("spawn", "--objective", objective.id, "--title", "Born while watching",
                             "--intent", "Check that the board follows a spawn", cwd=demo)
        assert spawned.code == 0, spawned.stderr
        page.get_by_text("Born while watching", exact=True).wait_for(timeout=10_000)
        thread_id = spawned.stdout.strip().split()[-1]
        retitled = run_leslie("retitle", thread_id, "Renamed while watching", cwd=demo)
        assert retitled.code == 0, retitled.stderr
        page.get_by_text("Renamed while watching", exact=True).wait_for(timeout=10_000)
        assert page.evaluate("window.__same_page") is True
    assert page.errors == []


def test_a_thread_page_renders_markdown_references_and_its_block(demo: Path, page: Any) -> None:
    repo = Repository(demo)
    thread = next(repo.read_thread(t) for t in repo.thread_ids() if repo.read_thread(t).references)
    with running_board(demo) as board:
        page.goto(board.url)
        page.get_by_role("link", name=thread.title).first.click()
        page.wait_for_url(f"**/thread/{thread.id}")
        assert page.locator("section.asset .markdown h1").count() >= 1  # plan.md's heading, as a heading
        assert page.locator("section.asset .markdown li").count() >= 1
        assert "<thread_context" in page.locator("pre.xml").inner_text()
        target = repo.read_thread(sorted(thread.references)[0])
        assert page.locator("section.links").get_by_text(target.title).count() == 1
        page.goto(board.base + "graph")  # the cookie opened it: no token in this address
        assert page.locator("svg a.node").count() == len([t for t in repo.thread_ids()
                                                          if not repo.read_thread(t).is_tombstone])
    assert page.errors == []


def test_hostile_content_never_runs_and_shows_as_text(repo: Repository, page: Any) -> None:
    evil = plant_hostile(repo)
    with running_board(repo.root) as board:
        page.goto(board.url)
        for path in ("", "graph", f"thread/{evil}"):
            page.goto(board.base + path)
            page.wait_for_load_state("load")
            page.wait_for_timeout(200)
            assert page.evaluate("typeof window.__pwned") == "undefined", path
            assert page.evaluate("document.scripts.length") == 1, path  # the board's own script only
            assert page.evaluate("document.querySelectorAll('[onerror],[onload],iframe,img').length") == 0
        assert "<script>window.__pwned=1</script>" in page.locator("h1").first.inner_text()  # the title, as text
        body = page.locator("main").inner_text()
        assert f'<img src=x onerror="{PWNED}">' in body  # plan.md's raw HTML, as text
        link = page.get_by_text("click me")
        assert link.count() >= 1
        assert page.locator("a", has_text="click me").count() == 0  # a javascript: link is no link
        for anchor in page.locator("main a").all():
            href = anchor.get_attribute("href") or ""
            assert not href.lower().startswith(("javascript:", "data:")), href
        assert page.evaluate("typeof window.__pwned") == "undefined"
    assert page.errors == []


def test_the_token_opens_the_board_once_then_the_cookie_does(demo: Path, page: Any) -> None:
    with running_board(demo) as board:
        refused = page.goto(board.base)
        assert refused is not None and refused.status == 403
        assert "<main" not in page.content() and "forbidden" in page.content()
        opened = page.goto(board.url)
        assert opened is not None and opened.status == 200
        page.wait_for_function("document.getElementById('live').textContent === 'live'")  # the event stream
        assert page.url == board.base  # board.js took the token out of the address (and the history)
        assert page.evaluate("document.cookie") == ""  # HttpOnly: no script of the page can read it
        page.reload()
        page.wait_for_function("document.getElementById('live').textContent === 'live'")
        assert page.locator("section.group").count() >= 1
        other = page.context.browser.new_context().new_page()  # another browser profile: no cookie
        try:
            assert other.goto(board.base).status == 403  # type: ignore[union-attr]
        finally:
            other.context.close()
    assert page.errors == []
