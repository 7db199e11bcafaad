"""The store's file primitives: the one atomic-write helper, the one reader of state files (regular files only,
never through a link, size-capped), and a per-file advisory lock.

They work on `str` paths and descriptors: every caller uses them, those that hold no `Repository` (the hooks,
the guard, the session store) as well as `leslie.store.files` and everything above it.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import threading
from types import TracebackType

from leslie.errors import CorruptStateError, LockTimeoutError, StorageError

TEMP_SUFFIX = ".leslie-tmp"
LESLIE_DIR = ".leslie"  # the folder of leslie's files in a repository (`store.files.Layout`)
_GIT_MARKER = os.sep + ".git" + os.sep
_MACHINE_MARKER = os.sep + "leslie" + os.sep  # `store.machine.MACHINE_DIR`, below a `.git` folder
LINKED = "is a symbolic link or lies in a linked folder; leslie never reads or writes its state through links"
# Size caps of what leslie reads from a repository (docs/security.md): a link to /dev/zero or a huge file
# must end in a clear error, never in a process that allocates without end.
STATE_FILE_CAP = 4 * 1024 * 1024  # thread.json, objective.json, session state, caches, config, templates
FOLDER_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC  # a folder, never through a link
INDEX_CAP = 256 * 1024 * 1024  # thread_relations.json: about 2,000 bytes a thread at 100,000 threads


def storage_error(action: str, path: str | os.PathLike[str], exc: OSError) -> StorageError:
    """The StorageError for a refused `action` on `path` (the OS's reason, without a traceback)."""
    reason = os.strerror(exc.errno) if exc.errno else str(exc)
    return StorageError(f"cannot {action} {os.fspath(path)}: {reason}")


def file_signature(path: str | os.PathLike[str]) -> str | None:
    """A regular file's identity and version as the file system keeps them (device, inode, size, mtime and
    ctime in ns), None for anything else. Written anew (`atomic_write`), a file gets a new inode and ctime, so
    no two versions of it share one; an edit in place moves its times."""
    try:
        info = os.lstat(path)
    except OSError:
        return None
    if not stat.S_ISREG(info.st_mode):
        return None
    return f"{info.st_dev}:{info.st_ino}:{info.st_size}:{info.st_mtime_ns}:{info.st_ctime_ns}"


def refuse_links(path: str | os.PathLike[str]) -> int | None:
    """Raise CorruptStateError when `path`, or a folder between it and the `.leslie` folder holding it (that
    folder included), is a symbolic link.

    A repository is untrusted input: a committed `.leslie/state -> ../.git/hooks` or `threads/thread-x -> ../..`
    would otherwise make leslie write, append, lock or delete outside its own files. Folders above `.leslie`
    (a user's own `~/src -> /data/src`) are not checked. The machine state in the git folder
    (`.git/leslie/...`, `.git/worktrees/x/leslie/...`) is checked from its `leslie` folder down; any other
    path outside a `.leslie` folder is checked from its own folder only (the final component). A few `lstat`
    calls: cheap enough for the hook path.
    Returns the `st_mode` of `path` itself, None when it does not exist.
    """
    target = os.path.abspath(os.fspath(path))
    marker = os.sep + LESLIE_DIR + os.sep
    start = (target + os.sep).find(marker)
    if start < 0:  # the machine state in a git folder (`store.machine`): checked from its `leslie` folder down
        start = target.find(_GIT_MARKER)
        start = (target + os.sep).find(_MACHINE_MARKER, start) if start >= 0 else -1
        marker = _MACHINE_MARKER
    if start < 0:
        chain = [target]
    else:
        top = start + len(marker) - 1
        parts = target[top:].split(os.sep)
        chain = [target[:top]]
        for part in parts[1:]:
            if part:
                chain.append(chain[-1] + os.sep + part)
    mode = None
    for step in chain:
        try:
            mode = os.lstat(step).st_mode
        except (FileNotFoundError, NotADirectoryError):
            # Nothing below a missing folder exists yet (it will be created as a real folder); a file in a
            # folder's place fails the write or read itself, with its own error.
            return None
        except OSError as exc:
            raise storage_error("check", step, exc) from None
        if stat.S_ISLNK(mode):
            raise CorruptStateError(target if step == target else f"{target} (at {step})", LINKED)
    return mode


def read_regular(path: str | os.PathLike[str], limit: int = STATE_FILE_CAP, *, tail: bool = False) -> bytes:
    """The bytes of the regular file `path`, at most `limit` of them; never through a link, never blocking.

    A link (at `path` or in its folders up to `.leslie`), a FIFO, device or socket, a folder, or a file over
    `limit` bytes raises CorruptStateError naming the file; FileNotFoundError passes through (a missing file
    often just means "none yet"); another refused read is a StorageError. `tail=True` reads the last `limit`
    bytes of a larger file instead of refusing it (for append-only logs).
    """
    refuse_links(path)
    try:
        # O_NONBLOCK: opening a FIFO must not wait for a writer (it is refused just below).
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise CorruptStateError(os.fspath(path), LINKED) from None
        if exc.errno == errno.ENOTDIR:
            raise FileNotFoundError(exc.errno, exc.strerror, os.fspath(path)) from None
        raise storage_error("read", path, exc) from None
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise CorruptStateError(os.fspath(path), "is a folder where a file was expected")
        if not stat.S_ISREG(info.st_mode):
            raise CorruptStateError(os.fspath(path), "is not a regular file (a device, FIFO or socket)")
        if info.st_size > limit:
            if not tail:
                raise CorruptStateError(os.fspath(path), f"is larger than leslie reads ({limit} bytes)")
            os.lseek(fd, info.st_size - limit, os.SEEK_SET)
        data = _read_capped(fd, max(info.st_size + 1, 1 << 16), limit)
        if len(data) > limit:  # grew while we read
            if tail:  # the tail we have is enough
                return data[:limit]
            raise CorruptStateError(os.fspath(path), f"is larger than leslie reads ({limit} bytes)")
    except OSError as exc:
        raise storage_error("read", path, exc) from None
    finally:
        os.close(fd)
    return data


def _read_capped(fd: int, first: int, limit: int) -> bytes:
    """The rest of the open file `fd`, read to its end or until more than `limit` bytes came (at most
    `limit + 1` are returned). The first read asks for `first` bytes (the size and a byte more: a 4 MB index in
    one buffer, not four chunks joined into a fifth), later ones for 64 KiB; the size can change while the file
    is read, so it is never trusted."""
    chunks: list[bytes] = []
    total, size = 0, first
    while total <= limit:
        chunk = os.read(fd, min(size, limit + 1 - total))
        if not chunk:
            break
        chunks.append(chunk)
        total += len(chunk)
        size = 1 << 16  # what follows is the end (an empty read) or a file that grew: no second big buffer
    return b"".join(chunks)


def read_in_folder(folder_fd: int, name: str | bytes, limit: int) -> bytes | None:
    """The bytes of regular file `name` in the folder open as `folder_fd`, at most `limit` of them; None for
    anything else: gone, a link (never followed), a FIFO, device or folder, over `limit` (before or while it
    is read), unreadable. For scans that skip what they cannot read; `read_regular` says why instead."""
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=folder_fd)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > limit:  # a FIFO would block: never read
            return None
        data = _read_capped(fd, info.st_size + 1, limit)
    except OSError:
        return None
    finally:
        os.close(fd)
    return data if len(data) <= limit else None


def _fsync_dir(folder: str) -> None:
    fd = os.open(folder or ".", os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _make_folders(folder: str) -> list[str]:
    """Create `folder` and its missing parents; return the ones created, deepest first (for an undo)."""
    missing = []
    current = folder
    while current and not os.path.isdir(current):
        missing.append(current)
        current = os.path.dirname(current)
    if missing:
        os.makedirs(folder, exist_ok=True)
    return missing


def _undo_write(temp: str, target: str, backup: str | None, replaced: bool, existed: bool,
                created: list[str]) -> None:
    """Put things back after a failed atomic write: old file restored, temp files and new folders gone.

    Each step is best effort: its own failure must not hide the error being reported.
    """
    doomed = [temp] if backup is None else [temp, backup]
    if replaced and backup is not None:
        try:
            os.replace(backup, target)
            doomed.pop()
        except OSError:
            pass
    elif replaced and not existed:
        doomed.append(target)
    for path in doomed:
        with contextlib.suppress(OSError):
            os.unlink(path)
    for made in created:
        with contextlib.suppress(OSError):
            os.rmdir(made)


def _recycling_write(path: str | os.PathLike[str], data: bytes) -> None:
    target = os.fspath(path)
    try:
        _recycle(target, data)
    except OSError as exc:
        if exc.errno in (errno.EISDIR, errno.ENOTDIR) and os.path.isdir(target):
            raise CorruptStateError(target, "is a folder where a file was expected") from None
        raise storage_error("write", path, exc) from None


def _recycle(target: str, data: bytes) -> None:
    """A non-durable atomic replace that frees no inode: the replaced file becomes the next write's temp.

    On a file system mounted with `discard`, freeing a file's blocks trims them synchronously: 0.3-6 ms
    on this project's CI disk, for every rewrite. Here the new content goes into a spare file, the current
    file is kept alive by a hard link, the spare is renamed over it, and the old inode becomes the spare.
    """
    folder, name = os.path.split(target)
    spare = os.path.join(folder, f".{name}.spare")
    previous = os.path.join(folder, f".{name}.previous")
    if folder:
        os.makedirs(folder, exist_ok=True)
    fd = os.open(spare, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW, 0o644)  # a committed link is refused
    try:
        view = memoryview(data)
        offset = 0
        while offset < len(data):
            offset += os.pwrite(fd, view[offset:], offset)
        os.ftruncate(fd, len(data))
    finally:
        os.close(fd)
    try:
        os.link(target, previous)
    except FileNotFoundError:
        pass
    except FileExistsError:  # left by an interrupted write: it is garbage
        os.unlink(previous)
        os.link(target, previous)
    os.replace(spare, target)
    with contextlib.suppress(FileNotFoundError):
        os.replace(previous, spare)


def _refuse_unsafe_target(target: str) -> None:
    # No write through a link (see `refuse_links`); and a rename would replace a device, FIFO or socket with a
    # regular file (run as root by hand, a merge driver given /dev/null once did exactly that).
    mode = refuse_links(target)
    if mode is not None and (stat.S_ISCHR(mode) or stat.S_ISBLK(mode) or stat.S_ISFIFO(mode)
                             or stat.S_ISSOCK(mode)):
        raise StorageError(f"cannot write {target}: not a regular file")


def atomic_write(path: str | os.PathLike[str], data: bytes, *, durable: bool = True,
                 recycle: bool = False) -> None:
    """Replace `path` with `data` so a crash leaves the old or the new file, never a torn one.

    Temp file in the same folder, flush + fsync, `os.replace`, fsync of the folder. On any failure the
    temp file is removed and the original is untouched: a failure after the rename (the folder's fsync)
    puts the old file back from a hard link taken just before, and folders this call created are removed.

    `durable=False` skips both fsyncs, for runtime state that is rebuilt when lost (agent sessions, caches):
    a crashed process still leaves the old or the new file; only a power cut may lose the last write. On a
    loaded disk the two fsyncs cost 1-15 ms, more than half of the no-injection hook's whole budget.
    `recycle=True` (non-durable only, and only when the caller holds a lock that serialises the writers of
    `path`) also avoids freeing the old file's blocks, see `_recycle`; it keeps two hidden files
    (`.<name>.spare`, `.<name>.previous`) beside `path`.
    """
    target = os.fspath(path)
    _refuse_unsafe_target(target)
    if recycle and not durable:
        _recycling_write(path, data)
        return
    folder, name = os.path.split(target)
    stem = os.path.join(folder, f".{name}.{os.urandom(4).hex()}")
    temp = stem + TEMP_SUFFIX
    backup: str | None = None
    created: list[str] = []
    existed = replaced = False
    try:
        if folder:
            created = _make_folders(folder)
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            view = memoryview(data)
            while view:
                written = os.write(fd, view)
                view = view[written:]
            if durable:
                os.fsync(fd)
        finally:
            os.close(fd)
        if durable:  # only the folder's fsync can fail after the rename: keep the old file until it is done
            try:
                os.link(target, stem + ".old" + TEMP_SUFFIX)
                backup, existed = stem + ".old" + TEMP_SUFFIX, True
            except FileNotFoundError:
                pass
            except OSError:  # no hard links here: the write still happens, only its undo is lost
                existed = os.path.lexists(target)
        os.replace(temp, target)
        replaced = True
        if durable:
            _fsync_dir(folder)
    except OSError as exc:
        _undo_write(temp, target, backup, replaced, existed, created)
        if exc.errno in (errno.EISDIR, errno.ENOTDIR) and os.path.isdir(target):
            raise CorruptStateError(target, "is a folder where a file was expected") from None
        raise storage_error("write", path, exc) from None
    if backup is not None:
        with contextlib.suppress(OSError):
            os.unlink(backup)


def wait_flock(fd: int, timeout: float) -> bool:
    """Wait in the kernel's queue for an exclusive `flock` on `fd`, at most `timeout` seconds; True once held.

    A blocked `flock` is woken the moment the holder lets go, and Linux wakes waiters in the order they
    blocked, so writers are served in about their arrival order (docs/design.md, "The index lock"); a
    poll-and-sleep loop instead lets the holder that just released win again and again. `flock` itself has
    no timeout, so a daemon thread does the blocking call and this one waits for it. On any failure `fd`
    is no longer the caller's: on a timeout (False) or an interrupt the waiting thread closes it if the kernel
    grants the lock later (releasing it at once), and an error of `flock` closes it before it is raised.
    """
    import fcntl

    done = threading.Event()
    guard = threading.Lock()
    outcome: list[BaseException | bool | None] = []  # [True] held, [OSError] failed, [None] the caller left

    def wait() -> None:
        result: BaseException | bool
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            result = True
        except OSError as exc:
            result = exc
        with guard:
            if not outcome:
                outcome.append(result)
                done.set()
                return
        os.close(fd)  # the caller gave up: a lock granted now is released at once

    threading.Thread(target=wait, name="leslie-lock-wait", daemon=True).start()
    try:
        done.wait(None if timeout >= threading.TIMEOUT_MAX else timeout)
    except BaseException:  # an interrupt (Ctrl-C) while waiting
        with guard:
            if outcome:
                os.close(fd)  # granted (or failed) just now: nobody else will close it
            else:
                outcome.append(None)
        raise
    with guard:
        if not outcome:
            outcome.append(None)
            return False
    result = outcome[0]
    if isinstance(result, OSError):
        os.close(fd)
        raise result
    return True


class FileLock:
    """An exclusive `fcntl.flock` on one lock file, waited for at most `timeout` seconds.

    The index lock (`store.acquire_index_lock`) and small runtime files that hooks update (agent sessions,
    the trust list). Not `filelock`: importing it costs ~40 ms, more than the hook's whole budget, and it
    polls, which starves waiters (`wait_flock`). The kernel drops a flock when its process dies, so
    a crashed hook never leaves a stale lock behind.
    """

    def __init__(self, path: str, timeout: float = 5.0) -> None:
        self.path = path
        self.timeout = timeout
        self._fd: int | None = None

    def _open(self, flags: int) -> int:
        """The lock file opened with `flags` besides read-write, no link followed: refused at the end (ELOOP)
        as in its folders up to `.leslie` (CorruptStateError)."""
        refuse_links(self.path)
        if flags & os.O_CREAT:
            os.makedirs(os.path.dirname(self.path) or ".", exist_ok=True)
        return os.open(self.path, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC | flags, 0o644)

    def acquire_if_free(self) -> bool:
        """Take the lock only when nobody holds it now: never waits, never raises (for best-effort work that must
        run under the lock or not at all: a reader recording what it verified). The lock file is made when
        missing (a fresh clone has none until its first mutation), never through a link; only a regular file is
        locked. True when held; `release` (or leaving a `with` block) lets go."""
        import fcntl

        try:
            fd = self._open(os.O_NONBLOCK | os.O_CREAT)
        except (OSError, CorruptStateError):
            return False
        try:
            if stat.S_ISREG(os.fstat(fd).st_mode):
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                self._fd = fd
                return True
        except OSError:  # held (a writer at work), or refused
            pass
        os.close(fd)
        return False

    def __enter__(self) -> FileLock:
        import fcntl

        try:
            fd = self._open(os.O_CREAT)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise CorruptStateError(self.path, LINKED) from None
            raise storage_error("lock", self.path, exc) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            try:
                held = wait_flock(fd, self.timeout)  # from here on, `fd` is closed for us if we fail
            except OSError as exc:
                raise storage_error("lock", self.path, exc) from None
            if not held:
                raise LockTimeoutError(
                    f"could not lock {self.path} within {self.timeout:g} s; nothing was changed, retry"
                ) from None
        except OSError as exc:
            os.close(fd)
            raise storage_error("lock", self.path, exc) from None
        self._fd = fd
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.release()

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the last descriptor releases the flock
            self._fd = None
