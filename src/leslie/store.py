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

# atomic_write and TEMP_SUFFIX live in the os-only `_fsio` so the hook path can use them cheaply; this
# module re-exports them and stays the place every other caller imports them from.
from leslie._fsio import TEMP_SUFFIX as TEMP_SUFFIX  # noqa: PLC0414 (explicit re-export for mypy)
from leslie._fsio import atomic_write as atomic_write  # noqa: PLC0414
from leslie._json import StrictJSONError, dumps_canonical, loads_strict
from leslie.errors import CorruptStateError, LockTimeoutError, NotFoundError, StorageError

LESLIE_DIR = ".leslie"
INDEX_NAME = "thread_relations.json"
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
        return self.leslie_dir / "state"

    @property
    def templates_dir(self) -> Path:
        return self.leslie_dir / "templates"

    @property
    def config_path(self) -> Path:
        return self.leslie_dir / "config.toml"

    @property
    def lock_path(self) -> Path:
        return self.state_dir / "index.lock"

    def thread_dir(self, thread_id: str) -> Path:
        return self.threads_dir / thread_id

    def thread_file(self, thread_id: str) -> Path:
        return self.threads_dir / thread_id / "thread.json"

    def objective_file(self, objective_id: str) -> Path:
        return self.objectives_dir / objective_id / "objective.json"

    def relative(self, path: Path) -> str:
        """`path` relative to the repo root, POSIX separators."""
        return path.relative_to(self.root).as_posix()


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


def read_bytes(path: Path) -> bytes:
    """Read a state file; a folder in its place is corruption, a refused read is an I/O error."""
    try:
        return path.read_bytes()
    except IsADirectoryError:
        raise CorruptStateError(path, "is a folder where a file was expected") from None
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise _storage_error("read", path, exc) from None


def read_json(path: Path) -> Any:
    """Read a JSON state file strictly; any defect raises CorruptStateError naming the file."""
    data = read_bytes(path)
    try:
        return loads_strict(data)
    except StrictJSONError as exc:
        raise CorruptStateError(path, str(exc)) from None


def write_json(path: Path, value: Any) -> bool:
    """Atomically write `value` as canonical JSON; returns False (and writes nothing) if unchanged."""
    return write_bytes(path, dumps_canonical(value))


def write_bytes(path: Path, data: bytes) -> bool:
    """Atomically write `data`; returns False (and writes nothing) if the file already holds exactly it."""
    try:
        if path.read_bytes() == data:
            return False
    except OSError:
        pass
    atomic_write(path, data)
    return True


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
    """Hold the one `filelock.FileLock` that serialises every mutation of `.leslie/`.

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
    import filelock  # imported here: 40 ms that read-only paths (the hook) must not pay

    wait = lock_timeout() if timeout is None else timeout
    try:
        layout.state_dir.mkdir(parents=True, exist_ok=True)
        lock = filelock.FileLock(str(layout.lock_path), timeout=wait)
        lock.acquire()
    except filelock.Timeout:
        raise LockTimeoutError(
            f"could not lock {layout.relative(layout.lock_path)} within {wait:g} s "
            "(another leslie command holds it); nothing was changed, retry"
        ) from None
    except OSError as exc:
        raise _storage_error("lock", layout.lock_path, exc) from None
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
    from leslie.snapshots import record_leslie_write

    record_leslie_write(str(layout.root), start_ns, time.time_ns())
