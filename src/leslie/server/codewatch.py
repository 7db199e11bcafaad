"""Whether the code a warm process loaded is still the code on disk (SPEC §12: an edited installed copy is never
served by the old process).

The warm process asks before every fork. Comparing each loaded file with its stat signature
(`code_changed`, ~150 `stat` calls) took ~0.5-0.7 ms of every command's path. So on Linux a `CodeWatch` also
holds an inotify watch on each folder of those files, without a thread: before every fork it reads the watch
without waiting, and compares the files only when something happened in one of those folders since the last
look. An edit, a copy, a move or a deletion is queued on the watch by the system call that makes it, before any
later command can ask, so no change is missed; what changed nothing (an editor's swap file beside the code) costs
one comparison. Without inotify (another platform, no watch left) every request compares the files, as before.
"""

from __future__ import annotations

import contextlib
import os

from leslie.version import Signature


def code_changed(signature: Signature) -> bool:
    """True when a file of `signature` is gone or differs (one `stat` per file). A file added since does not
    count: no loaded code runs it unless a file that does changes too."""
    for path, inode, size, mtime in signature:
        try:
            st = os.stat(path, follow_symlinks=False)
        except OSError:
            return True
        if (st.st_ino, st.st_size, st.st_mtime_ns) != (inode, size, mtime):
            return True
    return False


class CodeWatch:
    """The loaded code's signature, and an inotify watch on its folders (`fd`, None without one)."""

    def __init__(self, signature: Signature) -> None:
        self.signature = signature
        self.fd = watch_folders(sorted({os.path.dirname(path) for path, *_ in signature}))
        self.looked = False  # the first look compares: the signature was taken before the watch began

    def changed(self) -> bool:
        """Whether the code on disk differs from the signature: compared when the watch saw something happen
        in the code's folders since the last look, on the first look, and on every look without a watch."""
        if self.fd is not None and self.looked and not self._events():
            return False
        self.looked = True
        return code_changed(self.signature)

    def _events(self) -> bool:
        """Whether any event came since the last look (all of them read now, never waiting)."""
        assert self.fd is not None
        came = False
        while True:
            try:
                if not os.read(self.fd, 65536):
                    return came
            except BlockingIOError:
                return came
            except OSError:  # a watch that cannot be read can no longer vouch: compare every time from now on
                self.close()
                return True
            came = True

    def close(self) -> None:
        if self.fd is not None:
            with contextlib.suppress(OSError):
                os.close(self.fd)
            self.fd = None


def watch_folders(folders: list[str]) -> int | None:
    """A non-blocking inotify descriptor watching each of `folders` (links never followed); None where there is
    no inotify (watchdog's binding to it fails to load) or a folder cannot be watched."""
    try:
        from watchdog.observers.inotify_c import InotifyConstants as In
        from watchdog.observers.inotify_c import inotify_add_watch, inotify_init
    except Exception:  # not Linux, a libc without inotify: watchdog refuses to load its binding
        return None
    # What may change a folder's files: a write in place, a name given or taken (a file put in place, moved
    # away, made, deleted), the folder itself moved or deleted.
    mask = (In.IN_MODIFY | In.IN_ATTRIB | In.IN_CLOSE_WRITE | In.IN_MOVE | In.IN_CREATE | In.IN_DELETE
            | In.IN_DELETE_SELF | In.IN_MOVE_SELF | In.IN_ONLYDIR | In.IN_DONT_FOLLOW)
    fd = inotify_init()
    if fd < 0:
        return None
    os.set_blocking(fd, False)
    os.set_inheritable(fd, False)
    if all(inotify_add_watch(fd, os.fsencode(folder), mask) >= 0 for folder in folders):
        return fd
    os.close(fd)  # a folder that cannot be watched (gone, no watch left): no watch at all
    return None
