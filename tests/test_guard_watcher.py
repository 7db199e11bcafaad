"""The write guard's watcher (`leslie.guard.watcher`): real inotify through watchdog, real files, the real
warm process with its watcher process (`leslie.server.watcher`) and the real `leslie hook` executable.

Two ways in: in this process (`guard_watcher.answer` as the `ask` of `tripwire.watched_sweep`, so that a
test can count the sweeps and provoke an overflow or the watch limit), and through the hooks with the
warm process switched on (what an agent's hooks do).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import run_leslie, state_dir
from conftest import watcher_ask as ask
from leslie.guard import snapshots, tripwire
from leslie.guard import watcher as guard_watcher
from leslie.ops.threads import spawn
from leslie.server import client as warm_client
from leslie.store.repository import Repository
from test_tripwire import OTHER, OWN, bash, event, guard_file, hook, other, own, python, shell_call

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc/sys/fs/inotify"), reason="inotify is Linux's")


@pytest.fixture
def root(repo: Repository) -> Path:
    spawn(repo, "Own work", thread_id=OWN)
    spawn(repo, "Other work", thread_id=OTHER)
    return repo.root


class Counted:
    """Counts the scans of every protected file (what the watcher exists to avoid; a scan of a few paths
    the watcher named is not one)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.scans = 0
        real = snapshots.scan

        def scan(root: str, only: list[str] | None = None) -> dict[str, Any]:
            self.scans += only is None
            return real(root, only)

        monkeypatch.setattr(snapshots, "scan", scan)


def swept(root: Path) -> list[dict[str, Any]]:
    with tripwire.index_lock(str(root)):
        return tripwire.watched_sweep(str(root), ask)


def settle(root: Path, timeout: float = 20.0) -> None:
    """Sweep until the watch is set up and the manifest carries its mark."""
    mark = guard_file(root, snapshots.MARK_FILE)
    deadline = time.monotonic() + timeout
    while not mark.exists():
        assert time.monotonic() < deadline, "the watcher never gave a mark"
        swept(root)
        time.sleep(0.05)


def open_window(root: Path) -> None:
    """A shell call of the own thread's session is running (so a change in the other thread is restored)."""
    tripwire._update_activity(str(root), "claude-code", "s1", OWN, "open", "call-1")


# -- in this process ----------------------------------------------------------------------------------------

def test_a_quiet_call_takes_no_scan_and_a_scripted_write_is_still_restored(root: Path, watcher: None,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    settle(root)
    counted = Counted(monkeypatch)
    before = other(root).read_bytes()
    for _ in range(3):  # PreToolUse and PostToolUse of calls that changed nothing under .leslie/
        assert swept(root) == []
    assert counted.scans == 0
    open_window(root)
    bash(root, python(f"open('.leslie/threads/{OTHER}/plan.md', 'a').write('hijacked\\n')"))  # the agent's script
    incidents = swept(root)
    assert counted.scans == 1
    assert [(i["path"], i["action"]) for i in incidents] == [(f".leslie/threads/{OTHER}/plan.md", "restored")]
    assert other(root).read_bytes() == before
    assert swept(root) == []  # what the restore wrote is what the manifest says: no second sweep for it
    assert counted.scans == 1


def test_a_write_through_a_hard_link_made_elsewhere_is_seen(root: Path, watcher: None, tmp_path: Path) -> None:
    # No folder's watch sees it (the link's folder is outside): the file's own watch does.
    settle(root)
    open_window(root)
    before = other(root).read_bytes()
    outside = tmp_path / "outside-link"
    os.link(other(root), outside)
    with outside.open("a") as handle:
        handle.write("through the link\n")
    assert [(i["path"], i["action"]) for i in swept(root)] == [(f".leslie/threads/{OTHER}/plan.md", "restored")]
    assert other(root).read_bytes() == before


def test_both_paths_of_one_inode_are_named_until_one_goes(root: Path, watcher: None, tmp_path: Path) -> None:
    # Two paths of the repository on one inode share one watch: a write through a third link, made elsewhere,
    # names both; once one is removed, only the other.
    copy = other(root, "design") / "plan-copy.md"
    copy.parent.mkdir(parents=True, exist_ok=True)
    os.link(other(root), copy)
    settle(root)
    outside = tmp_path / "outside-link"
    os.link(other(root), outside)
    plan, linked = f"threads/{OTHER}/plan.md", f"threads/{OTHER}/design/plan-copy.md"
    watch = guard_watcher._repositories[os.path.normpath(str(root))]
    assert sorted(watch.files[watch.file_wd[plan]]) == [linked, plan]
    mark = json.loads(guard_file(root, snapshots.MARK_FILE).read_text())["mark"]
    with outside.open("a") as handle:
        handle.write("through the link\n")
    reply = ask(str(root), mark)
    assert reply is not None and sorted(reply["changed"]) == [linked, plan]  # type: ignore[arg-type]
    copy.unlink()
    mark = reply["mark"]
    ask(str(root), mark)  # the removal is seen: the copy's path is forgotten
    assert watch.files[watch.file_wd[plan]] == (plan,) and linked not in watch.file_wd
    mark = ask(str(root), mark)["mark"]  # type: ignore[index]
    with outside.open("a") as handle:
        handle.write("again\n")
    assert ask(str(root), mark)["changed"] == [plan]  # type: ignore[index]


def test_new_folders_are_watched_and_files_made_in_them_before_the_watch_are_found(root: Path,
                                                                                  watcher: None) -> None:
    settle(root)
    folder = other(root, "design") / "deep"
    folder.mkdir(parents=True)
    (folder / "notes.md").write_text("one\n")
    assert swept(root) == []  # nobody's shell call: absorbed
    open_window(root)
    with (folder / "notes.md").open("a") as handle:
        handle.write("two\n")
    assert [i["path"] for i in swept(root)] == [f".leslie/threads/{OTHER}/design/deep/notes.md"]


def test_a_queue_overflow_is_doubt_and_the_next_call_sweeps(root: Path, watcher: None,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    settle(root)
    watch = guard_watcher._repositories[os.path.normpath(str(root))]
    limit = int(Path("/proc/sys/fs/inotify/max_queued_events").read_text())
    target = own(root, "progress.md")
    with watch.lock:  # the reading thread waits in our callback: the kernel's queue fills up and overflows
        with target.open("a") as handle:
            for _ in range(limit + 100):
                handle.write("x")
                handle.flush()
                os.utime(target)
        time.sleep(0.2)
    deadline = time.monotonic() + 10
    while watch.broken is None:
        assert time.monotonic() < deadline, "no overflow reached the watcher"
        time.sleep(0.05)
    assert watch.broken == "the inotify queue overflowed"
    counted = Counted(monkeypatch)
    open_window(root)
    with other(root).open("a") as handle:
        handle.write("hijacked\n")
    assert [i["action"] for i in swept(root)] == ["restored"]  # swept, as without a watcher
    assert counted.scans == 1


def test_the_watch_limit_means_sweeping(root: Path, watcher: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(guard_watcher, "MAX_WATCHES", 5)
    for index in range(4):
        spawn(Repository(root), f"More {index}", thread_id=f"thread-more-{index}")
    assert ask(str(root), None) == {"state": "starting"}
    deadline = time.monotonic() + 10
    while (reply := ask(str(root), None)) == {"state": "starting"}:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert reply == {"state": "off", "why": "more than 5 entries to watch"}
    assert ask(str(root), None) == reply  # not walked again for RETRY_SECONDS
    counted = Counted(monkeypatch)
    swept(root)
    swept(root)
    assert counted.scans == 2
    assert not guard_file(root, snapshots.MARK_FILE).exists()


def test_a_repository_with_more_threads_than_watches_is_refused_without_a_walk(
        root: Path, watcher: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(guard_watcher, "MAX_WATCHES", 4)  # the two threads, .leslie/ and the barrier folder
    spawn(Repository(root), "A third", thread_id="thread-third")
    added: list[str] = []
    real = guard_watcher.RepoWatch._add

    def counted(watch: guard_watcher.RepoWatch, path: str, mask: int) -> int:
        added.append(path)
        return real(watch, path, mask)

    monkeypatch.setattr(guard_watcher.RepoWatch, "_add", counted)
    ask(str(root), None)
    deadline = time.monotonic() + 10
    while (reply := ask(str(root), None)) == {"state": "starting"}:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert reply == {"state": "off", "why": "more than 4 entries to watch"}
    assert len(added) == 2  # the barrier folder and .leslie/: no thread folder was walked


def test_a_network_or_fuse_file_system_is_not_watched(root: Path, watcher: None,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    # Another machine (NFS, SMB) or a FUSE daemon's backend changes files this kernel never sees change.
    assert guard_watcher.file_system_type("/proc") == "proc"
    assert guard_watcher.file_system_type(str(root)) not in (None, "")
    monkeypatch.setattr(guard_watcher, "file_system_type", lambda path: "nfs4")
    ask(str(root), None)
    deadline = time.monotonic() + 10
    while (reply := ask(str(root), None)) == {"state": "starting"}:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert reply == {"state": "off", "why": "cannot watch a file system of type nfs4 (inotify does not see changes "
                                            "made elsewhere)"}
    assert ask(str(root), None) == reply  # not tried again for RETRY_SECONDS


@pytest.mark.parametrize(("kind", "unseen"), [("ext4", False), ("tmpfs", False), ("btrfs", False), ("xfs", False),
                                              ("nfs4", True), ("cifs", True), ("fuse.sshfs", True),
                                              ("fuseblk", True), ("9p", True), ("virtiofs", True)])
def test_which_file_systems_hide_changes(kind: str, unseen: bool) -> None:
    assert guard_watcher._changes_unseen(kind) is unseen


def test_links_are_not_followed_out_of_the_repository(root: Path, watcher: None, tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere"
    for index in range(20):
        (outside / f"d{index}").mkdir(parents=True)
        (outside / f"d{index}" / "f").write_text("x")
    (other(root, "link")).symlink_to(outside, target_is_directory=True)
    settle(root)
    watch = guard_watcher._repositories[os.path.normpath(str(root))]
    watched = [*watch.folders.values(), *(p for paths in watch.files.values() for p in paths)]
    assert not any("/link/" in rel or rel.endswith("/link") for rel in watched), watched
    (outside / "d3" / "f").write_text("changed outside\n")
    reply = ask(str(root), json.loads(guard_file(root, snapshots.MARK_FILE).read_text())["mark"])
    assert reply is not None and reply["changed"] == []


def test_a_moved_folder_or_a_replaced_barrier_folder_stops_the_watch(root: Path, watcher: None) -> None:
    settle(root)
    mark = json.loads(guard_file(root, snapshots.MARK_FILE).read_text())["mark"]
    (root / ".leslie" / "threads" / OTHER).rename(root / ".leslie" / "threads" / "thread-moved")
    watch = guard_watcher._repositories[os.path.normpath(str(root))]
    assert "changed" not in ask(str(root), mark)  # type: ignore[operator]  (no answer: the hook sweeps)
    assert watch.broken == f"a folder was moved: threads/{OTHER}"
    settle_watch(root)
    assert ask(str(root), mark)["changed"] is None  # type: ignore[index]  (the old mark means nothing now)
    watch = guard_watcher._repositories[os.path.normpath(str(root))]
    os.rmdir(watch.barrier_dir)
    os.mkdir(watch.barrier_dir)  # a new folder, maybe with the old one's inode number
    assert "changed" not in ask(str(root), mark)  # type: ignore[operator]
    assert watch.broken is not None  # seen by its inode at the request, or by its own watch
    assert not os.path.exists(watch.barrier_dir)  # a watch dropped removes its barrier folder
    assert os.path.normpath(str(root)) not in guard_watcher._repositories or \
        guard_watcher._repositories[os.path.normpath(str(root))] is not watch


def settle_watch(root: Path) -> None:
    deadline = time.monotonic() + 10
    while ask(str(root), None) == {"state": "starting"}:
        assert time.monotonic() < deadline
        time.sleep(0.05)


def test_an_idle_repository_is_no_longer_watched(root: Path, watcher: None) -> None:
    settle(root)
    key = os.path.normpath(str(root))
    assert key in guard_watcher._repositories
    guard_watcher.expire_idle(time.monotonic() + guard_watcher.IDLE_SECONDS - 5)
    assert key in guard_watcher._repositories
    guard_watcher.expire_idle(time.monotonic() + guard_watcher.IDLE_SECONDS + 5)
    assert key not in guard_watcher._repositories


def test_a_mark_of_another_watch_or_a_changed_manifest_sweeps(root: Path, watcher: None,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    settle(root)
    mark_file = guard_file(root, snapshots.MARK_FILE)
    saved = json.loads(mark_file.read_text())
    counted = Counted(monkeypatch)
    mark_file.write_text(json.dumps({**saved, "mark": ["0123456789abcdef", saved["mark"][1]]}))
    swept(root)
    assert counted.scans == 1  # and the mark is the watcher's again
    assert json.loads(mark_file.read_text())["mark"][0] == saved["mark"][0]
    swept(root)
    assert counted.scans == 1
    manifest = Path(snapshots.manifest_path(str(root)))
    manifest.write_text(manifest.read_text())  # rewritten by someone else: the mark no longer vouches for it
    swept(root)
    assert counted.scans == 2


# -- through the hooks and the warm process ----------------------------------------------------------------

def warm_pid() -> int | None:
    answer = warm_client.control(b"status")
    return json.loads(answer)["pid"] if answer else None


@pytest.fixture
def runtime(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A private runtime folder for the warm process, switched on; stopped after."""
    folder = Path(tempfile.mkdtemp(prefix="lgw-", dir="/tmp"))
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(folder))
    monkeypatch.delenv("LESLIE_WARM")
    yield folder
    warm_client.control(b"stop")
    shutil.rmtree(folder, ignore_errors=True)


def settle_hooks(root: Path, timeout: float = 30.0) -> None:
    """Quiet shell calls through the hooks until the server's watcher vouches for the manifest."""
    deadline = time.monotonic() + timeout
    number = 0
    while not guard_file(root, snapshots.MARK_FILE).exists():
        assert time.monotonic() < deadline, "the hooks never got a mark from the server"
        number += 1
        assert shell_call(root, "make -v >/dev/null 2>&1; true", call=f"warm-{number}") is None
        time.sleep(0.05)


def test_through_the_hooks_a_scripted_write_is_restored_with_the_watcher(root: Path, runtime: Path) -> None:
    settle_hooks(root)
    manifest = Path(snapshots.manifest_path(str(root)))
    signature = manifest.stat().st_ino
    assert shell_call(root, "make -v >/dev/null 2>&1; true", call="quiet") is None
    before = other(root).read_bytes()
    answer = shell_call(root, python(f"open('.leslie/threads/{OTHER}/plan.md', 'a').write('hijacked\\n')"),
                        call="write")
    assert answer is not None and answer["decision"] == "block", answer
    assert other(root).read_bytes() == before
    assert manifest.stat().st_ino != signature
    assert warm_pid() is not None


def test_through_the_hooks_a_server_gone_mid_call_means_a_sweep(root: Path, runtime: Path) -> None:
    settle_hooks(root)
    command = python(f"open('.leslie/threads/{OTHER}/plan.md', 'a').write('hijacked\\n')")
    before = other(root).read_bytes()
    assert hook(root, event(root, "PreToolUse", command, call="gone")) is None
    assert warm_client.control(b"stop") == b"stopping"
    deadline = time.monotonic() + 10
    while warm_pid() is not None:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    bash(root, command)  # the agent's command, while no server runs
    answer = hook(root, event(root, "PostToolUse", command, call="gone"))
    assert answer is not None and answer["decision"] == "block", answer
    assert other(root).read_bytes() == before


def test_the_server_switched_off_means_sweeping_as_before(root: Path) -> None:
    assert shell_call(root, "make -v >/dev/null 2>&1; true") is None
    assert not guard_file(root, snapshots.MARK_FILE).exists()
    answer = shell_call(root, python(f"open('.leslie/threads/{OTHER}/plan.md', 'a').write('x\\n')"), call="w")
    assert answer is not None and answer["decision"] == "block"
    assert run_leslie("doctor", cwd=root).code in (0, 1)


def test_unchanged_looks_under_a_named_folder(root: Path) -> None:
    # A folder the watcher names may hold files made before its watch was set: they are compared too.
    files = snapshots.scan(str(root))
    design = f"threads/{OTHER}/design"
    assert snapshots.unchanged(str(root), files, [design, f"threads/{OTHER}/plan.md"])
    (other(root, "design") / "later").mkdir(parents=True)
    assert not snapshots.unchanged(str(root), files, [design])
    files = snapshots.scan(str(root))
    (other(root, "design") / "later" / "made-before-the-watch.md").write_text("x")
    assert not snapshots.unchanged(str(root), files, [design])
    assert snapshots.unchanged(str(root), files, [f"threads/{OTHER}/plan.md"])
    other(root).unlink()
    assert not snapshots.unchanged(str(root), files, [f"threads/{OTHER}/plan.md"])


def test_asking_leaves_nothing_in_the_repository_or_its_machine_state(repo: Repository, watcher: None) -> None:
    # A read (`list`, `find`) asks too: the guard's folder must not appear, or leslie's writes would be logged.
    settle_watch(repo.root)
    reply = ask(str(repo.root), None)
    assert reply is not None and "mark" in reply
    assert not (state_dir(repo.root) / "guard").exists()
    watch = guard_watcher._repositories[os.path.normpath(str(repo.root))]
    assert os.stat(watch.barrier_dir).st_mode & 0o777 == 0o700 and os.listdir(watch.barrier_dir) == []


def test_a_mark_older_than_what_is_remembered_gets_no_partial_answer(root: Path, watcher: None,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    # Several askers keep marks of their own; one asker's pruning must not leave another a partial list.
    monkeypatch.setattr(guard_watcher, "MAX_ANSWER", 3)
    settle_watch(root)
    old = ask(str(root), None)["mark"]  # type: ignore[index]
    for n in range(5):
        (root / ".leslie" / "threads" / OTHER / "plan.md").write_text(f"version {n}\n")
        (root / ".leslie" / "threads" / OWN / f"note-{n}.md").write_text("new\n")
    newer = ask(str(root), old)
    assert newer is not None and newer["changed"] is None  # more than MAX_ANSWER paths: "everything"
    (root / ".leslie" / "threads" / OWN / "plan.md").write_text("again\n")
    assert ask(str(root), newer["mark"])["changed"] == [f"threads/{OWN}/plan.md"]  # type: ignore[index]
    assert ask(str(root), old)["changed"] is None  # type: ignore[index]  (forgotten: not a partial list)
