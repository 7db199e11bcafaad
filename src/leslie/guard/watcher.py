"""The write guard's watcher: inotify tells what changed under a repository's protected files, so that a
shell tool call's hooks need not stat every one of them (`leslie.guard.tripwire`, docs/design.md "The watcher").

It lives in a resident process that the warm process manages (`leslie.server.watcher` passes `{"guard": ...}`
requests here); the hooks only ask it. One `RepoWatch` per repository, each with an inotify instance of its own
(watchdog's `InotifyFD`, the layer under its observers) watching:

- every folder of the protected set (`leslie.guard.snapshots`: `threads/`, `objectives/`, `templates/`), and
  `.leslie/` itself for the protected files and folders directly in it;
- every regular file of it, by its inode: a write through a hard link made elsewhere reaches no folder's
  watch, only the file's own;
- a private folder of its own for the barrier files (`mkdtemp` in the watcher process's private runtime
  folder): never in the repository or its machine state, so asking about a repository leaves nothing there.
  (`leslie list` and `leslie find` ask too, `ops/watched.py`: a guard folder made by a read would arm the
  guard's log of leslie's own writes, `store.mutations.record_leslie_write`.)

Each event under the protected set gets a sequence number; `changed` keeps, per path (relative to
`.leslie/`), the last one. A request names a mark `[epoch, seq]` (what its repository's manifest was last
known to match) and gets back every path changed after it, and a new mark. Before answering, the watcher
catches up: it creates a barrier file in its barrier folder and waits for that file's own event; one inotify
queue is ordered, so every write made before the request was read by then.

Whatever could make an answer incomplete makes it "no answer" instead, and the hook sweeps as it did
without a watcher: a mark of another epoch (another watcher, another server), a watch still being set up, a
queue overflow, the watch limit (ours: `watch_limit()`; the kernel's: ENOSPC), a folder that cannot be
watched, a folder moved (inotify cannot follow it reliably), `.leslie/` or the barrier folder replaced, more
than `MAX_CHANGED` paths changed, a mark older than the changes still remembered, a barrier not seen within
`BARRIER_TIMEOUT`. Nothing here follows a symbolic link (lstat walk, `IN_DONT_FOLLOW`, `IN_ONLYDIR`). A
repository nobody asked about for `IDLE_SECONDS` stops being watched; one too big to watch is not tried again
for `RETRY_SECONDS`.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import tempfile
import threading
import time
from typing import Any

from leslie.guard import snapshots

# inotify(7) constants (the same values as watchdog's InotifyConstants, which is imported only when watching)
IN_MODIFY = 0x2
IN_ATTRIB = 0x4
IN_CLOSE_WRITE = 0x8
IN_MOVED_FROM = 0x40
IN_MOVED_TO = 0x80
IN_CREATE = 0x100
IN_DELETE = 0x200
IN_DELETE_SELF = 0x400
IN_MOVE_SELF = 0x800
IN_Q_OVERFLOW = 0x4000
IN_ONLYDIR = 0x01000000
IN_DONT_FOLLOW = 0x02000000
IN_EXCL_UNLINK = 0x04000000
IN_ISDIR = 0x40000000
IN_MOVE = IN_MOVED_FROM | IN_MOVED_TO

FOLDER_MASK = (IN_MODIFY | IN_ATTRIB | IN_CLOSE_WRITE | IN_MOVE | IN_CREATE | IN_DELETE | IN_DELETE_SELF
               | IN_MOVE_SELF | IN_ONLYDIR | IN_DONT_FOLLOW | IN_EXCL_UNLINK)
# CLOSE_WRITE: a write through a memory mapping shows no MODIFY, only the close of the last reference
FILE_MASK = IN_MODIFY | IN_ATTRIB | IN_CLOSE_WRITE | IN_DONT_FOLLOW
BARRIER_MASK = IN_CREATE | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR | IN_DONT_FOLLOW

BARRIER_PREFIX = "watch-barrier-"
BARRIER_TIMEOUT = 1.0  # seconds an answer waits for its barrier's event, then says "sweep"
MAX_WATCHES = 1 << 16  # inotify watches of this process, all repositories together (see watch_limit)
MAX_REPOSITORIES = 16  # each takes one inotify instance (the kernel's default is 128 per user)
MAX_CHANGED = 50_000  # changed paths remembered per repository; more, and it starts again
MAX_ANSWER = 4_000  # changed paths sent in one answer; more, and the answer is "everything"
IDLE_SECONDS = 600.0  # a repository nobody asked about for this long is no longer watched
RETRY_SECONDS = 300.0  # a repository that could not be watched (too big, limit) is not tried again before
REAPER_SECONDS = 30.0


class _Doubt(Exception):
    """The watch can no longer tell every change: stop it; the hooks sweep."""


def _inotify() -> Any:
    """A watchdog `InotifyFD` (one inotify instance and its reading thread) that takes a watch asked for
    again silently: a file renamed into place, or a folder walked twice while it appears, is the same inode
    with the same callback (watchdog warns then)."""
    from watchdog.observers.inotify_c import InotifyFD

    class Quiet(InotifyFD):
        def add_callback(self, path: bytes, mask: Any, callback: Any, id_: Any) -> Any:
            with self._lock:
                watch = self._get_or_create_watch(path, mask)
                watch.callbacks[id_] = callback
                return watch.wd

    return Quiet()


# File systems whose files can change without this kernel seeing it (another machine, a FUSE daemon's own
# backend): inotify stays silent there, so a watch could vouch for what it never saw.
_UNSEEN = frozenset({"nfs", "nfs4", "cifs", "smb3", "smbfs", "9p", "afs", "ceph", "glusterfs", "lustre", "gpfs",
                     "ocfs2", "gfs2", "virtiofs", "vboxsf", "fuse", "fuseblk"})


def _changes_unseen(kind: str) -> bool:
    return kind in _UNSEEN or kind.startswith(("fuse.", "fuseblk."))


def file_system_type(path: str) -> str | None:
    """The type of the file system `path` is on (`/proc/self/mountinfo`, matched by device number), None when
    it cannot be told (not Linux, a device no mount names, as a btrfs subvolume's)."""
    try:
        device = os.stat(path).st_dev
        with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as mounts:
            lines = mounts.read().splitlines()
    except OSError:
        return None
    wanted = f"{os.major(device)}:{os.minor(device)}"
    for line in lines:
        fields = line.split()
        if len(fields) > 2 and fields[2] == wanted and "-" in fields[6:]:
            after = fields.index("-", 6) + 1
            return fields[after] if after < len(fields) else None
    return None


def watch_limit() -> int:
    """How many inotify watches this process may hold: `MAX_WATCHES`, and at most half of the kernel's
    per-user limit (editors and other watchers share it)."""
    try:
        with open("/proc/sys/fs/inotify/max_user_watches", "rb") as handle:
            kernel = int(handle.read().strip())
    except (OSError, ValueError):
        kernel = 8192
    return max(0, min(MAX_WATCHES, kernel // 2))


class RepoWatch:
    """The watches of one repository, and the paths changed under its protected set."""

    def __init__(self, root: str, limit: int, barriers: str | None = None) -> None:
        self.root = root
        self.base = os.path.join(root, ".leslie")
        self.barriers_in = barriers  # where the barrier folder is made (None: the system's temporary folder)
        self.barrier_dir = ""
        self.epoch = os.urandom(8).hex()  # marks of any other watch (or server) are unknown here
        self.limit = limit
        self.lock = threading.Condition(threading.RLock())
        self.seq = 0
        self.floor = 0  # `changed` holds every path changed after this sequence number
        self.changed: dict[str, int] = {}
        self.folders: dict[int, str] = {}  # watch descriptor -> folder, relative to .leslie/
        # watch descriptor -> the paths of one inode: one, or more for hard links (a tuple: 48 bytes, a set 216;
        # at 10,000 threads, 30,000 files)
        self.files: dict[int, tuple[str, ...]] = {}
        self.file_wd: dict[str, int] = {}
        self.top_wd = -1
        self.barrier_wd = -1
        self.identity: list[tuple[str, int, int]] = []
        self.ready = False
        self.broken: str | None = None
        self.barriers = 0
        self.reached = 0
        self.last_used = time.monotonic()
        self.fd: Any = None
        self.barrier_fd = -1

    # -- setting up, and stopping ------------------------------------------------------------------------

    def start(self) -> None:
        """Set the watches up in a thread of their own (a big repository takes a while): until it is ready,
        the hooks sweep."""
        threading.Thread(target=self._establish, name=f"leslie-watch-{self.epoch}", daemon=True).start()

    def _establish(self) -> None:
        try:
            with self.lock:  # `close` may have run already (a watch dropped while it was being set up)
                if self.broken is not None:
                    return
                self.fd = _inotify()
                self.fd.start()
                self.barrier_dir = tempfile.mkdtemp(prefix="leslie-barrier-", dir=self.barriers_in)  # 0700
                # Barrier files are made through this descriptor: never in a folder a link put in its place.
                self.barrier_fd = os.open(self.barrier_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
            self.barrier_wd = self._add(self.barrier_dir, BARRIER_MASK)
            self.top_wd = self._add(self.base, FOLDER_MASK)
            for path in (self.base, self.barrier_dir):
                st = os.lstat(path)
                self.identity.append((path, st.st_dev, st.st_ino))
            self._refuse_if_unwatchable()
            for name in snapshots.PROTECTED_FOLDERS:
                if self._is_folder(os.path.join(self.base, name)):
                    self._add_tree(name)
            for name in snapshots.PROTECTED_FILES:
                self._watch_file(name)
            with self.lock:
                self.ready = True
                self.lock.notify_all()
        except _Doubt as doubt:
            self.fail(str(doubt))
        except Exception as exc:  # no inotify here, an unreadable folder...: the hooks sweep
            self.fail(f"could not watch: {type(exc).__name__}: {exc}")

    def _refuse_if_unwatchable(self) -> None:
        """Refuse at once a repository on a file system whose changes inotify may not see (`_UNSEEN`), and one
        whose threads alone need more watches than the limit (each entry of `threads/` is at least one): at
        100,000 threads, one listing instead of adding and dropping tens of thousands of watches whenever
        `RETRY_SECONDS` have passed."""
        kind = file_system_type(self.base)
        if kind is not None and _changes_unseen(kind):
            raise _Doubt(f"cannot watch a file system of type {kind} (inotify does not see changes made elsewhere)")
        try:
            with os.scandir(os.path.join(self.base, "threads")) as entries:
                threads = sum(1 for _ in entries)
        except OSError:
            return
        if self.count() + threads > self.limit:
            raise _Doubt(f"more than {self.limit} entries to watch")

    def fail(self, why: str) -> None:
        """Stop trusting this watch (the next request drops it)."""
        with self.lock:
            if self.broken is None:
                self.broken = why
            self.lock.notify_all()

    def close(self) -> None:
        """Remove every watch and stop the reading thread."""
        with self.lock:
            self.fail("stopped")
            barrier_fd, self.barrier_fd = self.barrier_fd, -1
            fd, self.fd = self.fd, None
        if barrier_fd >= 0:
            os.close(barrier_fd)
        if self.barrier_dir:
            shutil.rmtree(self.barrier_dir, ignore_errors=True)
        if fd is not None:
            with contextlib.suppress(Exception):  # already closed on the kernel's side: nothing left to free
                fd.stop()

    def count(self) -> int:
        return len(self.folders) + len(self.files) + 2

    def same_tree(self) -> bool:
        """`.leslie/` and the barrier folder are still the ones watched (a repository moved, replaced, or
        its state folder removed, gives no event)."""
        for path, dev, ino in self.identity:
            try:
                st = os.lstat(path)
            except OSError:
                return False
            if (st.st_dev, st.st_ino) != (dev, ino) or not stat.S_ISDIR(st.st_mode):
                return False
        return True

    # -- adding watches ----------------------------------------------------------------------------------

    @staticmethod
    def _is_folder(path: str) -> bool:
        try:
            return stat.S_ISDIR(os.lstat(path).st_mode)
        except OSError:
            return False

    def _add(self, path: str, mask: int) -> int:
        """One inotify watch; its descriptor, -1 when `path` is gone or not of the kind asked for."""
        import errno

        if self.broken is not None or self.fd is None:  # dropped meanwhile: stop walking
            raise _Doubt(self.broken or "stopped")
        if self.count() >= self.limit:
            raise _Doubt(f"more than {self.limit} entries to watch")
        try:
            wd = int(self.fd.add_callback(os.fsencode(path), mask, self, 1))
        except OSError as exc:
            if exc.errno in (errno.ENOENT, errno.ENOTDIR, errno.ELOOP):
                return -1  # gone or replaced meanwhile: its folder's event says so
            raise _Doubt(f"cannot watch {path}: {exc.strerror}") from None
        if wd < 0:  # watchdog does not raise for EACCES
            raise _Doubt(f"cannot watch {path}: permission denied")
        return wd

    def _add_tree(self, rel: str) -> None:
        """Watch the folder `rel` and everything in it (lstat walk: links are never followed)."""
        stack = [rel]
        while stack:
            folder = stack.pop()
            path = os.path.join(self.base, folder)
            wd = self._add(path, FOLDER_MASK)
            if wd < 0:
                continue
            with self.lock:
                self.folders[wd] = folder
            try:
                listing = os.scandir(path)
            except OSError:
                continue
            with listing:
                for item in listing:
                    child = f"{folder}/{item.name}"
                    if item.is_dir(follow_symlinks=False):
                        stack.append(child)
                    elif item.is_file(follow_symlinks=False):
                        self._watch_file(child)

    def _watch_file(self, rel: str) -> None:
        path = os.path.join(self.base, rel)
        try:
            if not stat.S_ISREG(os.lstat(path).st_mode):
                return
        except OSError:
            return
        wd = self._add(path, FILE_MASK)
        if wd >= 0:
            with self.lock:
                paths = self.files.get(wd, ())
                if rel not in paths:
                    self.files[wd] = (*paths, rel)
                self.file_wd[rel] = wd

    def _forget_file(self, rel: str) -> None:
        """`rel` was renamed or deleted: its inode's events no longer concern that path."""
        with self.lock:
            wd = self.file_wd.pop(rel, None)
            if wd is not None and wd in self.files:
                self.files[wd] = tuple(path for path in self.files[wd] if path != rel)

    # -- events (on the InotifyFD's thread, in the queue's order) -------------------------------------------

    def on_event(self, event: Any) -> None:
        """watchdog's callback for one inotify event."""
        try:
            self._on_event(int(event.wd), int(event.mask), os.fsdecode(event.name))
        except _Doubt as doubt:
            self.fail(str(doubt))
        except Exception as exc:
            self.fail(f"internal error: {type(exc).__name__}: {exc}")

    def on_watch_deleted(self, wd: int) -> None:
        """watchdog's callback: the watch `wd` is gone (its folder or file was deleted)."""
        if wd in (self.top_wd, self.barrier_wd):
            self.fail(".leslie/ or the barrier folder is no longer watched")
        with self.lock:
            self.folders.pop(wd, None)
            for rel in self.files.pop(wd, ()):
                if self.file_wd.get(rel) == wd:
                    del self.file_wd[rel]

    def on_queue_overflow(self) -> None:
        """watchdog's callback: the kernel dropped events."""
        self.fail("the inotify queue overflowed")

    def _note(self, rel: str) -> None:
        with self.lock:
            self.seq += 1
            self.changed[rel] = self.seq
            if len(self.changed) > MAX_CHANGED:
                raise _Doubt(f"more than {MAX_CHANGED} paths changed")

    def _on_event(self, wd: int, mask: int, name: str) -> None:
        if self.broken is not None:
            return
        if wd == self.barrier_wd:
            if mask & (IN_DELETE_SELF | IN_MOVE_SELF):  # a new folder there may even get the same inode
                raise _Doubt("the barrier folder was removed or moved")
            if mask & IN_CREATE and name.startswith(BARRIER_PREFIX + self.epoch + "-"):
                with self.lock:
                    self.reached = max(self.reached, int(name.rsplit("-", 1)[1]))
                    self.lock.notify_all()
            return
        if wd == self.top_wd:
            if mask & (IN_DELETE_SELF | IN_MOVE_SELF):
                raise _Doubt(".leslie/ was removed or moved")
            if name in snapshots.PROTECTED_FOLDERS or name in snapshots.PROTECTED_FILES:
                self._changed_in(name, mask)
            return
        folder = self.folders.get(wd)
        if folder is not None:
            if mask & IN_MOVE_SELF:
                raise _Doubt(f"the folder {folder} was moved")
            if name:
                self._changed_in(f"{folder}/{name}", mask)
            elif not mask & IN_DELETE_SELF:
                self._note(folder)
            return
        paths = self.files.get(wd)
        for rel in sorted(paths or ()):
            self._note(rel)

    def _changed_in(self, rel: str, mask: int) -> None:
        """An entry of a watched folder changed: note it, and watch what appeared."""
        if mask & IN_ISDIR and mask & IN_MOVE:
            # Moving a folder keeps its watches under their old paths; renamed in or out, its content was
            # not seen arrive or leave. Rare under .leslie/ (leslie itself never moves a folder there).
            raise _Doubt(f"a folder was moved: {rel}")
        self._note(rel)
        if mask & IN_CREATE and mask & IN_ISDIR:
            self._add_tree(rel)
        elif mask & (IN_CREATE | IN_MOVED_TO) and not mask & IN_ISDIR:
            self._forget_file(rel)  # replaced by a rename: the old inode is no longer at this path
            self._watch_file(rel)
        elif mask & (IN_DELETE | IN_MOVED_FROM) and not mask & IN_ISDIR:
            self._forget_file(rel)

    # -- answering ---------------------------------------------------------------------------------------

    def barrier(self, timeout: float = BARRIER_TIMEOUT) -> int | None:
        """Catch up with every event queued before now; the sequence number reached, None on doubt."""
        with self.lock:
            self.barriers += 1
            number = self.barriers
        name = f"{BARRIER_PREFIX}{self.epoch}-{number}"
        try:
            fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600, dir_fd=self.barrier_fd)
            os.close(fd)
            os.unlink(name, dir_fd=self.barrier_fd)
        except OSError as exc:
            self.fail(f"cannot write the barrier file: {exc.strerror}")
            return None
        deadline = time.monotonic() + timeout
        with self.lock:
            while self.reached < number and self.broken is None:
                left = deadline - time.monotonic()
                if left <= 0:  # lost, or far behind: this answer is "sweep", and the next watch starts afresh
                    self.fail("the watch did not catch up in time")
                    return None
                self.lock.wait(left)
            return self.seq if self.broken is None else None

    def changed_since(self, since: int) -> list[str] | None:
        """The paths changed after `since` (sorted); None when too many to send, or when `since` is older than
        what is still remembered (several askers keep marks of their own: the guard's hooks, `list`, `find`)."""
        with self.lock:
            if since < self.floor:
                return None
            found = [rel for rel, seq in self.changed.items() if seq > since]
            if len(self.changed) > MAX_ANSWER:  # the entries up to `since` are forgotten: older marks get None
                self.changed = {rel: seq for rel, seq in self.changed.items() if seq > since}
                self.floor = since
        return sorted(found) if len(found) <= MAX_ANSWER else None


# -- the registry of watched repositories (the server's side) ---------------------------------------------

_repositories: dict[str, RepoWatch] = {}
_refused: dict[str, tuple[float, str]] = {}
_registry = threading.Lock()
_reaper: list[threading.Thread] = []


def _drop(root: str, watch: RepoWatch) -> None:
    watch.close()
    if _repositories.get(root) is watch:
        del _repositories[root]
    why = watch.broken or ""
    if "entries to watch" in why or "cannot watch" in why or "could not watch" in why:
        _refused[root] = (time.monotonic() + RETRY_SECONDS, why)


def expire_idle(now: float | None = None) -> None:
    """Stop watching repositories nobody asked about for `IDLE_SECONDS`, and broken ones."""
    now = time.monotonic() if now is None else now
    with _registry:
        for root, watch in list(_repositories.items()):
            if watch.broken is not None or now - watch.last_used > IDLE_SECONDS:
                _drop(root, watch)


def _reap() -> None:
    while True:
        time.sleep(REAPER_SECONDS)
        expire_idle()


def _valid_root(root: object) -> bool:
    if not (isinstance(root, str) and os.path.isabs(root)):
        return False
    try:
        return stat.S_ISDIR(os.lstat(os.path.join(root, ".leslie")).st_mode)
    except OSError:
        return False


def answer(doc: dict[str, object], barriers: str | None = None) -> dict[str, object]:
    """The server's answer to `{"guard": "check", "root": ..., "since": [epoch, seq] | null}`:
    `{"mark": [epoch, seq], "changed": [paths] | null}` (null: unknown, sweep everything), or
    `{"state": "starting" | "off", "why": ...}` (no mark: sweep, as without a watcher). A new watch makes its
    barrier folder in `barriers` (the server's private folder; None: the system's temporary folder)."""
    root = doc.get("root")
    if doc.get("guard") != "check" or not _valid_root(root):
        return {"error": "bad request"}
    assert isinstance(root, str)
    root = os.path.normpath(root)
    with _registry:
        if not _reaper:
            _reaper.append(threading.Thread(target=_reap, name="leslie-watch-reaper", daemon=True))
            _reaper[0].start()
        watch = _repositories.get(root)
        if watch is not None and (watch.broken is not None or (watch.ready and not watch.same_tree())):
            _drop(root, watch)
            watch = None
        if watch is None:
            until, why = _refused.get(root, (0.0, ""))
            if time.monotonic() < until:
                return {"state": "off", "why": why}
            if len(_repositories) >= MAX_REPOSITORIES:
                return {"state": "off", "why": f"already watching {MAX_REPOSITORIES} repositories"}
            used = sum(w.count() for w in _repositories.values())
            watch = RepoWatch(root, watch_limit() - used, barriers)
            _repositories[root] = watch
            watch.start()
            return {"state": "starting"}
        watch.last_used = time.monotonic()
        if not watch.ready:
            return {"state": "starting"}
        seq = watch.barrier()  # still holding the registry: the reaper cannot close this watch meanwhile
        if seq is None:
            return {"state": "off", "why": watch.broken or "the watch did not catch up in time"}
        since = doc.get("since")
        changed = None
        if isinstance(since, list) and len(since) == 2 and since[0] == watch.epoch and type(since[1]) is int \
                and 0 <= since[1] <= seq:
            changed = watch.changed_since(since[1])
        return {"mark": [watch.epoch, seq], "changed": changed}


def stop_all() -> None:
    """Stop every watch (the server is exiting, or a test ends)."""
    with _registry:
        for root, watch in list(_repositories.items()):
            _drop(root, watch)
        _refused.clear()
