"""The board's library: what the pages show (leslie.board.data), the graph layout, the Markdown sanitizer and
which file changes count, without a server."""

from __future__ import annotations

import os
import sys

from conftest import run_leslie
from leslie.board.data import PAGE_FILES_BYTES, Reads, known_thread, latest_entry, read_board, thread_page
from leslie.board.graph import layout
from leslie.board.live import matters
from leslie.board.markdown import render_markdown
from leslie.ops.threads import RefSpec, spawn
from leslie.store.model import Thread
from leslie.store.repository import Repository


def test_the_latest_progress_entry_is_the_last_dated_section_with_wrapped_lines_joined() -> None:
    text = ("# Progress: x\n\n<!-- template note -->\n\n## 2026-01-01\n- old\n\n## 2026-01-02\n- first item\n"
            "  wrapped on two lines\n- second\n")
    assert latest_entry(text) == "2026-01-02\n- first item wrapped on two lines\n- second"
    assert latest_entry("# Progress: x\n\n<!-- Thread t. Append a dated entry. -->\n") == ""
    assert latest_entry("# Progress\n\nDid a thing.\n") == "Did a thing."


def test_cards_are_grouped_by_objective_with_counts(three_threads: Repository) -> None:
    repo = three_threads
    run_leslie("objective", "create", "Ship it", "--id", "obj-ship", cwd=repo.root)
    spawn(repo, "in the objective", title="Objective work", objective="obj-ship", thread_id="thread-o")
    (repo.layout.thread_dir("thread-o") / "progress.md").write_text("# P\n\n## 2026-02-02\n- did it\n")
    board = read_board(repo)
    groups = {g.id: g for g in board.groups}
    assert [c.id for c in groups["obj-ship"].cards] == ["thread-o"]
    assert groups["obj-ship"].cards[0].latest == "2026-02-02\n- did it"
    first = groups["obj-default"]  # `leslie init`'s objective, where spawn puts a thread by default
    assert {c.id for c in first.cards} == {"thread-a", "thread-b", "thread-c"}
    assert first.counts == {"active": 3}
    card_b = next(c for c in first.cards if c.id == "thread-b")
    assert card_b.referrers == 1 and card_b.references == 0
    assert board.problems == []


def test_a_corrupt_thread_is_a_problem_not_a_broken_board(three_threads: Repository) -> None:
    repo = three_threads
    repo.layout.thread_file("thread-c").write_text("{not json", encoding="utf-8")
    board = read_board(repo)
    assert set(board.threads) == {"thread-a", "thread-b"}
    assert len(board.problems) == 1 and "thread-c" in board.problems[0]


def test_kept_reads_follow_every_change_of_the_file(three_threads: Repository) -> None:
    repo = three_threads
    reads = Reads()
    assert read_board(repo, reads).threads["thread-b"].title == "thread b"
    assert run_leslie("retitle", "thread-b", "B renamed", cwd=repo.root).code == 0
    assert read_board(repo, reads).threads["thread-b"].title == "B renamed"
    # Same size, same mtime second: still seen (the signature holds the inode, nanoseconds and ctime).
    path = repo.layout.thread_file("thread-b")
    before = os.stat(path)
    path.write_bytes(path.read_bytes().replace(b"B renamed", b"B Renamed"))
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert read_board(repo, reads).threads["thread-b"].title == "B Renamed"
    (repo.layout.thread_dir("thread-b") / "progress.md").write_text("# P\n\n## today\n- news\n")
    assert next(c for g in read_board(repo, reads).groups for c in g.cards if c.id == "thread-b").latest \
        == "today\n- news"
    path.write_text("{broken", encoding="utf-8")  # a kept read never hides a corrupt file
    assert any("thread-b" in p for p in read_board(repo, reads).problems)


def test_only_live_threads_of_the_index_are_known(three_threads: Repository) -> None:
    repo = three_threads
    stray = repo.layout.thread_dir("thread-stray")
    stray.mkdir()
    for bad in ("../thread-a", "thread-a/../thread-b", "thread-a/plan.md", "", "thread-stray", "THREAD-A",
                "thread-a\x00", "obj-x"):
        assert not known_thread(repo, bad), bad
    assert known_thread(repo, "thread-a")
    assert run_leslie("rm", "thread-c", "--force", cwd=repo.root).code == 0
    assert not known_thread(repo, "thread-c")


def test_a_thread_page_has_links_both_ways_and_its_files(three_threads: Repository) -> None:
    page = thread_page(three_threads, "thread-b")
    assert [(link.id, link.scope) for link in page.referrers] == [("thread-a", ("plan.md",))]
    assert page.references == []
    assert {f.path for f in page.files} == {"plan.md", "progress.md"}
    assert all(f.markdown and f.text is not None for f in page.files)


def _thread(thread_id: str, refs: dict[str, tuple[str, ...]]) -> Thread:
    return Thread(id=thread_id, title=thread_id, intent="", objective=None, references=refs)


def test_the_layout_puts_a_thread_right_of_what_it_reads_and_labels_scoped_edges() -> None:
    threads = {t.id: t for t in (_thread("thread-a", {"thread-b": ("plan.md",)}), _thread("thread-b", {}),
                                 _thread("thread-c", {"thread-a": (), "thread-b": ()}))}
    graph = layout(threads, {})
    x = {n.id: n.x for n in graph.nodes}
    assert x["thread-b"] < x["thread-a"] < x["thread-c"]
    labels = {(e.source, e.target): e.label for e in graph.edges}
    assert labels == {("thread-a", "thread-b"): "plan.md", ("thread-c", "thread-a"): "", ("thread-c", "thread-b"): ""}


def test_the_layout_survives_cycles_and_long_chains() -> None:
    cycle = {t.id: t for t in (_thread("thread-a", {"thread-b": ()}), _thread("thread-b", {"thread-c": ()}),
                               _thread("thread-c", {"thread-a": ()}))}
    assert len(layout(cycle, {}).nodes) == 3
    size = sys.getrecursionlimit() * 2
    chain = {f"thread-{i}": _thread(f"thread-{i}", {f"thread-{i - 1}": ()} if i else {}) for i in range(size)}
    graph = layout(chain, {})
    assert len(graph.nodes) == size and len(graph.edges) == size - 1


def test_markdown_is_rendered_without_anything_that_runs() -> None:
    html = render_markdown("# Title <script>alert(1)</script>\n\n<img src=x onerror=alert(1)>\n\n"
                           "[a](javascript:alert(1)) [b](JAVASCRIPT:alert(1)) [c](data:text/html,x) "
                           "<javascript:alert(1)> [d](vbscript:x) [ok](https://example.com/x)\n\n"
                           "![img](https://example.com/i.png)\n\n**bold** `code`\n")
    assert "<script" not in html and "<img" not in html and "onerror=" not in html.replace("onerror=alert", "")
    assert "href=\"javascript" not in html.lower() and "href=\"data" not in html and "vbscript:x\"" not in html
    assert '<a href="https://example.com/x" rel="noopener noreferrer">ok</a>' in html
    assert "<strong>bold</strong>" in html and "<code>code</code>" in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html


def test_changes_that_cannot_change_the_board_are_ignored() -> None:
    assert matters("/r/.leslie/threads/thread-a/plan.md")
    assert matters("/r/.leslie/state/sessions/claude-code-1.json")
    assert not matters("/r/.leslie/state/contexts/thread-a.xml")
    assert not matters("/r/.leslie/state/index.lock")
    assert not matters("/r/.leslie/threads/thread-a/.thread.json.0a1b2c3d.leslie-tmp")


def test_a_spawn_with_a_reference_shows_on_both_pages(repo: Repository) -> None:
    spawn(repo, "base", thread_id="thread-base")
    spawn(repo, "top", thread_id="thread-top", refs=[RefSpec("thread-base", ("design/",))])
    assert [link.scope for link in thread_page(repo, "thread-top").references] == [("design",)]
    assert [link.id for link in thread_page(repo, "thread-base").referrers] == ["thread-top"]


def test_a_thread_page_reads_at_most_its_budget_of_file_text(repo: Repository) -> None:
    # 256 files of 256 KiB each would make a 64 MB page: past PAGE_FILES_BYTES, files are named, not read.
    spawn(repo, "many files", thread_id="thread-many")
    design = repo.layout.thread_dir("thread-many") / "design"
    design.mkdir(exist_ok=True)
    for number in range(24):
        (design / f"part-{number:02d}.txt").write_text(f"{number:02d} " + "x" * 250_000, encoding="utf-8")
    files = [f for f in thread_page(repo, "thread-many").files if f.path.startswith("design/")]
    assert len(files) == 24
    shown = [f for f in files if f.text is not None]
    assert len(shown) == -(-PAGE_FILES_BYTES // 250_003)  # up to the budget, the file that crosses it included
    assert {f.skipped for f in files if f.text is None} == {"the page already shows 4 MB of files"}
    assert [f.path for f in files] == sorted(f.path for f in files)  # every file is still listed, in order
