"""The index lock is fair and its timeout leaves nothing behind (issue 18).

Real processes contend for `.leslie/state/index.lock` through `acquire_index_lock`. The old lock
(`filelock`, polling every 50 ms) let the holder that had just released win again and again: a waiter
saw dozens of other holders go first. Waiters now block in the kernel and are served in about their
arrival order: while one waits, each other writer goes first at most about once.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import held_lock
from leslie.errors import LockTimeoutError
from leslie.store.files import Layout, acquire_index_lock
from leslie.store.fsio import FileLock

WORKERS = Path(__file__).parent / "workers"


def overtakes(rows: dict[int, list[list[int]]]) -> list[int]:
    """For every acquisition, how many holders of other workers entered while it waited."""
    entries = sorted((entered, worker) for worker, mine in rows.items() for _asked, entered, _left in mine)
    counts = []
    for worker, mine in rows.items():
        for asked, entered, _left in mine:
            counts.append(sum(1 for when, who in entries if asked < when < entered and who != worker))
    return counts


def test_waiters_are_served_in_arrival_order(repo_root: Path, tmp_path: Path) -> None:
    """6 writers that ask again the moment they release: none waits for more than two turns of each other."""
    workers, rounds = 6, 12
    procs = [subprocess.Popen([sys.executable, str(WORKERS / "fair_probe.py"), str(repo_root),
                               str(tmp_path / f"w{w}.json"), str(rounds), "15"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
             for w in range(workers)]
    for proc in procs:
        _out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err.decode(errors="replace")
    rows = {w: json.loads((tmp_path / f"w{w}.json").read_text()) for w in range(workers)}
    counts = overtakes(rows)
    assert len(counts) == workers * rounds
    assert not (Layout(repo_root).state_dir / "lock-queue").exists()  # the last writer out removes it
    # First come, first served would be at most `workers - 1`; the kernel's wake-up race allows some slack.
    assert max(counts) <= 2 * (workers - 1), sorted(counts)[-10:]


def test_a_timed_out_waiter_lets_go_when_it_is_granted_later(repo_root: Path) -> None:
    """The abandoned wait releases the lock the moment the kernel grants it: nobody is locked out."""
    layout = Layout(repo_root)
    with held_lock(repo_root):
        with pytest.raises(LockTimeoutError) as info, acquire_index_lock(layout, timeout=0.2):
            pass
        assert info.value.exit_code == 5
        assert info.value.message == ("could not lock .git/leslie/index.lock within 0.2 s (another leslie "
                                      "command holds it); nothing was changed, retry")
    time.sleep(0.2)  # the holder is gone: the abandoned waiter is granted the lock and drops it
    code = ("import fcntl, os, sys\n"
            "fd = os.open(sys.argv[1], os.O_RDWR)\n"
            "fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)\n")
    probe = subprocess.run([sys.executable, "-c", code, str(layout.lock_path)], capture_output=True, text=True,
                           check=False)
    assert probe.returncode == 0, probe.stderr  # BlockingIOError if the abandoned wait still held it
    with acquire_index_lock(layout, timeout=0.5):
        pass


def test_timeout_zero_fails_at_once_and_an_endless_timeout_waits(repo_root: Path) -> None:
    layout = Layout(repo_root)
    with held_lock(repo_root):
        start = time.monotonic()
        with pytest.raises(LockTimeoutError), acquire_index_lock(layout, timeout=0):
            pass
        assert time.monotonic() - start < 1
    with acquire_index_lock(layout, timeout=float("inf")):
        pass  # no OverflowError from the waiting thread's timeout


def test_a_waiter_is_granted_the_lock_when_the_holder_dies(repo_root: Path) -> None:
    """A crashed holder never leaves a stale lock: the blocked waiter gets it as its process ends."""
    lock_path = str(Layout(repo_root).lock_path)
    code = ("import fcntl, os, sys, time\n"
            "fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT); fcntl.flock(fd, fcntl.LOCK_EX)\n"
            "print('locked', flush=True); time.sleep(0.5); os._exit(9)\n")
    holder = subprocess.Popen([sys.executable, "-c", code, lock_path], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        start = time.monotonic()
        with FileLock(lock_path, timeout=20):
            waited = time.monotonic() - start
        assert holder.wait(5) == 9
        assert 0.2 < waited < 10
    finally:
        holder.kill()
        holder.wait()


def test_the_lock_file_is_not_followed_or_truncated(repo_root: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("keep me")
    lock_path = Layout(repo_root).lock_path
    lock_path.unlink(missing_ok=True)
    os.symlink(outside, lock_path)
    with pytest.raises(Exception, match="symbolic link") as info, acquire_index_lock(Layout(repo_root)):
        pass
    assert getattr(info.value, "exit_code", None) not in (None, 70)
    assert outside.read_text() == "keep me"


def test_a_dead_writers_place_in_the_queue_is_skipped_and_removed(repo_root: Path) -> None:
    """A writer killed while queued leaves its file; the next writer finds it unlocked and removes it."""
    layout = Layout(repo_root)
    queue = layout.state_dir / "lock-queue"
    queue.mkdir(parents=True, exist_ok=True)
    dead = queue / f"{1:020d}"
    dead.write_bytes(b"")
    planted = [queue / f"{2:020d}", queue / f"{3:020d}"]
    planted[0].mkdir()  # not a waiter's file: skipped, never waited on
    os.mkfifo(planted[1])  # opened without blocking, skipped
    start = time.monotonic()
    with acquire_index_lock(layout, timeout=5):
        pass
    assert time.monotonic() - start < 3
    assert sorted(p.name for p in queue.iterdir()) == [p.name for p in planted]


def test_twenty_thousand_planted_places_neither_stall_a_writer_nor_outlast_the_timeout(repo_root: Path) -> None:
    """Free files ahead in the queue are walked once each (it was quadratic), and the deadline is checked at
    every one: with the index flock held elsewhere the writer times out on time (it once took over 20 s)."""
    layout = Layout(repo_root)
    queue = layout.state_dir / "lock-queue"
    queue.mkdir(parents=True, exist_ok=True)
    for n in range(1, 20_001):
        (queue / f"{n:020d}").write_bytes(b"")
    with held_lock(repo_root):
        start = time.monotonic()
        with pytest.raises(LockTimeoutError), acquire_index_lock(layout, timeout=0.5):
            pass
        assert time.monotonic() - start < 5
    start = time.monotonic()
    with acquire_index_lock(layout, timeout=30):
        pass
    assert time.monotonic() - start < 10
    assert not queue.exists()  # the dead places were removed on the way, and the last writer out took the folder


def test_a_linked_queue_folder_is_refused(repo_root: Path, tmp_path: Path) -> None:
    layout = Layout(repo_root)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    layout.state_dir.mkdir(parents=True, exist_ok=True)
    queue = layout.state_dir / "lock-queue"
    if queue.exists():
        queue.rmdir()
    os.symlink(elsewhere, queue)
    with pytest.raises(Exception, match="symbolic link") as info, acquire_index_lock(layout, timeout=1):
        pass
    assert getattr(info.value, "exit_code", None) not in (None, 70)
    assert list(elsewhere.iterdir()) == []


def test_a_timeout_in_the_queue_is_a_lock_timeout(repo_root: Path) -> None:
    """Behind a leslie writer (in the queue, not only on index.lock): exit 5 with the lock's message."""
    code = ("import sys, time\nfrom leslie.store.files import Layout, acquire_index_lock\n"
            "from pathlib import Path\n"
            "with acquire_index_lock(Layout(Path(sys.argv[1]))):\n    print('locked', flush=True); time.sleep(60)\n")
    holder = subprocess.Popen([sys.executable, "-c", code, str(repo_root)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        with pytest.raises(LockTimeoutError) as info, acquire_index_lock(Layout(repo_root), timeout=0.3):
            pass
        assert info.value.exit_code == 5 and "within 0.3 s (another leslie command holds it)" in info.value.message
        assert sorted(p.name for p in (Layout(repo_root).state_dir / "lock-queue").iterdir()) != []
    finally:
        holder.kill()
        holder.wait()
    with acquire_index_lock(Layout(repo_root), timeout=5):
        pass  # the dead holder's place is skipped


def test_a_queue_folder_removed_while_it_is_made_is_joined_again(repo_root: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """`os.makedirs(exist_ok=True)` raises FileExistsError when the folder existed at its `mkdir` but was gone
    at its check right after: a writer leaving an empty queue removes it (`_leave`). Under 16 CLI writers that
    failed a command with exit 6 ("cannot lock ...: File exists"); the writer now joins again."""
    from leslie.store import lockqueue

    layout = Layout(repo_root)
    real = os.makedirs
    raced = []

    def racing(name: str, mode: int = 0o777, exist_ok: bool = False) -> None:
        if name.endswith("lock-queue") and not raced:
            raced.append(name)
            raise FileExistsError(17, "File exists", name)  # what makedirs says after losing the race
        real(name, mode, exist_ok)

    monkeypatch.setattr(lockqueue.os, "makedirs", racing)
    with acquire_index_lock(layout, timeout=5):
        pass
    assert raced


def test_a_file_in_the_queue_folders_place_is_a_storage_error(repo_root: Path) -> None:
    layout = Layout(repo_root)
    layout.state_dir.mkdir(parents=True, exist_ok=True)
    queue = layout.state_dir / "lock-queue"
    if queue.exists():
        queue.rmdir()
    queue.write_bytes(b"planted")
    with pytest.raises(Exception, match="cannot lock") as info, acquire_index_lock(layout, timeout=1):
        pass
    assert getattr(info.value, "exit_code", None) == 6
