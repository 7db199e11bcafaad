"""Fault injection at every step of the write path: exit 6, the state byte-identical, no temp file left.

Each case runs the real CLI (`leslie.__main__.main`) in a subprocess whose `os.open`/`os.write`/
`os.fsync`/`os.replace` fail once, on the Nth call that touches `.leslie/` (tests/workers/faulty_leslie.py).
N walks through every atomic write of the command's transaction, so a failure of the index write after
the `thread.json` write (the torn-transaction case) is covered, not only the first write.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import tree_digest
from leslie.ops.threads import RefSpec, spawn
from leslie.store.fsio import TEMP_SUFFIX
from leslie.store.repository import Repository

WORKER = Path(__file__).parent / "workers" / "faulty_leslie.py"
STEPS = ("open", "write", "fsync", "replace", "fsync_dir")
ERRNOS = ("ENOSPC", "EIO", "EACCES")


def run_faulty(root: Path, step: str, code: str, nth: int, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(WORKER), step, code, str(nth), "--", "--root", str(root), *args],
                          capture_output=True, text=True, cwd=root, timeout=60, check=False)


def leftover_temps(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob(f"*{TEMP_SUFFIX}"))


# (command, number of atomic writes in its transaction). unreference, retitle and set-status share
# reference's transaction code (`threads._update`); one of them is enough for the full matrix.
COMMANDS = {
    "reference": (("reference", "--thread", "thread-c", "--target", "thread-b"), 2),
    "unreference": (("unreference", "--thread", "thread-a", "--target", "thread-b"), 2),
    "spawn": (("spawn", "--intent", "new work", "--id", "thread-new", "--ref", "thread-a"), 4),
    "rm-force": (("rm", "thread-b", "--force"), 3),
    "objective": (("objective", "create", "Second objective", "--id", "obj-second"), 1),
}


def _cases() -> list[tuple[str, str, str, int]]:
    """Every (command, step, write) once, the errno rotating; every errno for each step of `reference`."""
    cases = []
    for name, (_args, writes) in COMMANDS.items():
        for step in STEPS:
            for nth in range(1, writes + 1):
                if name == "reference":
                    cases += [(name, step, code, nth) for code in ERRNOS]
                elif name != "unreference" or step == "replace":
                    code = ERRNOS[(nth + STEPS.index(step) + len(name)) % len(ERRNOS)]
                    cases.append((name, step, code, nth))
    return cases


@pytest.mark.parametrize(("command", "step", "code", "nth"), _cases())
def test_write_fault_leaves_state_untouched(three_threads: Repository, command: str, step: str, code: str,
                                            nth: int) -> None:
    root = three_threads.root
    args, _writes = COMMANDS[command]
    before = tree_digest(root / ".leslie")
    proc = run_faulty(root, step, code, nth, *args)
    assert f"fault-injected: {step} #{nth}" in proc.stderr, proc.stderr
    assert proc.returncode == 6, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr
    assert proc.stderr.count("leslie: error:") == 1
    assert leftover_temps(root) == []
    after = tree_digest(root / ".leslie")
    changed = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
    assert changed == [], f"{command}: {step} #{nth} ({code}) left changes: {changed}"


@pytest.mark.parametrize("step", STEPS)
def test_fault_after_the_last_write_is_not_injected(three_threads: Repository, step: str) -> None:
    """Control: with N past the transaction's writes nothing fails, the command succeeds and changes state.

    Proves the harness counts the calls it claims to, so the cases above really hit each write.
    """
    root = three_threads.root
    before = tree_digest(root / ".leslie")
    # Write 3 is the record of the index's fingerprint (state/index.checked), best effort: see the next test.
    proc = run_faulty(root, step, "EIO", 4, "reference", "--thread", "thread-c", "--target", "thread-a")
    assert "fault-injected" not in proc.stderr
    assert proc.returncode == 0, proc.stderr
    assert tree_digest(root / ".leslie") != before
    assert Repository(root).read_thread("thread-c").references == {"thread-a": ()}


@pytest.mark.parametrize("step", ["open", "write", "replace"])
def test_a_fault_on_the_index_fingerprint_record_is_no_failure(three_threads: Repository, step: str) -> None:
    """The record only spares the next command the index's full check: when it cannot be written the mutation
    still succeeds, and the next read, finding no record of these bytes, checks the index in full."""
    from leslie.store.canonical import fingerprint

    root = three_threads.root
    proc = run_faulty(root, step, "EIO", 3, "reference", "--thread", "thread-c", "--target", "thread-a")
    assert "fault-injected: " + step + " #3" in proc.stderr, proc.stderr
    assert proc.returncode == 0, proc.stderr
    repo = Repository(root)
    assert repo.read_thread("thread-c").references == {"thread-a": ()}
    record = repo.layout.state_dir / "index.checked"
    assert not record.exists() or record.read_bytes() != fingerprint(repo.layout.index_path.read_bytes(),
                                                                     os.stat(repo.layout.index_path))
    source = repo.read_index().source()
    assert source is not None and not source.known


def test_spawn_under_fresh_objective_rolls_back_the_objective(repo: Repository) -> None:
    """A spawn that has to create obj-default and then fails leaves no objective behind either."""
    root = repo.root
    before = tree_digest(root / ".leslie")
    proc = run_faulty(root, "replace", "ENOSPC", 4, "spawn", "--intent", "first thread")
    assert "fault-injected: replace #4" in proc.stderr
    assert proc.returncode == 6, proc.stderr
    assert leftover_temps(root) == []
    assert tree_digest(root / ".leslie") == before


def test_spawn_with_refs_fault_keeps_targets(three_threads: Repository) -> None:
    """The index write failing during a spawn that references others leaves their entries alone."""
    root = three_threads.root
    index_before = three_threads.layout.index_path.read_bytes()
    proc = run_faulty(root, "write", "EIO", 4, "spawn", "--intent", "x", "--id", "thread-x",
                      "--ref", "thread-b:plan.md")
    assert proc.returncode == 6, proc.stderr
    assert three_threads.layout.index_path.read_bytes() == index_before
    assert not three_threads.layout.thread_dir("thread-x").exists()
    # and the same spawn succeeds once the disk is back
    outcome = spawn(three_threads, "x", thread_id="thread-x", refs=[RefSpec("thread-b", ("plan.md",))])
    assert outcome.thread.references == {"thread-b": ("plan.md",)}
