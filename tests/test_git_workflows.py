"""Real git: branches that spawn, reference, retitle and delete, merged both ways with and without the driver;
rebase; cherry-pick; a deletion meeting a new reference; two worktrees used at once."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import LESLIE_EXE, git, run_leslie, tree_digest

BIN_DIR = str(Path(LESLIE_EXE).parent)


@pytest.fixture(autouse=True)
def leslie_on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """git runs hooks and drivers through the shell: the real executable must be reachable."""
    monkeypatch.setenv("PATH", BIN_DIR + os.pathsep + os.environ.get("PATH", ""))


def leslie(root: Path, *args: str) -> str:
    result = run_leslie(*args, cwd=root)
    assert result.code == 0, f"leslie {' '.join(args)}: {result.stderr}"
    return result.stdout


def leslie_fast(root: Path, *args: str) -> None:
    """The same CLI in-process: building histories is setup, not what these tests are about (speed)."""
    from leslie.__main__ import main

    assert main(["--root", str(root), *args]) == 0, args


def commit(root: Path, message: str) -> None:
    git("add", "-A", cwd=root)
    git("commit", "-q", "-m", message, cwd=root)


def try_git(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, check=False)


def leslie_digest(root: Path) -> dict[str, str]:
    """Everything under .leslie/ that git tracks (state/ is runtime only)."""
    return {k: v for k, v in tree_digest(root / ".leslie").items() if not k.startswith("state")}


def unmerged(root: Path) -> list[str]:
    return git("diff", "--name-only", "--diff-filter=U", cwd=root).split()


def make_repo(tmp_path: Path, *, driver: bool) -> Path:
    root = tmp_path / "repo"
    root.mkdir(parents=True)
    git("init", "-q", "-b", "main", cwd=root)
    leslie(root, "init", *(["--git"] if driver else []))
    leslie_fast(root, "objective", "create", "One", "--id", "obj-one")
    for name in "abcde":
        leslie_fast(root, "spawn", "--id", f"thread-{name}", "--intent", f"base {name}", "--objective", "obj-one")
    commit(root, "base threads")
    return root


def feature_ops(root: Path, *, overlapping: bool) -> None:
    """The feature branch, one commit per operation (so single commits can be cherry-picked)."""
    git("checkout", "-q", "-b", "feature", cwd=root)
    steps: list[tuple[str, ...]] = [
        ("spawn", "--id", "thread-f1", "--intent", "feature one", "--ref", "thread-a"),
        ("spawn", "--id", "thread-f2", "--intent", "feature two", "--ref", "thread-f1:plan.md"),
        ("retitle", "thread-b", "B renamed on feature"),
        ("rm", "thread-c"),
        ("reference", "--thread", "thread-d", "--target", "thread-f1"),
    ]
    if overlapping:  # changes to the same thread.json as main: git's line merge would conflict
        steps += [("reference", "--thread", "thread-a", "--target", "thread-f2"), ("rm", "thread-e")]
    for step in steps:
        leslie_fast(root, *step)
        commit(root, "feature: " + " ".join(step))


def main_ops(root: Path, *, overlapping: bool) -> None:
    git("checkout", "-q", "main", cwd=root)
    steps: list[tuple[str, ...]] = [
        ("spawn", "--id", "thread-m1", "--intent", "main one", "--ref", "thread-b"),
        ("retitle", "thread-a", "A renamed on main"),
        ("reference", "--thread", "thread-m1", "--target", "thread-d", "--scope", "plan.md"),
    ]
    if overlapping:
        steps += [("reference", "--thread", "thread-a", "--target", "thread-m1"),
                  ("retitle", "thread-e", "E renamed on main"), ("done", "thread-b")]
    for step in steps:
        leslie_fast(root, *step)
        commit(root, "main: " + " ".join(step))


_HISTORIES: dict[tuple[bool, bool], Path] = {}


def build_history(tmp_path: Path, *, driver: bool, overlapping: bool) -> Path:
    """Two diverged branches (built once per kind, then copied: a git repository is relocatable)."""
    key = (driver, overlapping)
    if key not in _HISTORIES:
        built = make_repo(tmp_path / "template", driver=driver)
        feature_ops(built, overlapping=overlapping)
        main_ops(built, overlapping=overlapping)
        git("branch", "main-copy", "main", cwd=built)
        git("branch", "feature-copy", "feature", cwd=built)
        _HISTORIES[key] = built
    root = tmp_path / "repo"
    shutil.copytree(_HISTORIES[key], root, symlinks=True)
    return root


def expected_titles(overlapping: bool) -> dict[str, str]:
    titles = {"thread-a": "A renamed on main", "thread-b": "B renamed on feature", "thread-d": "base d",
              "thread-f1": "feature one", "thread-f2": "feature two", "thread-m1": "main one"}
    if not overlapping:
        titles["thread-e"] = "base e"
    return titles


def check_merged_state(root: Path, overlapping: bool) -> dict[str, object]:
    doctor = run_leslie("doctor", cwd=root)
    assert doctor.code == 0, doctor.stdout
    index = json.loads((root / ".leslie" / "thread_relations.json").read_text())
    assert {t: e["title"] for t, e in index["threads"].items()} == expected_titles(overlapping)
    relations = index["relations"]
    assert relations["thread-f1"]["references_to"] == ["thread-a"]
    assert relations["thread-f1"]["referenced_by"] == ["thread-d", "thread-f2"]
    assert relations["thread-m1"]["references_to"] == ["thread-b", "thread-d"]
    assert "thread-c" not in index["threads"]
    assert json.loads((root / ".leslie/threads/thread-c/thread.json").read_text())["status"] == "deleted"
    if overlapping:
        assert relations["thread-a"]["references_to"] == ["thread-f2", "thread-m1"]
        assert index["threads"]["thread-b"]["status"] == "done"
        tombstone = json.loads((root / ".leslie/threads/thread-e/thread.json").read_text())
        assert tombstone["status"] == "deleted" and tombstone["references"] == {}
    return index


@pytest.mark.parametrize("overlapping", [False, True], ids=["separate-files", "same-thread-files"])
def test_merge_with_the_driver_both_ways(tmp_path: Path, overlapping: bool) -> None:
    root = build_history(tmp_path, driver=True, overlapping=overlapping)
    merged = try_git(root, "merge", "--no-edit", "feature")
    assert merged.returncode == 0, merged.stdout + merged.stderr
    assert unmerged(root) == []
    assert git("status", "--porcelain", cwd=root) == ""  # the driver's index was already exact
    check_merged_state(root, overlapping)
    one_way = leslie_digest(root)

    git("checkout", "-q", "feature-copy", cwd=root)
    other = try_git(root, "merge", "--no-edit", "main-copy")
    assert other.returncode == 0, other.stdout + other.stderr
    assert git("status", "--porcelain", cwd=root) == ""
    check_merged_state(root, overlapping)
    assert leslie_digest(root) == one_way  # symmetric: the same .leslie/ whichever way the merge went


def test_merge_without_the_driver_is_detected_and_doctor_repairs_it(tmp_path: Path) -> None:
    root = build_history(tmp_path, driver=False, overlapping=False)
    for ours, theirs in (("main", "feature"), ("feature-copy", "main-copy")):
        git("checkout", "-q", ours, cwd=root)
        merged = try_git(root, "merge", "--no-edit", theirs)
        assert merged.returncode != 0
        assert unmerged(root) == [".leslie/thread_relations.json"]  # thread.json files merged cleanly
        listing = run_leslie("list", cwd=root)
        assert listing.code == 4
        assert ".leslie/thread_relations.json" in listing.stderr and "leslie doctor --fix" in listing.stderr
        assert "conflict markers" in listing.stderr
        assert run_leslie("spawn", "--intent", "blocked", cwd=root).code == 4
        assert run_leslie("doctor", cwd=root).code == 1
        fixed = run_leslie("doctor", "--fix", cwd=root)
        assert fixed.code == 0, fixed.stdout + fixed.stderr
        check_merged_state(root, overlapping=False)
        commit(root, "merge, index rebuilt by leslie doctor --fix")
        assert run_leslie("list", cwd=root).code == 0


def test_rebase_and_cherry_pick_with_the_driver(tmp_path: Path) -> None:
    root = build_history(tmp_path, driver=True, overlapping=True)
    git("merge", "-q", "--no-edit", "feature", cwd=root)
    merged = leslie_digest(root)

    git("checkout", "-q", "feature-copy", cwd=root)
    rebased = try_git(root, "rebase", "main-copy")
    assert rebased.returncode == 0, rebased.stdout + rebased.stderr
    assert unmerged(root) == [] and git("status", "--porcelain", cwd=root) == ""
    check_merged_state(root, overlapping=True)
    assert leslie_digest(root) == merged  # a rebase lands where the merge did

    git("checkout", "-q", "-b", "picked", "main-copy", cwd=root)
    first_feature_commit = git("rev-list", "--reverse", "main-copy..feature-copy", cwd=root).split()[0]
    picked = try_git(root, "cherry-pick", first_feature_commit)
    assert picked.returncode == 0, picked.stdout + picked.stderr
    assert run_leslie("doctor", cwd=root).code == 0
    index = json.loads((root / ".leslie" / "thread_relations.json").read_text())
    assert sorted(index["threads"]) == ["thread-a", "thread-b", "thread-c", "thread-d", "thread-e",
                                        "thread-f1", "thread-m1"]
    assert index["relations"]["thread-a"]["referenced_by"] == ["thread-f1"]


def test_deletion_on_one_branch_meets_a_new_reference_on_the_other(tmp_path: Path) -> None:
    root = make_repo(tmp_path, driver=True)
    git("checkout", "-q", "-b", "feature", cwd=root)
    leslie(root, "spawn", "--id", "thread-new", "--intent", "uses d", "--ref", "thread-d")
    commit(root, "reference d")
    git("checkout", "-q", "main", cwd=root)
    leslie(root, "rm", "thread-d")
    commit(root, "delete d")
    git("config", "core.hooksPath", str(tmp_path / "no-hooks"), cwd=root)  # see what doctor sees first
    git("merge", "-q", "--no-edit", "feature", cwd=root)
    assert unmerged(root) == []
    index = json.loads((root / ".leslie" / "thread_relations.json").read_text())
    assert "thread-d" not in index["threads"]  # the tombstone won
    assert index["relations"]["thread-new"]["references_to"] == []
    report = run_leslie("doctor", cwd=root)
    assert report.code == 1 and "deleted thread thread-d" in report.stdout
    assert run_leslie("doctor", "--fix", cwd=root).code == 0
    assert json.loads((root / ".leslie/threads/thread-new/thread.json").read_text())["references"] == {}
    assert run_leslie("doctor", cwd=root).code == 0

    # With the hooks in place, the post-merge hook does that repair by itself.
    git("config", "--unset", "core.hooksPath", cwd=root)
    git("reset", "-q", "--hard", "HEAD~1", cwd=root)
    git("merge", "-q", "--no-edit", "feature", cwd=root)
    assert run_leslie("doctor", cwd=root).code == 0
    assert git("status", "--porcelain", cwd=root).strip() == "M .leslie/threads/thread-new/thread.json"


def _spawn_many(root: Path, prefix: str, count: int) -> list[subprocess.Popen[str]]:
    return [subprocess.Popen([LESLIE_EXE, "spawn", "--id", f"thread-{prefix}{n}", "--intent", f"{prefix} {n}",
                              "--ref", "thread-a"], cwd=root, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True) for n in range(count)]


def test_two_worktrees_used_at_once(tmp_path: Path) -> None:
    root = make_repo(tmp_path, driver=True)
    other = tmp_path / "other-worktree"
    git("worktree", "add", "-q", "-b", "side", str(other), cwd=root)
    assert run_leslie("doctor", cwd=other).code == 0
    assert run_leslie("git", "setup", "--check", cwd=other).code == 0  # config and hooks are shared

    procs = _spawn_many(root, "main", 4) + _spawn_many(other, "side", 4)
    for proc in procs:
        _out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
    leslie(root, "switch", "thread-main0")
    leslie(other, "switch", "thread-side0")
    # each work tree's current thread is its own, in its own git folder, and nothing of it under .leslie/
    assert (root / ".git/leslie/current_thread").read_text().strip() == "thread-main0"
    assert (root / ".git/worktrees/other-worktree/leslie/current_thread").read_text().strip() == "thread-side0"
    assert not (root / ".leslie/state").exists() and not (other / ".leslie/state").exists()
    for tree in (root, other):
        assert run_leslie("doctor", cwd=tree).code == 0
    commit(root, "main threads")
    commit(other, "side threads")

    git("merge", "-q", "--no-edit", "side", cwd=root)
    assert unmerged(root) == [] and git("status", "--porcelain", cwd=root) == ""
    index = json.loads((root / ".leslie" / "thread_relations.json").read_text())
    assert index["relations"]["thread-a"]["referenced_by"] == sorted(
        [f"thread-main{n}" for n in range(4)] + [f"thread-side{n}" for n in range(4)])
    assert run_leslie("doctor", cwd=root).code == 0
    git("merge", "-q", "--no-edit", "main", cwd=other)  # and the other worktree catches up
    assert leslie_digest(other) == leslie_digest(root)
    assert run_leslie("doctor", cwd=other).code == 0
