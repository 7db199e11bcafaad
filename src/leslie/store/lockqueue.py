"""The index lock, served in arrival order: a queue of waiters in front of the flock on `state/index.lock`.

Mutual exclusion is the flock on `state/index.lock` alone. Every writer queues here first, commands and the
guard's sweeps alike (`guard.tripwire.index_lock`): a sweep that took the flock directly would overtake the
queue, and the writers behind it would wait once more. The queue only decides who asks for the flock next,
so that 16 busy writers wait their turn instead of racing: when a flock is released Linux wakes every
waiter and the first to run wins, and a writer that asks again right after releasing often wins again
(issue 18 measured waits of 13 s with the old polling lock; docs/design.md, "The index lock", has the
figures).

    state/lock-queue/              flocked for a few microseconds while one writer takes its number
    state/lock-queue/<number>      one empty file per writer, flocked by it while it waits and holds

A writer takes a number (its wall-clock time in ns, above every number already there) and creates its file
under the folder's flock, then waits for the flock of the file just ahead of its own. When that is granted,
the writer ahead has left, or died: the kernel drops a dead process's flocks, so a crash never blocks the
queue; its file is removed by whoever is behind it. With nobody ahead any more, the writer takes the index
flock itself. Everything here is best effort for order, never for safety: a lost or planted file at worst
lets two writers race for the index flock, which still admits one at a time.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import time

from leslie.errors import CorruptStateError, LockTimeoutError
from leslie.store.fsio import LINKED, FileLock, refuse_links, storage_error, wait_flock

QUEUE = "lock-queue"
_WIDTH = 20  # digits of a number: names sort like the numbers they hold


def _is_number(name: str) -> bool:
    return len(name) == _WIDTH and name.isdigit()


def _flock(fd: int, deadline: float) -> bool:
    """An exclusive flock on `fd` by `deadline` (time.monotonic); on False or an error `fd` is closed."""
    import fcntl

    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return wait_flock(fd, max(0.0, deadline - time.monotonic()))
    except OSError:
        os.close(fd)
        raise


class QueuedLock:
    """The index lock: first a place in `state/lock-queue/`, then the flock on `lock_path` (see the module)."""

    def __init__(self, lock_path: str, timeout: float) -> None:
        self.lock_path = lock_path
        self.timeout = timeout
        self.folder = os.path.join(os.path.dirname(lock_path), QUEUE)
        self._entry: str | None = None
        self._entry_fd: int | None = None
        self._lock: FileLock | None = None

    def acquire(self) -> None:
        """Wait for our turn, then for the index flock; LockTimeoutError after `timeout` seconds in all."""
        deadline = time.monotonic() + min(self.timeout, 1e9)
        try:
            self._join(deadline)
            self._wait_turn(deadline)
            lock = FileLock(self.lock_path, max(0.0, deadline - time.monotonic()))
            lock.__enter__()
            self._lock = lock
        except BaseException:
            self._leave()
            raise

    def __enter__(self) -> QueuedLock:
        self.acquire()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.release()

    def release(self) -> None:
        """Let go of the index flock, then of our place: the writer behind us is woken by the second."""
        try:
            if self._lock is not None:
                self._lock.__exit__(None, None, None)
                self._lock = None
        finally:
            self._leave()

    def _join(self, deadline: float) -> None:
        """Take a number and create our flocked file, under the queue folder's own flock."""
        for _attempt in range(50):
            if self._try_join(deadline):
                return
            # the folder was removed under us by a writer leaving an empty queue: made again
        raise storage_error("lock", self.folder, OSError(errno.ENOENT, "removed again and again"))

    def _try_join(self, deadline: float) -> bool:
        import fcntl

        try:
            refuse_links(self.folder)
            os.makedirs(self.folder, exist_ok=True)
            door = os.open(self.folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except FileNotFoundError:
            return False
        except FileExistsError as exc:
            # `makedirs(exist_ok=True)` raises this when the folder existed at its `mkdir` but was gone at its
            # check just after: a writer leaving an empty queue removed it in between. Join again; only a
            # file that is not a folder in its place is an error.
            if os.path.isdir(self.folder) or not os.path.lexists(self.folder):
                return False
            raise storage_error("lock", self.lock_path, exc) from None
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise CorruptStateError(self.folder, LINKED) from None
            raise storage_error("lock", self.lock_path, exc) from None  # as before the queue: `state` a file...
        try:
            held = _flock(door, deadline)  # `door` is closed for us on failure
        except OSError as exc:
            raise storage_error("lock", self.lock_path, exc) from None
        if not held:
            raise self._timeout()
        try:
            taken = [int(name) for name in os.listdir(self.folder) if _is_number(name)]
            number = max(time.time_ns(), max(taken, default=0) + 1)
            while True:
                path = os.path.join(self.folder, f"{number:0{_WIDTH}d}")
                try:
                    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
                    break
                except FileExistsError:
                    number += 1  # a file nobody listed (planted, or a name that is not a number's)
            self._entry = path
            self._entry_fd = fd
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # a new file: free
            return True
        except FileNotFoundError:
            return False
        except OSError as exc:
            raise storage_error("lock", self.lock_path, exc) from None
        finally:
            os.close(door)

    def _wait_turn(self, deadline: float) -> None:
        """Wait until no file ahead of ours is left, removing those whose writers died.

        One listing is enough: a writer that joins later takes a higher number, so nobody new gets ahead of
        us. We wait for each file ahead in turn, nearest first (the writer just ahead leaves only after all
        ahead of it), so the whole wait is linear in the queue's length, and the deadline is checked at every
        file, free ones included (20,000 planted files once took longer than any timeout, quadratically).
        """
        assert self._entry is not None
        mine = os.path.basename(self._entry)
        try:
            ahead = sorted(name for name in os.listdir(self.folder) if _is_number(name) and name < mine)
        except OSError as exc:
            raise storage_error("lock", self.lock_path, exc) from None
        for name in reversed(ahead):
            if time.monotonic() > deadline:
                raise self._timeout()
            path = os.path.join(self.folder, name)
            try:
                fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
            except OSError:
                continue  # it left between the listing and now, or it is no waiter's file (a link)
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                os.close(fd)  # a folder or a FIFO someone planted: nobody waits on it
                continue
            try:
                held = _flock(fd, deadline)  # `fd` is closed for us on failure
            except OSError as exc:
                raise storage_error("lock", self.lock_path, exc) from None
            if not held:
                raise self._timeout()
            with contextlib.suppress(OSError):  # its writer has gone: a file still there is a dead writer's
                os.unlink(path)
            os.close(fd)

    def _leave(self) -> None:
        """Remove our file, then close it: removed first, so nobody behind takes it for a dead writer's.

        The folder goes too when it is left empty: a command that is refused changes nothing in `.leslie/`.
        A writer that opened it to join meanwhile finds it gone and makes it again (`_join`).
        """
        if self._entry is not None:
            with contextlib.suppress(OSError):
                os.unlink(self._entry)
            with contextlib.suppress(OSError):  # not empty: others are waiting
                os.rmdir(self.folder)
            self._entry = None
        if self._entry_fd is not None:
            os.close(self._entry_fd)
            self._entry_fd = None

    def _timeout(self) -> LockTimeoutError:
        return LockTimeoutError(f"could not lock {self.lock_path} within {self.timeout:g} s; nothing was changed, "
                                "retry")
