"""Crash consistency: SIGKILL a process in the middle of its mutations, at random and at exact points.

A worker (tests/workers/crash_worker.py) runs a deterministic plan of mutations through the Python API and
appends each operation's number to an fsynced log once the call has returned. The test kills it at a
random moment (after it reports ready, so the kill lands among the mutations, not in the interpreter's
start), then checks: every state file still parses strictly; the `thread.json` files show exactly the
acknowledged operations, plus at most the one that was in flight; `leslie doctor --fix` restores full
consistency and `leslie doctor` then exits 0. The worker restarts where it left off, and so on.

The deterministic half kills the real CLI at every write of a transaction, just before and just after the
rename that lands each file (tests/workers/faulty_leslie.py with SIGKILL): each thread is then either as it
was or as the command would have left it, and `doctor --fix` restores full consistency.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from conftest import run_leslie
from leslie.ops.doctor import run_doctor
from leslie.ops.objectives import create_objective
from leslie.ops.threads import reference, spawn
from leslie.store.files import read_json
from leslie.store.fsio import TEMP_SUFFIX
from leslie.store.jsonio import dumps_canonical
from leslie.store.model import objective_from_json, thread_from_json
from leslie.store.relations import index_from_json
from leslie.store.repository import Repository
from workers.crash_worker import PLAN_LENGTH, State, expected_state, plan

WORKER = Path(__file__).parent / "workers" / "crash_worker.py"
SEED = 7


def strict_read_everything(repo: Repository) -> None:
    """Every thread.json, objective.json and the index parse strictly (a torn file raises here)."""
    for path in sorted(repo.layout.threads_dir.glob("*/thread.json")):
        thread_from_json(read_json(path))
    for path in sorted(repo.layout.objectives_dir.glob("*/objective.json")):
        objective_from_json(read_json(path))
    index_from_json(read_json(repo.layout.index_path), repo.layout.index_path)


def state_on_disk(repo: Repository) -> State:
    state: State = {}
    for thread_id in repo.thread_ids():
        thread = repo.read_thread(thread_id)
        state[thread_id] = {"title": thread.title, "status": thread.status, "refs": set(thread.references)}
    return state


def acknowledged(ack_log: Path) -> int:
    try:
        lines = ack_log.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return 0
    assert lines == [str(k) for k in range(len(lines))], "the ack log is out of order"
    return len(lines)


def kill_at_random(repo: Repository, ack_log: Path, rng: random.Random) -> None:
    proc = subprocess.Popen([sys.executable, str(WORKER), str(repo.root), str(ack_log), str(SEED)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None
    ready = proc.stdout.readline()
    assert ready == b"ready\n", (ready, proc.stderr.read() if proc.stderr else b"")
    time.sleep(rng.uniform(0.0, 0.15))
    os.kill(proc.pid, signal.SIGKILL)
    _out, err = proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGKILL, err.decode(errors="replace")


@pytest.mark.stress
def test_repeated_sigkill_loses_no_acknowledged_operation(repo: Repository, tmp_path: Path) -> None:
    create_objective(repo, "Crash objective", objective_id="obj-crash")
    ack_log = tmp_path / "acks"
    ops = plan(SEED, PLAN_LENGTH)
    rng = random.Random(20261122)
    kills = 32
    progress: list[int] = []
    for kill in range(kills):
        kill_at_random(repo, ack_log, rng)
        done = acknowledged(ack_log)
        progress.append(done)
        assert done < PLAN_LENGTH, "the plan ran out before the kills did; make it longer"
        strict_read_everything(repo)
        on_disk = state_on_disk(repo)
        candidates = [expected_state(ops, done), expected_state(ops, done + 1)]
        assert on_disk in candidates, (
            f"kill {kill}: after {done} acknowledged operations the threads match neither that state nor "
            f"the next (in flight: {ops[done]!r})")
        fixed = run_leslie("doctor", "--fix", cwd=repo.root)
        assert fixed.code == 0, fixed.stdout + fixed.stderr
        check = run_leslie("doctor", cwd=repo.root)
        assert check.code == 0, check.stdout + check.stderr
        assert repo.layout.index_path.read_bytes() == dumps_canonical(repo.rebuild_index().to_json())
        assert not list(repo.layout.leslie_dir.rglob("*.leslie-tmp"))
    # the kills landed at different points of the plan, not all before the first mutation
    assert progress[-1] > kills, progress
    assert len(set(progress)) > kills // 2, progress


def test_crash_plan_is_deterministic_and_valid() -> None:
    """The plan the worker follows and the one the test checks against are the same, and replayable."""
    ops = plan(SEED, 300)
    assert ops == plan(SEED, 300)
    state: dict[str, Any] = expected_state(ops, 300)
    assert len(state) >= 3
    for thread_id, entry in state.items():
        assert thread_id not in entry["refs"]
        assert entry["refs"] <= set(state)


# -- kills at exact points of the write path -----------------------------------------------------------

FAULTY = Path(__file__).parent / "workers" / "faulty_leslie.py"
# (arguments, number of atomic writes in the transaction)
KILLED_COMMANDS = {
    "spawn": (("spawn", "--intent", "new work", "--id", "thread-new", "--ref", "thread-a"), 4),
    "reference": (("reference", "--thread", "thread-c", "--target", "thread-b"), 2),
    "rm-force": (("rm", "thread-b", "--force"), 3),
}
KILL_CASES = [(name, step, nth) for name, (_args, writes) in KILLED_COMMANDS.items()
              for nth in range(1, writes + 1) for step in ("replace", "fsync_dir")]


def populate(repo: Repository) -> None:
    for thread_id in ("thread-a", "thread-b", "thread-c"):
        spawn(repo, f"work of {thread_id}", thread_id=thread_id)
    reference(repo, "thread-a", "thread-b", ["plan.md"])


def threads_by_id(repo: Repository) -> dict[str, Any]:
    """Each thread.json, without its timestamps (the reference run happens a moment earlier)."""
    return {tid: {k: v for k, v in repo.read_thread(tid).to_json().items() if k not in ("created_at", "deleted_at")}
            for tid in repo.thread_ids()}


@pytest.mark.parametrize(("command", "step", "nth"), KILL_CASES)
def test_kill_at_each_write_of_a_transaction(repo: Repository, tmp_path: Path, command: str, step: str,
                                             nth: int) -> None:
    """Killed just before (`replace`) or just after (`fsync_dir`) the rename of each file it writes."""
    populate(repo)
    args, _writes = KILLED_COMMANDS[command]
    before = threads_by_id(repo)
    finished = tmp_path / "finished"
    shutil.copytree(repo.root, finished)
    completed = run_leslie("--root", str(finished), *args, cwd=finished)
    assert completed.code == 0, completed.stderr
    after = threads_by_id(Repository(finished))

    proc = subprocess.run([sys.executable, str(FAULTY), step, "SIGKILL", str(nth), "--", "--root", str(repo.root),
                           *args], capture_output=True, text=True, timeout=60, check=False)
    assert f"fault-injected: {step} #{nth}" in proc.stderr, proc.stderr
    assert proc.returncode == -signal.SIGKILL, proc.stderr

    strict_read_everything(repo)
    now = threads_by_id(repo)
    for thread_id in before.keys() | after.keys() | now.keys():
        assert now.get(thread_id) in (before.get(thread_id), after.get(thread_id)), thread_id
    if command != "rm-force":  # a single-file change: all or nothing
        assert now in (before, after)
    fixed = run_leslie("doctor", "--fix", cwd=repo.root)
    assert fixed.code == 0, fixed.stdout + fixed.stderr
    assert run_doctor(repo).ok
    assert repo.layout.index_path.read_bytes() == dumps_canonical(repo.rebuild_index().to_json())
    assert not list(repo.layout.leslie_dir.rglob(f"*{TEMP_SUFFIX}"))


def test_doctor_removes_the_folder_of_an_interrupted_spawn(repo: Repository) -> None:
    """What a spawn killed while writing thread.json leaves: a folder with only a temp file."""
    folder = repo.layout.thread_dir("thread-half")
    folder.mkdir()
    (folder / f".thread.json.1234abcd{TEMP_SUFFIX}").write_text('{"id": "thread-ha')
    check = run_leslie("doctor", cwd=repo.root)
    assert check.code == 1
    assert "interrupted spawn" in check.stdout
    fixed = run_leslie("doctor", "--fix", cwd=repo.root)
    assert fixed.code == 0, fixed.stdout
    assert not folder.exists()
    # and the ID is free again
    assert spawn(repo, "again", thread_id="thread-half").thread.id == "thread-half"


def test_doctor_never_removes_a_folder_with_user_files(repo: Repository) -> None:
    folder = repo.layout.thread_dir("thread-notes")
    folder.mkdir()
    (folder / "notes.md").write_text("my notes")
    (folder / f".thread.json.1234abcd{TEMP_SUFFIX}").write_text("{")
    fixed = run_leslie("doctor", "--fix", cwd=repo.root)
    assert fixed.code == 1
    assert "has no thread.json" in fixed.stdout
    assert (folder / "notes.md").read_text() == "my notes"
