"""repository.py: typed reads of threads, objectives and the index; locked writes."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from conftest import git
from leslie.errors import CorruptStateError, LeslieError, NotFoundError
from leslie.ops.objectives import create_objective
from leslie.ops.threads import remove, spawn, switch
from leslie.store.files import acquire_index_lock
from leslie.store.fsio import STATE_FILE_CAP
from leslie.store.jsonio import dumps_canonical
from leslie.store.repository import Repository, git_toplevel


def test_discover(repo_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert Repository.discover(repo_root).root == repo_root
    sub = repo_root / "x"
    sub.mkdir()
    monkeypatch.chdir(sub)
    assert Repository.discover().root == repo_root


def test_read_thread_not_found_and_live(repo: Repository) -> None:
    with pytest.raises(NotFoundError, match="no such thread: thread-zzz"):
        repo.read_thread("thread-zzz")
    spawn(repo, "x", thread_id="thread-a")
    assert repo.read_live_thread("thread-a").id == "thread-a"
    remove(repo, "thread-a")
    assert repo.read_thread("thread-a").status == "deleted"
    with pytest.raises(NotFoundError, match="thread thread-a is deleted"):
        repo.read_live_thread("thread-a")


def test_read_thread_corrupt_names_the_file_relative(repo: Repository) -> None:
    spawn(repo, "x", thread_id="thread-a")
    path = repo.layout.thread_file("thread-a")
    data = json.loads(path.read_text())
    data["references"] = ["thread-b"]
    path.write_text(json.dumps(data))
    with pytest.raises(CorruptStateError) as info:
        repo.read_thread("thread-a")
    assert info.value.path == ".leslie/threads/thread-a/thread.json"
    assert "field 'references' has the wrong type (list)" in info.value.message


def test_read_thread_id_must_match_folder(repo: Repository) -> None:
    spawn(repo, "x", thread_id="thread-a")
    src = repo.layout.thread_dir("thread-a")
    src.rename(repo.layout.thread_dir("thread-b"))
    with pytest.raises(CorruptStateError, match="its id 'thread-a' does not match its folder"):
        repo.read_thread("thread-b")


def test_thread_ids_only_folders_with_thread_json(repo: Repository) -> None:
    for tid in ("thread-c", "thread-a", "thread-b"):
        spawn(repo, "x", thread_id=tid)
    (repo.layout.threads_dir / "thread-empty").mkdir()
    (repo.layout.threads_dir / "README").write_text("not a thread")
    assert repo.thread_ids() == ["thread-a", "thread-b", "thread-c"]
    assert repo.thread_exists("thread-empty") and not repo.thread_exists("thread-zzz")


def test_thread_ids_without_threads_folder(tmp_path: Path) -> None:
    (tmp_path / ".leslie").mkdir()
    repo = Repository(tmp_path)
    assert repo.thread_ids() == [] and repo.objectives() == []


def test_objectives_sorted_and_checked(repo: Repository) -> None:
    for oid in ("obj-b", "obj-a"):
        create_objective(repo, oid.upper(), objective_id=oid)
    assert [o.id for o in repo.objectives()] == ["obj-a", "obj-b"]
    with pytest.raises(NotFoundError, match="no such objective: obj-zzz"):
        repo.read_objective("obj-zzz")
    repo.layout.objective_file("obj-b").write_text('{"id": "obj-a", "status": "active", "title": "x"}')
    with pytest.raises(CorruptStateError, match="does not match its folder"):
        repo.objectives()


def test_read_index_absent_is_rebuilt_and_write_skips_identical(repo: Repository) -> None:
    spawn(repo, "x", thread_id="thread-a")
    spawn(repo, "y", thread_id="thread-b")
    stored = repo.layout.index_path.read_bytes()
    repo.layout.index_path.unlink()
    assert dumps_canonical(repo.read_index().to_json()) == stored
    with acquire_index_lock(repo.layout) as lock:
        assert repo.write_index(lock, repo.read_index()) is True
        assert repo.write_index(lock, repo.read_index()) is False
    assert repo.layout.index_path.read_bytes() == stored


def test_read_index_corrupt(repo: Repository) -> None:
    repo.layout.index_path.write_text('{"version": "1.0", "threads": {}}')
    with pytest.raises(CorruptStateError) as info:
        repo.read_index()
    assert info.value.path == ".leslie/thread_relations.json"


def test_current_thread_record(repo: Repository) -> None:
    assert repo.recorded_current_thread() is None
    spawn(repo, "x", thread_id="thread-a")
    switch(repo, "thread-a")
    assert repo.recorded_current_thread() == "thread-a"
    repo.current_thread_file().write_bytes(b"\xff\xfe")
    assert repo.recorded_current_thread() is None
    repo.current_thread_file().write_text("  \n")
    assert repo.recorded_current_thread() is None


def test_git_toplevel(tmp_path: Path) -> None:
    top = tmp_path / "g"
    (top / "a" / "b").mkdir(parents=True)
    git("init", "-q", cwd=top)
    assert git_toplevel(top / "a" / "b") == top.resolve()
    plain = tmp_path / "plain"
    plain.mkdir()
    assert git_toplevel(plain) is None


def _outcome(read: Callable[[str], object], thread_id: str) -> object:
    """What a read gives: the thread, or the error's type and message."""
    try:
        return read(thread_id)
    except LeslieError as exc:
        return type(exc), exc.message


def test_the_threads_folder_reads_as_read_thread_does(repo: Repository, tmp_path: Path) -> None:
    """Through the open folder, every thread reads as `read_thread` reads it: the same thread, or the same
    error for a missing one, a linked folder or file, a FIFO, a file too big, bad JSON, another ID."""
    spawn(repo, "first", thread_id="thread-a")
    spawn(repo, "second", thread_id="thread-b")
    remove(repo, "thread-b")
    threads = repo.layout.threads_dir
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "thread.json").write_bytes(repo.layout.thread_file("thread-a").read_bytes())
    (threads / "thread-linked").symlink_to(outside)
    (threads / "thread-file-link").mkdir()
    (threads / "thread-file-link" / "thread.json").symlink_to(outside / "thread.json")
    (threads / "thread-fifo").mkdir()
    os.mkfifo(threads / "thread-fifo" / "thread.json")
    (threads / "thread-big").mkdir()
    (threads / "thread-big" / "thread.json").write_bytes(b" " * (STATE_FILE_CAP + 1))
    (threads / "thread-bad").mkdir()
    (threads / "thread-bad" / "thread.json").write_text('{"id": "thread-bad",')
    (threads / "thread-other").mkdir()
    (threads / "thread-other" / "thread.json").write_bytes(repo.layout.thread_file("thread-a").read_bytes())
    (threads / "thread-nofile").mkdir()
    names = ["thread-a", "thread-b", "thread-linked", "thread-file-link", "thread-fifo", "thread-big", "thread-bad",
             "thread-other", "thread-nofile", "thread-missing", "../outside", "thread-a/"]
    with repo.threads_folder() as folder:
        for name in names:
            assert _outcome(folder.read, name) == _outcome(repo.read_thread, name), name
    assert folder.fd is None  # closed
    assert [t.id for t in repo.read_threads(["thread-a", "thread-b"])] == ["thread-a", "thread-b"]


@pytest.mark.parametrize("linked", ["threads", ".leslie"])
def test_a_linked_folder_above_reads_as_read_thread_does(repo: Repository, tmp_path: Path, linked: str) -> None:
    spawn(repo, "first", thread_id="thread-a")
    place = repo.layout.threads_dir if linked == "threads" else repo.layout.leslie_dir
    moved = tmp_path / "moved"
    place.rename(moved)
    place.symlink_to(moved)
    with repo.threads_folder() as folder:
        expected = _outcome(repo.read_thread, "thread-a")
        assert isinstance(expected, tuple) and expected[0] is CorruptStateError
        assert _outcome(folder.read, "thread-a") == expected


def _open_under(folder: Path) -> list[str]:
    """The paths of this process's open descriptors that are `folder` or lie under it."""
    found = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:  # closed meanwhile (the listing's own descriptor, another thread's)
            continue
        if target == str(folder) or target.startswith(f"{folder}/"):
            found.append(target)
    return found


def test_the_threads_folder_is_opened_once_and_closed(repo: Repository) -> None:
    for tid in ("thread-a", "thread-b", "thread-c"):
        spawn(repo, tid, thread_id=tid)
    threads = repo.layout.threads_dir.resolve()
    folder = repo.threads_folder()
    assert folder.fd is None and _open_under(threads) == []  # nothing is opened until a read
    assert [folder.read(t).title for t in ("thread-a", "thread-b", "thread-c")] == ["thread-a", "thread-b", "thread-c"]
    assert _open_under(threads) == [str(threads)]  # the threads folder, and no thread folder left open
    folder.close()
    assert _open_under(threads) == []
    reads = repo.read_threads(["thread-a", "thread-zzz"])
    assert next(reads).id == "thread-a"
    with pytest.raises(NotFoundError, match="no such thread: thread-zzz"):
        next(reads)
    assert _open_under(threads) == []
