"""`leslie list --tree`: the tree's data (ops.tree, pure) and its drawing (cli.tree_view), on real repositories."""

from __future__ import annotations

import json
import os
import re
import sqlite3
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from conftest import run_leslie
from leslie.cli.common import json_line
from leslie.cli.tree_view import json_lines, plain_lines, terminal_lines, tree_lines
from leslie.errors import LeslieError
from leslie.ops import tree_drawing as tree_module
from leslie.ops.graphs import render_mermaid
from leslie.ops.objectives import create_objective, retitle_objective
from leslie.ops.threads import RefSpec, remove, set_status, spawn
from leslie.ops.tree import Tree, build_tree
from leslie.ops.tree_drawing import TreeDrawing, load_tree
from leslie.ops.watched import Vouched
from leslie.store import drawings
from leslie.store.derived import with_store
from leslie.store.model import Objective, Thread
from leslie.store.names import short_id
from leslie.store.repository import Repository
from test_context import assert_golden
from test_listing import on_a_terminal

EXAMPLE = Path(__file__).parents[1] / ".leslie.example"
SGR_CODE = re.compile("\x1b\\[[0-9;]*m")  # a terminal's colour code



def _thread(tid: str, title: str, *, objective: str | None = None, status: str = "active", created: str = "",
            refs: dict[str, tuple[str, ...]] | None = None) -> Thread:
    return Thread(id=tid, title=title, intent=title, objective=objective, status=status,
                  references=refs or {}, created_at=created)


def test_short_id() -> None:
    assert short_id("thread-8lg2xq") == "8lg2xq"
    assert short_id("obj-a-b") == "a-b"


def test_groups_and_order_are_stable() -> None:
    objectives = [Objective("obj-z", "Alpha"), Objective("obj-a", "beta"), Objective("obj-empty", "Gamma")]
    threads = [
        _thread("thread-3", "third", objective="obj-a", created="2026-01-03T00:00:00Z"),
        _thread("thread-1", "first", objective="obj-a", created="2026-01-01T00:00:00Z",
                refs={"thread-3": ("plan.md",), "thread-gone": ()}),
        _thread("thread-2", "Same time b", objective="obj-a", created="2026-01-02T00:00:00Z"),
        _thread("thread-0", "same time a", objective="obj-a", created="2026-01-02T00:00:00Z"),
        _thread("thread-x", "loose", created="2026-01-01T00:00:00Z"),
        _thread("thread-m", "orphan", objective="obj-missing"),
        _thread("thread-d", "deleted", objective="obj-a", status="deleted"),
        _thread("thread-y", "in alpha", objective="obj-z", status="done"),
    ]
    tree = build_tree(reversed(threads), objectives)
    # Objectives by title (case-insensitive), then objectives that do not exist, then threads without one.
    assert [g.objective_id for g in tree.groups] == ["obj-z", "obj-a", "obj-empty", "obj-missing", None]
    assert [t.id for t in tree.groups[1].threads] == ["thread-1", "thread-0", "thread-2", "thread-3"]
    assert tree.groups[2].threads == () and tree.groups[3].missing
    first = tree.groups[1].threads[0]
    assert [(r.target, r.title, r.scope) for r in first.references] == [
        ("thread-3", "third", ("plan.md",)), ("thread-gone", None, ())]
    assert "thread-d" not in {t.id for t in tree.threads()}
    assert build_tree(threads, objectives) == tree  # the input order does not matter


_TEXT = st.text(st.sampled_from("ab Z\n\t\x1b\u202e\u200b…/é"), max_size=6)


@given(st.lists(st.tuples(st.sampled_from(["obj-a", "obj-b", "obj-gone", None]), _TEXT,
                          st.sampled_from(["active", "paused", "done", "deleted"]),
                          st.lists(st.tuples(st.integers(0, 7), st.lists(_TEXT.filter(str.strip), max_size=2)),
                                   max_size=3)), max_size=8),
       st.lists(st.tuples(st.sampled_from(["obj-a", "obj-b", "obj-c"]), _TEXT), unique_by=lambda o: o[0]),
       st.lists(st.tuples(st.integers(0, 7), st.integers(0, 7)), max_size=4))
def test_the_plain_lines_are_the_styled_lines_joined(threads: list[Any], objectives: list[Any],
                                                     order: list[tuple[int, int]]) -> None:
    made = [_thread(f"thread-{n}", title, objective=objective, status=status, created=f"2026-01-0{n % 9 + 1}",
                    refs={f"thread-{target}": tuple(scope) for target, scope in refs})
            for n, (objective, title, status, refs) in enumerate(threads)]
    after: dict[str, list[str]] = {}
    for then, first in order:
        after.setdefault(f"thread-{then}", []).append(f"thread-{first}")
    tree = build_tree(made, [Objective(oid, title) for oid, title in objectives], after=after)
    assert "".join(plain_lines(tree)) == "".join("".join(text for text, _ in line) + "\n" for line in tree_lines(tree))
    for width in (20, 44, 80):  # on a terminal: the fitted lines, each cut at the width, coloured or not
        shown = ["".join(text for text, _ in line) for line in tree_lines(tree, width)]
        expected = "".join((text if len(text) <= width else text[:width - 1] + "…") + "\n" for text in shown)
        assert "".join(terminal_lines(tree, width, colour=False)) == expected
        assert SGR_CODE.sub("", "".join(terminal_lines(tree, width))) == expected
    assert "".join(json_lines(tree)) == json_line(tree.to_json())  # the JSON made of pieces: the document's


def test_a_scope_cannot_disguise_itself() -> None:
    # A scope holds no control character (normalize_scope refuses them) but may hold a bidi override.
    tree = build_tree([_thread("thread-1", "one"), _thread("thread-2", "two", refs={"thread-1": ("a\u202eb.md",)})],
                      [])
    assert "        → 1  one  [a\\u202eb.md]\n" in "".join(plain_lines(tree)).splitlines(keepends=True)
    assert [segment for line in tree_lines(tree, 80) for segment in line if "a\\u202eb.md" in segment[0]]


def test_filters_drop_empty_groups() -> None:
    objectives = [Objective("obj-a", "A"), Objective("obj-b", "B")]
    threads = [_thread("thread-1", "one", objective="obj-a"),
               _thread("thread-2", "two", objective="obj-b", status="done"), _thread("thread-3", "three")]
    done = build_tree(threads, objectives, status="done")
    assert [(g.objective_id, [t.id for t in g.threads]) for g in done.groups] == [("obj-b", ["thread-2"])]
    only_a = build_tree(threads, objectives, objective="obj-a")
    assert [(g.objective_id, [t.id for t in g.threads]) for g in only_a.groups] == [("obj-a", ["thread-1"])]
    assert build_tree(threads, objectives, objective="obj-b", status="active").groups == ()


def test_example_tree_plain_matches_golden(example_root: Path) -> None:
    result = run_leslie("list", "--tree", cwd=example_root)
    assert result.code == 0, result.stderr
    assert_golden("tree/example.txt", result.stdout)
    # Piped output is uncut and plain: grep finds whole titles, no escape codes.
    assert "CSRF protection for cookie-authenticated endpoints" in result.stdout and "\x1b" not in result.stdout


def test_example_tree_json_is_nested(example_root: Path) -> None:
    result = run_leslie("list", "--tree", "--json", cwd=example_root)
    assert result.code == 0, result.stderr
    data = json.loads(result.stdout)
    groups = data["groups"]
    assert [g["objective"]["title"] for g in groups] == ["Harden session handling", "Sign in with Google and GitHub"]
    e2e = next(t for g in groups for t in g["threads"] if t["id"] == "thread-xcc4fq")
    assert e2e["references"] == [
        {"target": "thread-ehc76k", "title": "Login page: Google and GitHub buttons", "status": "active",
         "scope": ["plan.md"]},
        {"target": "thread-kv700l", "title": "OAuth flow and API design", "status": "done",
         "scope": ["design/oauth-flow.md"]},
        {"target": "thread-wcecil", "title": "Backend: OAuth callback and account linking", "status": "active",
         "scope": []},
    ]
    assert e2e["created_at"] == "2026-11-16T09:30:18Z"
    # Filters apply to the tree too; the tombstone of the example is never shown.
    done = json.loads(run_leslie("list", "--tree", "--json", "--status", "done", cwd=example_root).stdout)
    assert [t["id"] for g in done["groups"] for t in g["threads"]] == ["thread-kv700l"]
    assert "thread-gs5scg" not in result.stdout


def test_terminal_rendering_fits_80_columns(repo: Repository) -> None:
    create_objective(repo, "An objective whose title is long enough to matter " * 3, objective_id="obj-long")
    spawn(repo, "target", title="A target thread with a really quite long title " * 4, objective="obj-long",
          thread_id="thread-target")
    spawn(repo, "source", title="Source " * 30, objective="obj-long", thread_id="thread-source",
          refs=[RefSpec("thread-target", ("plan.md", "progress.md", "design/" + "x" * 90 + ".md"))])
    spawn(repo, "loose", title="A thread without an objective", thread_id="thread-loose",
          refs=[RefSpec("thread-target")])
    tree = load_tree(repo)
    for line in tree_lines(tree, 80):
        text = "".join(chunk for chunk, _ in line)
        assert len(text) <= 80, text
    shown = "".join(terminal_lines(tree, 80, colour=False))
    assert all(len(line) <= 80 for line in shown.splitlines())
    # IDs are never cut, titles are, with an ellipsis.
    assert "source" in shown and "target" in shown and "loose" in shown and "…" in shown
    assert "[whole thread]" in shown and "3 threads" in shown
    coloured = "".join(terminal_lines(tree, 80))
    assert "\x1b[32mactive" in coloured and "\x1b[36mtarget\x1b[0m" in coloured
    assert SGR_CODE.sub("", coloured) == shown  # the colours are all that differs
    # Narrower than the fitting's floors: the lines that still pass the width are cut there, with an ellipsis.
    narrow = "".join(terminal_lines(tree, 30)).splitlines()
    assert all(len(SGR_CODE.sub("", line)) <= 30 for line in narrow)
    assert any(SGR_CODE.sub("", line).endswith("…") and len(SGR_CODE.sub("", line)) == 30 for line in narrow)


def test_hostile_title_cannot_break_the_tree(repo: Repository) -> None:
    spawn(repo, "x", thread_id="thread-evil")
    path = repo.layout.thread_file("thread-evil")
    data = json.loads(path.read_text(encoding="utf-8"))
    data["title"] = "line one\n└── active   forged line\tend\x7f\x9b2J"  # DEL and C1 are legal XML
    path.write_text(json.dumps(data), encoding="utf-8")
    result = run_leslie("list", "--tree", cwd=repo.root)
    assert result.code == 0, result.stderr
    assert result.stdout.splitlines() == ["Default objective  default · active · 1 thread",
                                        "└── active   line one\\n└── active   forged line\\tend\\x7f\\x9b2J  evil"]


def test_empty_repository_and_bad_filters(repo: Repository) -> None:
    result = run_leslie("list", "--tree", cwd=repo.root)
    assert (result.code, result.stdout) == (0, "no threads\n")
    assert run_leslie("list", "--tree", "--status", "nope", cwd=repo.root).code == 2
    assert run_leslie("list", "--tree", "--objective", "bad id", cwd=repo.root).code == 2


def test_removed_thread_leaves_the_tree(repo: Repository) -> None:
    spawn(repo, "keep", thread_id="thread-keep")
    spawn(repo, "gone", thread_id="thread-gone")
    remove(repo, "thread-gone")
    assert [t.id for t in load_tree(repo).threads()] == ["thread-keep"]


def test_example_tree_at_80_columns_matches_golden(example_root: Path) -> None:
    """The text of the README's screenshot (docs/img/render_tree_svg.py records the same drawing as SVG)."""
    tree = load_tree(Repository(example_root))
    assert_golden("tree/example-80.txt", "".join(terminal_lines(tree, 80, colour=False)))
    assert "\x1b[32mactive" in "".join(terminal_lines(tree, 80))  # coloured by status on a terminal


def test_the_tree_on_a_terminal_is_fitted_and_coloured(repo: Repository) -> None:
    """The command on a real pseudo-terminal: fitted to its width, coloured unless NO_COLOR or a dumb terminal
    says not to; a terminal that was given no size (0 columns) is fitted to 80."""
    spawn(repo, "target", title="A target thread with a title long enough to be cut " * 2, thread_id="thread-target")
    spawn(repo, "source", title="source", thread_id="thread-source", refs=[RefSpec("thread-target")])
    plain = on_a_terminal(repo.root, "list", "--tree", columns=60)
    assert plain.code == 0, plain.stderr
    lines = plain.stdout.splitlines()
    assert "\x1b" not in plain.stdout and all(len(line) <= 60 for line in lines) and "…" in plain.stdout
    assert any(line.endswith("  target") for line in lines)  # the ID whole, the title cut before it
    coloured = on_a_terminal(repo.root, "list", "--tree", columns=60, env={"TERM": "xterm"}, colour=True)
    assert "\x1b[32mactive" in coloured.stdout and SGR_CODE.sub("", coloured.stdout) == plain.stdout
    dumb = on_a_terminal(repo.root, "list", "--tree", columns=60, env={"TERM": "dumb"}, colour=True)
    assert dumb.stdout == plain.stdout
    sizeless = on_a_terminal(repo.root, "list", "--tree", columns=0)
    assert sizeless.stdout == "".join(terminal_lines(load_tree(repo), 80, colour=False))


def test_a_terminal_without_a_size_or_narrower_than_20_columns(repo: Repository) -> None:
    """A terminal that reports 0 columns is drawn for as 80 wide (the table as the tree); one narrower than 20
    as 20 (`text.MIN_WIDTH`: a cut never reaches the tree's branches)."""
    spawn(repo, "target", title="A target thread with a title long enough to be cut " * 2, thread_id="thread-target")
    spawn(repo, "source", title="source", thread_id="thread-source", refs=[RefSpec("thread-target")])
    for args in (("list",), ("list", "--tree")):
        assert on_a_terminal(repo.root, *args, columns=0).stdout == on_a_terminal(repo.root, *args).stdout
        assert on_a_terminal(repo.root, *args, columns=12).stdout == on_a_terminal(repo.root, *args, columns=20).stdout
    tree = on_a_terminal(repo.root, "list", "--tree", columns=12).stdout.splitlines()
    assert all(len(line) <= 20 for line in tree) and any(len(line) == 20 for line in tree)  # the table keeps its IDs


def test_hostile_titles_on_a_terminal_are_text_in_every_piece(repo: Repository) -> None:
    """Titles that spell the tree's own branches and stems, escapes and line breaks, on the last thread of a group
    (whose kept piece is turned into the last one's): the terminal shows them as text, and the drawing made of
    kept pieces is the drawing made anew."""
    spawn(repo, "source", title="│   ├── \x9b31mred", thread_id="thread-source")
    spawn(repo, "target", title="target", thread_id="thread-target", refs=[RefSpec("thread-source")])
    path = repo.layout.thread_file("thread-target")  # by hand: a line break, DEL and CSI, legal in the file
    data = json.loads(path.read_text(encoding="utf-8"))
    data["title"] = "├── └── \n│   \x7f\x9b2J│   "
    path.write_text(json.dumps(data), encoding="utf-8")
    expected = "".join(terminal_lines(load_tree(repo), 60))
    assert expected.count("\x1b[") == SGR_CODE.subn("", expected)[1]  # every escape is one of the colours
    assert not re.search("[\x00-\x09\x0b-\x1a\x1c-\x1f\x7f-\x9f]", expected)
    for _ in range(2):  # drawn anew, then again (from kept pieces, the last one turned, once out of the racy second)
        shown = on_a_terminal(repo.root, "list", "--tree", columns=60, env={"TERM": "xterm"}, colour=True)
        assert shown.code == 0 and shown.stdout == expected, shown.stderr
    assert "├── └── \\n│   \\x7f\\x9b2J│   " in SGR_CODE.sub("", expected)


def _strict_tree(repo: Repository) -> Tree:
    """The tree as it was always made: every thread of the index read strictly from its thread.json."""
    return build_tree([repo.read_thread(tid) for tid in sorted(repo.read_index().threads)], repo.objectives())


def _stored_titles(repo: Repository) -> dict[str, str]:
    def titles(db: sqlite3.Connection, _persistent: bool) -> dict[str, str]:
        return dict(db.execute("SELECT id, title FROM tree").fetchall())

    return with_store(repo.root, titles)


def test_the_tree_comes_from_the_store_until_a_thread_json_changes(repo: Repository,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """What the tree shows of each thread.json is kept with the file's signature: a row is used while the file
    is unchanged (a forged title shows, which proves it), and the file is read again once it changed."""
    monkeypatch.setattr(tree_module, "RACY_NS", 0)  # files written a moment ago count as settled
    spawn(repo, "target", thread_id="thread-target")
    spawn(repo, "source", thread_id="thread-source", refs=[RefSpec("thread-target", ("plan.md",))])
    spawn(repo, "plain", thread_id="thread-plain", refs=[RefSpec("thread-target")])
    assert load_tree(repo) == _strict_tree(repo)
    assert set(_stored_titles(repo)) == {"thread-target", "thread-source", "thread-plain"}

    def forge(db: sqlite3.Connection, _persistent: bool) -> None:
        db.execute("UPDATE tree SET title = 'forged' WHERE id = 'thread-plain'")

    with_store(repo.root, forge)
    assert [t.title for t in load_tree(repo).threads() if t.id == "thread-plain"] == ["forged"]
    # A hand edit of thread.json (the index left as it was): a new title and a new scope.
    path = repo.layout.thread_file("thread-plain")
    data = json.loads(path.read_text(encoding="utf-8"))
    data["title"], data["references"] = "edited by hand", {"thread-target": ["design/api.md", "plan.md"]}
    path.write_text(json.dumps(data), encoding="utf-8")
    assert load_tree(repo) == _strict_tree(repo)
    assert _stored_titles(repo)["thread-plain"] == "edited by hand"
    # A removed thread leaves the store too.
    remove(repo, "thread-plain")
    assert load_tree(repo) == _strict_tree(repo)
    assert "thread-plain" not in _stored_titles(repo)


def test_a_stored_thread_still_fails_as_a_strict_read_does(repo: Repository,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """A thread.json corrupted after it was stored, or a thread folder replaced by a link to the same files,
    fails the command as every strict read does (exit 4), never answered from the store."""
    monkeypatch.setattr(tree_module, "RACY_NS", 0)
    spawn(repo, "kept", thread_id="thread-kept")
    spawn(repo, "linked", thread_id="thread-linked")
    load_tree(repo)
    folder = repo.layout.thread_dir("thread-linked")
    moved = repo.root / "elsewhere"
    folder.rename(moved)
    folder.symlink_to(moved, target_is_directory=True)  # thread.json: the same inode, size and times
    with pytest.raises(LeslieError) as linked:
        load_tree(repo)
    assert linked.value.exit_code == 4 and "thread-linked" in linked.value.message
    folder.unlink()
    moved.rename(folder)
    assert load_tree(repo) == _strict_tree(repo)
    repo.layout.thread_file("thread-kept").write_text("{not json", encoding="utf-8")
    result = run_leslie("list", "--tree", cwd=repo.root)
    assert result.code == 4 and "thread-kept" in result.stderr, result


def test_a_thread_json_edited_in_place_within_the_racy_second_is_read_again(repo: Repository) -> None:
    """A row stored less than a second after its file changed keeps a signature that never matches (ctime -1):
    an in-place edit of the same size that puts the mtime back, right after the read, is seen by the next."""
    spawn(repo, "plain", thread_id="thread-plain")
    assert load_tree(repo) == _strict_tree(repo)  # stored within the racy second of the spawn
    path = repo.layout.thread_file("thread-plain")
    before = path.stat()
    text = path.read_text(encoding="utf-8")
    with path.open("r+", encoding="utf-8") as handle:  # in place: the same inode
        handle.write(text.replace('"title": "plain"', '"title": "PLAIN"'))
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))  # the same size and mtime as stored
    assert [t.title for t in load_tree(repo).threads()] == ["PLAIN"]


# -- drawings kept in the store (`TreeDrawing`) ------------------------------------------------------------------
def _draw(repo: Repository, name: str = "mermaid", **options: Any) -> str:
    """What the graph command does: the kept drawing, else one drawn now and kept."""
    drawing = TreeDrawing(repo, name, **options)
    text = drawing.stored()
    if text is None:
        text = render_mermaid(drawing.tree())
        drawing.keep(text)
    return text


def _fresh(repo: Repository, **filters: Any) -> str:
    """The drawing of the tree as it was always made: every thread.json read strictly, nothing kept."""
    index = repo.read_index()
    return render_mermaid(build_tree([repo.read_thread(tid) for tid in sorted(index.threads)], repo.objectives(),
                                     after=index.after if index.has_order() else {}, **filters))


def _drop_from_index(repo: Repository, thread_id: str) -> None:
    """A hand edit of the index: `thread_id` out of it (its folder left as it is)."""
    data = json.loads(repo.layout.index_path.read_text(encoding="utf-8"))
    del data["threads"][thread_id], data["relations"][thread_id]
    for relation in data["relations"].values():
        for side in ("references_to", "referenced_by"):
            relation[side] = [tid for tid in relation[side] if tid != thread_id]
    repo.layout.index_path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def _forge(repo: Repository) -> None:
    def forge(db: sqlite3.Connection, _persistent: bool) -> None:
        assert db.execute("UPDATE drawings SET text = 'forged'").rowcount > 0

    with_store(repo.root, forge)


def test_a_drawing_is_given_from_the_store_until_what_it_was_drawn_from_changes(
        repo: Repository, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each change below comes after the kept drawing was forged: the forged text shows while nothing changed
    (which proves it is given from the store), and a change of any one thing it was drawn from draws anew."""
    monkeypatch.setattr(tree_module, "RACY_NS", 0)
    objective = create_objective(repo, "Ship it").id
    spawn(repo, "target", thread_id="thread-target", objective=objective)
    spawn(repo, "source", thread_id="thread-source", refs=[RefSpec("thread-target", ("plan.md",))])
    spawn(repo, "plain", thread_id="thread-plain", refs=[RefSpec("thread-target")])
    assert _draw(repo) == _fresh(repo)
    _forge(repo)
    assert _draw(repo) == "forged"

    def changed_by(change: Any, **filters: Any) -> None:
        _forge(repo)
        change()
        assert _draw(repo, **filters) == _fresh(repo, **filters)

    path = repo.layout.thread_file("thread-plain")
    changed_by(lambda: path.write_text(path.read_text(encoding="utf-8").replace('"plain"', '"by hand"'),
                                       encoding="utf-8"))  # in place: the index says otherwise
    assert "by hand" in _draw(repo)

    def edited_then_read_by_another() -> None:  # who stores the row anew: the drawing kept before is not the tree
        path.write_text(path.read_text(encoding="utf-8").replace('"by hand"', '"by hand again"'), encoding="utf-8")
        load_tree(repo)

    changed_by(edited_then_read_by_another)
    changed_by(lambda: set_status(repo, "thread-source", "paused"))  # the thread.json and the index
    changed_by(lambda: _drop_from_index(repo, "thread-source"))  # the index alone (by hand): who is in the tree
    changed_by(lambda: retitle_objective(repo, objective, "Ship it now"))  # an objective's file
    changed_by(lambda: None, status="active")  # another filter
    changed_by(lambda: monkeypatch.setattr(drawings, "code_digest", lambda: "the digest of other code"))
    changed_by(lambda: remove(repo, "thread-plain"))
    _forge(repo)
    assert _draw(repo, "dot") != "forged"  # another drawing


def test_a_drawing_of_rows_stored_within_the_racy_second_is_not_given(repo: Repository) -> None:
    spawn(repo, "plain", thread_id="thread-plain")
    assert _draw(repo) == _fresh(repo)  # its row stored within the racy second: never matching
    _forge(repo)
    assert _draw(repo) == _fresh(repo)


def test_a_reader_that_lost_the_race_for_the_rows_keeps_no_drawing(repo: Repository,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Rows another reader wrote meanwhile (`Vouched.keep` refuses): the tree is drawn, nothing is kept."""
    monkeypatch.setattr(tree_module, "RACY_NS", 0)
    spawn(repo, "plain", thread_id="thread-plain")
    monkeypatch.setattr(Vouched, "keep", lambda self, db, *, final: False)
    assert _draw(repo) == _fresh(repo)

    def count(db: sqlite3.Connection, _persistent: bool) -> int:
        return int(db.execute("SELECT count(*) FROM drawings").fetchone()[0])

    assert with_store(repo.root, count) == 0


def test_the_commands_give_their_kept_drawings(repo: Repository, monkeypatch: pytest.MonkeyPatch) -> None:
    """`list --tree` piped (plain and JSON) and both graphs: the same text twice, warm and cold, and the kept
    text (forged here) the second time."""
    spawn(repo, "target", thread_id="thread-target")
    spawn(repo, "source", thread_id="thread-source", refs=[RefSpec("thread-target", ("plan.md",))])
    time.sleep(1.1)  # past the racy second: the rows read now are kept as matching
    commands = [("list", "--tree"), ("list", "--tree", "--json"), ("relations", "--format", "mermaid"),
                ("relations", "--format", "dot")]
    first = {args: run_leslie(*args, cwd=repo.root) for args in commands}
    assert all(result.code == 0 and result.stdout for result in first.values()), first
    for args in commands:
        assert run_leslie(*args, cwd=repo.root).stdout == first[args].stdout
        assert run_leslie(*args, cwd=repo.root, env={"LESLIE_WARM": "0"}).stdout == first[args].stdout
    _forge(repo)
    assert {run_leslie(*args, cwd=repo.root).stdout for args in commands} == {"forged"}


@pytest.mark.parametrize("args", [("relations", "--format", "mermaid"), ("list", "--tree")])
def test_concurrent_drawings_while_a_thread_json_changes_are_each_a_whole_tree(repo: Repository,
                                                                               args: tuple[str, ...]) -> None:
    """Four processes draw the graph (or the tree, whose source's line shows the target's title: a piece that
    depends on another thread's row) over and over while a thread.json is edited in place between two titles:
    every drawing is the tree with one title or the other (never a mix, never a drawing kept from before the
    last edit once the edits stop), warm, as users run it."""
    spawn(repo, "target", thread_id="thread-target")
    spawn(repo, "source", thread_id="thread-source", refs=[RefSpec("thread-target")])
    path = repo.layout.thread_file("thread-target")
    text = path.read_text(encoding="utf-8")
    states = [text.replace('"target"', f'"{word}"') for word in ("alpha1", "omega2")]  # the same size
    drawings = set()

    def fresh() -> str:
        return _fresh(repo) if args[0] == "relations" else "".join(plain_lines(_strict_tree(repo)))

    for state in states:
        path.write_text(state, encoding="utf-8")
        drawings.add(fresh())
    stop = threading.Event()

    def edit() -> None:
        for n in range(40):
            with path.open("r+", encoding="utf-8") as handle:  # in place
                handle.write(states[n % 2])
            time.sleep(0.02)
        stop.set()

    def draw() -> list[str]:
        seen = []
        while not stop.is_set():
            result = run_leslie(*args, cwd=repo.root)
            assert result.code == 0, result.stderr
            seen.append(result.stdout)
        return seen

    with ThreadPoolExecutor(5) as pool:
        editor = pool.submit(edit)
        seen = [text for future in [pool.submit(draw) for _ in range(4)] for text in future.result()]
        editor.result()
    assert seen and set(seen) <= drawings
    for state in states:  # once more each way, in place, once the edits stopped: whatever was kept before
        with path.open("r+", encoding="utf-8") as handle:
            handle.write(state)
        last = fresh()
        for _ in range(3):  # drawn of kept pieces, then kept whole, then given
            assert run_leslie(*args, cwd=repo.root).stdout == last


def test_a_terminal_gets_its_own_tree_never_a_kept_drawing(repo: Repository, monkeypatch: pytest.MonkeyPatch) -> None:
    """On a terminal the tree is fitted to its width and drawn each time: a kept (here forged) drawing of the
    piped tree never shows there, plain or JSON."""
    monkeypatch.setattr(tree_module, "RACY_NS", 0)
    spawn(repo, "A title long enough to be cut on a narrow terminal", thread_id="thread-long")
    time.sleep(1.1)  # past the racy second: the rows read now are kept as matching
    for args in (("list", "--tree"), ("list", "--tree", "--json")) * 2:
        assert run_leslie(*args, cwd=repo.root).code == 0  # piped: drawn, its pieces kept, then the whole kept
    _forge(repo)
    assert run_leslie("list", "--tree", cwd=repo.root).stdout == "forged"
    narrow = on_a_terminal(repo.root, "list", "--tree", columns=40)
    assert narrow.code == 0 and "forged" not in narrow.stdout and "…" in narrow.stdout, narrow
    shown = on_a_terminal(repo.root, "list", "--tree", "--json")
    assert shown.code == 0 and "forged" not in shown.stdout, shown
    assert json.loads(shown.stdout)["groups"][0]["threads"][0]["id"] == "thread-long"
