"""`doctor`'s look at every thread folder: its own entries and its parsed `thread.json`, in parallel at scale.

Each thread folder is opened once as a descriptor (so no link swapped in meanwhile is followed), listed, and
its `thread.json` read through that descriptor in one `read` and parsed strictly (`Repository.parse_thread`):
the same checks and messages as every other read. At 100,000 threads this is most of doctor's time, and
nearly all of it per folder, so above `PARALLEL_FROM` folders it is shared among worker processes (forked:
each starts with the parent's imports and repository, nothing is re-read or re-imported). Workers send back
plain values (`marshal`, between processes of the same interpreter: nothing a repository supplies is
unmarshalled), and the parent rebuilds exactly what the sequential look gives; `tests/test_doctor.py`
compares the two on hostile folders.

With a cold file cache the workers would wait on the disk for one `thread.json` after another. A few reads
timed first tell (`_is_cold`); then a forked child asks the kernel for every `thread.json` ahead of them
(`POSIX_FADV_WILLNEED`, from several threads so that cold folder lookups overlap too), and the disk serves
many requests at once. It reads and parses nothing, and is stopped when the look is done.
"""

from __future__ import annotations

import dataclasses
import os
import stat
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from leslie.errors import LeslieError
from leslie.store.files import STATE_FILE_CAP, TEMP_SUFFIX
from leslie.store.forked import Job, start
from leslie.store.model import Thread
from leslie.store.repository import Repository

PARALLEL_FROM = 4_000  # fewer folders: forking and sending results back cost more than they save
# Three a core, at least two, at most six: more workers than cores cost nothing warm (7.4-8.2 s either way at
# 100,000 threads on 2 cores) and overlap the reads of a cold cache (11 s with six against 16-28 s with two).
MAX_WORKERS = 6
_PER_CORE = 3
_CHUNK = 512  # folders per task: small messages (memory), many tasks (balance)
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_SPECIAL = "is a FIFO, device or socket; leslie reads only regular files (remove it)"


@dataclass(slots=True)  # one per thread folder: 100,000 of them at scale
class Listed:
    """A thread folder as the scan saw it: what its listing says, and its thread.json parsed when it was a
    plain regular file (else `thread` and `error` are None and the load reads it the ordinary way)."""

    listed: bool  # False: the folder could not be opened as one (the load then looks at it itself)
    has_thread_json: bool = False
    temps_only: bool = False  # nothing but temp files in it (an interrupted spawn)
    thread: Thread | None = None
    error: str | None = None  # the message of a thread.json that did not parse or check
    odd: tuple[tuple[str, str], ...] = ()  # (path relative to the root, what it is); nearly always none
    temps: tuple[str, ...] = ()


def link_problem(path: str) -> str:
    """What a link found under `.leslie/` is, for doctor's report."""
    try:
        target = os.readlink(path)
    except OSError:
        target = "?"
    return f"is a symbolic link (to {target}); leslie never follows links under .leslie/ (remove it)"


def special_problem() -> str:
    """What a FIFO, device or socket found under `.leslie/` is, for doctor's report."""
    return _SPECIAL


def look_at_folders(repo: Repository, threads_dir: str, names: list[str]) -> Iterator[tuple[str, Listed]]:
    """(name, what its folder holds) for each thread folder in `names`, in parallel when there are many."""
    if not names:
        return
    if len(names) < PARALLEL_FROM or not hasattr(os, "fork"):
        for name in names:
            yield name, look_at_folder(repo, threads_dir, name)
        return
    yield from _in_workers(repo, threads_dir, names)


def look_at_folder(repo: Repository, threads_dir: str, name: str) -> Listed:
    """One thread folder's own entries (links and special files, temp files, whether thread.json is there)
    and its thread.json parsed; folders inside it (`design/`, `artifacts/`) are not walked (docs/design.md)."""
    folder = os.path.join(threads_dir, name)
    try:
        fd = os.open(folder, _DIR_FLAGS)
    except OSError:
        return Listed(False)
    try:
        try:
            entries = list(os.scandir(fd))
        except OSError:
            return Listed(False)
        listed = Listed(True, temps_only=all(entry.name.endswith(TEMP_SUFFIX) for entry in entries))
        raw = None
        odd: list[tuple[str, str]] = []
        temps: list[str] = []
        for entry in entries:
            entry_name = entry.name
            if entry_name == "thread.json":  # whatever it is (a link, a folder: read the ordinary way)
                listed.has_thread_json = True
            if entry.is_symlink():
                path = os.path.join(folder, entry_name)
                odd.append((os.path.relpath(path, repo.root), link_problem(path)))
            elif entry.is_dir(follow_symlinks=False):
                continue  # not walked
            elif not entry.is_file(follow_symlinks=False):
                odd.append((os.path.relpath(os.path.join(folder, entry_name), repo.root), _SPECIAL))
            elif entry_name.endswith(TEMP_SUFFIX):
                temps.append(os.path.join(folder, entry_name))
            elif entry_name == "thread.json":
                raw = read_plain(fd, entry_name)
        if odd or temps:
            listed.odd, listed.temps = tuple(odd), tuple(temps)
    finally:
        os.close(fd)
    if raw is not None:
        try:
            listed.thread = repo.parse_thread(name, raw)
        except LeslieError as exc:
            listed.error = exc.message
    return listed


def read_plain(folder_fd: int, name: str) -> bytes | None:
    """The bytes of regular file `name` in the folder open as `folder_fd`, at most the state-file cap; None
    for anything else (gone, a link or FIFO swapped in, too big, unreadable), which is then read again by
    `Repository.read_thread` for its exact error."""
    try:
        fd = os.open(name, _FILE_FLAGS, dir_fd=folder_fd)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > STATE_FILE_CAP:
            return None
        # One read: a regular file returns fewer bytes than asked only at its end.
        data = os.read(fd, info.st_size + 1)
        if len(data) > info.st_size:  # it grew since fstat: read on to its end or past the cap
            chunks, total = [data], len(data)
            while total <= STATE_FILE_CAP:
                more = os.read(fd, STATE_FILE_CAP + 1 - total)
                if not more:
                    break
                chunks.append(more)
                total += len(more)
            data = b"".join(chunks)
        return data if len(data) <= STATE_FILE_CAP else None
    except OSError:
        return None
    finally:
        os.close(fd)


# -- in worker processes ------------------------------------------------------------------------------------
_FIELDS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(Thread))
_WORK: tuple[Repository, str] | None = None  # set in the parent before forking: the workers inherit it


def _look_at_chunk(names: list[str]) -> bytes:
    """A worker's answer for `names`: plain values only, marshalled (Thread objects are sent as field tuples)."""
    import marshal

    assert _WORK is not None
    repo, threads_dir = _WORK
    out = []
    for name in names:
        listed = look_at_folder(repo, threads_dir, name)
        thread = listed.thread
        out.append((name, listed.listed, listed.has_thread_json, listed.temps_only,
                    None if thread is None else tuple(getattr(thread, f) for f in _FIELDS),
                    listed.error, listed.odd, listed.temps))
    return marshal.dumps(out)


# -- a cold file cache -----------------------------------------------------------------------------------
_PROBES = 16  # thread.json files read to tell a cold cache from a warm one
_COLD_NS = 50_000  # a median read slower than 50 µs came from the disk (a cached one takes ~10 µs)
_PREFETCHERS = 8  # threads asking for the files ahead: blocked lookups of a cold disk overlap


def _open_regular(path: str) -> int | None:
    """A descriptor of `path` when it is a regular file (never a link, FIFO or device: those are not opened),
    else None. The look itself reports what else is there."""
    try:
        if not stat.S_ISREG(os.lstat(path).st_mode):
            return None
        return os.open(path, _FILE_FLAGS)
    except OSError:
        return None


def _is_cold(threads_dir: str, names: list[str]) -> bool:
    """Whether reading the thread.json files will wait for the disk: a few, spread over `names`, timed."""
    times = []
    for name in names[::max(1, len(names) // _PROBES)][:_PROBES]:
        started = time.perf_counter_ns()
        fd = _open_regular(os.path.join(threads_dir, name, "thread.json"))
        if fd is None:
            continue
        try:
            os.read(fd, 4096)
        except OSError:
            pass
        finally:
            os.close(fd)
        times.append(time.perf_counter_ns() - started)
    return bool(times) and sorted(times)[len(times) // 2] > _COLD_NS


def _start_prefetch(threads_dir: str, names: list[str]) -> Job | None:
    """A forked child (`store.forked`) asking the kernel to read every thread.json ahead
    (`POSIX_FADV_WILLNEED`), so that the workers find them in the page cache; None when it could not start. It
    opens regular files only (no link, FIFO or device), and reads nothing itself.

    Measured at 100,000 threads with the files' data evicted: reading every thread.json took 12-13 s one
    after another, 2.3-2.8 s after asking for them all first (the disk serves many requests at once)."""
    if not hasattr(os, "posix_fadvise"):
        return None
    job = start(lambda part: _ask_ahead(threads_dir, part), names, minimum=1)
    return job if job.forked else None


def _ask_ahead(threads_dir: str, names: Sequence[str]) -> list[None]:
    """In the prefetching child: ask for each thread.json from several threads (cold lookups overlap)."""
    import threading

    def ask(part: Sequence[str]) -> None:
        for name in part:
            fd = _open_regular(os.path.join(threads_dir, name, "thread.json"))
            if fd is None:
                continue
            try:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_WILLNEED)
            except OSError:
                pass
            finally:
                os.close(fd)

    askers = [threading.Thread(target=ask, args=(names[i::_PREFETCHERS],)) for i in range(_PREFETCHERS)]
    for asker in askers:
        asker.start()
    for asker in askers:
        asker.join()
    return []


def _in_workers(repo: Repository, threads_dir: str, names: list[str]) -> Iterator[tuple[str, Listed]]:
    """The look of `look_at_folders` in forked workers, answers in the names' order. A worker that cannot be
    started or dies (killed, out of memory) costs time, never an answer: what it had not answered is looked at
    here, sequentially (`concurrent.futures` reports a dead worker; a bare `multiprocessing.Pool` would wait
    for its answer forever)."""
    import marshal
    import multiprocessing
    from concurrent.futures import Future, ProcessPoolExecutor

    global _WORK  # handed to forked workers by inheritance, not by pickling the repository
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    chunks = [names[i:i + _CHUNK] for i in range(0, len(names), _CHUNK)]
    answered = 0
    _WORK = (repo, threads_dir)
    prefetch = _start_prefetch(threads_dir, names) if _is_cold(threads_dir, names) else None
    try:
        with ProcessPoolExecutor(min(MAX_WORKERS, max(2, _PER_CORE * cpus)),
                                 mp_context=multiprocessing.get_context("fork")) as pool:
            futures: list[Future[bytes]] = [pool.submit(_look_at_chunk, chunk) for chunk in chunks]
            for future in futures:
                answer = future.result()
                for name, is_listed, has_json, temps_only, fields, error, odd, temps in marshal.loads(answer):
                    yield name, Listed(is_listed, has_json, temps_only, None if fields is None else Thread(*fields),
                                       error, odd, temps)
                answered += 1
    except (OSError, RuntimeError):  # no fork (limits), or a broken pool (BrokenProcessPool is a RuntimeError)
        for chunk in chunks[answered:]:
            for name in chunk:
                yield name, look_at_folder(repo, threads_dir, name)
    finally:
        _WORK = None
        if prefetch is not None:
            prefetch.close()  # done or not, its work is over
