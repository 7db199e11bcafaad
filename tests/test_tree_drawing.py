"""The tree's drawings made of kept pieces (ops/tree_drawing.py, "Pieces"; store/drawings.py): after a change, only the
threads it touched are drawn anew, and the drawing is always the tree as its files say."""

from __future__ import annotations

import contextlib
import functools
import json
import random
import sqlite3
from collections.abc import Callable, Iterable
from typing import Any

import pytest

from leslie.cli.tree_view import json_lines, json_piece, plain_lines, plain_piece, terminal_lines, terminal_piece
from leslie.errors import UsageError
from leslie.ops import tree_drawing
from leslie.ops.graphs import dot_piece, mermaid_piece, render_dot, render_mermaid
from leslie.ops.order import add_after, remove_after
from leslie.ops.threads import RefSpec, reference, remove, retitle, set_status, spawn, unreference
from leslie.ops.tree import ThreadNode, build_tree
from leslie.ops.tree_drawing import TreeDrawing
from leslie.store import drawings
from leslie.store.derived import with_store
from leslie.store.repository import Repository


def _on_a_terminal(width: int, colour: bool) -> tuple[Callable[[ThreadNode], str], Callable[..., Iterable[str]]]:
    """The pieces and lines of a terminal `width` columns wide (`cli.tree_view.terminal_form`)."""
    piece = functools.partial(terminal_piece, width=width, colour=colour)
    return piece, lambda tree, piece=piece: terminal_lines(tree, width, colour=colour, piece=piece)


FORMS: dict[str, tuple[Callable[[ThreadNode], str], Callable[..., Iterable[str]]]] = {
    "plain": (plain_piece, plain_lines), "json": (json_piece, json_lines),
    "mermaid": (mermaid_piece, lambda tree, piece=mermaid_piece: [render_mermaid(tree, piece)]),
    "dot": (dot_piece, lambda tree, piece=dot_piece: [render_dot(tree, piece)]),
    "terminal 80 colour": _on_a_terminal(80, True), "terminal 30 plain": _on_a_terminal(30, False)}
FILTERED = ("plain", "json", "terminal 80 colour", "terminal 30 plain")  # the forms of `list --tree`


@pytest.fixture(autouse=True)
def _rows_kept_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tree_drawing, "RACY_NS", 0)  # rows read now are kept as matching (not within the racy second)


def _draw(repo: Repository, form: str = "plain", **filters: Any) -> str:
    """What `list --tree` piped does (`cli.common.print_kept`)."""
    piece, lines = FORMS[form]
    drawing = TreeDrawing(repo, form, piece=piece, **filters)
    text = drawing.stored()
    if text is None:
        text = "".join(drawing.draw(lines))
        drawing.keep(text)
    return text


def _fresh(repo: Repository, form: str = "plain", **filters: Any) -> str:
    """The drawing as it was always made: every thread.json read strictly, nothing kept."""
    index = repo.read_index()
    tree = build_tree([repo.read_thread(tid) for tid in sorted(index.threads)], repo.objectives(),
                      after=index.after if index.has_order() else {}, **filters)
    return "".join(FORMS[form][1](tree))


def _query(repo: Repository, sql: str, *args: Any) -> list[Any]:
    def work(db: sqlite3.Connection, persistent: bool) -> list[Any]:
        assert persistent
        return db.execute(sql, args).fetchall()

    return with_store(repo.root, work)


def drawings_version(repo: Repository) -> str:
    def work(db: sqlite3.Connection, _persistent: bool) -> str | None:
        return drawings.current_version(db, "tree")

    found = with_store(repo.root, work)
    assert found is not None
    return found


def _forge(repo: Repository) -> None:
    """Every kept plain piece says it was forged, and no whole drawing is kept: what shows is made of pieces."""
    _query(repo, "UPDATE pieces SET text = '├── forged ' || id || char(10) WHERE form = 'plain'")
    _query(repo, "DELETE FROM drawings")


def _forged(text: str) -> set[str]:
    return {line.split("forged ", 1)[1] for line in text.splitlines() if "forged " in line}


@pytest.fixture
def four(repo: Repository) -> Repository:
    """target ← source (scoped), target ← plain, and alone; all kept as pieces."""
    spawn(repo, "target", thread_id="thread-target")
    spawn(repo, "source", thread_id="thread-source", refs=[RefSpec("thread-target", ("plan.md",))])
    spawn(repo, "plain", thread_id="thread-plain", refs=[RefSpec("thread-target")])
    spawn(repo, "alone", thread_id="thread-alone")
    assert _draw(repo) == _fresh(repo)
    return repo


ALL = {"thread-target", "thread-source", "thread-plain", "thread-alone"}


def test_a_first_drawing_keeps_its_pieces_and_the_next_the_whole(four: Repository) -> None:
    assert {tid for _form, tid in _query(four, "SELECT form, id FROM pieces")} == ALL
    assert _query(four, "SELECT count(*) FROM drawings") == [(0,)]  # pieces drawn now: not the whole
    assert _draw(four) == _fresh(four)
    assert _query(four, "SELECT count(*) FROM drawings") == [(1,)]  # made of kept pieces only: the whole kept
    _forge(four)
    assert _forged(_draw(four)) == ALL  # the pieces are what shows


def test_a_drawing_too_long_to_keep_whole_keeps_its_pieces(repo: Repository, monkeypatch: pytest.MonkeyPatch,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    """`print_kept` does not hold a text longer than a kept text may be (100,000 threads' tree), and the drawing
    keeps its pieces all the same: the next drawing after a change draws only the threads it touched."""
    from leslie.cli.common import print_kept
    from leslie.store import drawings

    for name in ("a", "b", "c"):
        spawn(repo, name, thread_id=f"thread-{name}")
    monkeypatch.setattr(drawings, "MAX_TEXT", 10)
    piece, lines = FORMS["plain"]
    drawing = TreeDrawing(repo, "plain", piece=piece)
    print_kept(drawing, lambda: drawing.draw(lines))
    assert capsys.readouterr().out == _fresh(repo)
    assert {tid for _form, tid in _query(repo, "SELECT form, id FROM pieces")} == {"thread-a", "thread-b", "thread-c"}
    assert _query(repo, "SELECT count(*) FROM drawings") == [(0,)]


@pytest.mark.parametrize(("change", "touched"), [
    (lambda repo: retitle(repo, "thread-target", "target renamed"), {"thread-target", "thread-source", "thread-plain"}),
    (lambda repo: retitle(repo, "thread-plain", "plain renamed"), {"thread-plain"}),
    (lambda repo: set_status(repo, "thread-target", "paused"), {"thread-target", "thread-source", "thread-plain"}),
    (lambda repo: remove(repo, "thread-target", force=True), {"thread-target", "thread-source", "thread-plain"}),
    (lambda repo: reference(repo, "thread-alone", "thread-plain"), {"thread-alone"}),
    (lambda repo: unreference(repo, "thread-plain", "thread-target"), {"thread-plain"}),
    (lambda repo: spawn(repo, "new", thread_id="thread-new", refs=[RefSpec("thread-alone")]), {"thread-new"}),
    (lambda repo: add_after(repo, "thread-alone", "thread-plain"), {"thread-alone", "thread-plain"}),
])
def test_a_change_draws_anew_the_threads_it_touched_and_no_other(four: Repository, change: Any,
                                                                   touched: set[str]) -> None:
    """The kept pieces are forged first: a forged piece that shows was given from the store; every thread the
    change touched (it, and the threads that show its title and status) is drawn from its files."""
    _forge(four)
    change(four)
    text = _draw(four)
    live = set(four.read_index().threads)
    assert _forged(text) == (ALL - touched) & live
    _query(four, "DELETE FROM pieces")
    _query(four, "DELETE FROM drawings")
    assert _draw(four) == _fresh(four)


@pytest.mark.parametrize("form", ["json", "mermaid", "dot", "terminal 80 colour", "terminal 30 plain"])
def test_every_form_is_made_of_its_kept_pieces(four: Repository, form: str) -> None:
    """The JSON tree and the graphs keep their pieces as the plain tree does: a forged piece shows, and only in
    its own form; a change draws anew the pieces it touched."""
    assert _draw(four, form) == _fresh(four, form)
    assert _draw(four, form) == _fresh(four, form)  # made of kept pieces; the whole kept now
    _query(four, "DELETE FROM drawings")
    _query(four, "UPDATE pieces SET text = 'forged-' || id WHERE form = ? AND id = 'thread-alone'", form)
    assert "forged-thread-alone" in _draw(four, form)
    assert "forged" not in _draw(four, "plain")
    retitle(four, "thread-alone", "alone, renamed")
    assert _draw(four, form) == _fresh(four, form)


def test_a_terminal_keeps_the_pieces_of_its_last_width_alone(four: Repository) -> None:
    """The pieces of a terminal's drawing are per width and colours; keeping one such variant's drops the other
    variants' (a terminal resized again and again keeps one set), never another form's."""
    def forms() -> set[str]:
        return {form for (form,) in _query(four, "SELECT DISTINCT form FROM pieces")}

    assert _draw(four, "terminal 80 colour") == _fresh(four, "terminal 80 colour")
    assert forms() == {"plain", "terminal 80 colour"}
    assert _draw(four, "terminal 30 plain") == _fresh(four, "terminal 30 plain")
    assert forms() == {"plain", "terminal 30 plain"}
    assert _draw(four, "terminal 30 plain") == _fresh(four, "terminal 30 plain")  # made of its kept pieces


def test_a_hand_edit_of_a_target_draws_its_sources_anew(four: Repository) -> None:
    """A thread.json edited in place (the index says otherwise): the rows come from the file, and so do the
    pieces that show it."""
    path = four.layout.thread_file("thread-target")
    _forge(four)
    path.write_text(path.read_text(encoding="utf-8").replace('"target"', '"by hand"'), encoding="utf-8")
    text = _draw(four)
    assert _forged(text) == {"thread-alone"}
    assert "by hand" in text


def test_a_thread_in_the_order_is_drawn_each_time(four: Repository) -> None:
    """Its piece shows the order, which the index holds: never kept, and a piece kept before it came into the
    order is not used while it is in it (and is again once it is out of it: its rows did not change)."""
    _query(four, "DELETE FROM pieces")
    add_after(four, "thread-alone", "thread-plain")
    assert _draw(four) == _fresh(four)
    assert {tid for (tid,) in _query(four, "SELECT id FROM pieces")} == {"thread-target", "thread-source"}
    _forge(four)
    assert _forged(_draw(four)) == {"thread-target", "thread-source"}
    remove_after(four, "thread-alone", "thread-plain")  # the index alone changes: out of the order again
    _query(four, "DELETE FROM pieces WHERE text LIKE '%forged%'")
    assert _draw(four) == _fresh(four)
    assert _draw(four) == _fresh(four)


def test_pieces_of_other_code_are_never_used(four: Repository, monkeypatch: pytest.MonkeyPatch) -> None:
    _forge(four)
    monkeypatch.setattr(drawings, "code_digest", lambda: "the digest of other code")
    assert _draw(four) == _fresh(four)
    assert _query(four, "SELECT count(*) FROM pieces WHERE text LIKE '%forged%'") == [(0,)]  # emptied by the keep


def test_pieces_are_kept_only_at_the_version_they_were_drawn_from(four: Repository) -> None:
    """A reader whose rows another has since written keeps none of its pieces."""
    drawing = TreeDrawing(four, "plain", piece=plain_piece)
    retitle(four, "thread-alone", "alone, renamed")
    tree = drawing.tree()
    version = drawing.version
    assert version is not None
    assert "".join(plain_lines(tree, drawing.pieces or plain_piece)) == _fresh(four)
    retitle(four, "thread-alone", "alone, renamed again")
    _draw(four)  # another reader: the row written anew, the store at a later version
    drawings.keep_pieces(str(four.root), "plain", version, {"thread-target": "stale\n"})
    assert _query(four, "SELECT count(*) FROM pieces WHERE text = 'stale\n'") == [(0,)]
    drawings.keep_pieces(str(four.root), "plain", drawings_version(four), {"thread-target": "kept\n"})
    assert _query(four, "SELECT count(*) FROM pieces WHERE text = 'kept\n'") == [(1,)]  # at the version: kept


def test_a_drawing_whose_store_moved_on_is_made_from_every_row(four: Repository,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """Between the rows written and the frame read, other readers drew and kept the whole drawing: the tree is
    then made from every row (never from a kept drawing's empty look), and is the tree of the files."""
    retitle(four, "thread-alone", "alone, renamed")
    frame = TreeDrawing._frame

    def moved_on(self: TreeDrawing, *args: Any) -> Any:
        monkeypatch.setattr(TreeDrawing, "_frame", frame)
        _draw(four)
        _draw(four)  # made of kept pieces: kept whole
        assert _query(four, "SELECT count(*) FROM drawings") == [(1,)]
        return None

    monkeypatch.setattr(TreeDrawing, "_frame", moved_on)
    drawing = TreeDrawing(four, "plain", piece=plain_piece)
    assert drawing.stored() is None
    assert "".join(plain_lines(drawing.tree(), drawing.pieces or plain_piece)) == _fresh(four)


@pytest.mark.parametrize("seed", range(4))
def test_random_changes_and_drawings_are_always_the_tree_of_the_files(repo: Repository, seed: int) -> None:
    """Changes of every kind, a drawing (plain or JSON, filtered or not) after each one or two: each is the tree
    drawn from every file, and most were made mostly of kept pieces."""
    rng = random.Random(seed)
    ids = [f"thread-{n}" for n in range(8)]
    for tid in ids[:4]:
        spawn(repo, tid, thread_id=tid)
    made, kept = 4, 0

    def live() -> list[str]:
        return sorted(repo.read_index().threads)

    def hand_edit(tid: str) -> None:
        path = repo.layout.thread_file(tid)
        data = json.loads(path.read_text(encoding="utf-8"))
        data["title"] = f"by hand {rng.random():.3f}"
        path.write_text(json.dumps(data), encoding="utf-8")

    for _ in range(60):
        threads = live()
        one, other = rng.choice(threads), rng.choice(threads)
        action = rng.randrange(8)
        if action == 0 and made < len(ids):
            spawn(repo, ids[made], thread_id=ids[made], refs=[RefSpec(one)])
            made += 1
        elif action == 1:
            retitle(repo, one, f"title {rng.random():.3f}")
        elif action == 2:
            set_status(repo, one, rng.choice(["active", "paused", "done"]))
        elif action == 3 and one != other:
            reference(repo, one, other, rng.choice([(), ("plan.md",)]))
        elif action == 4 and one != other and other in repo.read_thread(one).references:
            unreference(repo, one, other)
        elif action == 5 and len(threads) > 3:
            remove(repo, one, force=True)
        elif action == 6:
            hand_edit(one)
        elif action == 7 and one != other:
            with contextlib.suppress(UsageError):  # a cycle: refused, nothing changed
                add_after(repo, one, other)
        form = rng.choice(list(FORMS))
        filters = rng.choice([{}, {"status": "active"}]) if form in FILTERED else {}  # graphs: never
        kept += _query(repo, "SELECT count(*) FROM pieces WHERE form = ?", form)[0][0] > 0
        assert _draw(repo, form, **filters) == _fresh(repo, form, **filters)
    assert kept > 20  # a third of the drawings at least were made with kept pieces
