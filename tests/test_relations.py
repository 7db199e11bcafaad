"""relations.py: the index shape of SPEC §2, rebuilds, incremental updates, invariants, graph formats."""

from __future__ import annotations

import contextlib
import json
import random
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import run_leslie
from index_model import STATUSES, apply_op, ops
from leslie.errors import CorruptStateError
from leslie.store.jsonio import dumps_canonical
from leslie.store.model import Thread
from leslie.store.relations import (
    Index,
    build_index,
    decode_index,
    format_relations,
    index_from_json,
    invariant_problems,
)
from leslie.store.repository import Repository


def thread(tid: str, refs: dict[str, tuple[str, ...]] | None = None, status: str = "active",
           objective: str | None = "obj-1") -> Thread:
    return Thread(id=tid, title=f"title {tid}", intent="i", objective=objective, status=status,
                  references=refs or {})


def test_build_index_exact_shape() -> None:
    index = build_index([
        thread("thread-abc", {"thread-xyz": ()}),
        thread("thread-xyz", {"thread-abc": ("plan.md",)}),
        thread("thread-old", status="deleted"),
        thread("thread-p", status="paused", objective=None),
    ])
    assert index.to_json() == {
        "version": "1.0",
        "threads": {
            "thread-abc": {"created_at": "", "intent": "i", "objective": "obj-1", "status": "active",
                           "title": "title thread-abc"},
            "thread-p": {"created_at": "", "intent": "i", "objective": None, "status": "paused",
                         "title": "title thread-p"},
            "thread-xyz": {"created_at": "", "intent": "i", "objective": "obj-1", "status": "active",
                           "title": "title thread-xyz"},
        },
        "relations": {
            "thread-abc": {"references_to": ["thread-xyz"], "referenced_by": ["thread-xyz"]},
            "thread-p": {"references_to": [], "referenced_by": []},
            "thread-xyz": {"references_to": ["thread-abc"], "referenced_by": ["thread-abc"]},
        },
    }


def test_build_index_drops_self_dangling_and_tombstone_edges() -> None:
    index = build_index([
        thread("thread-a", {"thread-a": (), "thread-gone": (), "thread-dead": (), "thread-b": ()}),
        thread("thread-b"),
        thread("thread-dead", {"thread-b": ()}, status="deleted"),
    ])
    assert index.references_to == {"thread-a": {"thread-b"}, "thread-b": set()}
    assert index.referenced_by == {"thread-a": set(), "thread-b": {"thread-a"}}
    assert invariant_problems(index) == []


def test_empty_index_bytes() -> None:
    assert dumps_canonical(Index.empty().to_json()) == (
        b'{\n  "relations": {},\n  "threads": {},\n  "version": "1.0"\n}\n')


# Random graphs of live and deleted threads, with dangling and self references mixed in.
ids = st.sampled_from([f"thread-{c}" for c in "abcdefgh"])
graphs = st.dictionaries(
    ids,
    st.tuples(st.sampled_from(["active", "paused", "done", "archived", "deleted"]),
              st.dictionaries(st.sampled_from([f"thread-{c}" for c in "abcdefghz"]),
                              st.sampled_from([(), ("plan.md",)]), max_size=5)),
    max_size=8,
)


@settings(max_examples=150)
@given(graphs, st.randoms(use_true_random=False))
def test_rebuild_is_deterministic_and_consistent(graph: dict[str, Any], rnd: random.Random) -> None:
    threads = [thread(tid, refs, status) for tid, (status, refs) in graph.items()]
    expected = dumps_canonical(build_index(threads).to_json())
    rnd.shuffle(threads)
    index = build_index(threads)
    assert dumps_canonical(index.to_json()) == expected
    assert invariant_problems(index) == []
    live = {t.id for t in threads if not t.is_tombstone}
    assert set(index.threads) == live  # invariant 1
    for source in live:  # invariant 2 and 3
        for target in index.references_to[source]:
            assert target != source and target in live and source in index.referenced_by[target]
    # Decoding the document gives back the same index.
    assert index_from_json(json.loads(expected), Path("x")).to_json() == index.to_json()


@settings(max_examples=300)
@given(graphs, graphs)
def test_equals_rebuild_answers_as_comparing_the_bytes(stored_graph: dict[str, Any], graph: dict[str, Any]) -> None:
    """doctor's check without building the rebuild: the stored index of one graph against the threads of
    another (or the same: half the examples), as comparing the stored bytes with the rebuild's."""
    for threads_graph in (stored_graph, graph):
        data = dumps_canonical(build_index(thread(t, r, s) for t, (s, r) in stored_graph.items()).to_json())
        threads = {tid: thread(tid, refs, status) for tid, (status, refs) in threads_graph.items()}
        rebuilt = dumps_canonical(build_index(threads.values()).to_json())
        stored = decode_index(data, Path("x"), Path("x"))
        assert stored.equals_rebuild(threads) == (data == rebuilt)


def test_equals_rebuild_sees_a_referrer_list_that_differs_in_one_id() -> None:
    """Totals alike, one referrer swapped for another live thread: the item check catches it."""
    threads = {t.id: t for t in (thread("thread-a", {"thread-c": ()}), thread("thread-b"), thread("thread-c"))}
    data = dumps_canonical(build_index(threads.values()).to_json())
    assert decode_index(data, Path("x"), Path("x")).equals_rebuild(threads)
    swapped = data.replace(b'"referenced_by": [\n        "thread-a"', b'"referenced_by": [\n        "thread-b"')
    assert swapped != data
    assert not decode_index(swapped, Path("x"), Path("x")).equals_rebuild(threads)
    dropped = data.replace(b'"referenced_by": [\n        "thread-a"\n      ]', b'"referenced_by": []')
    assert dropped != data and decode_index(dropped, Path("x"), Path("x")).is_stored_encoding()
    assert not decode_index(dropped, Path("x"), Path("x")).equals_rebuild(threads)  # an edge no list names
    missing = {tid: t for tid, t in threads.items() if tid != "thread-b"}  # an entry no thread.json backs
    assert not decode_index(data, Path("x"), Path("x")).equals_rebuild(missing)


@settings(max_examples=150)
@given(ops(8, 40))
def test_incremental_updates_equal_a_rebuild(operations: list[tuple[str, int, int]]) -> None:
    """put_thread/drop_thread as the commands use them keep the index equal to a rebuild (invariant 4)."""
    sources: dict[str, Thread] = {}
    index = Index.empty()
    names = [f"thread-{c}" for c in "abcdefgh"]
    for op, i, j in operations:
        apply_op(index, sources, op, names[i], names[j], STATUSES[j % 4], thread)
        assert dumps_canonical(index.to_json()) == dumps_canonical(build_index(sources.values()).to_json())


def test_put_thread_keeps_extra_entry_keys_and_tombstone_drops() -> None:
    index = build_index([thread("thread-a"), thread("thread-b", {"thread-a": ()})])
    index.threads["thread-a"]["color"] = "blue"
    index.put_thread(replace(thread("thread-a"), title="new"))
    assert index.threads["thread-a"] == {"color": "blue", "created_at": "", "intent": "i", "objective": "obj-1",
                                         "status": "active", "title": "new"}
    index.put_thread(thread("thread-a", status="deleted"))
    assert "thread-a" not in index.threads and index.references_to["thread-b"] == set()


VALID = {"version": "1.0", "threads": {"thread-a": {"status": "active", "title": "A", "objective": None}},
         "relations": {"thread-a": {"references_to": [], "referenced_by": []}}}


@pytest.mark.parametrize(
    ("doc", "why"),
    [
        ([], "is not an index"),
        ({**VALID, "extra": 1}, "is not an index"),
        ({k: v for k, v in VALID.items() if k != "relations"}, "is not an index"),
        ({**VALID, "version": "2.0"}, "unknown index version '2.0'"),
        ({**VALID, "version": 1}, "unknown index version 1"),
        ({**VALID, "threads": []}, "must be objects"),
        ({**VALID, "relations": None}, "must be objects"),
        ({**VALID, "threads": {"bad-id": {"status": "active", "title": "A"}}}, "threads entry 'bad-id'"),
        ({**VALID, "threads": {"thread-a": "active"}}, "threads entry 'thread-a'"),
        ({**VALID, "threads": {"thread-a": {"status": "active"}}}, "threads entry 'thread-a' has no title string"),
        ({**VALID, "threads": {"thread-a": {"status": 1, "title": "A"}}}, "threads entry 'thread-a' has status 1"),
        ({**VALID, "relations": {"thread-b": {"references_to": [], "referenced_by": []}}}, "no threads entry"),
        ({**VALID, "relations": {"thread-a": []}}, "malformed"),
        ({**VALID, "relations": {"thread-a": {"references_to": "thread-b", "referenced_by": []}}},
         "references_to is not a list"),
        ({**VALID, "relations": {"thread-a": {"references_to": [], "referenced_by": [3]}}},
         "referenced_by is not a list"),
        # Well-formed JSON, but not what leslie writes (issue 11): each would reach the context or a write.
        ({**VALID, "threads": {"thread-a": {"status": "deleted", "title": "A"}}}, "has status 'deleted'"),
        ({**VALID, "threads": {"thread-a": {"status": "active", "title": "A\x1b[2J"}}}, "XML 1.0 cannot carry"),
        ({**VALID, "threads": {"thread-a": {"status": "active", "title": "A", "objective": "../x"}}},
         "not an objective ID"),
        ({**VALID, "threads": {"thread-a": {"status": "active", "title": "A", "x": [[[]]]}}}, "nested value"),
        ({**VALID, "relations": {"thread-a": {"references_to": ["../../x"], "referenced_by": []}}},
         "references_to is not a list of thread IDs"),
    ],
)
def test_index_from_json_rejects_wrong_shapes(doc: Any, why: str) -> None:
    with pytest.raises(CorruptStateError, match=why) as info:
        index_from_json(doc, Path(".leslie/thread_relations.json"))
    assert info.value.path == ".leslie/thread_relations.json" and info.value.exit_code == 4


def test_invariant_problems_each_kind() -> None:
    index = Index(
        threads={"thread-a": {}, "thread-b": {}, "thread-c": {}},
        references_to={"thread-a": {"thread-a", "thread-b", "thread-zzz"}, "thread-b": set()},
        referenced_by={"thread-a": set(), "thread-b": set(), "thread-c": {"thread-b"}},
    )
    assert invariant_problems(index) == [
        "thread-c has no relations entry",
        "thread-a references itself",
        "thread-b.referenced_by lacks thread-a (mirror broken)",
        "thread-a references missing thread thread-zzz",
        "thread-b.references_to lacks thread-c (mirror broken)",
    ]


def test_format_relations() -> None:
    index = build_index([thread("thread-a", {"thread-b": ()}), thread("thread-b"), thread("thread-c-1")])
    assert format_relations(index) == dumps_canonical(index.to_json()).decode()


@pytest.mark.parametrize(("old", "new"), [
    (b'"title": "A"', b'"title": "\\ud800"'),  # a lone surrogate: no UTF-8 file can hold it
    (b'"title": "A"', b'"title": "\\u0007"'),  # a control character XML cannot carry
    (b'"title": "A"', b'"title": "\\f"'),
    (b'"status": "active"', b'"status": "deleted"'),
    (b'"objective": null', b'"objective": "../../etc"'),
])
def test_decode_index_checks_a_canonical_file_as_strictly_as_any_other(old: bytes, new: bytes) -> None:
    from leslie.store.jsonio import dumps_canonical

    data = dumps_canonical(VALID)
    assert old in data
    decode_index(data, Path("i"), Path("i"))  # the untouched file is fine (and takes the fast path)
    with pytest.raises(CorruptStateError):
        decode_index(data.replace(old, new), Path("i"), Path("i"))


def _graph() -> Index:
    return build_index([thread("thread-a", {"thread-b": (), "thread-c": ()}), thread("thread-b", {"thread-c": ()}),
                        thread("thread-c", {"thread-a": ()}),
                        replace(thread("thread-d"), title='\u00e9t\u00e9 "quoted"\ttab \\ \u2028')])


def test_stored_bytes_of_a_canonical_file_are_the_encoders_bytes() -> None:
    data = dumps_canonical(_graph().to_json())
    index = decode_index(data, Path("x"), Path("x"))
    assert index.stored_bytes() == data
    assert format_relations(index) == data.decode()
    assert index._lazy is not None  # printed without decoding the whole index


def test_stored_bytes_refuse_unsorted_or_repeated_id_lists_and_edits() -> None:
    """The layout check accepts any order in an ID list; the encoder sorts: such a file is encoded again."""
    data = dumps_canonical(_graph().to_json())
    sorted_list = b'"references_to": [\n        "thread-b",\n        "thread-c"\n      ]'
    assert sorted_list in data
    for wrong in (b'"references_to": [\n        "thread-c",\n        "thread-b"\n      ]',
                  b'"references_to": [\n        "thread-b",\n        "thread-b"\n      ]'):
        edited = data.replace(sorted_list, wrong)
        index = decode_index(edited, Path("x"), Path("x"))
        assert index._lazy is not None and index.stored_bytes() is None  # canonical layout, not canonical order
        assert format_relations(index) == dumps_canonical(index.to_json()).decode()
        assert format_relations(index).encode() != edited
    index = decode_index(data, Path("x"), Path("x"))
    index.put_thread(thread("thread-d", {"thread-a": ()}))
    assert index.stored_bytes() is None
    assert format_relations(index) == dumps_canonical(index.to_json()).decode()


def test_show_reads_one_entry_of_the_index() -> None:
    """`Index.referrers` (what `leslie show` lists) answers from the one entry, the same as a full decode."""
    data = dumps_canonical(_graph().to_json())
    lazy = decode_index(data, Path("x"), Path("x"))
    assert [sorted(lazy.referrers(t)) for t in ("thread-a", "thread-c", "thread-zz")] == [
        ["thread-c"], ["thread-a", "thread-b"], []]
    assert lazy._lazy is not None
    assert lazy.referrers("thread-c") == _graph().referenced_by["thread-c"]


def test_relations_command_prints_the_encoders_bytes_stored_or_not(three_threads: Repository) -> None:
    """`leslie relations --format json` prints the stored file when it is canonical, the encoding otherwise:
    the same bytes either way."""
    root = three_threads.root
    path = three_threads.layout.index_path
    expected = dumps_canonical(three_threads.rebuild_index().to_json()).decode()
    assert path.read_text() == expected
    assert run_leslie("relations", "--format", "json", cwd=root).stdout == expected
    path.write_text(path.read_text().replace('"references_to": [\n        "thread-b"\n      ]',
                                             '"references_to": [\n        "thread-b",\n        "thread-b"\n      ]'))
    assert path.read_text() != expected
    assert run_leslie("relations", "--json", cwd=root).stdout == expected
    path.write_text(json.dumps(json.loads(expected)))  # valid, not canonical: decoded and encoded
    assert run_leslie("relations", cwd=root).stdout == expected


def test_the_quick_invariant_pass_agrees_with_the_full_one() -> None:
    """`invariant_problems` first checks the edges unsorted (status and doctor at 100,000 threads): broken
    in any one way, the full sorted pass still lists the problem."""
    rng = random.Random(18)
    for _ in range(300):
        ids = [f"thread-{i}" for i in range(6)]
        index = build_index([thread(t, {u: () for u in rng.sample(ids, 2) if u != t}) for t in ids])
        assert invariant_problems(index) == []
        kind = rng.randrange(5)
        a, b = rng.sample(ids, 2)
        if kind == 0:
            index.references_to[a].add(a)
        elif kind == 1:
            index.references_to[a].add("thread-gone")
        elif kind == 2:
            index.references_to[a].add(b)  # without the mirror
            index.referenced_by[b].discard(a)
        elif kind == 3:
            index.referenced_by[b].add(a)
            index.references_to[a].discard(b)
        else:
            del index.referenced_by[a]
        assert invariant_problems(index) != []


def test_stored_entries_decode_the_file_in_slices() -> None:
    index = _graph()
    data = dumps_canonical(index.to_json())
    lazy = decode_index(data, Path("x"), Path("x"))
    for size in (1, 40, 1 << 20):  # a slice per entry, a few entries, all at once
        for section in ("threads", "relations"):
            merged: dict[str, Any] = {}
            for chunk in lazy._lazy.text.slices(section, size):  # type: ignore[union-attr]
                assert not set(chunk) & set(merged)
                merged.update(chunk)
            assert merged == index.to_json()[section]
    assert [len(c) for c in lazy._lazy.text.slices("threads", 1)] == [1, 1, 1, 1]  # type: ignore[union-attr]
    empty = decode_index(dumps_canonical(Index.empty().to_json()), Path("x"), Path("x"))
    assert list(empty.stored_entries("threads")) == [] and empty.is_stored_encoding()
    lazy.put_thread(thread("thread-a"))
    with pytest.raises(ValueError, match="edited"):
        list(lazy.stored_entries("threads"))


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=6)


@settings(max_examples=400, deadline=None)
@given(st.sampled_from(["created_at", "intent", "objective", "status", "title", "extra"]), JSON_VALUES,
       st.sampled_from(["references_to", "referenced_by", None]), JSON_VALUES)
def test_any_json_in_an_index_entry_is_accepted_or_corrupt_state(field: str, value: Any, key: str | None,
                                                                 listed: Any) -> None:
    """Whatever JSON an entry's fields hold, decoding the index accepts it or raises CorruptStateError (exit 4),
    never another exception (a list as a status was a TypeError: exit 70 in every read)."""
    entry = {"created_at": "2025-01-01T00:00:00Z", "intent": "", "objective": None, "status": "active",
             "title": "a", field: value}
    relation: dict[str, Any] = {"referenced_by": [], "references_to": []}
    if key is not None:
        relation[key] = listed
    document = {"relations": {"thread-a": relation}, "threads": {"thread-a": entry}, "version": "1.0"}
    for data in (dumps_canonical(document), json.dumps(document).encode()):
        with contextlib.suppress(CorruptStateError):
            decode_index(data, Path("index"), Path("index"))
