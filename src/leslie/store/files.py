"""The only code that touches `.leslie/` files: root discovery, strict reads, atomic writes, the lock."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from leslie.errors import CorruptStateError, LeslieError, LockTimeoutError, NotFoundError, StorageError
from leslie.store import machine
from leslie.store.fsio import INDEX_CAP, LESLIE_DIR, STATE_FILE_CAP, atomic_write, read_regular
from leslie.store.jsonio import StrictJSONError, dumps_canonical, loads_strict
from leslie.store.lockqueue import QueuedLock

INDEX_NAME = "thread_relations.json"
CURRENT_THREAD_FILE = "current_thread"  # in the machine state: the thread `leslie switch` recorded
DEFAULT_LOCK_TIMEOUT = 30.0


@dataclass(frozen=True)
class Layout:
    """Where every file of one leslie repository lives.

    The folders are cached: `doctor` asks for 10,000 thread paths, and each pathlib join costs microseconds.
    """

    root: Path

    @cached_property
    def leslie_dir(self) -> Path:
        return self.root / LESLIE_DIR

    @property
    def index_path(self) -> Path:
        return self.leslie_dir / INDEX_NAME

    @cached_property
    def threads_dir(self) -> Path:
        return self.leslie_dir / "threads"

    @cached_property
    def objectives_dir(self) -> Path:
        return self.leslie_dir / "objectives"

    @cached_property
    def state_dir(self) -> Path:
        """This work tree's machine state, outside the tracked tree in a git work tree (`store.machine`)."""
        return Path(machine.state_dir(self.root))

    @property
    def templates_dir(self) -> Path:
        return self.leslie_dir / "templates"

    @property
    def config_path(self) -> Path:
        return self.leslie_dir / "config.toml"

    @property
    def lock_path(self) -> Path:
        return Path(machine.index_lock_path(self.root))

    def thread_dir(self, thread_id: str) -> Path:
        return self.threads_dir / thread_id

    def thread_file(self, thread_id: str) -> Path:
        return self.threads_dir / thread_id / "thread.json"

    def objective_file(self, objective_id: str) -> Path:
        return self.objectives_dir / objective_id / "objective.json"

    def relative(self, path: Path) -> str:
        """`path` relative to the repo root, POSIX separators; a path outside the root (the machine state of a
        linked work tree, in the clone's git folder) as it is."""
        try:
            return path.relative_to(self.root).as_posix()
        except ValueError:
            return path.as_posix()


def find_root(start: Path | None = None, explicit: str | os.PathLike[str] | None = None) -> Path:
    """The repo root: `explicit` (or `LESLIE_ROOT`) if given, else the nearest ancestor holding `.leslie/`."""
    chosen = explicit if explicit is not None else os.environ.get("LESLIE_ROOT") or None
    if chosen is not None:
        root = Path(chosen).absolute()
        if not (root / LESLIE_DIR).is_dir():
            raise NotFoundError(f"no {LESLIE_DIR}/ in {root} (run `leslie init` there first)")
        return root
    here = (start or Path.cwd()).absolute()
    for candidate in (here, *here.parents):
        if (candidate / LESLIE_DIR).is_dir():
            return candidate
    raise NotFoundError(f"no {LESLIE_DIR}/ found in {here} or any parent (run `leslie init` first)")


def _storage_error(action: str, path: Path, exc: OSError) -> StorageError:
    reason = os.strerror(exc.errno) if exc.errno else str(exc)
    return StorageError(f"cannot {action} {path}: {reason}")


def read_bytes(path: Path, limit: int = STATE_FILE_CAP) -> bytes:
    """Read a state file: a regular file of at most `limit` bytes, never through a symbolic link.

    A link, a FIFO or device, a folder, or a larger file is corruption (CorruptStateError naming the file);
    a missing file raises FileNotFoundError; a refused read is an I/O error (StorageError).
    """
    return read_regular(path, limit)


def recorded_current_thread(root: Path) -> str | None:
    """The thread `leslie switch` recorded for the work tree at `root`, if any (CorruptStateError, naming the
    file, when it is a link or not a regular file). `Repository.recorded_current_thread` names it relative to
    the root; the hooks, which hold no `Repository`, call this."""
    try:
        value = read_bytes(Layout(root).state_dir / CURRENT_THREAD_FILE).decode("utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return None
    return value or None


def read_json(path: Path, limit: int = STATE_FILE_CAP) -> Any:
    """Read a JSON state file strictly (see `read_bytes`); any defect raises CorruptStateError naming it."""
    data = read_bytes(path, limit)
    try:
        return loads_strict(data)
    except StrictJSONError as exc:
        raise CorruptStateError(path, str(exc)) from None


def write_json(path: Path, value: Any) -> bool:
    """Atomically write `value` as canonical JSON; returns False (and writes nothing) if unchanged."""
    return write_bytes(path, dumps_canonical(value))


def write_bytes(path: Path, data: bytes, limit: int = INDEX_CAP) -> bool:
    """Atomically write `data`; returns False (and writes nothing) if the file already holds exactly it."""
    try:
        if read_regular(path, limit) == data:
            return False
    except (OSError, LeslieError):
        pass  # whatever is there is replaced, or refused by the write itself (a link, say)
    atomic_write(path, data)
    return True


# -- files of the repository outside .leslie/ (AGENTS.md, CLAUDE.md, .gitattributes, agent hook files) ---

OUTSIDE_HINT = "remove the link, or make it point inside the repository"


def repository_target(root: Path, path: Path, *, within: Path | None = None) -> Path:
    """The real file a write to `path` lands on, provided it stays inside the repository.

    `path` itself, or where its symbolic links (on the file or its folders) lead: an `AGENTS.md` linked to
    a shared file of the repository is written there. `within` (default: `root`, and then never `.git/`
    or `.leslie/` through a link) is the folder the real path must lie in: a committed
    `AGENTS.md -> ~/.ssh/authorized_keys` or `.claude -> ~` raises CorruptStateError naming `path`.
    """
    real = Path(os.path.realpath(path))
    area = Path(os.path.realpath(within if within is not None else root))
    try:
        shown = path.relative_to(root).as_posix()
    except ValueError:
        shown = str(path)
    if not real.is_relative_to(area):
        raise CorruptStateError(shown, f"leads outside the repository (to {real}) through a symbolic link; "
                                       "leslie writes only inside it", OUTSIDE_HINT)
    parts = real.relative_to(area).parts
    if within is None and parts and parts[0] in (".git", LESLIE_DIR):
        raise CorruptStateError(shown, f"leads into {parts[0]}/ (to {real}) through a symbolic link; leslie "
                                       "never writes there through a link", OUTSIDE_HINT)
    return real


def read_repository_file(root: Path, path: Path, *, within: Path | None = None,
                         limit: int = STATE_FILE_CAP) -> bytes | None:
    """The bytes of a repository file (`repository_target` rules, a regular file of at most `limit` bytes),
    None when it does not exist."""
    try:
        return read_regular(repository_target(root, path, within=within), limit)
    except FileNotFoundError:
        return None


def write_repository_file(root: Path, path: Path, data: bytes, *, within: Path | None = None) -> Path:
    """Atomically write a repository file where `repository_target` says it really lives; returns that path."""
    target = repository_target(root, path, within=within)
    atomic_write(target, data)
    return target


def lock_timeout() -> float:
    """Seconds to wait for the lock: `LESLIE_LOCK_TIMEOUT`, default 30."""
    raw = os.environ.get("LESLIE_LOCK_TIMEOUT")
    if not raw:
        return DEFAULT_LOCK_TIMEOUT
    try:
        return max(0.0, float(raw))
    except ValueError:
        return DEFAULT_LOCK_TIMEOUT


class IndexLock:
    """Proof that the caller holds the state lock; passed down, never re-acquired."""

    def __init__(self, layout: Layout) -> None:
        self.layout = layout


@contextmanager
def acquire_index_lock(layout: Layout, timeout: float | None = None) -> Iterator[IndexLock]:
    """Hold the one lock that serialises every mutation of `.leslie/`: a `flock` on `state/index.lock`.

    Writers wait in `state/lock-queue/` and are served in arrival order (`store.lockqueue`); the guard's
    sweeps queue there too (`guard.tripwire.index_lock`). The kernel drops it when its holder
    dies, so a crashed command never leaves a stale lock.

    `LESLIE_TEST_DISABLE_LOCK=1` skips it: a test-only switch for the negative control that proves the
    concurrency tests can fail.
    """
    if os.environ.get("LESLIE_TEST_DISABLE_LOCK") == "1":
        start = time.time_ns()
        try:
            yield IndexLock(layout)
        finally:
            _note_mutation(layout, start)
        return
    wait = lock_timeout() if timeout is None else timeout
    # FileLock (under QueuedLock) refuses a link anywhere from `.leslie` down to the lock file, and opens it
    # with O_NOFOLLOW and without O_TRUNC: a committed `state/index.lock -> ~/x` is neither followed nor truncated.
    lock = QueuedLock(str(layout.lock_path), wait)
    try:
        lock.acquire()
    except LockTimeoutError:
        raise LockTimeoutError(
            f"could not lock {layout.relative(layout.lock_path)} within {wait:g} s "
            "(another leslie command holds it); nothing was changed, retry"
        ) from None
    start = time.time_ns()
    try:
        yield IndexLock(layout)
    finally:
        try:
            _note_mutation(layout, start)
        finally:
            lock.release()


def _note_mutation(layout: Layout, start_ns: int) -> None:
    """Tell the write guard's second line that leslie itself wrote under `.leslie/` in this window."""
    from leslie.store.mutations import record_leslie_write

    record_leslie_write(str(layout.root), start_ns, time.time_ns())
