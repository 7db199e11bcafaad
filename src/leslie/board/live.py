"""Live updates: a watchdog observer on `.leslie/` (and, in a git work tree, on the agent sessions in the machine
state, `.git/leslie/sessions/`) that counts changes; the page's event stream follows the count.

Only a counter crosses from the observer's thread to the server's loop, so nothing else is shared. Changes that
change nothing on the board are ignored: rendered-block caches (`state/contexts/`), locks, temporary files of
atomic writes, and plain reads.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from typing import Any

from leslie.store.fsio import TEMP_SUFFIX

_CHANGES = frozenset({"created", "modified", "moved", "deleted", "closed"})
_IGNORED_DIRS = (os.sep + "contexts" + os.sep,)


class ChangeCounter:
    """`generation` grows by one for each change that matters under the watched folder; `changed_at` says when."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.generation = 0
        self.changed_at = 0.0

    def bump(self) -> None:
        """Count one change (called from the observer's thread)."""
        with self._lock:
            self.generation += 1
            self.changed_at = time.monotonic()

    def read(self) -> tuple[int, float]:
        """The generation and the time of the last change."""
        with self._lock:
            return self.generation, self.changed_at


def matters(path: str) -> bool:
    """Whether a change at `path` can change what the board shows."""
    name = os.path.basename(path)
    return not (name.endswith((TEMP_SUFFIX, ".lock")) or any(part in path for part in _IGNORED_DIRS))


def session_matters(sessions: str) -> Callable[[str], bool]:
    """Whether a change at a path of the machine state can change what the board shows: a session's state or
    log in `sessions` (not the guard's records, nor a session's lock or seen record)."""
    prefix = sessions.rstrip(os.sep) + os.sep
    return lambda path: path.startswith(prefix) and path.endswith((".json", ".jsonl")) and matters(path)


class LiveWatch:
    """A running observer of one `.leslie/` folder (and of `sessions`, the agent sessions' folder, when it lies
    outside it) feeding a ChangeCounter; `stop()` ends it."""

    def __init__(self, folder: str, counter: ChangeCounter, *, polling: bool = False,
                 sessions: str | None = None) -> None:
        """`sessions`: the agent sessions' folder; watched (or, until it exists, the machine state folder that
        will hold it) when it lies outside `folder`, as it does in a git work tree (`.git/leslie/sessions/`)."""
        from watchdog.events import FileSystemEvent, FileSystemEventHandler
        from watchdog.observers import Observer
        from watchdog.observers.polling import PollingObserver

        class Handler(FileSystemEventHandler):
            def __init__(self, keep: Any) -> None:
                self.keep = keep

            def dispatch(self, event: FileSystemEvent) -> None:
                if event.is_directory and event.event_type == "modified":
                    return  # a folder's own mtime: what changed in it comes as its own event
                paths = [os.fsdecode(event.src_path), os.fsdecode(event.dest_path or "")]
                if event.event_type in _CHANGES and any(p and self.keep(p) for p in paths):
                    counter.bump()

        watched: list[tuple[str, Callable[[str], bool]]] = [(folder, matters)]
        if sessions is not None and not os.path.realpath(sessions).startswith(os.path.realpath(folder) + os.sep):
            existing = next((f for f in (sessions, os.path.dirname(sessions)) if os.path.isdir(f)), None)
            if existing is not None:
                watched.append((existing, session_matters(sessions)))

        def start(observer: Any) -> Any:
            observer.daemon = True  # never keeps the process alive on its own
            for path, keep in watched:
                observer.schedule(Handler(keep), path, recursive=True)
            observer.start()
            return observer

        try:
            self._observer: Any = start(PollingObserver(timeout=1.0) if polling else Observer())
        except OSError:  # the kernel's inotify limits: poll instead (as `leslie watch` does)
            self._observer = start(PollingObserver(timeout=1.0))

    def stop(self) -> None:
        """Stop the observer; not waited for long (its threads are daemons, and its emitters wake only once a
        second to notice: Ctrl-C should not wait for that)."""
        self._observer.stop()
        self._observer.join(timeout=0.2)
