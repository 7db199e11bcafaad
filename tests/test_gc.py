"""`leslie gc`: prunes old, unreferenced tombstones only; dry-run; under the lock; the resurrection hazard."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from conftest import git, run_leslie, tree_digest
from leslie.ops import threads
from leslie.ops.gc import collect_garbage
from leslie.store.files import acquire_index_lock
from leslie.store.repository import Repository

DAY = 86400


def _spawn(repo: Repository, tid: str, *refs: str) -> None:
    threads.spawn(repo, f"intent of {tid}", thread_id=tid, refs=[threads.RefSpec(r) for r in refs])


def _backdate(repo: Repository, tid: str, days: float) -> None:
    path = repo.layout.thread_file(tid)
    then = time.time() - days * DAY
    os.utime(path, (then, then))


def test_rm_stamps_the_tombstone_and_gc_keeps_recent_ones(repo: Repository) -> None:
    _spawn(repo, "thread-old")
    assert run_leslie("rm", "thread-old", cwd=repo.root).code == 0
    tombstone = json.loads(repo.layout.thread_file("thread-old").read_text())
    assert tombstone["status"] == "deleted" and tombstone["deleted_at"].endswith("Z")
    result = run_leslie("--json", "gc", cwd=repo.root)
    assert result.code == 0
    data = json.loads(result.stdout)
    assert data["pruned"] == [] and data["kept"][0]["id"] == "thread-old"
    assert "less than 30 days" in data["kept"][0]["kept_because"]
    assert repo.layout.thread_dir("thread-old").is_dir()


def test_gc_prunes_old_tombstones_and_leaves_everything_else(repo: Repository) -> None:
    for tid in ("thread-keep", "thread-old", "thread-new"):
        _spawn(repo, tid)
    threads.remove(repo, "thread-old")
    threads.remove(repo, "thread-new")
    _backdate(repo, "thread-old", 40)  # e.g. a tombstone written before deleted_at existed, or backdated
    _backdate(repo, "thread-keep", 400)  # live threads are never pruned, however old
    index_before = repo.layout.index_path.read_bytes()
    result = run_leslie("gc", cwd=repo.root)
    assert result.code == 0, result.stderr
    assert "pruned thread-old" in result.stdout and "kept thread-new" in result.stdout
    assert not repo.layout.thread_dir("thread-old").exists()
    assert repo.layout.thread_dir("thread-new").is_dir() and repo.layout.thread_dir("thread-keep").is_dir()
    assert repo.layout.index_path.read_bytes() == index_before
    assert run_leslie("doctor", cwd=repo.root).code == 0
    assert run_leslie("gc", "--older-than", "0", cwd=repo.root).code == 0
    assert not repo.layout.thread_dir("thread-new").exists()


def test_deleted_at_decides_when_the_mtime_is_fresh(repo: Repository) -> None:
    _spawn(repo, "thread-x")
    threads.remove(repo, "thread-x")
    path = repo.layout.thread_file("thread-x")
    data = json.loads(path.read_text())
    data["deleted_at"] = "2020-01-01T00:00:00Z"  # an old deletion, checked out just now (fresh mtime)
    path.write_text(json.dumps(data))
    assert [t.id for t in collect_garbage(repo, older_than_days=30, dry_run=True).pruned] == ["thread-x"]


def test_dry_run_changes_nothing(repo: Repository) -> None:
    _spawn(repo, "thread-x")
    threads.remove(repo, "thread-x")
    before = tree_digest(repo.layout.threads_dir)
    result = run_leslie("gc", "--older-than", "0", "--dry-run", cwd=repo.root)
    assert result.code == 0 and "would prune thread-x" in result.stdout
    assert tree_digest(repo.layout.threads_dir) == before


def test_a_referenced_tombstone_is_kept_until_doctor_drops_the_reference(repo: Repository) -> None:
    _spawn(repo, "thread-gone")
    _spawn(repo, "thread-user")
    threads.remove(repo, "thread-gone")
    # What a merge can leave: a live thread (from another branch) still referencing the tombstone.
    user = repo.layout.thread_file("thread-user")
    data = json.loads(user.read_text())
    data["references"] = {"thread-gone": []}
    user.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    result = run_leslie("--json", "gc", "--older-than", "0", cwd=repo.root)
    assert json.loads(result.stdout)["kept"][0]["kept_because"].startswith("still referenced by thread-user")
    assert repo.layout.thread_dir("thread-gone").is_dir()
    assert run_leslie("doctor", "--fix", cwd=repo.root).code == 0
    assert json.loads(run_leslie("--json", "gc", "--older-than", "0", cwd=repo.root).stdout)["pruned"] == [
        "thread-gone"]


def test_gc_refuses_bad_input_and_corrupt_state_without_changing_anything(repo: Repository) -> None:
    _spawn(repo, "thread-x")
    _spawn(repo, "thread-bad")
    threads.remove(repo, "thread-x")
    assert run_leslie("gc", "--older-than", "-1", cwd=repo.root).code == 2
    repo.layout.thread_file("thread-bad").write_text('{"id": "thread-bad", "id": "dup"}')
    before = tree_digest(repo.layout.threads_dir)
    result = run_leslie("gc", "--older-than", "0", cwd=repo.root)
    assert result.code == 4 and "thread-bad" in result.stderr
    assert tree_digest(repo.layout.threads_dir) == before


def test_gc_never_moves_a_thread_through_a_linked_trash_folder(repo: Repository, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    _spawn(repo, "thread-old")
    threads.remove(repo, "thread-old")
    _backdate(repo, "thread-old", 40)
    (repo.layout.state_dir / "gc-trash").symlink_to(outside)
    before = tree_digest(repo.layout.leslie_dir)
    result = run_leslie("gc", cwd=repo.root)
    assert result.code == 4 and "gc-trash" in result.stderr and "symbolic link" in result.stderr
    assert list(outside.iterdir()) == [] and tree_digest(repo.layout.leslie_dir) == before


def test_gc_waits_for_the_lock(repo: Repository) -> None:
    _spawn(repo, "thread-x")
    threads.remove(repo, "thread-x")
    with acquire_index_lock(repo.layout):
        result = run_leslie("gc", "--older-than", "0", cwd=repo.root, env={"LESLIE_LOCK_TIMEOUT": "0.3"})
    assert result.code == 5
    assert repo.layout.thread_dir("thread-x").is_dir()


def test_pruning_lets_an_old_branch_bring_a_thread_back(repo_root: Path) -> None:
    """The documented hazard: the tombstone is what lets a merge keep a deletion."""
    repo = Repository(repo_root)
    assert run_leslie("git", "setup", cwd=repo_root).code == 0
    _spawn(repo, "thread-x")
    git("add", "-A", cwd=repo_root)
    git("commit", "-q", "-m", "base", cwd=repo_root)
    git("checkout", "-q", "-b", "old", cwd=repo_root)
    threads.retitle(repo, "thread-x", "edited on an old branch")
    git("commit", "-q", "-am", "edit x", cwd=repo_root)
    git("checkout", "-q", "main", cwd=repo_root)
    threads.remove(repo, "thread-x")
    git("add", "-A", cwd=repo_root)
    git("commit", "-q", "-m", "rm x", cwd=repo_root)
    git("branch", "pruned", cwd=repo_root)

    git("merge", "-q", "--no-edit", "old", cwd=repo_root)  # tombstone present: the deletion wins
    assert json.loads(repo.layout.thread_file("thread-x").read_text())["status"] == "deleted"

    git("checkout", "-q", "pruned", cwd=repo_root)
    assert run_leslie("gc", "--older-than", "0", cwd=repo_root).code == 0
    git("add", "-A", cwd=repo_root)
    git("commit", "-q", "-m", "gc", cwd=repo_root)
    import subprocess

    merged = subprocess.run(["git", "merge", "--no-edit", "old"], cwd=repo_root, capture_output=True,
                            text=True, check=False)
    assert merged.returncode != 0 and "thread-x/thread.json" in merged.stdout  # modify/delete: a human decides
