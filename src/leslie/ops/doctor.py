"""`leslie doctor`: check every SPEC §2 invariant and the files' integrity; `--fix` repairs what is derived."""

from __future__ import annotations

import json
import os
import sqlite3
import stat
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from leslie.errors import LeslieError, StorageError
from leslie.ops.find_index import RACY_NS
from leslie.ops.folderscan import Listed, link_problem, look_at_folders, special_problem
from leslie.ops.order import describe_cycle
from leslie.ops.watched import Ask, Vouched, keep_times
from leslie.store import derived, drawings
from leslie.store.files import IndexLock, acquire_index_lock, read_bytes
from leslie.store.fsio import INDEX_CAP, LESLIE_DIR, TEMP_SUFFIX, atomic_write, refuse_links
from leslie.store.machine import in_git
from leslie.store.migration import tracked_state, untrack_state
from leslie.store.model import thread_from_json
from leslie.store.relations import (
    ENTRY_KEYS,
    Index,
    Indexed,
    ThreadFacts,
    decode_index,
    invariant_problems,
    invariants_hold,
    rebuilt_bytes,
)
from leslie.store.repository import INDEX_CHECKED_FILE, Repository, ThreadsFolder


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


def _load_threads(repo: Repository, report: DoctorReport, scan: _Scan,
                  lock: IndexLock | None = None) -> tuple[dict[str, ThreadFacts], set[str]]:
    """What the index holds of each readable thread, and the names of thread folders whose thread.json cannot
    be read.

    With `lock` (fixing), a thread folder holding nothing but temp files — a spawn killed before its
    thread.json landed — is removed: it has no data to lose, and it would keep the ID taken. A linked thread
    folder is never entered (`scan.odd`, the links and special files the scan found, reports it).
    """
    threads: dict[str, ThreadFacts] = {}
    unreadable: set[str] = set()
    odd = set(scan.odd)
    folders = scan.thread_folders if scan.threads_walked else _list_unwalked(scan.threads_dir)
    for name in sorted(folders):
        listed = folders.pop(name)  # each listing (and its thread.json bytes) freed once used
        if listed is None:  # a link in a thread folder's place
            unreadable.add(name)
            continue
        folder = os.path.join(scan.threads_dir, name)
        # A folder the scan could not list is looked at the plain way (and read with its own errors).
        present = listed.has_thread_json if listed.listed else os.path.lexists(os.path.join(folder, "thread.json"))
        if not present:
            leftovers = _only_temp_files(folder) if not listed.listed or listed.temps_only else None
            if leftovers is not None and lock is not None:
                for path in leftovers:
                    os.unlink(path)
                os.rmdir(folder)
                report.fixed.append(f"removed .leslie/threads/{name}/: an interrupted spawn (no thread.json, "
                                    "only temporary files)")
            elif leftovers is not None:
                report.problems.append(f".leslie/threads/{name}/ has no thread.json, only temporary files "
                                       "(an interrupted spawn; `leslie doctor --fix` removes it)")
            else:
                report.problems.append(f".leslie/threads/{name}/ has no thread.json (not a thread; left alone)")
            continue
        # The scan parsed a plain thread.json read through the folder it listed; anything unusual (a link, a
        # FIFO, too big) is read again the ordinary way, for the ordinary error.
        error = listed.error
        if listed.thread is not None:
            threads[name] = listed.thread
        elif error is None:
            try:
                threads[name] = ThreadFacts.of(repo.read_thread(name))
            except LeslieError as exc:
                error = exc.message
        if error is not None:
            unreadable.add(name)
            if f"{LESLIE_DIR}/threads/{name}/thread.json" not in odd:  # else reported by the scan
                report.problems.append(f"{error} (fix or restore it by hand; doctor never deletes a thread)")
    return threads, unreadable


def _list_unwalked(threads_dir: str) -> dict[str, Listed | None]:
    """The thread folders of a `threads/` the scan did not walk (a link, reported by it): listed through it
    as doctor always did, each then read the ordinary way (which names the link in its error)."""
    try:
        entries = list(os.scandir(threads_dir))
    except (FileNotFoundError, NotADirectoryError):
        return {}
    return {entry.name: None if entry.is_symlink() else Listed(False)
            for entry in entries if entry.is_symlink() or entry.is_dir(follow_symlinks=False)}


def _dangling(thread: ThreadFacts, targets: Iterable[str], threads: dict[str, ThreadFacts], *,
              tombstones: bool) -> dict[str, str]:
    """Edges of `thread` to `targets` that must not exist: to itself, to a missing thread, and (with
    `tombstones`) to a deleted one. References use it with `tombstones`; order edges without: one to a deleted
    thread counts as done (SPEC §14), and the index leaves it out, as a rebuild does."""
    bad = {}
    for target in targets:
        if target == thread.id:
            bad[target] = "itself"
        elif target not in threads:
            bad[target] = f"missing thread {target}"
        elif tombstones and threads[target].is_tombstone:
            bad[target] = f"deleted thread {target}"
    return bad


def order_cycles(threads: dict[str, ThreadFacts]) -> list[list[str]]:
    """The cycles of the order edges between live threads (a merge of two branches can close one), each as
    `[a, b, ..., a]` (each comes after the next), once each."""
    live = {tid: t for tid, t in threads.items() if not t.is_tombstone}
    if not any(t.after for t in live.values()):
        return []
    after = {tid: {p for p in t.after if p in live and p != tid} for tid, t in live.items()}
    cycles: list[list[str]] = []
    state: dict[str, int] = {}  # 1: on the current path, 2: finished
    for start in sorted(after):
        if start in state:
            continue
        path: list[str] = [start]
        state[start] = 1
        stack = [iter(sorted(after[start]))]
        while stack:
            step = next(stack[-1], None)
            if step is None:
                state[path.pop()] = 2
                stack.pop()
            elif state.get(step) == 1:
                cycles.append([*path[path.index(step):], step])
            elif step not in state:
                state[step] = 1
                path.append(step)
                stack.append(iter(sorted(after[step])))
    return cycles


RUNTIME_TEMP_GRACE = 60.0  # seconds
# The one state file written only under the index lock (by every mutation): a temp file of it is never a write
# in progress while doctor --fix holds the lock, however young (a command killed mid-write leaves one).
_LOCKED_STATE_TEMP = f".{INDEX_CHECKED_FILE}."


@dataclass
class _Scan:
    """One walk of `.leslie/`: stale temp files, the links and special files found (never followed), and
    every thread folder's listing (None for a link in a folder's place)."""

    threads_dir: str = ""
    temps: list[str] = field(default_factory=list)
    odd: dict[str, str] = field(default_factory=dict)  # path relative to the root → what it is
    thread_folders: dict[str, Listed | None] = field(default_factory=dict)
    threads_walked: bool = False  # False when `threads/` is missing or a link: `thread_folders` is then empty


def _scan(repo: Repository) -> _Scan:
    """Walk `.leslie/` (and the machine state) without following links: every link and special file, and
    stale temp files.

    A thread folder is looked at, not walked: its own entries (links, special files, temp files, its
    thread.json, read on the way), but not the folders a person or an agent made inside it (`design/`,
    `artifacts/`). leslie writes nothing there, so no temp file of its own can be there, and it never follows
    a link or opens a special file there either (docs/design.md, "What doctor walks"); at 100,000 threads
    walking them was a fifth to a third of doctor's time.

    Temp files in the machine state (agent sessions) are written by hooks without the index lock, so a young one
    there may be a write in progress: removing it would break that write. Only older ones count as stale.
    """
    found = _Scan(threads_dir=str(repo.layout.threads_dir))
    state = str(repo.layout.state_dir)
    now = time.time()
    guard = os.path.join(state, "guard")
    # The write guard's copies (thousands of files, no temp files), and the machine state of other `.leslie/`
    # folders of the same work tree (`store.machine`: `roots/` below this one's in the git folder).
    guard_copies = (os.path.join(guard, "objects"), os.path.join(guard, "quarantine"), os.path.join(state, "roots"))
    pending = [str(repo.layout.leslie_dir)]
    if not state.startswith(pending[0] + os.sep) and os.path.isdir(state):
        pending.append(state)  # the machine state in the git folder (`store.machine`): its temp files
    while pending:
        folder = pending.pop()
        if folder in guard_copies:
            continue
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        runtime = folder == state or folder.startswith(state + os.sep)
        threads = folder == found.threads_dir
        found.threads_walked = found.threads_walked or threads
        thread_folders: list[str] = []
        for entry in entries:  # the kind of each entry comes with the listing: no stat per file
            if entry.is_symlink():
                found.odd[os.path.relpath(entry.path, repo.root)] = link_problem(entry.path)
                if threads:
                    found.thread_folders[entry.name] = None
            elif entry.is_dir(follow_symlinks=False):
                if threads:
                    thread_folders.append(entry.name)
                else:
                    pending.append(entry.path)
            elif not entry.is_file(follow_symlinks=False):
                found.odd[os.path.relpath(entry.path, repo.root)] = special_problem()
            elif entry.name.endswith(TEMP_SUFFIX):
                try:
                    if (runtime and not entry.name.startswith(_LOCKED_STATE_TEMP)
                            and now - entry.stat(follow_symlinks=False).st_mtime < RUNTIME_TEMP_GRACE):
                        continue
                except FileNotFoundError:
                    continue  # renamed into place by its writer meanwhile
                found.temps.append(entry.path)
        for name, listed in look_at_folders(repo, folder, sorted(thread_folders)):
            found.thread_folders[name] = listed
            found.odd.update(listed.odd)
            found.temps += listed.temps
    found.temps.sort()
    return found


def run_doctor(repo: Repository, *, fix: bool = False) -> DoctorReport:
    """Check the repository; with `fix`, rebuild the index, drop dangling references, remove temp files."""
    refuse_links(repo.layout.leslie_dir)  # a linked .leslie: nothing in it can be checked, let alone fixed
    if not fix:
        return _check(repo, None)
    with acquire_index_lock(repo.layout) as lock:
        return _check(repo, lock)


def _check(repo: Repository, lock: IndexLock | None) -> DoctorReport:
    report = DoctorReport()
    scan = _scan(repo)
    for path, what in sorted(scan.odd.items()):
        report.problems.append(f"{path} {what}")
    _check_tracked_state(repo, report, lock)
    threads, unreadable = _load_threads(repo, report, scan, lock)
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
        bad = {t: why for t, why in _dangling(thread, thread.references, threads, tombstones=True).items()
               if t not in unreadable}
        early = {t: why for t, why in _dangling(thread, thread.after, threads, tombstones=False).items()
                 if t not in unreadable}
        if not bad and not early:
            continue
        what = ", ".join([f"a reference to {why}" for why in bad.values()]
                         + [f"an order edge to {why}" for why in early.values()])
        if lock is None:
            report.problems.append(f"{thread.id}: has {what}")
            continue
        data = repo.read_thread(thread.id).to_json()  # the whole thread (scopes, extra fields), read again
        data["references"] = {t: scope for t, scope in data["references"].items() if t not in bad}
        if "after" in data:
            data["after"] = [t for t in data["after"] if t not in early]
        fixed = thread_from_json(data)
        repo.write_thread(lock, fixed)
        threads[thread.id] = ThreadFacts.of(fixed)
        report.fixed.append(f"{thread.id}: removed {what}")
    report.problems += [f"order cycle {describe_cycle(chain)}: these threads are never ready; remove an edge with "
                        "`leslie after THREAD --on ID --remove`" for chain in order_cycles(threads)]
    _check_objectives(repo, report, set(scan.odd))
    for temp in scan.temps:
        if lock is None:
            report.problems.append(f"stale temporary file {os.path.relpath(temp, repo.root)}")
        else:
            try:
                os.unlink(temp)
            except FileNotFoundError:
                continue  # its writer finished meanwhile: not stale after all
            report.fixed.append(f"removed stale temporary file {os.path.relpath(temp, repo.root)}")
    if not any(repo.layout.relative(p) in scan.odd for p in (repo.layout.index_path, repo.layout.threads_dir)):
        _check_index(repo, lock, threads, report)  # else: reported above; never rebuilt through a link
    if lock is not None:
        _remove_obsolete_caches(repo, report)
    return report


# Caches older leslie versions kept in the machine state: the index digest and `find`'s shards (hundreds of
# megabytes at scale). The derived store in the user's cache folder replaced both (`store.derived`).
OBSOLETE_CACHES = ("index-digest", "find")


def _remove_obsolete_caches(repo: Repository, report: DoctorReport) -> None:
    """Remove what `OBSOLETE_CACHES` names in the machine state: a plain file or a real folder, never a link
    (the scan reports a link there)."""
    import shutil

    for name in OBSOLETE_CACHES:
        path = repo.layout.state_dir / name
        try:
            mode = os.lstat(path).st_mode
            if stat.S_ISREG(mode):
                os.unlink(path)
            elif stat.S_ISDIR(mode):
                shutil.rmtree(path)
            else:
                continue
        except OSError:
            continue
        report.fixed.append(f"removed {repo.layout.relative(path)}, a cache of an older leslie (leslie now keeps "
                            "its caches in the user's cache folder)")


def _check_tracked_state(repo: Repository, report: DoctorReport, lock: IndexLock | None) -> None:
    """Files git tracks under `.leslie/state/`: machine state a clone brought along. leslie never reads them
    (its own state is in the git folder, `store.machine`); `--fix` removes them from git's index."""
    if not in_git(repo.root):
        return
    tracked = sorted(tracked_state(str(repo.root)) or ())
    if not tracked:
        return
    shown = ", ".join(tracked[:5]) + (f" and {len(tracked) - 5} more" if len(tracked) > 5 else "")
    where = f"{LESLIE_DIR}/state/"
    problem = (f"git tracks {where} ({len(tracked)} files: {shown}), machine state a clone brings along; "
               "leslie never reads it; `leslie doctor --fix` removes it from git's index "
               f"(`git rm -r --cached {where}`)")
    if lock is None:
        report.problems.append(problem)
        return
    try:
        count = untrack_state(str(repo.root))
    except StorageError as exc:  # git busy (a rebase holding its index, say): reported, fixed next time
        report.problems.append(f"{problem}; {exc.message}")
        return
    report.fixed.append(f"removed {where} from git's index ({count} files; leslie never reads them, and they "
                        "stay on disk, git-ignored): commit the removal")


def _check_objectives(repo: Repository, report: DoctorReport, odd: set[str]) -> None:
    """Report every objective.json that does not read cleanly (links among them are reported by the scan)."""
    try:
        names = sorted(os.listdir(repo.layout.objectives_dir))
    except (FileNotFoundError, NotADirectoryError):
        return
    for name in names:
        path = repo.layout.objective_file(name)
        if repo.layout.relative(path.parent) in odd or repo.layout.relative(path) in odd:
            continue
        if not os.path.lexists(path):
            continue
        try:
            repo.read_objective(name)
        except LeslieError as exc:
            report.problems.append(exc.message)


def _check_index(repo: Repository, lock: IndexLock | None, threads: dict[str, ThreadFacts],
                 report: DoctorReport) -> None:
    """Compare the index with a rebuild from `threads` (by ID), and rebuild it when fixing. Nothing is built to
    compare: the stored index is read a slice at a time beside `threads` (`Index.equals_rebuild`); when they
    differ, what is wrong is found a slice at a time too (`_what_differs`), and a fix encodes the rebuild an
    entry at a time (`relations.rebuilt_bytes`)."""
    path = repo.layout.index_path
    rel = repo.layout.relative(path)
    try:
        current: bytes | None = read_bytes(path, INDEX_CAP)
    except FileNotFoundError:
        current = None
    except LeslieError:
        current = b""  # unreadable (a folder in its place): reported once below, and repairable
    if current and _encodes(current, threads, known=repo.known_index(current)):
        return
    backup = None
    if current and lock is not None:
        backup = repo.layout.state_dir / "backups" / f"thread_relations.{time.strftime('%Y%m%dT%H%M%S')}.json"
        atomic_write(backup, current)
    missing = current is None
    del current  # the stored bytes are read again, a slice at a time, to say what is wrong
    problem = f"{rel} is missing" if missing else _what_differs(repo, rel)
    if lock is None:
        report.problems.append(problem)
        return
    if backup is not None:
        problem += f" (old copy kept in {repo.layout.relative(backup)})"
    if os.path.isdir(path) and not os.path.islink(path) and not os.listdir(path):
        path.rmdir()  # an empty folder in the index's place: a rebuild may take its place
    repo.write_index_bytes(lock, rebuilt_bytes(threads.values()))
    report.fixed.append(f"rebuilt {rel}: {problem}")


def _what_differs(repo: Repository, rel: str) -> str:
    """What is wrong with a stored index that is not the rebuild: unreadable, broken invariants, written by an
    older leslie, or just different. Read a slice at a time when it is canonical (a whole decode of a broken
    one only, to name its problems)."""
    try:
        stored = repo.read_index(record=False)  # doctor records only what it writes
    except LeslieError as exc:
        return exc.message
    if not invariants_hold(stored):
        return f"{rel} breaks invariants: " + "; ".join(invariant_problems(stored)[:5])
    return _older_index(rel, stored) or f"{rel} differs from a rebuild from the thread.json files"


def _encodes(data: bytes, threads: Mapping[str, Indexed], *, known: bool = False) -> bool:
    """Whether `data` is exactly the canonical encoding of the index rebuilt from `threads`, found without
    building or encoding it: canonical bytes (`Index.stored_bytes`) are the encoding of what they decode to,
    so a decoded index equal to the rebuild means equal bytes. At 100,000 threads the encoding took seconds
    and a few hundred MB, and the rebuild alone ~65 MB. `known`: these exact bytes were verified or written by
    leslie (`Repository.known_index`): their layout is not checked again, as every other read does; their
    entries are still compared one by one."""
    try:
        stored = decode_index(data, Path("index"), Path("index"), known=known)
    except LeslieError:
        return False  # corrupt: certainly not the encoding; the caller says what is wrong with it
    return stored.is_stored_encoding() and stored.equals_rebuild(threads)


def _older_index(rel: str, stored: Index) -> str | None:
    """The explanation for an index written by a leslie older than ENTRY_KEYS, None for any other one."""
    chunks = stored.stored_entries("threads") if stored.streams() else [stored.threads]
    old = sum(1 for chunk in chunks for entry in chunk.values() if not all(key in entry for key in ENTRY_KEYS))
    if not old:
        return None
    return (f"{rel} was written by an older leslie: {old} thread entr{'y lacks' if old == 1 else 'ies lack'} "
            f"{' and '.join(ENTRY_KEYS)} (what `leslie list` shows without opening every thread.json); "
            "a rebuild adds them")


AGREED = "thread_json_agreed"  # meta of the derived store: {"index": the index file's signature, "upto": ns}


def quick_problems(repo: Repository, ask: Ask | None = None) -> list[str]:
    """The problems a cheap look finds (for `leslie status`): what `run_doctor` would report about the index,
    objectives and references, without reading every `thread.json`, walking `.leslie/` or starting git.

    The index is checked against itself (SPEC §2 invariants 1-3), its threads' objectives, and the
    thread.json files changed since it was written (or absent from it): only those are read and compared.
    The index's fields and the invariants' verdict come from the derived store (`store.derived`), so the
    index is decoded only when it changed. Which thread.json files changed takes one `lstat` per thread
    folder, or, when the resident watcher answers `ask` (`ops/watched.py`), only for the folders it saw
    change: the others' times come from the store. A thread.json found to agree with the index is not read
    again while neither changes (`_keep_agreed`): a clone's are all newer than its index, as git wrote them.
    An empty list does not prove health (links, temp files, tracked state are `leslie doctor`'s); a problem
    listed here is one `leslie doctor` reports too.
    """
    start = time.time_ns()
    index_path = repo.layout.index_path
    shown = repo.layout.relative(index_path)
    vouched = Vouched("thread_times", ask)
    try:
        look = derived.with_index_table(repo, lambda db: _quick_look(repo, db, vouched), invariants=True)
    except LeslieError as exc:
        return [exc.message]
    keep_times(repo.root, vouched, "thread_times", look.fresh, look.watched)
    problems = [] if look.holds else [f"{shown} breaks invariants: {p}" for p in invariant_problems(repo.read_index())]
    if not os.path.exists(index_path):
        problems.append(f"{shown} is missing")
    problems += [f"{tid}: its objective {objective} does not exist" for tid, objective in look.orphans]
    problems += [f"{shown} lists {tid}, which has no thread.json" for tid in look.missing]
    agreed: list[int] = []
    refused: list[int] = []
    with repo.threads_folder() as folder:
        for tid, modified in look.changed.items():
            problem = _thread_problem(folder, tid, shown, look.entries)
            if problem is None:
                agreed.append(modified)
            else:
                problems.append(problem)
                refused.append(modified)
    _keep_agreed(repo.root, look, min([start - RACY_NS, *refused]), agreed)
    return problems


def _thread_problem(folder: ThreadsFolder, tid: str, shown: str, entries: dict[str, tuple[Any, ...]]) -> str | None:
    """What is wrong between the thread.json of `tid` and the index's entry for it (`entries`; none when the
    index lacks it), if anything."""
    try:
        thread = folder.read(tid)
    except LeslieError as exc:
        return exc.message
    if thread.is_tombstone:
        return f"{shown} still lists deleted thread {tid}" if tid in entries else None
    if tid not in entries:
        return f"{tid} is missing from {shown}"
    objective, status, title, targets = entries[tid]
    if ((objective, status, title) != (thread.objective, thread.status, thread.title)
            or set(thread.references) != (set(targets.split(",")) if targets else set())):
        return f"{shown} differs from {tid}'s thread.json"
    return None


def _keep_agreed(root: Path, look: _QuickLook, limit: int, agreed: list[int]) -> None:
    """Keep, with the index file's signature, the newest time up to which every thread.json agrees with that
    index: the latest of those just found to agree that is older than `limit` (older than every one found
    wrong, and than the look by RACY_NS: a write in flight, or within one tick of a coarse clock, could get a
    time no later than one looked at, as in `ops.find_index`). Every thread.json newer than the index and not
    newer than that time was compared, now or by a look before; one written after this look is newer, and is
    compared next time. Best effort, like the stored times: a busy store keeps what it had."""
    upto = max((modified for modified in agreed if modified < limit), default=-1)
    if look.index_file is None or upto <= look.upto:
        return

    def keep(db: sqlite3.Connection, persistent: bool) -> None:
        if persistent:
            derived.keep_meta(db, AGREED, json.dumps({"index": look.index_file, "upto": upto}))

    derived.with_store(root, keep)


def _agreed_upto(db: sqlite3.Connection, index: str | None) -> int:
    """The time kept by `_keep_agreed` for the index file whose signature is `index`; -1 when none is."""
    row = db.execute("SELECT value FROM meta WHERE key = ?", (AGREED,)).fetchone()
    try:
        doc = json.loads(row[0]) if row is not None and isinstance(row[0], str) else None
    except ValueError:
        return -1
    if not isinstance(doc, dict) or index is None or doc.get("index") != index or type(doc.get("upto")) is not int:
        return -1
    return int(doc["upto"])


class _QuickLook(NamedTuple):
    """What `quick_problems` needs from the index's table and the thread folders, and what it stores."""

    holds: bool  # the invariants' verdict
    orphans: list[tuple[str, str]]  # (thread, objective) whose objective is gone
    changed: dict[str, int]  # the thread folders to compare with the index (sorted) → their thread.json's time
    missing: list[str]  # the indexed threads without a thread.json, sorted
    entries: dict[str, tuple[Any, ...]]  # the indexed fields of those changed (none: not in the index)
    fresh: dict[str, int | None]  # the thread.json times looked at now
    watched: set[str] | None  # the folders the watcher saw change (None: every folder was looked at)
    index_file: str | None  # the signature of the index file the table's rows are (`drawings.mirrored_index`)
    upto: int  # every thread.json not newer agrees with that index (`_keep_agreed`; -1: none known)


def _quick_look(repo: Repository, db: sqlite3.Connection, vouched: Vouched) -> _QuickLook:
    """`_QuickLook` from the index's table, the thread folders, and the stored times the watcher vouches for."""
    watched = None
    if vouched.ask is not None:  # the stored times' mark, then the watcher's word, before the times are read
        vouched.load(db)
        watched = vouched.changed(repo.root)
    # A handful of objectives for 100,000 threads: each looked up once, their threads listed only if one is gone.
    gone = [objective for (objective,) in db.execute(
        "SELECT DISTINCT objective FROM threads WHERE objective IS NOT NULL ORDER BY objective")
        if not repo.objective_exists(objective)]
    orphans = sorted(derived.rows_where_in(db, "SELECT id, objective FROM threads WHERE objective IN ({})", gone))
    try:
        written = os.stat(repo.layout.index_path).st_mtime_ns
    except OSError:
        written = -1
    index = drawings.mirrored_index(db)
    upto = _agreed_upto(db, index)
    threads_dir = os.fspath(repo.layout.threads_dir)
    if watched is None:
        listed = {row[0] for row in db.execute("SELECT id FROM threads")}
        changed, missing, fresh = _changed_threads(threads_dir, max(written, upto), listed)
    else:
        changed, missing, fresh = _changed_since(db, threads_dir, max(written, upto), watched)
    entries = {row[0]: row[1:] for row in derived.rows_where_in(
        db, "SELECT id, objective, status, title, targets FROM threads WHERE id IN ({})", changed)}
    return _QuickLook(derived.invariants_hold(db), orphans, changed, missing, entries, fresh, watched, index, upto)


def _changed_threads(threads_dir: str, written: int,
                     listed: set[str]) -> tuple[dict[str, int], list[str], dict[str, int | None]]:
    """(the thread folders whose thread.json is newer than `written` or absent from the index (`listed`),
    sorted, with that file's time; the listed threads without a thread.json, sorted; the times looked at now).
    One `lstat` per folder, relative to the open threads folder (the kernel walks two names, not the whole
    path), and nothing else per folder: at 100,000 threads these calls are most of what `status` costs; the
    set work is done once, in C."""
    fresh = _times_in(threads_dir, None)
    times = {tid: modified for tid, modified in fresh.items() if modified is not None}  # the thread folders
    newer = [tid for tid, modified in times.items() if modified > written]
    changed = {tid: times[tid] for tid in sorted(times.keys() - listed | set(newer))}
    return changed, sorted(listed.difference(times)), fresh


# The stored times of the folders not in the index (a thread.json the index lacks), and the indexed threads
# with no stored time (no thread.json): each an anti-join on the two tables' keys, in SQLite.
_UNLISTED = ("SELECT id, ns FROM thread_times AS t WHERE ns IS NOT NULL "
             "AND NOT EXISTS (SELECT 1 FROM threads AS h WHERE h.id = t.id)")
_UNSTORED = ("SELECT id FROM threads AS h "
             "WHERE NOT EXISTS (SELECT 1 FROM thread_times AS t WHERE t.id = h.id AND t.ns IS NOT NULL)")


def _changed_since(db: sqlite3.Connection, threads_dir: str, written: int,
                   watched: set[str]) -> tuple[dict[str, int], list[str], dict[str, int | None]]:
    """`_changed_threads`'s answer from the stored times (`thread_times`), which the watcher vouches for but
    those of the folders it saw change (`watched`): only those are looked at. The stored rows are the folders
    of the last look, and the watcher names every folder made, removed or renamed since, so no listing of
    `threads/` is needed; the sets come from SQLite, not from every stored row made a Python object (at
    10,000 threads ~7 ms instead of ~20)."""
    names = sorted(watched)
    fresh = _times_in(threads_dir, names)
    listed = {row[0] for row in derived.rows_where_in(db, "SELECT id FROM threads WHERE id IN ({})", names)}
    stored = [*db.execute("SELECT id, ns FROM thread_times WHERE ns > ?", (written,)), *db.execute(_UNLISTED)]
    found = {tid: modified for tid, modified in stored if tid not in fresh}  # a watched folder's row is old
    found.update((tid, modified) for tid, modified in fresh.items()
                 if modified is not None and (modified > written or tid not in listed))
    changed = {tid: found[tid] for tid in sorted(found)}
    missing = {tid for (tid,) in db.execute(_UNSTORED) if tid not in fresh}
    missing.update(tid for tid in listed if fresh[tid] is None)
    return changed, sorted(missing), fresh


def _times_in(threads_dir: str, names: list[str] | None) -> dict[str, int | None]:
    """The `thread.json` time of each folder `names` (None: every entry of `threads_dir`), None for one without
    it; with no threads folder to open (or list), none for every name."""
    try:
        fd = os.open(threads_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return dict.fromkeys(names or [])
    try:
        look = os.listdir(fd) if names is None else names
        return dict(zip(look, _thread_json_times(fd, look), strict=True))
    except OSError:
        return dict.fromkeys(names or [])
    finally:
        os.close(fd)


def _thread_json_times(fd: int, names: Sequence[str]) -> list[int | None]:
    """The mtime (ns) of each folder's thread.json, None when there is none (not a thread folder, or not
    readable: `leslie doctor` says which)."""
    look = os.stat
    times: list[int | None] = []
    for tid in names:
        try:
            times.append(look(tid + "/thread.json", dir_fd=fd, follow_symlinks=False).st_mtime_ns)
        except OSError:
            times.append(None)
    return times
