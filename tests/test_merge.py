"""The three-way merge of the index and of thread.json: properties (hypothesis) and the driver command."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import run_leslie
from leslie.ops.merge import (
    merge_index_documents,
    merge_indexes,
    merge_thread_documents,
    pick,
)
from leslie.store.jsonio import dumps_canonical
from leslie.store.model import Thread, thread_from_json
from leslie.store.relations import Index, build_index, index_from_json, invariant_problems

IDS = [f"thread-{c}" for c in "abcdef"]
TITLES = ["alpha", "beta", "gamma", "Ω"]
STATUSES = ["active", "paused", "done", "archived"]


def doc(tid: str, title: str = "t", status: str = "active", refs: dict[str, list[str]] | None = None,
        objective: str | None = "obj-1") -> dict[str, Any]:
    """A thread.json document."""
    return {"created_at": "2026-01-01T00:00:00Z", "id": tid, "intent": "i", "objective": objective,
            "references": refs or {}, "spawned_by": None, "status": status, "title": title, "version": 1}


def index_of(docs: dict[str, dict[str, Any]]) -> Index:
    return build_index(thread_from_json(d) for d in docs.values())


def as_json(index: Index) -> bytes:
    return dumps_canonical(index.to_json())


# -- strategies ------------------------------------------------------------------------------------------

@st.composite
def thread_docs(draw: st.DrawFn) -> dict[str, dict[str, Any]]:
    """A consistent set of threads: live ones referencing live ones, and a few tombstones."""
    ids = draw(st.lists(st.sampled_from(IDS), unique=True, max_size=len(IDS)))
    tombstones = set(draw(st.lists(st.sampled_from(ids), unique=True))) if ids else set()
    live = [t for t in ids if t not in tombstones]
    docs = {}
    for tid in ids:
        if tid in tombstones:
            docs[tid] = doc(tid, status="deleted")
            continue
        targets = draw(st.lists(st.sampled_from(live), unique=True)) if live else []
        refs = {t: draw(st.lists(st.sampled_from(["plan.md", "design/x.md"]), unique=True))
                for t in targets if t != tid}
        docs[tid] = doc(tid, draw(st.sampled_from(TITLES)), draw(st.sampled_from(STATUSES)), refs,
                        draw(st.sampled_from(["obj-1", "obj-2", None])))
    return docs


def _edit(draw: st.DrawFn, base: dict[str, dict[str, Any]], prefix: str) -> dict[str, dict[str, Any]]:
    """A branch's history: a few leslie operations applied to a copy of `base`."""
    docs = copy.deepcopy(base)
    for n in range(draw(st.integers(0, 6))):
        live = sorted(t for t, d in docs.items() if d["status"] != "deleted")
        op = draw(st.sampled_from(["spawn", "retitle", "status", "ref", "unref", "rm"]))
        if op == "spawn":
            new = f"thread-{prefix}{n}"
            refs = {t: [] for t in draw(st.lists(st.sampled_from(live), unique=True))} if live else {}
            docs[new] = doc(new, draw(st.sampled_from(TITLES)), refs=refs)
        elif not live:
            continue
        elif op == "retitle":
            docs[draw(st.sampled_from(live))]["title"] = draw(st.sampled_from(TITLES))
        elif op == "status":
            docs[draw(st.sampled_from(live))]["status"] = draw(st.sampled_from(STATUSES))
        elif op in ("ref", "unref"):
            source, target = draw(st.sampled_from(live)), draw(st.sampled_from(live))
            if source == target:
                continue
            if op == "ref":
                docs[source]["references"][target] = draw(st.sampled_from([[], ["plan.md"]]))
            else:
                docs[source]["references"].pop(target, None)
        else:  # rm --force: the tombstone, and every reference to it removed
            victim = draw(st.sampled_from(live))
            docs[victim].update(status="deleted", references={})
            for other in docs.values():
                other["references"].pop(victim, None)
    return docs


@st.composite
def histories(draw: st.DrawFn) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    base = draw(thread_docs())
    return base, _edit(draw, base, "o"), _edit(draw, base, "t")


@st.composite
def raw_indexes(draw: st.DrawFn) -> Index:
    """Any shape-valid index, including broken mirrors, self and dangling edges."""
    ids = draw(st.lists(st.sampled_from(IDS), unique=True))
    index = Index.empty()
    for tid in ids:
        index.threads[tid] = {"status": draw(st.sampled_from(STATUSES)), "title": draw(st.sampled_from(TITLES))}
        index.references_to[tid] = set(draw(st.lists(st.sampled_from(IDS), unique=True)))
        index.referenced_by[tid] = set(draw(st.lists(st.sampled_from(IDS), unique=True)))
    return index


FAST = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# -- properties of the index merge --------------------------------------------------------------------

@FAST
@given(raw_indexes(), raw_indexes(), raw_indexes())
def test_result_always_satisfies_the_invariants(base: Index, ours: Index, theirs: Index) -> None:
    merged = merge_indexes(base, ours, theirs)
    assert invariant_problems(merged) == []
    assert set(merged.references_to) == set(merged.referenced_by) == set(merged.threads)
    # and it is a document the strict reader accepts
    assert as_json(index_from_json(json.loads(as_json(merged)), Path("x"))) == as_json(merged)


@FAST
@given(thread_docs())
def test_merging_three_equal_versions_is_the_identity(docs: dict[str, Any]) -> None:
    index = index_of(docs)
    assert as_json(merge_indexes(index, index, index)) == as_json(index)


@FAST
@given(histories())
def test_merge_is_symmetric(history: tuple[dict[str, Any], ...]) -> None:
    base, ours, theirs = (index_of(d) for d in history)
    assert as_json(merge_indexes(base, ours, theirs)) == as_json(merge_indexes(base, theirs, ours))


@FAST
@given(histories())
def test_a_side_without_changes_yields_the_other_side(history: tuple[dict[str, Any], ...]) -> None:
    base, ours, theirs = (index_of(d) for d in history)
    assert as_json(merge_indexes(base, base, theirs)) == as_json(theirs)
    assert as_json(merge_indexes(base, ours, base)) == as_json(ours)


def _merge_thread_sets(base: dict[str, Any], ours: dict[str, Any], theirs: dict[str, Any]) -> dict[str, Any]:
    """What git produces with the thread.json driver: per file, a three-way merge or the one side's file."""
    merged = {}
    for tid in set(ours) | set(theirs):
        if tid in ours and tid in theirs:
            merged[tid] = merge_thread_documents(base.get(tid), ours[tid], theirs[tid])
        else:
            merged[tid] = (ours if tid in ours else theirs)[tid]
    return merged


@FAST
@given(histories())
def test_the_driver_result_equals_the_rebuild_after_merging_the_threads(
        history: tuple[dict[str, Any], ...]) -> None:
    """So the post-merge `doctor --fix` finds nothing to change: the index merge mirrors the thread merge."""
    base, ours, theirs = history
    driver = merge_indexes(index_of(base), index_of(ours), index_of(theirs))
    rebuilt = index_of(_merge_thread_sets(base, ours, theirs))
    assert as_json(driver) == as_json(rebuilt)


@FAST
@given(histories())
def test_deleted_threads_stay_deleted(history: tuple[dict[str, Any], ...]) -> None:
    base, ours, theirs = history
    merged = merge_indexes(index_of(base), index_of(ours), index_of(theirs))
    for side in (ours, theirs):
        for tid, document in side.items():
            if document["status"] == "deleted":
                assert tid not in merged.threads
                assert all(tid not in targets for targets in merged.references_to.values())


@FAST
@given(st.one_of(st.none(), st.integers(), st.text(), st.dictionaries(st.text(), st.integers())),
       raw_indexes(), raw_indexes())
def test_unknown_versions_never_raise(garbage: Any, ours: Index, theirs: Index) -> None:
    for args in ((garbage, ours.to_json(), theirs.to_json()), (ours.to_json(), garbage, theirs.to_json()),
                 (ours.to_json(), theirs.to_json(), garbage), (garbage, garbage, garbage)):
        assert invariant_problems(merge_index_documents(*args)) == []


# -- concrete cases ---------------------------------------------------------------------------------

def test_both_sides_add_threads_and_edges() -> None:
    base = {"thread-a": doc("thread-a")}
    ours = {**base, "thread-o": doc("thread-o", refs={"thread-a": []})}
    theirs = {**base, "thread-t": doc("thread-t", refs={"thread-a": []})}
    merged = merge_indexes(index_of(base), index_of(ours), index_of(theirs))
    assert sorted(merged.threads) == ["thread-a", "thread-o", "thread-t"]
    assert merged.referenced_by["thread-a"] == {"thread-o", "thread-t"}


def test_deletion_wins_over_a_concurrent_edit_and_drops_edges_to_it() -> None:
    base = {"thread-a": doc("thread-a"), "thread-b": doc("thread-b")}
    ours = {"thread-a": doc("thread-a"), "thread-b": doc("thread-b", status="deleted")}
    theirs = {"thread-a": doc("thread-a", refs={"thread-b": []}), "thread-b": doc("thread-b", title="new")}
    merged = merge_indexes(index_of(base), index_of(ours), index_of(theirs))
    assert sorted(merged.threads) == ["thread-a"]
    assert merged.references_to["thread-a"] == set()


def test_conflicting_field_changes_pick_deterministically() -> None:
    assert pick("title", "old", "x", "y") == pick("title", "old", "y", "x")
    assert pick("status", "active", "done", "paused") == "done"
    assert pick("status", "active", "archived", "done") == "archived"
    assert pick("status", "done", "deleted", "active") == "deleted"
    assert pick("title", "old", "old", "new") == "new"


def test_an_edge_removed_on_one_side_is_removed() -> None:
    base = {"thread-a": doc("thread-a", refs={"thread-b": []}), "thread-b": doc("thread-b")}
    ours = {"thread-a": doc("thread-a"), "thread-b": doc("thread-b")}
    theirs = {"thread-a": doc("thread-a", refs={"thread-b": []}), "thread-b": doc("thread-b", title="x")}
    merged = merge_indexes(index_of(base), index_of(ours), index_of(theirs))
    assert merged.references_to["thread-a"] == set()
    assert merged.threads["thread-b"]["title"] == "x"


def test_thread_merge_keeps_the_wider_scope_and_empties_a_tombstone() -> None:
    base = doc("thread-a", refs={"thread-b": ["plan.md"]})
    ours = doc("thread-a", refs={"thread-b": ["plan.md", "design/"]})
    theirs = doc("thread-a", refs={"thread-b": []})
    assert merge_thread_documents(base, ours, theirs)["references"] == {"thread-b": []}
    gone = merge_thread_documents(base, doc("thread-a", status="deleted") | {"deleted_at": "2026-01-02T00:00:00Z"},
                                  ours)
    assert gone["status"] == "deleted"
    assert gone["references"] == {}
    assert gone["deleted_at"] == "2026-01-02T00:00:00Z"


def test_thread_merge_refuses_an_unparsable_side() -> None:
    from leslie.store.model import ShapeError

    with pytest.raises(ShapeError):
        merge_thread_documents(doc("thread-a"), {"id": "thread-a"}, doc("thread-a"))


# -- the driver command -----------------------------------------------------------------------------

def _write(path: Path, data: Any) -> Path:
    path.write_bytes(data if isinstance(data, bytes) else dumps_canonical(data))
    return path


def test_driver_merges_files_into_ours(tmp_path: Path) -> None:
    base = {"thread-a": doc("thread-a")}
    ours = {**base, "thread-o": doc("thread-o", refs={"thread-a": []})}
    theirs = {**base, "thread-t": doc("thread-t")}
    paths = [_write(tmp_path / n, index_of(d).to_json()) for n, d in (("O", base), ("A", ours), ("B", theirs))]
    result = run_leslie("merge-relations", *map(str, paths), cwd=tmp_path)
    assert result.code == 0, result.stderr
    merged = json.loads(paths[1].read_text())
    assert sorted(merged["threads"]) == ["thread-a", "thread-o", "thread-t"]
    assert paths[1].read_bytes() == as_json(merge_indexes(index_of(base), index_of(ours), index_of(theirs)))
    assert not list(tmp_path.glob("*.leslie-tmp"))


def test_driver_survives_conflict_markers_by_rebuilding_from_the_working_tree(tmp_path: Path) -> None:
    threads = tmp_path / ".leslie" / "threads"
    for tid, d in {"thread-a": doc("thread-a"), "thread-w": doc("thread-w", refs={"thread-a": []})}.items():
        (threads / tid).mkdir(parents=True)
        _write(threads / tid / "thread.json", d)
    base = _write(tmp_path / "O", index_of({"thread-a": doc("thread-a")}).to_json())
    ours = _write(tmp_path / "A", b'{\n<<<<<<< HEAD\n"x": 1\n=======\n"y": 2\n>>>>>>> other\n}\n')
    theirs = _write(tmp_path / "B", index_of({"thread-a": doc("thread-a"), "thread-t": doc("thread-t")}).to_json())
    result = run_leslie("merge-relations", str(base), str(ours), str(theirs), cwd=tmp_path)
    assert result.code == 0
    assert "conflict markers" in result.stderr and "working tree" in result.stderr
    merged = json.loads(ours.read_text())
    assert sorted(merged["threads"]) == ["thread-a", "thread-t", "thread-w"]
    assert merged["relations"]["thread-a"]["referenced_by"] == ["thread-w"]
    assert "<<<<<<<" not in ours.read_text()


@pytest.mark.parametrize("garbage", [b"", b"{", b"\xef\xbb\xbf{}", b'{"version": "1.0"}', b"[1, 2]"])
def test_driver_always_writes_a_consistent_index(tmp_path: Path, garbage: bytes) -> None:
    good = index_of({"thread-a": doc("thread-a"), "thread-b": doc("thread-b", refs={"thread-a": []})})
    for slot in range(3):
        files = [_write(tmp_path / f"{slot}{n}", good.to_json()) for n in "OAB"]
        _write(files[slot], garbage)
        result = run_leslie("merge-relations", *map(str, files), cwd=tmp_path)
        assert result.code == 0, result.stderr
        merged = index_from_json(json.loads(files[1].read_text()), files[1])
        assert invariant_problems(merged) == []
        assert as_json(merged) == as_json(good)  # the known versions agree, so that is the answer


def test_driver_with_a_missing_base_file_unions_both_sides(tmp_path: Path) -> None:
    ours = _write(tmp_path / "A", index_of({"thread-a": doc("thread-a")}).to_json())
    theirs = _write(tmp_path / "B", index_of({"thread-b": doc("thread-b")}).to_json())
    result = run_leslie("merge-relations", str(tmp_path / "nope"), str(ours), str(theirs), cwd=tmp_path)
    assert result.code == 0
    assert sorted(json.loads(ours.read_text())["threads"]) == ["thread-a", "thread-b"]


def test_thread_driver_merges_and_reports_conflicts(tmp_path: Path) -> None:
    base = _write(tmp_path / "O", doc("thread-a"))
    ours = _write(tmp_path / "A", doc("thread-a", title="ours", refs={"thread-o": []}))
    theirs = _write(tmp_path / "B", doc("thread-a", status="done", refs={"thread-t": []}))
    assert run_leslie("merge-relations", "--kind", "thread", str(base), str(ours), str(theirs),
                      cwd=tmp_path).code == 0
    merged = json.loads(ours.read_text())
    assert (merged["title"], merged["status"]) == ("ours", "done")
    assert merged["references"] == {"thread-o": [], "thread-t": []}
    _write(ours, b"<<<<<<< HEAD\n")
    result = run_leslie("merge-relations", "--kind", "thread", str(base), str(ours), str(theirs), cwd=tmp_path)
    assert result.code == 1
    assert "left as a conflict" in result.stderr
    assert ours.read_bytes() == b"<<<<<<< HEAD\n"  # untouched: a human decides


def test_thread_tombstone_round_trips_through_the_model() -> None:
    merged = merge_thread_documents(doc("thread-a"), doc("thread-a", status="deleted"), doc("thread-a", "new"))
    thread: Thread = thread_from_json(merged)
    assert thread.is_tombstone and thread.title == "new" and thread.references == {}


def test_driver_never_replaces_anything_but_a_regular_file(tmp_path: Path) -> None:
    """Regression: run by hand with /dev/null as OURS, the atomic replace swapped the device for a file."""
    good = _write(tmp_path / "good", index_of({"thread-a": doc("thread-a")}).to_json())
    target = _write(tmp_path / "target", b"keep me\n")
    link = tmp_path / "link"
    link.symlink_to(target)
    folder = tmp_path / "folder"
    folder.mkdir()
    for ours in (link, folder):
        result = run_leslie("merge-relations", str(good), str(ours), str(good), cwd=tmp_path)
        assert result.code == 2 and "regular file" in result.stderr
    assert target.read_bytes() == b"keep me\n" and link.is_symlink() and folder.is_dir()
