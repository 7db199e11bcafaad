"""`doctor`'s look at every thread folder: its own entries and what its `thread.json` holds.

Each thread folder is opened once as a descriptor (so no link swapped in meanwhile is followed), listed, and
its `thread.json` read through that descriptor in one `read` and parsed strictly (`Repository.parse_thread`):
the same checks and messages as every other read. Of a parsed thread only what the index holds is kept
(`relations.ThreadFacts`): at 100,000 threads every `Thread` kept whole made most of doctor's memory. With a
cold file cache, threads ask the kernel for the `thread.json` files ahead of the look (`_read_ahead`).
"""

from __future__ import annotations

import os
import stat
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass

from leslie.errors import LeslieError
from leslie.store.fsio import FOLDER_FLAGS, STATE_FILE_CAP, TEMP_SUFFIX, read_in_folder
from leslie.store.relations import ThreadFacts
from leslie.store.repository import Repository

_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_SPECIAL = "is a FIFO, device or socket; leslie reads only regular files (remove it)"


@dataclass(slots=True)  # one per thread folder: 100,000 of them at scale
class Listed:
    """A thread folder as the scan saw it: what its listing says, and its thread.json parsed when it was a
    plain regular file (else `thread` and `error` are None and the load reads it the ordinary way)."""

    listed: bool  # False: the folder could not be opened as one (the load then looks at it itself)
    has_thread_json: bool = False
    temps_only: bool = False  # nothing but temp files in it (an interrupted spawn)
    thread: ThreadFacts | None = None
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
    """(name, what its folder holds) for each thread folder in `names`, in order; with a cold file cache the
    kernel is asked for the thread.json files ahead (`_read_ahead`)."""
    with _read_ahead(threads_dir, names):
        for name in names:
            yield name, look_at_folder(repo, threads_dir, name)


def look_at_folder(repo: Repository, threads_dir: str, name: str) -> Listed:
    """One thread folder's own entries (links and special files, temp files, whether thread.json is there)
    and its thread.json parsed; folders inside it (`design/`, `artifacts/`) are not walked (docs/design.md)."""
    folder = os.path.join(threads_dir, name)
    try:
        fd = os.open(folder, FOLDER_FLAGS)
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
                # None unless a regular file within the cap: `Repository.read_thread` reads it again, for its error
                raw = read_in_folder(fd, entry_name, STATE_FILE_CAP)
        if odd or temps:
            listed.odd, listed.temps = tuple(odd), tuple(temps)
    finally:
        os.close(fd)
    if raw is not None:
        try:
            listed.thread = ThreadFacts.of(repo.parse_thread(name, raw))
        except LeslieError as exc:
            listed.error = exc.message
    return listed


# -- a cold file cache -----------------------------------------------------------------------------------
READ_AHEAD_FROM = 1_000  # fewer folders: a cold read of each costs less than starting the readers
_PROBES = 16  # thread.json files read to tell a cold cache from a warm one
_COLD_NS = 50_000  # a median read slower than 50 µs came from the disk (a cached one takes ~10 µs)
_READERS = 8  # threads asking for the files ahead: blocked lookups of a cold disk overlap


@contextmanager
def _read_ahead(threads_dir: str, names: list[str]) -> Iterator[None]:
    """With a cold file cache, threads ask the kernel for every thread.json ahead of the look
    (`POSIX_FADV_WILLNEED`): the disk then serves many reads at once instead of one after another. They open
    regular files only (never a link, FIFO or device), read nothing, and stop when the look is done. With a
    warm cache (a few reads timed first) nothing starts.

    Measured at 100,000 threads with the files' data evicted (issue 18): reading every thread.json took
    12-13 s one after another, 2.3-2.8 s after asking for them all first."""
    if len(names) < READ_AHEAD_FROM or not hasattr(os, "posix_fadvise") or not _is_cold(threads_dir, names):
        yield
        return
    done = threading.Event()
    with ThreadPoolExecutor(_READERS) as readers:
        for start in range(_READERS):
            readers.submit(_ask_ahead, threads_dir, names[start::_READERS], done)
        try:
            yield
        finally:
            done.set()


def _ask_ahead(threads_dir: str, names: list[str], done: threading.Event) -> None:
    for name in names:
        if done.is_set():
            return
        fd = _open_regular(os.path.join(threads_dir, name, "thread.json"))
        if fd is None:
            continue
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_WILLNEED)
        except OSError:
            pass
        finally:
            os.close(fd)


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
