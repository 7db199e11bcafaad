"""threads.py through the Python API: spawn, reference, unreference, status, retitle, rm, switch."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from conftest import tree_digest
from leslie.errors import NotFoundError, UsageError
from leslie.ops.objectives import create_objective
from leslie.ops.threads import (
    RefSpec,
    current_thread_id,
    reference,
    remove,
    retitle,
    set_status,
    spawn,
    switch,
    unreference,
)
from leslie.store.jsonio import dumps_canonical
from leslie.store.relations import invariant_problems
from leslie.store.repository import Repository


def assert_consistent(repo: Repository) -> None:
    """SPEC §2: the stored index equals a rebuild byte for byte, and breaks no invariant."""
    stored = repo.layout.index_path.read_bytes()
    assert stored == dumps_canonical(repo.rebuild_index().to_json())
    assert invariant_problems(repo.read_index()) == []


def doc(repo: Repository, thread_id: str) -> dict[str, object]:
    data: dict[str, object] = json.loads(repo.layout.thread_file(thread_id).read_text(encoding="utf-8"))
    return data


def make(repo: Repository, *ids: str) -> None:
    for tid in ids:
        spawn(repo, f"intent of {tid}", thread_id=tid)


# -- spawn --------------------------------------------------------------------------------------------


def test_spawn_creates_folder_assets_and_index_entry(repo: Repository) -> None:
    outcome = spawn(repo, "Fix the login bug\nsecond line", title="Login")
    thread = outcome.thread
    folder = repo.layout.thread_dir(thread.id)
    assert sorted(p.name for p in folder.iterdir()) == ["plan.md", "progress.md", "thread.json"]
    assert doc(repo, thread.id) == {
        "created_at": thread.created_at, "id": thread.id, "intent": "Fix the login bug\nsecond line",
        "objective": "obj-default", "references": {}, "spawned_by": None, "status": "active",
        "title": "Login", "version": 1,
    }
    plan = (folder / "plan.md").read_text(encoding="utf-8")
    assert plan == "# Plan: Login\n\n- [ ] \n"  # a heading and a checklist: the how is in AGENTS.md (issue 33)
    assert (folder / "progress.md").read_text(encoding="utf-8").startswith("# Progress: Login")
    index = json.loads(repo.layout.index_path.read_text(encoding="utf-8"))
    assert index["threads"][thread.id] == {"created_at": thread.created_at, "intent": "Fix the login bug\nsecond line",
                                           "objective": "obj-default", "status": "active", "title": "Login"}
    assert index["relations"][thread.id] == {"referenced_by": [], "references_to": []}
    assert_consistent(repo)


def test_spawn_default_title_from_first_line_of_intent(repo: Repository) -> None:
    short = spawn(repo, "\n  First line  \nmore").thread
    assert short.title == "First line"
    long = spawn(repo, "word " * 40).thread
    assert len(long.title) == 80 and long.title.endswith("…")


def test_spawn_cleans_text(repo: Repository) -> None:
    thread = spawn(repo, "a\r\nb\rc", title="one\ntwo\r\nthree").thread
    assert thread.intent == "a\nb\nc"
    assert thread.title == "one two three"
    assert doc(repo, thread.id)["intent"] == "a\nb\nc"


def test_spawn_with_chosen_id_and_duplicate(repo: Repository) -> None:
    assert spawn(repo, "x", thread_id="thread-mine").thread.id == "thread-mine"
    before = tree_digest(repo.layout.leslie_dir)
    with pytest.raises(UsageError, match="thread thread-mine already exists"):
        spawn(repo, "again", thread_id="thread-mine")
    assert tree_digest(repo.layout.leslie_dir) == before


def test_spawn_user_template_override(repo: Repository) -> None:
    repo.layout.templates_dir.mkdir()
    (repo.layout.templates_dir / "plan.md").write_text("custom plan for $thread\n", encoding="utf-8")
    thread = spawn(repo, "x", thread_id="thread-t").thread
    assert (repo.layout.thread_dir(thread.id) / "plan.md").read_text() == "custom plan for thread-t\n"


def test_spawn_with_refs_and_parent(repo: Repository) -> None:
    make(repo, "thread-a", "thread-b")
    (repo.layout.thread_dir("thread-b") / "design").mkdir()
    (repo.layout.thread_dir("thread-b") / "design" / "api.md").write_text("api")
    refs = [RefSpec.parse("thread-a"), RefSpec.parse("thread-b:design/api.md"), RefSpec.parse("thread-b:plan.md")]
    outcome = spawn(repo, "child", refs=refs, parent="thread-a", thread_id="thread-c")
    assert outcome.warnings == ()
    assert doc(repo, "thread-c")["references"] == {"thread-a": [], "thread-b": ["design/api.md", "plan.md"]}
    assert doc(repo, "thread-c")["spawned_by"] == "thread-a"
    index = repo.read_index()
    assert index.referenced_by["thread-a"] == {"thread-c"} and index.referenced_by["thread-b"] == {"thread-c"}
    assert_consistent(repo)


def test_spawn_ref_whole_wins_over_scope(repo: Repository) -> None:
    make(repo, "thread-a")
    refs = [RefSpec.parse("thread-a:plan.md"), RefSpec.parse("thread-a")]
    spawn(repo, "x", refs=refs, thread_id="thread-b")
    assert doc(repo, "thread-b")["references"] == {"thread-a": []}


def test_spawn_ref_missing_file_warns(repo: Repository) -> None:
    make(repo, "thread-a")
    outcome = spawn(repo, "x", refs=[RefSpec.parse("thread-a:design/later.md")])
    assert outcome.warnings == ("warning: thread-a has no design/later.md yet; the reference will cover it "
                                "once it exists",)


def test_ref_spec_parse() -> None:
    assert RefSpec.parse("thread-a") == RefSpec("thread-a", ())
    assert RefSpec.parse("thread-a:./design/x.md") == RefSpec("thread-a", ("design/x.md",))
    with pytest.raises(UsageError, match="invalid referenced thread ID"):
        RefSpec.parse("nope:plan.md")
    with pytest.raises(UsageError, match="invalid scope"):
        RefSpec.parse("thread-a:")


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"refs": [RefSpec("thread-zzz")]}, NotFoundError, "no such thread: thread-zzz"),
        ({"parent": "thread-zzz"}, NotFoundError, "no such thread: thread-zzz"),
        ({"objective": "obj-zzz"}, NotFoundError, "no such objective: obj-zzz"),
        ({"refs": [RefSpec("thread-new")], "thread_id": "thread-new"}, UsageError, "cannot reference itself"),
        ({"parent": "bad"}, UsageError, "invalid parent thread ID 'bad'"),
        ({"objective": "bad"}, UsageError, "invalid objective ID 'bad'"),
        ({"thread_id": "bad"}, UsageError, "invalid thread ID 'bad'"),
        ({"title": "x" * 513}, UsageError, "limit is 512"),
        ({"title": "\x07"}, UsageError, "U\\+0007"),
    ],
)
def test_spawn_rejections_change_nothing(repo: Repository, kwargs: dict[str, object], error: type[Exception],
                                         message: str) -> None:
    before = tree_digest(repo.layout.leslie_dir)
    with pytest.raises(error, match=message):
        spawn(repo, "intent", **kwargs)  # type: ignore[arg-type]
    assert tree_digest(repo.layout.leslie_dir) == before


def test_spawn_ref_to_tombstone_is_not_found(repo: Repository) -> None:
    make(repo, "thread-a")
    remove(repo, "thread-a")
    with pytest.raises(NotFoundError, match="thread thread-a is deleted"):
        spawn(repo, "x", refs=[RefSpec("thread-a")])


# -- objective resolution -----------------------------------------------------------------------------


def test_objective_default_created_on_first_use(repo: Repository) -> None:
    first = spawn(repo, "x")
    assert first.thread.objective == "obj-default"
    assert first.warnings == ("note: created objective obj-default for threads spawned without one",)
    assert repo.read_objective("obj-default").status == "active"
    second = spawn(repo, "y")
    assert second.thread.objective == "obj-default" and second.warnings == ()


def test_objective_only_active_one_is_chosen(repo: Repository) -> None:
    create_objective(repo, "Done", objective_id="obj-done")
    from leslie.ops.objectives import set_objective_status

    set_objective_status(repo, "obj-done", "done")
    create_objective(repo, "Live", objective_id="obj-live")
    assert spawn(repo, "x").thread.objective == "obj-live"
    assert not repo.objective_exists("obj-default")


def test_objective_several_active_needs_a_choice(repo: Repository) -> None:
    create_objective(repo, "A", objective_id="obj-a")
    create_objective(repo, "B", objective_id="obj-b")
    before = tree_digest(repo.layout.leslie_dir)
    with pytest.raises(UsageError, match=r"several active objectives \(obj-a “.*”, obj-b “.*”\)"):
        spawn(repo, "x")
    assert tree_digest(repo.layout.leslie_dir) == before
    assert spawn(repo, "x", objective="obj-b").thread.objective == "obj-b"


def test_objective_explicit_beats_parent_and_parent_beats_only_active(repo: Repository) -> None:
    create_objective(repo, "A", objective_id="obj-a")
    create_objective(repo, "B", objective_id="obj-b")
    spawn(repo, "parent", objective="obj-a", thread_id="thread-p")
    assert spawn(repo, "child", parent="thread-p").thread.objective == "obj-a"
    assert spawn(repo, "child", parent="thread-p", objective="obj-b").thread.objective == "obj-b"


def test_objective_explicit_may_be_done(repo: Repository) -> None:
    create_objective(repo, "Old", objective_id="obj-old")
    from leslie.ops.objectives import set_objective_status

    set_objective_status(repo, "obj-old", "archived")
    assert spawn(repo, "x", objective="obj-old").thread.objective == "obj-old"


# -- reference / unreference --------------------------------------------------------------------------


def test_reference_whole_and_repeat_is_noop(repo: Repository) -> None:
    make(repo, "thread-a", "thread-b")
    outcome = reference(repo, "thread-a", "thread-b")
    assert outcome.changed and doc(repo, "thread-a")["references"] == {"thread-b": []}
    assert_consistent(repo)
    before = tree_digest(repo.layout.leslie_dir)
    stamp = repo.layout.index_path.stat().st_mtime_ns
    again = reference(repo, "thread-a", "thread-b")
    assert not again.changed
    assert tree_digest(repo.layout.leslie_dir) == before
    assert repo.layout.index_path.stat().st_mtime_ns == stamp


def test_reference_scopes_add_and_no_scope_widens(repo: Repository) -> None:
    make(repo, "thread-a", "thread-b")
    reference(repo, "thread-a", "thread-b", ["plan.md"])
    reference(repo, "thread-a", "thread-b", ["design/api.md", "./plan.md"])
    assert doc(repo, "thread-a")["references"] == {"thread-b": ["design/api.md", "plan.md"]}
    assert not reference(repo, "thread-a", "thread-b", ["plan.md"]).changed
    reference(repo, "thread-a", "thread-b")
    assert doc(repo, "thread-a")["references"] == {"thread-b": []}
    # A whole reference stays whole when scopes are added.
    assert not reference(repo, "thread-a", "thread-b", ["plan.md"]).changed
    assert doc(repo, "thread-a")["references"] == {"thread-b": []}
    assert_consistent(repo)


def test_reference_missing_scope_warns(repo: Repository) -> None:
    make(repo, "thread-a", "thread-b")
    outcome = reference(repo, "thread-a", "thread-b", ["plan.md", "design/x.md"])
    assert outcome.warnings == ("warning: thread-b has no design/x.md yet; the reference will cover it once "
                                "it exists",)


@pytest.mark.parametrize(
    ("source", "target", "scope", "error", "message"),
    [
        ("thread-a", "thread-a", [], UsageError, "cannot reference itself"),
        ("thread-a", "thread-zzz", [], NotFoundError, "no such thread: thread-zzz"),
        ("thread-zzz", "thread-a", [], NotFoundError, "no such thread: thread-zzz"),
        ("thread-a", "nope", [], UsageError, "invalid target thread ID 'nope'"),
        ("thread-a", "thread-b", ["../x"], UsageError, "must not contain '..'"),
        ("thread-a", "thread-b", [""], UsageError, "invalid scope ''"),
    ],
)
def test_reference_rejections_change_nothing(repo: Repository, source: str, target: str, scope: list[str],
                                             error: type[Exception], message: str) -> None:
    make(repo, "thread-a", "thread-b")
    before = tree_digest(repo.layout.leslie_dir)
    with pytest.raises(error, match=message):
        reference(repo, source, target, scope)
    assert tree_digest(repo.layout.leslie_dir) == before


@pytest.mark.parametrize(
    "link_target",
    ["/etc", "../../../../..", "../../../.git", "../thread-c"],
    ids=["absolute-outside", "relative-outside", "into-git", "into-another-thread"],
)
def test_reference_scope_through_escaping_symlink(repo: Repository, link_target: str) -> None:
    make(repo, "thread-a", "thread-b", "thread-c")
    os.symlink(link_target, repo.layout.thread_dir("thread-b") / "link")
    before = tree_digest(repo.layout.leslie_dir)
    with pytest.raises(UsageError, match="invalid scope 'link/x': leads outside the thread through a symlink"):
        reference(repo, "thread-a", "thread-b", ["link/x"])
    with pytest.raises(UsageError, match="through a symlink"):
        spawn(repo, "x", refs=[RefSpec.parse("thread-b:link")])
    assert tree_digest(repo.layout.leslie_dir) == before


def test_reference_scope_through_symlink_inside_the_thread_is_fine(repo: Repository) -> None:
    make(repo, "thread-a", "thread-b")
    folder = repo.layout.thread_dir("thread-b")
    (folder / "design").mkdir()
    os.symlink("design", folder / "alias")
    assert reference(repo, "thread-a", "thread-b", ["alias"]).warnings == ()


def test_reference_to_paused_done_archived_targets(repo: Repository) -> None:
    make(repo, "thread-a", "thread-b")
    set_status(repo, "thread-b", "archived")
    assert reference(repo, "thread-a", "thread-b").changed
    assert_consistent(repo)


def test_unreference_whole(repo: Repository) -> None:
    make(repo, "thread-a", "thread-b")
    reference(repo, "thread-a", "thread-b", ["plan.md"])
    assert unreference(repo, "thread-a", "thread-b").changed
    assert doc(repo, "thread-a")["references"] == {}
    assert repo.read_index().referenced_by["thread-b"] == set()
    assert_consistent(repo)
    assert not unreference(repo, "thread-a", "thread-b").changed  # already gone: a no-op


def test_unreference_partial_then_last_path(repo: Repository) -> None:
    make(repo, "thread-a", "thread-b")
    reference(repo, "thread-a", "thread-b", ["plan.md", "progress.md", "design/x.md"])
    unreference(repo, "thread-a", "thread-b", ["plan.md", "design/x.md"])
    assert doc(repo, "thread-a")["references"] == {"thread-b": ["progress.md"]}
    assert not unreference(repo, "thread-a", "thread-b", ["not-there.md"]).changed
    unreference(repo, "thread-a", "thread-b", ["progress.md"])
    assert doc(repo, "thread-a")["references"] == {}
    assert_consistent(repo)


def test_unreference_cannot_narrow_a_whole_reference(repo: Repository) -> None:
    make(repo, "thread-a", "thread-b")
    reference(repo, "thread-a", "thread-b")
    before = tree_digest(repo.layout.leslie_dir)
    with pytest.raises(UsageError, match="references all of thread-b; to narrow it"):
        unreference(repo, "thread-a", "thread-b", ["plan.md"])
    assert tree_digest(repo.layout.leslie_dir) == before


def test_unreference_missing_target(repo: Repository) -> None:
    make(repo, "thread-a")
    with pytest.raises(NotFoundError, match="no such thread: thread-zzz"):
        unreference(repo, "thread-a", "thread-zzz")


# -- status, title --------------------------------------------------------------------------------------


@pytest.mark.parametrize("status", ["paused", "done", "archived", "active"])
def test_set_status(repo: Repository, status: str) -> None:
    make(repo, "thread-a")
    outcome = set_status(repo, "thread-a", status)
    assert outcome.changed == (status != "active")
    assert doc(repo, "thread-a")["status"] == status
    assert repo.read_index().threads["thread-a"]["status"] == status
    assert_consistent(repo)


def test_set_status_rejections(repo: Repository) -> None:
    make(repo, "thread-a")
    with pytest.raises(UsageError, match=r"unknown status 'deleted'.*use `leslie rm`"):
        set_status(repo, "thread-a", "deleted")
    with pytest.raises(UsageError, match="unknown status 'Done'"):
        set_status(repo, "thread-a", "Done")
    with pytest.raises(NotFoundError):
        set_status(repo, "thread-zzz", "done")
    remove(repo, "thread-a")
    with pytest.raises(NotFoundError, match="is deleted"):
        set_status(repo, "thread-a", "active")


def test_retitle(repo: Repository) -> None:
    make(repo, "thread-a")
    assert retitle(repo, "thread-a", "New\ntitle").thread.title == "New title"
    assert repo.read_index().threads["thread-a"]["title"] == "New title"
    assert not retitle(repo, "thread-a", "New title").changed
    with pytest.raises(UsageError):
        retitle(repo, "thread-a", "")
    assert_consistent(repo)


# -- rm -----------------------------------------------------------------------------------------------


def test_rm_refused_while_referenced_lists_referrers(repo: Repository) -> None:
    make(repo, "thread-a", "thread-b", "thread-c")
    reference(repo, "thread-b", "thread-a")
    reference(repo, "thread-c", "thread-a", ["plan.md"])
    before = tree_digest(repo.layout.leslie_dir)
    with pytest.raises(UsageError, match=r"thread-a is referenced by thread-b, thread-c; .*--force"):
        remove(repo, "thread-a")
    assert tree_digest(repo.layout.leslie_dir) == before


def test_rm_dry_run_changes_nothing(repo: Repository) -> None:
    make(repo, "thread-a", "thread-b")
    reference(repo, "thread-b", "thread-a")
    before = tree_digest(repo.layout.leslie_dir)
    outcome = remove(repo, "thread-a", force=True, dry_run=True)
    assert not outcome.changed
    assert outcome.detail == {"referenced_by": ["thread-b"], "files": [
        ".leslie/threads/thread-a/plan.md", ".leslie/threads/thread-a/progress.md"]}
    assert tree_digest(repo.layout.leslie_dir) == before
    with pytest.raises(UsageError, match="referenced by thread-b"):
        remove(repo, "thread-a", dry_run=True)  # a dry run reports the refusal too


def test_rm_force_removes_edges_assets_and_leaves_tombstone(repo: Repository) -> None:
    make(repo, "thread-a", "thread-b", "thread-c")
    reference(repo, "thread-b", "thread-a", ["plan.md"])
    reference(repo, "thread-b", "thread-c")
    reference(repo, "thread-a", "thread-c")
    folder = repo.layout.thread_dir("thread-a")
    (folder / "design").mkdir()
    (folder / "design" / "x.md").write_text("x")
    outcome = remove(repo, "thread-a", force=True)
    assert outcome.detail["referenced_by"] == ["thread-b"]
    assert ".leslie/threads/thread-a/design/" in outcome.detail["files"]
    assert sorted(p.name for p in folder.iterdir()) == ["thread.json"]
    tomb = doc(repo, "thread-a")
    assert tomb["status"] == "deleted" and tomb["references"] == {} and tomb["title"] == "intent of thread-a"
    assert doc(repo, "thread-b")["references"] == {"thread-c": []}
    index = repo.read_index()
    assert "thread-a" not in index.threads and index.referenced_by["thread-c"] == {"thread-b"}
    assert_consistent(repo)


def test_rm_tombstone_is_final(repo: Repository) -> None:
    make(repo, "thread-a", "thread-b")
    remove(repo, "thread-a")
    with pytest.raises(NotFoundError, match="thread thread-a is deleted"):
        remove(repo, "thread-a")
    with pytest.raises(UsageError, match="already exists"):
        spawn(repo, "x", thread_id="thread-a")  # the tombstone keeps the ID taken
    with pytest.raises(NotFoundError, match="thread thread-a is deleted"):
        reference(repo, "thread-b", "thread-a")
    with pytest.raises(NotFoundError, match="thread thread-a is deleted"):
        reference(repo, "thread-a", "thread-b")
    assert_consistent(repo)


# -- switch / current thread --------------------------------------------------------------------------


def test_switch_and_current_thread_precedence(repo: Repository, monkeypatch: pytest.MonkeyPatch) -> None:
    make(repo, "thread-a", "thread-b", "thread-c")
    with pytest.raises(UsageError, match="no current thread"):
        current_thread_id(repo)
    switch(repo, "thread-a")
    assert (repo.layout.state_dir / "current_thread").read_text() == "thread-a\n"
    assert current_thread_id(repo) == "thread-a"
    monkeypatch.setenv("LESLIE_THREAD", "thread-b")
    assert current_thread_id(repo) == "thread-b"
    assert current_thread_id(repo, "thread-c") == "thread-c"
    monkeypatch.setenv("LESLIE_THREAD", "garbage")
    with pytest.raises(UsageError, match="invalid thread ID 'garbage'"):
        current_thread_id(repo)
    monkeypatch.setenv("LESLIE_THREAD", "")  # an empty variable counts as unset
    assert current_thread_id(repo) == "thread-a"
    # Regression: an explicit but empty --thread silently fell back to LESLIE_THREAD or `switch`.
    with pytest.raises(UsageError, match="invalid thread ID ''"):
        current_thread_id(repo, "")


def test_switch_rejects_missing_and_deleted(repo: Repository) -> None:
    make(repo, "thread-a")
    remove(repo, "thread-a")
    with pytest.raises(NotFoundError):
        switch(repo, "thread-a")
    with pytest.raises(NotFoundError):
        switch(repo, "thread-zzz")
    assert not (repo.layout.state_dir / "current_thread").exists()


def test_switch_does_not_touch_tracked_state(repo: Repository) -> None:
    make(repo, "thread-a")
    before = {k: v for k, v in tree_digest(repo.layout.leslie_dir).items() if not k.startswith("state")}
    switch(repo, "thread-a")
    after = {k: v for k, v in tree_digest(repo.layout.leslie_dir).items() if not k.startswith("state")}
    assert after == before


# -- a failed index write rolls the transaction back --------------------------------------------------

_ROLLBACK_CHILD = """
import resource, sys
from pathlib import Path
from leslie.errors import StorageError
from leslie.store.repository import Repository
from leslie.ops import threads
repo = Repository(Path(sys.argv[1]))
# The index of this repository is larger than the limit; every thread.json is smaller.
resource.setrlimit(resource.RLIMIT_FSIZE, (900, 900))
calls = {
    "spawn": lambda: threads.spawn(repo, "new"),
    "reference": lambda: threads.reference(repo, "thread-a", "thread-b"),
    "unreference": lambda: threads.unreference(repo, "thread-c", "thread-d"),
    "set_status": lambda: threads.set_status(repo, "thread-a", "done"),
    "remove": lambda: threads.remove(repo, "thread-d", force=True),
}
try:
    calls[sys.argv[2]]()
except StorageError as exc:
    print(exc.exit_code)
"""


@pytest.mark.parametrize("operation", ["spawn", "reference", "unreference", "set_status", "remove"])
def test_failed_index_write_leaves_everything_unchanged(repo: Repository, operation: str) -> None:
    make(repo, "thread-a", "thread-b", "thread-c", "thread-d", "thread-e", "thread-f", "thread-g", "thread-h")
    reference(repo, "thread-c", "thread-d")
    if operation == "spawn":
        # No objective yet would make spawn create obj-default: that must be rolled back too.
        for objective in repo.layout.objectives_dir.iterdir():
            for path in objective.iterdir():
                path.unlink()
            objective.rmdir()
    assert repo.layout.index_path.stat().st_size > 900
    before = tree_digest(repo.layout.leslie_dir)
    out = subprocess.run([sys.executable, "-c", _ROLLBACK_CHILD, str(repo.root), operation],
                         capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "6", out.stderr
    assert tree_digest(repo.layout.leslie_dir) == before
