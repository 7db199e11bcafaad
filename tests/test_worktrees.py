"""A git worktree per thread (SPEC §13, `ops/worktrees.py`): real git, real worktrees, the real command."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import git, run_leslie
from leslie.ops import claims
from leslie.ops.threads import RefSpec, spawn
from leslie.store.repository import Repository


@pytest.fixture
def committed(repo: Repository) -> Repository:
    """A repository whose thread `thread-one` is committed on `main`."""
    spawn(repo, "Committed thread", thread_id="thread-one")
    git("add", "-A", cwd=repo.root)
    git("commit", "-qm", "one", cwd=repo.root)
    return repo


def test_add_makes_a_worktree_on_its_own_branch_with_the_thread_current(committed: Repository) -> None:
    result = run_leslie("worktree", "add", "one", "--json", cwd=committed.root)
    assert result.code == 0, result.stderr
    bound = json.loads(result.stdout)
    where = committed.root.parent / "repo.worktrees" / "thread-one"
    assert (bound["thread"], bound["path"], bound["branch"]) == ("thread-one", str(where), "leslie/thread-one")
    assert str(where) in git("worktree", "list", cwd=committed.root)
    assert git("branch", "--show-current", cwd=where).strip() == "leslie/thread-one"
    assert run_leslie("switch", cwd=where).stdout.startswith("current thread: thread-one")
    assert run_leslie("switch", cwd=committed.root).code == 1  # the main worktree's current thread is its own
    rows = json.loads(run_leslie("worktree", "list", "--json", cwd=where).stdout)  # seen from either worktree
    assert [(r["thread"], r["path"], r["present"]) for r in rows] == [("thread-one", str(where), True)]
    again = run_leslie("worktree", "add", "one", cwd=committed.root)
    assert again.code == 2 and "has a worktree already" in again.stderr


def test_spawn_worktree_carries_an_uncommitted_thread_into_it(committed: Repository, tmp_path: Path) -> None:
    where = tmp_path / "elsewhere"
    result = run_leslie("spawn", "--intent", "Fresh work", "--id", "thread-fresh", "--worktree", str(where),
                        "--json", cwd=committed.root)
    assert result.code == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["id"] == "thread-fresh" and data["worktree"]["path"] == str(where)
    shown = json.loads(run_leslie("show", "fresh", "--json", cwd=where).stdout)
    assert shown["title"] == "Fresh work" and (where / ".leslie" / "threads" / "thread-fresh" / "plan.md").is_file()
    assert run_leslie("doctor", cwd=where).code == 0  # the index there names it, as a rebuild would
    lone = run_leslie("spawn", "--intent", "x", str(tmp_path / "p"), cwd=committed.root)
    assert lone.code == 2 and "goes with --worktree" in lone.stderr


def test_remove_refuses_uncommitted_changes_unless_forced(committed: Repository) -> None:
    run_leslie("worktree", "add", "one", cwd=committed.root)
    where = committed.root.parent / "repo.worktrees" / "thread-one"
    (where / ".leslie" / "threads" / "thread-one" / "plan.md").write_text("- [ ] more\n", encoding="utf-8")
    refused = run_leslie("worktree", "remove", "one", cwd=committed.root)
    assert refused.code == 2 and "uncommitted changes" in refused.stderr and where.is_dir()
    assert run_leslie("worktree", "remove", "one", "--force", cwd=committed.root).code == 0
    assert not where.exists() and "leslie/thread-one" in git("branch", cwd=committed.root)  # the branch stays
    assert json.loads(run_leslie("worktree", "list", "--json", cwd=committed.root).stdout) == []
    assert run_leslie("worktree", "remove", "one", cwd=committed.root).code == 3


def test_a_clean_worktree_is_removed_without_force(committed: Repository) -> None:
    run_leslie("worktree", "add", "one", cwd=committed.root)
    assert run_leslie("worktree", "remove", "one", cwd=committed.root).code == 0


def test_merging_a_threads_branch_back_loses_nothing(committed: Repository) -> None:
    spawn(committed, "Other", thread_id="thread-other")
    git("add", "-A", cwd=committed.root)
    git("commit", "-qm", "other", cwd=committed.root)
    run_leslie("git", "setup", cwd=committed.root)  # the merge drivers
    run_leslie("worktree", "add", "one", cwd=committed.root)
    where = committed.root.parent / "repo.worktrees" / "thread-one"
    assert run_leslie("claim", "--session", "agent-b", cwd=where).code == 0
    (where / ".leslie" / "threads" / "thread-one" / "plan.md").write_text("- [x] done there\n", encoding="utf-8")
    assert run_leslie("reference", "other:plan.md", cwd=where).code == 0
    assert run_leslie("done", "one", cwd=where).code == 0  # its claim ends with it
    git("add", "-A", cwd=where)
    git("commit", "-qm", "thread-one done", cwd=where)
    spawn(committed, "Meanwhile on main", thread_id="thread-main")  # main moves on too
    git("add", "-A", cwd=committed.root)
    git("commit", "-qm", "main", cwd=committed.root)
    git("merge", "-q", "--no-edit", "leslie/thread-one", cwd=committed.root)
    repo = Repository(committed.root)
    one = repo.read_thread("thread-one")
    assert one.status == "done" and one.references == {"thread-other": ("plan.md",)}
    assert (committed.root / ".leslie" / "threads" / "thread-one" / "plan.md").read_text() == "- [x] done there\n"
    assert repo.thread_exists("thread-main") and claims.holder(repo, "thread-one") is None
    doctor = run_leslie("doctor", cwd=committed.root)
    assert doctor.code == 0, doctor.stdout + doctor.stderr  # the index equals a rebuild


def test_outside_git_there_is_no_worktree(tmp_path: Path) -> None:
    from leslie.ops.bootstrap import init_repository

    init_repository(tmp_path)
    spawn(Repository(tmp_path), "x", thread_id="thread-x")
    result = run_leslie("worktree", "add", "x", cwd=tmp_path)
    assert result.code == 2 and "git" in result.stderr and "Traceback" not in result.stderr


def test_a_reference_to_a_thread_bound_to_another_worktree_is_live_and_read_only(committed: Repository) -> None:
    """In worktree B (here: the main one), thread-two references thread-one, which works in worktree A: its
    block shows thread-one as it is in A now, uncommitted edits included, and the guard denies writing it there."""
    run_leslie("worktree", "add", "one", cwd=committed.root)
    a = committed.root.parent / "repo.worktrees" / "thread-one"
    spawn(committed, "Two", thread_id="thread-two", refs=[RefSpec("thread-one")])
    run_leslie("switch", "two", cwd=committed.root)
    plan = a / ".leslie" / "threads" / "thread-one" / "plan.md"
    plan.write_text("# Plan\n\n- [ ] written in worktree A, not committed\n", encoding="utf-8")
    block = run_leslie("context", cwd=committed.root).stdout
    assert f'<ref thread="thread-one" title="Committed thread" status="active" worktree="{a}">' in block
    assert "written in worktree A, not committed" in block
    payload = {"hook_event_name": "UserPromptSubmit", "session_id": "b1", "cwd": str(committed.root), "prompt": "go"}
    first = json.loads(run_leslie("hook", "claude-code", cwd=committed.root, input=json.dumps(payload)).stdout)
    assert "written in worktree A" in first["hookSpecificOutput"]["additionalContext"]
    with plan.open("a", encoding="utf-8") as handle:
        handle.write("- [ ] and then this\n")
    payload["prompt"] = "and now?"
    again = run_leslie("hook", "claude-code", cwd=committed.root, input=json.dumps(payload)).stdout
    assert "and then this" in again and 'changed=\\"true\\"' in again  # a change in A is a change for B
    denied = run_leslie("check-write", str(plan), "--thread", "two", cwd=committed.root)
    assert denied.code == 1 and "belongs to thread thread-one" in denied.stderr
    own = a / ".leslie" / "threads" / "thread-two" / "notes.md"
    assert run_leslie("check-write", str(own), "--thread", "two", cwd=committed.root).code == 0
    run_leslie("worktree", "remove", "one", "--force", cwd=committed.root)  # gone: read from here again
    assert "worktree=" not in run_leslie("context", cwd=committed.root).stdout


def test_a_binding_that_is_not_one_is_ignored(committed: Repository, tmp_path: Path) -> None:
    from leslie.store.bindings import binding, live_roots
    from leslie.store.machine import shared_dir

    folder = Path(shared_dir(committed.root)) / "worktrees"
    folder.mkdir(parents=True)
    elsewhere = tmp_path / "elsewhere.json"
    elsewhere.write_text(json.dumps({"thread": "thread-one", "path": str(tmp_path), "branch": "x", "since": "y"}))
    (folder / "thread-one.json").symlink_to(elsewhere)
    assert binding(committed.root, "thread-one") is None  # a link is never followed
    (folder / "thread-one.json").unlink()
    (folder / "thread-one.json").write_text("{not json", encoding="utf-8")
    assert "thread-one" not in live_roots(committed.root)
    (folder / "thread-one.json").write_text(json.dumps({"thread": "thread-one", "path": str(tmp_path),
                                                        "branch": "x", "since": "y"}), encoding="utf-8")
    assert live_roots(committed.root) == {}  # no thread folder there: read from here
    assert "worktree=" not in run_leslie("context", "--thread", "one", cwd=committed.root).stdout
    assert binding(committed.root, "../../etc/passwd") is None
