"""`leslie doctor`: check every SPEC §2 invariant and the files' integrity; `--fix` repairs what is derived."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field, replace

from leslie._json import dumps_canonical
from leslie.errors import LeslieError
from leslie.model import Thread
from leslie.relations import build_index, invariant_problems
from leslie.repository import Repository
from leslie.store import TEMP_SUFFIX, IndexLock, acquire_index_lock, atomic_write, read_bytes


@dataclass
class DoctorReport:
    """Problems found (and still present), and repairs made."""

    problems: list[str] = field(default_factory=list)
    fixed: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # worth knowing, not a problem (exit status unaffected)

    @property
    def ok(self) -> bool:
        return not self.problems


def _only_temp_files(folder: str) -> list[str] | None:
    """The temp files in `folder` if that is all it holds (what a spawn killed mid-write leaves), else None."""
    try:
        names = os.listdir(folder)
    except OSError:
        return None
    if all(name.endswith(TEMP_SUFFIX) for name in names):
        return [os.path.join(folder, name) for name in names]
    return None


def _load_threads(repo: Repository, report: DoctorReport,
                  lock: IndexLock | None = None) -> tuple[dict[str, Thread], set[str]]:
    """The readable threads, and the names of thread folders whose thread.json cannot be read.

    With `lock` (fixing), a thread folder holding nothing but temp files — a spawn killed before its
    thread.json landed — is removed: it has no data to lose, and it would keep the ID taken.
    """
    threads: dict[str, Thread] = {}
    unreadable: set[str] = set()
    try:
        names = sorted(os.listdir(repo.layout.threads_dir))
    except FileNotFoundError:
        return threads, unreadable
    for name in names:
        folder = repo.layout.thread_dir(name)
        if not folder.is_dir():
            continue
        if not repo.layout.thread_file(name).exists():
            leftovers = _only_temp_files(str(folder))
            if leftovers is not None and lock is not None:
                for path in leftovers:
                    os.unlink(path)
                folder.rmdir()
                report.fixed.append(f"removed .leslie/threads/{name}/: an interrupted spawn (no thread.json, "
                                    "only temporary files)")
            elif leftovers is not None:
                report.problems.append(f".leslie/threads/{name}/ has no thread.json, only temporary files "
                                       "(an interrupted spawn; `leslie doctor --fix` removes it)")
            else:
                report.problems.append(f".leslie/threads/{name}/ has no thread.json (not a thread; left alone)")
            continue
        try:
            threads[name] = repo.read_thread(name)
        except LeslieError as exc:
            unreadable.add(name)
            report.problems.append(f"{exc.message} (fix or restore it by hand; doctor never deletes a thread)")
    return threads, unreadable


def _dangling_references(thread: Thread, threads: dict[str, Thread]) -> dict[str, str]:
    """References that must not exist: to itself, to a missing thread, to a tombstone."""
    bad = {}
    for target in thread.references:
        if target == thread.id:
            bad[target] = "itself"
        elif target not in threads:
            bad[target] = f"missing thread {target}"
        elif threads[target].is_tombstone:
            bad[target] = f"deleted thread {target}"
    return bad


RUNTIME_TEMP_GRACE = 60.0  # seconds


def _temp_files(repo: Repository) -> list[str]:
    """Temp files left by interrupted writes.

    Files under `state/` (agent sessions) are written by hooks without the index lock, so a young temp file
    there may be a write in progress: removing it would break that write. Only older ones count as stale.
    """
    found = []
    state = str(repo.layout.state_dir)
    now = time.time()
    guard_copies = (os.path.join(state, "guard", "objects"), os.path.join(state, "guard", "quarantine"))
    for folder, dirs, files in os.walk(repo.layout.leslie_dir):
        if folder == os.path.join(state, "guard"):  # the write guard's copies: thousands of files, no temp files
            dirs[:] = [d for d in dirs if os.path.join(folder, d) not in guard_copies]
        runtime = folder == state or folder.startswith(state + os.sep)
        for name in files:
            path = os.path.join(folder, name)
            if not name.endswith(TEMP_SUFFIX):
                continue
            try:
                if runtime and now - os.stat(path).st_mtime < RUNTIME_TEMP_GRACE:
                    continue
            except FileNotFoundError:
                continue  # renamed into place by its writer meanwhile
            found.append(path)
    return sorted(found)


def run_doctor(repo: Repository, *, fix: bool = False) -> DoctorReport:
    """Check the repository; with `fix`, rebuild the index, drop dangling references, remove temp files."""
    if not fix:
        return _check(repo, None)
    with acquire_index_lock(repo.layout) as lock:
        return _check(repo, lock)


def _check(repo: Repository, lock: IndexLock | None) -> DoctorReport:
    report = DoctorReport()
    threads, unreadable = _load_threads(repo, report, lock)
    objectives: dict[str, bool] = {}  # thousands of threads share a handful of objectives: stat each once
    for thread in list(threads.values()):
        if thread.is_tombstone:
            continue
        objective = thread.objective
        if objective is not None:
            if objective not in objectives:
                objectives[objective] = repo.objective_exists(objective)
            if not objectives[objective]:
                report.problems.append(f"{thread.id}: its objective {objective} does not exist")
        # A reference to a thread whose thread.json is unreadable is not dangling: the file may be restored.
        bad = {t: why for t, why in _dangling_references(thread, threads).items() if t not in unreadable}
        if not bad:
            continue
        what = ", ".join(f"a reference to {why}" for why in bad.values())
        if lock is None:
            report.problems.append(f"{thread.id}: has {what}")
            continue
        fixed = replace(thread, references={t: s for t, s in thread.references.items() if t not in bad})
        repo.write_thread(lock, fixed)
        threads[thread.id] = fixed
        report.fixed.append(f"{thread.id}: removed {what}")
    try:
        repo.objectives()
    except LeslieError as exc:
        report.problems.append(exc.message)
    for temp in _temp_files(repo):
        if lock is None:
            report.problems.append(f"stale temporary file {os.path.relpath(temp, repo.root)}")
        else:
            try:
                os.unlink(temp)
            except FileNotFoundError:
                continue  # its writer finished meanwhile: not stale after all
            report.fixed.append(f"removed stale temporary file {os.path.relpath(temp, repo.root)}")
    _check_index(repo, lock, threads, report)
    _check_guard(repo, report)
    return report


def _check_guard(repo: Repository, report: DoctorReport) -> None:
    """The agents' hooks (installed ones must be complete and point at an existing leslie), and what the
    write guard's second line has caught (`leslie.tripwire`)."""
    from leslie import hooks_install, tripwire

    for agent in hooks_install.AGENTS:
        status = hooks_install.check(repo.root, agent, probe=False)
        if not status.installed and status.problem is None:
            continue
        if status.problem is not None or status.missing or not all(c.ok for c in status.commands):
            report.problems += hooks_install.status_lines(status)
        elif status.outdated:
            report.notes += hooks_install.status_lines(status)
    count, last = tripwire.incidents_summary(str(repo.root))
    if count:
        report.notes.append(f"the write guard recorded {count} change(s) by agents' shell commands to files they "
                            f"may not write (last: {last}); see .leslie/state/guard/incidents.jsonl")


def _check_index(repo: Repository, lock: IndexLock | None, threads: dict[str, Thread],
                 report: DoctorReport) -> None:
    expected_index = build_index(threads.values())
    expected = dumps_canonical(expected_index.to_json())
    path = repo.layout.index_path
    rel = repo.layout.relative(path)
    try:
        current: bytes | None = read_bytes(path)
    except FileNotFoundError:
        current = None
    except LeslieError:
        current = b""  # unreadable (a folder in its place): reported once below, and repairable
    if current == expected:
        return
    if current is None:
        problem = f"{rel} is missing"
    else:
        try:
            stored = repo.read_index()
            problems = invariant_problems(stored)
            problem = f"{rel} breaks invariants: " + "; ".join(problems[:5]) if problems else (
                f"{rel} differs from a rebuild from the thread.json files")
        except LeslieError as exc:
            problem = exc.message
    if lock is None:
        report.problems.append(problem)
        return
    if current:
        backup = repo.layout.state_dir / "backups" / f"thread_relations.{time.strftime('%Y%m%dT%H%M%S')}.json"
        atomic_write(backup, current)
        problem += f" (old copy kept in {repo.layout.relative(backup)})"
    if path.is_dir() and not os.listdir(path):
        path.rmdir()  # an empty folder in the index's place: a rebuild may take its place
    repo.write_index(lock, expected_index)
    report.fixed.append(f"rebuilt {rel}: {problem}")
