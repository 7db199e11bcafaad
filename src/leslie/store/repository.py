"""One leslie repository: typed reads and locked writes of threads, objectives and the index."""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from contextlib import suppress
from functools import cached_property
from pathlib import Path
from typing import Any

from leslie.errors import CorruptStateError, LeslieError, NotFoundError
from leslie.store.canonical import fingerprint
from leslie.store.config import Config, load_config
from leslie.store.files import (
    CURRENT_THREAD_FILE,
    IndexLock,
    Layout,
    find_root,
    read_bytes,
    read_json,
    recorded_current_thread,
    write_bytes,
    write_json,
)
from leslie.store.fsio import (
    FOLDER_FLAGS,
    INDEX_CAP,
    STATE_FILE_CAP,
    FileLock,
    atomic_write,
    file_signature,
    read_in_folder,
    refuse_links,
)
from leslie.store.model import THREAD_ID_RE, Objective, ShapeError, Thread, objective_from_json, thread_from_json
from leslie.store.relations import Index, build_index, decode_index

INDEX_CHECKED_FILE = "index.checked"  # in state/: the fingerprint of the index leslie last wrote (`write_index`)


class Repository:
    """Reads go straight to disk; every write takes an `IndexLock` as proof the caller holds the lock."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.layout = Layout(root)

    @classmethod
    def discover(cls, root: str | os.PathLike[str] | None = None) -> Repository:
        """The repository at `root`, `LESLIE_ROOT`, or the nearest ancestor of the working directory."""
        return cls(find_root(explicit=root))

    @cached_property
    def config(self) -> Config:
        return load_config(self.layout.config_path)

    # -- threads ---------------------------------------------------------------------------------
    def thread_exists(self, thread_id: str) -> bool:
        """True when the thread's folder exists, tombstone or not (so its ID is taken); a link counts."""
        return os.path.lexists(self.layout.thread_dir(thread_id))

    def _read_json(self, path: Path) -> Any:
        """`store.read_json`, naming a corrupt file relative to the repo root (SPEC §1)."""
        try:
            return read_json(path)
        except CorruptStateError as exc:
            raise CorruptStateError(self._shown(exc.path), exc.problem, exc.hint) from None

    def _shown(self, path: str) -> str:
        """`path` (as a CorruptStateError names it, possibly "<file> (at <folder>)") relative to the root."""
        prefix = str(self.root) + os.sep
        return path.replace(prefix, "")

    def read_thread(self, thread_id: str) -> Thread:
        """The thread's `thread.json`; NotFoundError if there is none, CorruptStateError if malformed."""
        path = self.layout.thread_file(thread_id)
        try:
            data = self._read_json(path)
        except FileNotFoundError:
            raise NotFoundError(f"no such thread: {thread_id}") from None
        return self._thread_from(thread_id, path, data)

    def parse_thread(self, thread_id: str, raw: bytes) -> Thread:
        """The thread whose `thread.json` bytes were just read (as `read_thread` reads them): the same checks
        and errors, without reading the file again."""
        from leslie.store.jsonio import StrictJSONError, loads_strict

        try:
            data = loads_strict(raw)
        except StrictJSONError as exc:
            raise CorruptStateError(self._shown(str(self.layout.thread_file(thread_id))), str(exc)) from None
        return self._thread_from(thread_id, None, data)

    def _thread_from(self, thread_id: str, path: Path | None, data: Any) -> Thread:
        """The thread of a decoded `thread.json`; `path` (None: the thread's own) only names it in errors, so
        `doctor` reading 100,000 of them builds no path object per thread."""
        try:
            thread = thread_from_json(data)
        except ShapeError as exc:
            shown = self.layout.relative(path or self.layout.thread_file(thread_id))
            raise CorruptStateError(shown, str(exc)) from None
        if thread.id != thread_id:
            shown = self.layout.relative(path or self.layout.thread_file(thread_id))
            raise CorruptStateError(shown, f"its id {thread.id!r} does not match its folder")
        return thread

    def threads_folder(self) -> ThreadsFolder:
        """The threads folder held open, for a loop that reads many threads (`ThreadsFolder`)."""
        return ThreadsFolder(self)

    def read_threads(self, thread_ids: Iterable[str]) -> Iterator[Thread]:
        """`read_thread` of each of `thread_ids`, in turn, through one `ThreadsFolder`."""
        with self.threads_folder() as folder:
            for thread_id in thread_ids:
                yield folder.read(thread_id)

    def read_live_thread(self, thread_id: str) -> Thread:
        """Like `read_thread`, but a tombstone counts as not found."""
        thread = self.read_thread(thread_id)
        if thread.is_tombstone:
            raise NotFoundError(f"thread {thread_id} is deleted")
        return thread

    def thread_ids(self) -> list[str]:
        """IDs of every folder under `threads/` that holds a `thread.json`, sorted.

        A symbolic link there is listed too, whatever it points at: reading it then fails naming it (a linked
        thread folder is corrupt state), instead of a hostile link being silently skipped or followed.
        """
        return _entries(self.layout.threads_dir, "thread.json")

    def write_thread(self, lock: IndexLock, thread: Thread) -> None:
        """Atomically write `thread.json` (the caller then writes the index in the same transaction)."""
        write_json(self.layout.thread_file(thread.id), thread.to_json())

    # -- objectives ------------------------------------------------------------------------------
    def objective_title(self, objective_id: str | None) -> str | None:
        """The objective's title, None when there is no objective or it cannot be read (views that show
        what they can: the board, `leslie status`)."""
        if not objective_id:
            return None
        try:
            return self.read_objective(objective_id).title
        except LeslieError:
            return None

    def read_objective(self, objective_id: str) -> Objective:
        """The objective's `objective.json`; NotFoundError if there is none."""
        path = self.layout.objective_file(objective_id)
        try:
            data = self._read_json(path)
        except FileNotFoundError:
            raise NotFoundError(f"no such objective: {objective_id}") from None
        try:
            objective = objective_from_json(data)
        except ShapeError as exc:
            raise CorruptStateError(self.layout.relative(path), str(exc)) from None
        if objective.id != objective_id:
            raise CorruptStateError(self.layout.relative(path), "its id does not match its folder")
        return objective

    def objective_exists(self, objective_id: str) -> bool:
        return os.path.lexists(self.layout.objective_file(objective_id).parent)

    def objectives(self) -> list[Objective]:
        """Every objective, sorted by ID (a linked objective folder fails naming it, as in `thread_ids`)."""
        return [self.read_objective(n) for n in _entries(self.layout.objectives_dir, "objective.json")]

    def write_objective(self, lock: IndexLock, objective: Objective) -> None:
        write_json(self.layout.objective_file(objective.id), objective.to_json())

    # -- the index -------------------------------------------------------------------------------
    def read_index(self, *, record: bool = True) -> Index:
        """The stored index; when absent (a fresh clone without it), rebuilt from the threads. `record=False`:
        bytes found canonical by the full check are not recorded (`doctor` without `--fix` writes nothing)."""
        path = self.layout.index_path
        before = file_signature(path)
        try:
            data = read_bytes(path, INDEX_CAP)
        except FileNotFoundError:
            return self.rebuild_index()
        except CorruptStateError as exc:
            raise CorruptStateError(self._shown(exc.path), exc.problem, exc.hint) from None
        shown = Path(self.layout.relative(path))
        known = self.known_index(data)
        index = decode_index(data, shown, shown, known=known)
        if record and not known and index.source() is not None:
            self._record_verified(data)
        if before is not None and file_signature(path) == before:
            index.origin = before  # these bytes are that file's (the derived store follows its edits)
        return index

    def _record_verified(self, data: bytes) -> None:
        """Record index bytes just found canonical by the full check (an index git or a script wrote), so the
        reads after this one skip the check (~25 ms at 10,000 threads, ~0.4 s at 100,000). Only under the
        index lock, as every write of the record (doctor counts on it), and only when it is free: a reader
        never waits for a writer. A record racing a write names bytes or a file the other no longer matches,
        which costs the next reader a full check, never a skipped one."""
        lock = FileLock(str(self.layout.lock_path))
        if not lock.acquire_if_free():
            return
        try:
            self._record_index(data)
        finally:
            lock.release()

    def _index_checked_path(self) -> str:
        return os.path.join(self.layout.state_dir, INDEX_CHECKED_FILE)

    def known_index(self, data: bytes) -> bool:
        """Whether `data` are the index bytes leslie last wrote or verified (`canonical.fingerprint`)."""
        try:  # a file replaced since it was read has another identity: no match, a full check (never wrong)
            identity = os.stat(self.layout.index_path, follow_symlinks=False)
            return read_bytes(Path(self._index_checked_path()), 128) == fingerprint(data, identity)
        except (OSError, LeslieError):  # none yet, or not a regular file: the index is checked in full
            return False

    def _record_index(self, data: bytes) -> None:
        """Record the fingerprint of index bytes that are canonical (written here, or just verified), under the
        index lock.

        Runtime state, not durable: lost, stale or torn, it no longer matches and the index is checked in full.
        """
        # A linked or unwritable `state/`: every read then checks the index in full, as before.
        with suppress(OSError, LeslieError):
            identity = os.stat(self.layout.index_path, follow_symlinks=False)  # the file just renamed into place
            atomic_write(self._index_checked_path(), fingerprint(data, identity), durable=False)

    def rebuild_index(self) -> Index:
        """The index as derived from every `thread.json` (SPEC §2 invariant 4)."""
        return build_index(self.read_threads(self.thread_ids()))

    def write_index(self, lock: IndexLock, index: Index) -> bool:
        """Atomically write the index; False when its bytes did not change.

        An index read under this lock and edited lazily is compared with the bytes it was read from (the file
        is not read again). Either way the fingerprint of the bytes now in place is recorded, so the next
        command skips checking them (`read_index`): after a full write too (`doctor --fix`, `init`), every read
        of a 100,000-thread index otherwise checked its layout (a decoded copy of 40-90 MB and ~0.3 s) until
        the next mutation.
        """
        data = index.to_bytes()
        source = index.source()
        if source is None:
            return self.write_index_bytes(lock, data)
        if data is source.data or data == source.data:
            return False
        atomic_write(self.layout.index_path, data)
        self._record_index(data)
        if index.origin is not None:
            from leslie.store.derived import index_rewritten

            index_rewritten(self, index)
        return True

    def write_index_bytes(self, lock: IndexLock, data: bytes) -> bool:
        """Atomically write canonical index bytes the caller encoded (`relations.rebuilt_bytes`); False when
        the file already holds exactly them. Their fingerprint is recorded, as `write_index` does."""
        changed = write_bytes(self.layout.index_path, data)
        self._record_index(data)
        return changed

    # -- the current thread of this working tree ------------------------------------------------
    def current_thread_file(self) -> Path:
        return self.layout.state_dir / CURRENT_THREAD_FILE

    def recorded_current_thread(self) -> str | None:
        """The thread recorded by `leslie switch` for this working tree, if any (CorruptStateError when the
        file is a link or not a regular file)."""
        try:
            return recorded_current_thread(self.root)
        except CorruptStateError as exc:
            raise CorruptStateError(self._shown(exc.path), exc.problem, exc.hint) from None

    def record_current_thread(self, lock: IndexLock, thread_id: str) -> None:
        atomic_write(self.current_thread_file(), (thread_id + "\n").encode())


def _entries(folder: Path, marker: str) -> list[str]:
    """Names in `folder` that are symbolic links, or real folders holding `marker`, sorted."""
    try:
        entries = list(os.scandir(folder))
    except (FileNotFoundError, NotADirectoryError):
        return []
    names = []
    for entry in entries:  # is_symlink/is_dir come from the directory listing: no extra system call
        if entry.is_symlink() or (entry.is_dir(follow_symlinks=False)
                                  and os.path.isfile(os.path.join(entry.path, marker))):
            names.append(entry.name)
    return sorted(names)


class ThreadsFolder:
    """The threads folder open as a descriptor, for a loop that reads many `thread.json` files (a first look at
    a clone, a rebuild): each is read through it and its thread folder's descriptor, both opened without
    following a link, so no path is built and no folder above is checked again per thread (`read_thread`
    takes an `lstat` of each of four: `.leslie`, `threads`, the thread's folder, the file). What cannot be
    read so (gone, a link, a FIFO, too big, an unreadable or linked threads folder) is read by
    `Repository.read_thread`, which fails naming it: the same threads, the same errors."""

    def __init__(self, repo: Repository) -> None:
        self.repo = repo
        self.fd: int | None = None
        self._opened = False  # the folder is opened by the first read (a loop may read none)

    def read(self, thread_id: str) -> Thread:
        """The thread's `thread.json`, as `Repository.read_thread` reads it."""
        folder = self.open_thread(thread_id)
        try:
            return self.read_in(folder, thread_id)
        finally:
            if folder is not None:
                os.close(folder)

    def open_thread(self, thread_id: str) -> int | None:
        """The thread's folder, opened from the threads folder without following a link (the caller closes it);
        None when it cannot be so: gone, a link, not a folder, a name that is not a thread ID, no threads
        folder to open."""
        if not self._opened:
            self._opened = True
            with suppress(OSError, LeslieError):
                refuse_links(self.repo.layout.threads_dir)
                self.fd = os.open(self.repo.layout.threads_dir, FOLDER_FLAGS)
        if self.fd is None or not THREAD_ID_RE.match(thread_id):  # an ID that is not one: `read_thread`'s to refuse
            return None
        try:
            return os.open(thread_id, FOLDER_FLAGS, dir_fd=self.fd)
        except OSError:
            return None

    def read_in(self, folder: int | None, thread_id: str) -> Thread:
        """The thread's `thread.json`, read in its folder opened by `open_thread` (None: by `read_thread`)."""
        raw = None if folder is None else read_in_folder(folder, "thread.json", STATE_FILE_CAP)
        return self.repo.read_thread(thread_id) if raw is None else self.repo.parse_thread(thread_id, raw)

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    def __enter__(self) -> ThreadsFolder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def git_toplevel(start: Path) -> Path | None:
    """The top of the git working tree holding `start`, or None outside git."""
    import subprocess  # only `init` asks; every other command would pay ~10 ms to import it

    try:
        out = subprocess.run(["git", "rev-parse", "--show-toplevel"], cwd=start, capture_output=True,
                             text=True, check=False, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return Path(out.stdout.strip()) if out.returncode == 0 and out.stdout.strip() else None
