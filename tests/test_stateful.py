"""Property-based tests: leslie's operations against a pure model, SPEC §2 invariants after every step.

The state machine drives the Python API (spawn, reference with and without scope, unreference, set_status,
retitle, remove with and without force) and a simulated crash between a `thread.json` write and the index
write, repaired by `run_doctor(fix=True)`. After every step the files on disk must equal the model and the
index must equal a rebuild byte for byte. A second property pins the lazy index (decoded per entry and
written by splicing) to the plain full encode.
"""

from __future__ import annotations

import re
import shutil
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    initialize,
    invariant,
    rule,
    run_state_machine_as_test,
)

from leslie.errors import LeslieError, NotFoundError, UsageError
from leslie.ops.bootstrap import init_repository
from leslie.ops.doctor import run_doctor
from leslie.ops.threads import RefSpec, reference, remove, retitle, set_status, spawn, unreference
from leslie.store.files import acquire_index_lock
from leslie.store.jsonio import dumps_canonical
from leslie.store.model import Thread, clean_title
from leslie.store.relations import Index, build_index, decode_index, invariant_problems
from leslie.store.repository import Repository

SCOPES = ("plan.md", "progress.md", "design/api.md", "artifacts/out.txt")
TITLE_TEXT = st.text(alphabet=st.characters(codec="utf-8", categories=("L", "N", "P", "Zs", "S")),
                     min_size=1, max_size=30).filter(lambda t: t.strip())


@dataclass
class ModelThread:
    title: str
    status: str = "active"
    refs: dict[str, tuple[str, ...]] = field(default_factory=dict)


def merge_scope(current: tuple[str, ...] | None, scope: tuple[str, ...]) -> tuple[str, ...]:
    """The documented rule: no scope (or an existing whole reference) means the whole thread."""
    if not scope or current == ():
        return ()
    return tuple(sorted(set(current or ()) | set(scope)))


class LeslieMachine(RuleBasedStateMachine):
    """leslie's thread operations, checked step by step against a dictionary of ModelThreads."""

    threads = Bundle("threads")

    def __init__(self) -> None:
        super().__init__()
        self.tmp = Path(tempfile.mkdtemp(prefix="leslie-stateful-"))
        init_repository(self.tmp)
        self.repo = Repository(self.tmp)
        self.model: dict[str, ModelThread] = {}
        self.counter = 0

    def teardown(self) -> None:
        shutil.rmtree(self.tmp, ignore_errors=True)

    # -- helpers -------------------------------------------------------------------------------------
    def live(self, thread_id: str) -> bool:
        return thread_id in self.model and self.model[thread_id].status != "deleted"

    def rank(self, edge: tuple[str, str]) -> tuple[int, int]:
        """Order edges by the threads' creation, not their IDs: generated IDs differ between runs, and
        hypothesis needs the same draws to mean the same thing when it replays a case."""
        order = list(self.model)
        return order.index(edge[0]), order.index(edge[1])

    def expect_error(self, kind: type[LeslieError], call: object) -> None:
        before = self.snapshot()
        with pytest.raises(kind):
            call()  # type: ignore[operator]
        assert self.snapshot() == before, "a rejected operation changed .leslie/"

    def snapshot(self) -> dict[str, bytes]:
        return {str(p.relative_to(self.tmp)): p.read_bytes()
                for p in sorted((self.tmp / ".leslie").rglob("*.json")) if p.is_file()}

    # -- rules -----------------------------------------------------------------------------------------
    @initialize(target=threads)
    def first_thread(self) -> str:
        spawn(self.repo, "the first thread", title="first", thread_id="thread-first")
        self.model["thread-first"] = ModelThread("first")
        return "thread-first"

    @rule(target=threads, title=TITLE_TEXT, data=st.data(), explicit_id=st.booleans())
    def spawn_thread(self, title: str, data: st.DataObject, explicit_id: bool) -> str:
        live = [t for t in self.model if self.live(t)]  # creation order: IDs may be random
        targets = data.draw(st.lists(st.sampled_from(live), max_size=2, unique=True)) if live else []
        scopes = {t: data.draw(st.sets(st.sampled_from(SCOPES), max_size=2)) for t in targets}
        refs = [RefSpec(t, (s,)) for t in targets for s in sorted(scopes[t])]
        refs += [RefSpec(t) for t in targets if not scopes[t]]
        thread_id = None
        if explicit_id:
            self.counter += 1
            thread_id = f"thread-h{self.counter}"
        outcome = spawn(self.repo, f"intent: {title}", title=title, refs=refs, thread_id=thread_id)
        expected: dict[str, tuple[str, ...]] = {}
        for ref in refs:
            expected[ref.target] = merge_scope(expected.get(ref.target), ref.scope)
        self.model[outcome.thread.id] = ModelThread(clean_title(title), refs=expected)
        return outcome.thread.id

    @rule(source=threads, dest=threads, scope=st.sets(st.sampled_from(SCOPES), max_size=2))
    def reference_thread(self, source: str, dest: str, scope: set[str]) -> None:
        target = dest  # `target` is reserved by @rule
        paths = tuple(sorted(scope))
        if source == target:
            self.expect_error(UsageError, lambda: reference(self.repo, source, target, paths))
        elif not self.live(source) or not self.live(target):
            self.expect_error(NotFoundError, lambda: reference(self.repo, source, target, paths))
        else:
            reference(self.repo, source, target, paths)
            refs = self.model[source].refs
            refs[target] = merge_scope(refs.get(target), paths)

    @rule(source=threads, dest=threads, scope=st.sets(st.sampled_from(SCOPES), max_size=1))
    def unreference_thread(self, source: str, dest: str, scope: set[str]) -> None:
        self.check_unreference(source, dest, tuple(sorted(scope)))

    @rule(data=st.data())
    def unreference_existing_edge(self, data: st.DataObject) -> None:
        """Most random pairs are not referenced; this rule removes (part of) a reference that exists."""
        edges = sorted(((s, t) for s, m in self.model.items() if self.live(s) for t in m.refs), key=self.rank)
        if not edges:
            return
        source, target = data.draw(st.sampled_from(edges))
        current = self.model[source].refs[target]
        paths = tuple(sorted(data.draw(st.sets(st.sampled_from(current), max_size=len(current))))) if current else ()
        self.check_unreference(source, target, paths)

    def check_unreference(self, source: str, target: str, paths: tuple[str, ...]) -> None:
        if not self.live(source):
            self.expect_error(NotFoundError, lambda: unreference(self.repo, source, target, paths))
            return
        refs = self.model[source].refs
        current = refs.get(target)
        if current is not None and paths and current == ():
            self.expect_error(UsageError, lambda: unreference(self.repo, source, target, paths))
            return
        unreference(self.repo, source, target, paths)
        if current is None:
            return
        remaining = tuple(p for p in current if p not in paths) if paths else ()
        if remaining:
            refs[target] = remaining
        else:
            del refs[target]

    @rule(thread=threads, status=st.sampled_from(["active", "paused", "done", "archived"]))
    def change_status(self, thread: str, status: str) -> None:
        if not self.live(thread):
            self.expect_error(NotFoundError, lambda: set_status(self.repo, thread, status))
            return
        set_status(self.repo, thread, status)
        self.model[thread].status = status

    @rule(thread=threads, title=TITLE_TEXT)
    def retitle_thread(self, thread: str, title: str) -> None:
        if not self.live(thread):
            self.expect_error(NotFoundError, lambda: retitle(self.repo, thread, title))
            return
        retitle(self.repo, thread, title)
        self.model[thread].title = clean_title(title)

    @rule(thread=threads, force=st.booleans())
    def remove_thread(self, thread: str, force: bool) -> None:
        if not self.live(thread):
            self.expect_error(NotFoundError, lambda: remove(self.repo, thread, force=force))
            return
        referrers = sorted(t for t, m in self.model.items() if self.live(t) and thread in m.refs and t != thread)
        if referrers and not force:
            self.expect_error(UsageError, lambda: remove(self.repo, thread, force=False))
            return
        outcome = remove(self.repo, thread, force=force)
        assert outcome.detail["referenced_by"] == referrers
        for source in referrers:
            del self.model[source].refs[thread]
        self.model[thread].status = "deleted"
        self.model[thread].refs = {}

    @rule(thread=threads, data=st.data())
    def crash_between_thread_and_index(self, thread: str, data: st.DataObject) -> None:
        """A process dies after writing thread.json and before the index: doctor --fix makes them agree."""
        if not self.live(thread):
            return
        live = [t for t in self.model if self.live(t) and t != thread]
        current = self.repo.read_thread(thread)
        new_refs = dict(current.references)
        if live and data.draw(st.booleans()):
            new_refs[data.draw(st.sampled_from(live))] = ()
        elif new_refs:
            del new_refs[min(new_refs, key=list(self.model).index)]
        title = f"crashed {self.counter}"
        with acquire_index_lock(self.repo.layout) as lock:
            self.repo.write_thread(lock, replace(current, references=new_refs, title=title))
        report = run_doctor(self.repo, fix=True)
        assert report.ok, report.problems
        self.model[thread].refs = new_refs
        self.model[thread].title = title

    # -- invariants ----------------------------------------------------------------------------------
    @invariant()
    def disk_matches_model(self) -> None:
        assert sorted(self.repo.thread_ids()) == sorted(self.model)
        for thread_id, expected in self.model.items():
            stored = self.repo.read_thread(thread_id)
            assert (stored.title, stored.status, stored.references) == (expected.title, expected.status, expected.refs)

    @invariant()
    def index_holds_spec_invariants(self) -> None:
        stored = self.repo.layout.index_path.read_bytes()
        rebuilt = build_index(self.repo.read_thread(t) for t in self.repo.thread_ids())
        assert stored == dumps_canonical(rebuilt.to_json()), "invariant 4: index differs from a rebuild"
        index = self.repo.read_index()
        assert invariant_problems(index) == []  # invariants 1-3 (entries, mirror, no bad edge)
        live = {t for t in self.model if self.live(t)}
        assert set(index.threads) == live == set(index.references_to) == set(index.referenced_by)
        for source in live:
            assert index.references_to[source] == set(self.model[source].refs)
            assert index.referenced_by[source] == {t for t in live if source in self.model[t].refs}


def test_operations_against_the_model() -> None:
    run_state_machine_as_test(LeslieMachine, settings=settings(
        max_examples=30, stateful_step_count=25, deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much]))


# -- the lazy index: same bytes and same content as the plain one ---------------------------------------

IDS = [f"thread-{c}" for c in "abcdef"]


def make_thread(tid: str, refs: list[str] | set[str] = (), status: str = "active", title: str = "t") -> Thread:
    return Thread(id=tid, title=title, intent="", objective=None, status=status, references=dict.fromkeys(refs, ()))


# Any title a thread.json can hold: text XML 1.0 can carry (the index refuses the rest, as thread.json does).
XML_CHAR = st.characters(codec="utf-8").filter(lambda c: not re.match("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]", c))
thread_strategy = st.builds(
    make_thread, st.sampled_from(IDS), st.sets(st.sampled_from(IDS), max_size=3),
    st.sampled_from(["active", "active", "active", "done", "deleted"]), st.text(XML_CHAR, min_size=1, max_size=12))
A, B, C = "thread-a", "thread-b", "thread-c"


@settings(max_examples=300, deadline=None)
@given(initial=st.lists(thread_strategy, min_size=1, max_size=6, unique_by=lambda t: t.id),
       edits=st.lists(st.tuples(st.booleans(), thread_strategy), max_size=10))
@example(initial=[make_thread(A), make_thread(B, [A])], edits=[(False, make_thread(B))])  # unreference
@example(initial=[make_thread(A), make_thread(B, [A])], edits=[(True, make_thread(A))])  # rm --force
@example(initial=[make_thread(A), make_thread(B, [A])], edits=[(False, make_thread(A, status="deleted"))])
@example(initial=[make_thread(A)], edits=[(False, make_thread(C, [A])), (False, make_thread(B, [A, C]))])
@example(initial=[make_thread(A), make_thread(B, [A])], edits=[(True, make_thread(B)), (False, make_thread(B, [A]))])
def test_lazy_index_edits_match_full_encode(initial: list[Thread], edits: list[tuple[bool, Thread]]) -> None:
    data = dumps_canonical(build_index(initial).to_json())
    lazy = decode_index(data, Path("index"), Path("index"))
    plain = build_index(initial)
    assert lazy.to_bytes() == data
    for drop, thread in edits:
        for index in (lazy, plain):
            if drop:
                index.drop_thread(thread.id)
            else:
                index.put_thread(thread)
        assert lazy.has_thread(thread.id) == (thread.id in plain.threads)
        assert lazy.referrers(thread.id) == plain.referenced_by.get(thread.id, set())
        assert lazy.to_bytes() == dumps_canonical(plain.to_json())
    reread = decode_index(lazy.to_bytes(), Path("index"), Path("index"))
    assert reread == plain  # full decode of the spliced text
    assert lazy == plain  # and of the edited lazy index itself


def test_non_canonical_index_is_read_strictly_and_rewritten_canonically() -> None:
    """Hand-formatted JSON (valid, same content) is not spliced into: it is re-encoded in full."""
    index = build_index([make_thread(A, title="A"), make_thread(B, [A], title="B")])
    compact = b'{"version": "1.0", "threads": {"thread-a": {"created_at": "", "intent": "", "objective": null, ' \
              b'"status": "active", "title": "A"}, "thread-b": {"created_at": "", "intent": "", "objective": null, ' \
              b'"status": "active", "title": "B"}}, "relations": {"thread-a": ' \
              b'{"references_to": [], "referenced_by": ["thread-b"]}, "thread-b": {"references_to": ["thread-a"], ' \
              b'"referenced_by": []}}}'
    decoded = decode_index(compact, Path("index"), Path("index"))
    assert decoded == index
    decoded.put_thread(make_thread(C))
    index.put_thread(make_thread(C))
    assert decoded.to_bytes() == dumps_canonical(index.to_json())


def test_index_is_an_index() -> None:
    assert Index.empty().to_bytes() == dumps_canonical(Index.empty().to_json())
