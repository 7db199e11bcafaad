"""bootstrap.py and `leslie init`: the files it creates, idempotence, where it puts the root."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import git, run_leslie, tree_digest
from leslie.errors import NotFoundError
from leslie.ops.bootstrap import GITATTRIBUTES_LINE, choose_init_root, init_repository
from leslie.ops.threads import spawn
from leslie.store.repository import Repository


@pytest.fixture
def git_repo(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    root.mkdir()
    git("init", "-q", "-b", "main", cwd=root)
    return root


def test_init_creates_the_layout(git_repo: Path) -> None:
    result = run_leslie("init", "--json", cwd=git_repo)
    assert result.code == 0, result.stderr
    data = json.loads(result.stdout)
    assert Path(data["root"]) == git_repo
    assert data["changed"] == [".leslie/", ".leslie/threads/", ".leslie/objectives/", ".leslie/.gitignore",
                               ".leslie/thread_relations.json", ".gitattributes",
                               "AGENTS.md"]
    leslie = git_repo / ".leslie"
    assert (leslie / "thread_relations.json").read_text() == (
        '{\n  "relations": {},\n  "threads": {},\n  "version": "1.0"\n}\n')
    ignore = (leslie / ".gitignore").read_text().splitlines()
    assert "state/" in ignore and "*.leslie-tmp" in ignore
    assert (git_repo / ".gitattributes").read_text() == GITATTRIBUTES_LINE + "\n"
    assert GITATTRIBUTES_LINE == ".leslie/thread_relations.json merge=leslie-relations"
    agents = (git_repo / "AGENTS.md").read_text()
    assert agents.startswith("<!-- leslie:begin version=") and agents.rstrip().endswith("<!-- leslie:end -->")


def test_init_is_idempotent(git_repo: Path) -> None:
    assert run_leslie("init", cwd=git_repo).code == 0
    before = tree_digest(git_repo)
    again = run_leslie("init", cwd=git_repo)
    assert again.code == 0 and "nothing to do" in again.stdout
    assert tree_digest(git_repo) == before
    assert json.loads(run_leslie("init", "--json", cwd=git_repo).stdout)["changed"] == []


def test_init_keeps_existing_files(git_repo: Path) -> None:
    (git_repo / "AGENTS.md").write_text("# Project guide\n\nHand-written rules.\n")
    (git_repo / ".gitattributes").write_text("*.png binary")  # no trailing newline
    assert run_leslie("init", cwd=git_repo).code == 0
    agents = (git_repo / "AGENTS.md").read_text()
    assert agents.startswith("# Project guide\n\nHand-written rules.\n\n<!-- leslie:begin version=")
    assert agents.count("<!-- leslie:begin") == 1
    assert (git_repo / ".gitattributes").read_text() == "*.png binary\n" + GITATTRIBUTES_LINE + "\n"
    assert run_leslie("init", cwd=git_repo).code == 0
    assert (git_repo / "AGENTS.md").read_text() == agents
    assert (git_repo / ".gitattributes").read_text().count("merge=leslie-relations") == 1


def test_git_ignores_runtime_state(git_repo: Path) -> None:
    init_repository(git_repo)
    repo = Repository(git_repo)
    spawn(repo, "x", thread_id="thread-a")
    (repo.layout.leslie_dir / ".thread_relations.json.abcd.leslie-tmp").write_text("torn")
    status = git("status", "--porcelain", "--untracked-files=all", cwd=git_repo).splitlines()
    paths = sorted(line[3:] for line in status)
    assert ".leslie/state/index.lock" not in paths
    assert not any(p.startswith(".leslie/state/") or p.endswith(".leslie-tmp") for p in paths)
    assert ".leslie/threads/thread-a/thread.json" in paths and ".leslie/thread_relations.json" in paths


def test_init_from_a_subfolder_uses_the_git_top(git_repo: Path) -> None:
    sub = git_repo / "src" / "deep"
    sub.mkdir(parents=True)
    assert run_leslie("init", cwd=sub).code == 0
    assert (git_repo / ".leslie").is_dir() and not (sub / ".leslie").exists()


def test_init_inside_an_existing_root_reuses_it(tmp_path: Path) -> None:
    outer = tmp_path / "outer"
    outer.mkdir()
    init_repository(outer)  # not a git repo
    inner = outer / "inner"
    inner.mkdir()
    assert run_leslie("init", cwd=inner).code == 0
    assert not (inner / ".leslie").exists()


def test_init_outside_git_uses_the_working_directory(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    assert run_leslie("init", cwd=plain).code == 0
    assert (plain / ".leslie" / "thread_relations.json").is_file()


@pytest.mark.parametrize("where", ["before", "after"])
def test_init_root_option(tmp_path: Path, where: str) -> None:
    target = tmp_path / "target"
    target.mkdir()
    args = ["--root", str(target), "init"] if where == "before" else ["init", "--root", str(target)]
    assert run_leslie(*args, cwd=tmp_path).code == 0
    assert (target / ".leslie").is_dir()


def test_init_root_must_exist(tmp_path: Path) -> None:
    result = run_leslie("init", "--root", str(tmp_path / "nope"), cwd=tmp_path)
    assert result.code == 3 and "no such folder" in result.stderr
    assert not (tmp_path / "nope").exists()


def test_choose_init_root_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LESLIE_ROOT", str(tmp_path))
    assert choose_init_root() == tmp_path
    sub = tmp_path / "sub"
    sub.mkdir()
    assert choose_init_root(sub) == sub  # an explicit --root beats LESLIE_ROOT
    with pytest.raises(NotFoundError):
        choose_init_root(tmp_path / "missing")


def test_init_rebuilds_a_missing_index_from_threads(repo_root: Path) -> None:
    repo = Repository(repo_root)
    spawn(repo, "x", thread_id="thread-a")
    expected = repo.layout.index_path.read_bytes()
    repo.layout.index_path.unlink()
    init_repository(repo_root)
    assert repo.layout.index_path.read_bytes() == expected


def test_init_claude_adds_agents_import(git_repo: Path) -> None:
    (git_repo / "CLAUDE.md").write_text("# Claude notes")
    assert run_leslie("init", "--claude", cwd=git_repo).code == 0
    assert (git_repo / "CLAUDE.md").read_text() == "# Claude notes\n@AGENTS.md\n"
    assert run_leslie("init", "--claude", cwd=git_repo).code == 0
    assert (git_repo / "CLAUDE.md").read_text().count("@AGENTS.md") == 1
