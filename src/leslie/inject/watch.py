"""`leslie watch`: keep the index in step with hand edits and git, and report writes into closed threads.

File-system events are only hints. They are debounced, and a batch of them triggers a full re-read of the
`thread.json` files; the index is rebuilt and written (under the lock, atomically) only when its bytes
differ. A periodic rescan catches whatever the events missed (a polling observer can miss an edit within
one mtime tick; inotify drops events when its queue overflows). Writes into the assets of threads that are
`done`, `archived` or `deleted` are reported, never blocked.

Events go to an `emit` callback as dicts with an `event` key:
`started`, `index_updated`, `contexts_refreshed`, `write_to_closed_thread`, `corrupt_file`,
`observer_fallback`, `observer_restarted`, `error`, `stopped`. Cached rendered contexts (`state/contexts/`, see
`leslie.inject.injector`) are keyed by the stat signatures of their inputs, so a stale one is never served; after
each batch of changes the watcher re-renders the stale ones so the next prompt does not pay for it.
`Watcher.on_index_updated` is the hook point for anything else that wants to react to a new index.
"""

from __future__ import annotations

import errno
import hashlib
import os
import queue
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from leslie.errors import LeslieError, LockTimeoutError, NotFoundError
from leslie.store.files import acquire_index_lock, read_bytes, read_json
from leslie.store.fsio import INDEX_CAP, TEMP_SUFFIX, atomic_write, refuse_links
from leslie.store.jsonio import dumps_canonical
from leslie.store.relations import Index, build_index
from leslie.store.repository import Repository

CLOSED_STATUSES = ("done", "archived", "deleted")
WRITE_EVENTS = frozenset({"created", "modified", "moved", "closed"})
# Opening or reading a file (every sync reads every thread.json) and attribute changes change nothing.
CHANGE_EVENTS = WRITE_EVENTS | {"deleted"}
INOTIFY_LIMIT_ERRNOS = frozenset({errno.ENOSPC, errno.EMFILE, errno.ENFILE})
WATCH_LOCK_TIMEOUT = 5.0  # short: the watcher retries later rather than stall behind a long command
TICK = 0.1
POLL_INTERVAL = 1.0  # each poll stats every file under .leslie/: with 10,000 threads, 1 s is a fair price

Emit = Callable[[dict[str, Any]], None]


@dataclass(frozen=True)
class RawEvent:
    """One watchdog event reduced to what the watcher needs (paths as given by the observer)."""

    kind: str
    src: str
    dest: str
    is_directory: bool


def _schedule(observer: Any, sink: queue.Queue[RawEvent], folder: str) -> None:
    """Watch `folder` recursively; every event goes, reduced, to `sink` (the main loop does the work)."""
    from watchdog.events import FileSystemEvent, FileSystemEventHandler

    class Handler(FileSystemEventHandler):
        def dispatch(self, event: FileSystemEvent) -> None:
            sink.put(RawEvent(event.event_type, os.fsdecode(event.src_path), os.fsdecode(event.dest_path or ""),
                              event.is_directory))

    observer.schedule(Handler(), folder, recursive=True)


def _simulate_kernel_limit() -> None:
    """Test-only switch: `LESLIE_TEST_INOTIFY_ERROR=ENOSPC` (or EMFILE) fails the native observer's start
    the way an exhausted inotify limit does, which a test cannot provoke without disturbing the machine."""
    simulated = os.environ.get("LESLIE_TEST_INOTIFY_ERROR")
    if simulated:
        code = getattr(errno, simulated, errno.ENOSPC)
        raise OSError(code, f"simulated: {os.strerror(code)}")


def _diff(old: Index | None, new: Index) -> dict[str, list[str]]:
    before = old.threads if old is not None else {}
    after = new.threads
    changed = sorted(
        tid for tid in set(before) & set(after)
        if before[tid] != after[tid]
        or (old is not None and (old.references_to.get(tid) != new.references_to.get(tid)
                                or old.referenced_by.get(tid) != new.referenced_by.get(tid)))
    )
    return {"added": sorted(set(after) - set(before)), "removed": sorted(set(before) - set(after)),
            "changed": changed}


class Watcher:
    """The observer loop; `run()` blocks until `stop()` (also wired to SIGINT/SIGTERM) and returns 0."""

    def __init__(self, repo: Repository, emit: Emit, *, polling: bool = False, debounce: float = 0.2,
                 rescan: float = 30.0) -> None:
        self.repo = repo
        self.layout = repo.layout
        self.emit = emit
        self.polling = polling
        self.debounce = max(0.0, debounce)
        self.max_delay = max(1.0, 5 * self.debounce)  # a steady stream of events still gets synced
        self.rescan = rescan
        self.events: queue.Queue[RawEvent] = queue.Queue()
        self.on_index_updated: list[Callable[[Index], None]] = []
        self._stopping = False
        self._observer: Any = None
        self._last_written: str | None = None
        self._reported_corrupt: dict[str, str] = {}
        self._leslie = os.path.realpath(self.layout.leslie_dir)
        self._state = os.path.realpath(self.layout.state_dir)  # inside `.leslie/` only outside git
        self._threads = os.path.join(self._leslie, "threads")
        self._index = os.path.join(self._leslie, self.layout.index_path.name)

    # -- lifecycle ---------------------------------------------------------------------------------
    def stop(self, *_args: object) -> None:
        """Ask the loop to stop; safe in a signal handler (sets a flag, takes no lock)."""
        self._stopping = True

    def _event(self, name: str, **fields: Any) -> None:
        try:
            self.emit({"event": name, "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), **fields})
        except OSError:
            self.stop()  # nobody is listening any more (a closed pipe): stop cleanly

    def _start_observer(self) -> tuple[Any, str]:
        """A running observer on `.leslie/`: native, or polling when forced or the kernel limits say so."""
        from watchdog.observers import Observer
        from watchdog.observers.polling import PollingObserver

        if not self.polling:
            observer = Observer()
            try:
                _simulate_kernel_limit()
                _schedule(observer, self.events, self._leslie)
                observer.start()
                return observer, "native"
            except OSError as exc:
                if exc.errno not in INOTIFY_LIMIT_ERRNOS:
                    raise
                self.polling = True  # the limit will not go away by itself: stay on polling
                self._event("observer_fallback", mode="polling",
                            reason=f"native observer failed: {exc.strerror or exc}")
        observer = PollingObserver(timeout=POLL_INTERVAL)
        _schedule(observer, self.events, self._leslie)
        observer.start()
        return observer, "polling"

    @staticmethod
    def _stop_observer(observer: Any) -> None:
        try:
            observer.stop()
            observer.join(timeout=10)
        except RuntimeError:  # never started
            pass

    def _observer_healthy(self, observer: Any) -> bool:
        return bool(observer.is_alive()) and all(e.is_alive() for e in observer.emitters)

    def run(self) -> int:
        """Watch until stopped; always returns 0 (failures are reported as events)."""
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGINT, self.stop)
            signal.signal(signal.SIGTERM, self.stop)
        self._observer, mode = self._start_observer()
        try:
            # Observer first, so nothing between this sync and the loop goes unseen; `started` last, so a
            # client that waits for it knows the index was in step at that moment.
            synced = self.sync("startup")
            self.refresh_contexts()
            self._event("started", root=str(self.repo.root), mode=mode, debounce=self.debounce,
                        rescan=self.rescan)
            self._loop(needs_sync=not synced)
        finally:
            if self._observer is not None:
                self._stop_observer(self._observer)
            self._event("stopped")
        return 0

    def _loop(self, *, needs_sync: bool) -> None:
        closed_writes: dict[str, str] = {}
        first_pending: float | None = None
        last_event = 0.0
        next_rescan = time.monotonic() + self.rescan if self.rescan > 0 else float("inf")
        next_restart = 0.0
        while not self._stopping:
            try:
                raw = self.events.get(timeout=TICK)
            except queue.Empty:
                raw = None
            now = time.monotonic()
            if raw is not None and self._note(raw, closed_writes):
                needs_sync = needs_sync or self._wants_sync(raw)
                first_pending = first_pending if first_pending is not None else now
                last_event = now
            due = first_pending is not None and (
                now - last_event >= self.debounce or now - first_pending >= self.max_delay)
            if due:
                self._report_closed_writes(closed_writes)
                closed_writes.clear()
                if needs_sync:
                    needs_sync = not self.sync("events")
                    self.refresh_contexts()
                first_pending = None
            if now >= next_rescan:
                needs_sync = not self.sync("rescan") or needs_sync
                self.refresh_contexts()
                next_rescan = now + self.rescan
            elif needs_sync and first_pending is None and raw is None:
                first_pending = now  # a sync failed (lock busy): retry after the debounce
            if self._stopping:
                break
            if self._observer is not None and not self._observer_healthy(self._observer):
                self._observer_lost()
            if self._observer is None and now >= next_restart:
                next_restart = now + 0.5
                if self._restart_observer():
                    needs_sync, first_pending, last_event = True, now, now

    def _observer_lost(self) -> None:
        """The observer stopped: `.leslie/` vanished (a checkout of a branch without it), or the native
        observer died (e.g. a watch limit hit while adding a new folder), which polling replaces."""
        self._stop_observer(self._observer)
        self._observer = None
        if not self.layout.leslie_dir.is_dir():
            self._event("error", message=f"{self.layout.leslie_dir} is gone; waiting for it to come back")
        elif not self.polling:
            self.polling = True
            self._event("observer_fallback", mode="polling", reason="native observer stopped")

    def _restart_observer(self) -> bool:
        """Start watching again once `.leslie/` exists; True when the observer runs again."""
        if not self.layout.leslie_dir.is_dir():
            return False
        try:
            self._observer, mode = self._start_observer()
        except OSError as exc:
            self._event("error", message=f"cannot watch {self.layout.leslie_dir}: {exc.strerror or exc}")
            return False
        self._event("observer_restarted", mode=mode)
        return True

    # -- events ------------------------------------------------------------------------------------
    def _relevant(self, path: str) -> bool:
        if not path:
            return False
        if path.endswith(TEMP_SUFFIX):
            return False
        return not (path == self._state or path.startswith(self._state + os.sep))

    def _note(self, raw: RawEvent, closed_writes: dict[str, str]) -> bool:
        """Classify one event (both source and destination: atomic saves arrive as moves)."""
        if raw.kind not in CHANGE_EVENTS or not (self._relevant(raw.src) or self._relevant(raw.dest)):
            return False
        if raw.kind in WRITE_EVENTS and not raw.is_directory:
            target = raw.dest if raw.kind == "moved" else raw.src
            thread_id = self._asset_owner(target) if self._relevant(target) else None
            if thread_id is not None:
                closed_writes[target] = thread_id
        return True

    def _asset_owner(self, path: str) -> str | None:
        """The thread whose asset `path` is (not its thread.json), else None."""
        if not path.startswith(self._threads + os.sep):
            return None
        parts = path[len(self._threads) + 1:].split(os.sep)
        if len(parts) < 2 or parts[1:] == ["thread.json"]:
            return None
        return parts[0]

    def _wants_sync(self, raw: RawEvent) -> bool:
        for path in (raw.src, raw.dest):
            if not self._relevant(path):
                continue
            if path == self._index:
                if not self._is_own_write():
                    return True
            elif path == self._threads or path.startswith(self._threads + os.sep):
                return True
        return False

    def _is_own_write(self) -> bool:
        try:
            data = read_bytes(self.layout.index_path, INDEX_CAP)
        except (OSError, LeslieError):
            return False
        return hashlib.sha256(data).hexdigest() == self._last_written

    def _report_closed_writes(self, closed_writes: dict[str, str]) -> None:
        statuses: dict[str, str | None] = {}
        for path, thread_id in sorted(closed_writes.items()):
            if thread_id not in statuses:
                statuses[thread_id] = self._status_of(thread_id)
            status = statuses[thread_id]
            if status in CLOSED_STATUSES and os.path.lexists(path):
                rel = Path(path).relative_to(self._leslie).as_posix()
                self._event("write_to_closed_thread", thread=thread_id, status=status,
                            path=f"{self.layout.leslie_dir.name}/{rel}")

    def _status_of(self, thread_id: str) -> str | None:
        try:
            data = read_json(Path(self._threads) / thread_id / "thread.json")
        except (OSError, LeslieError):
            return None
        status = data.get("status") if isinstance(data, dict) else None
        return status if isinstance(status, str) else None

    # -- the one place that writes ----------------------------------------------------------------
    def sync(self, reason: str) -> bool:
        """Rebuild the index from every `thread.json` and write it if it differs; False: retry later."""
        if not self.layout.leslie_dir.is_dir():
            return True  # the loop reports it and restarts the observer when it is back
        try:
            with acquire_index_lock(self.layout, timeout=WATCH_LOCK_TIMEOUT) as lock:
                threads, corrupt = [], {}
                for tid in self.repo.thread_ids():
                    try:
                        threads.append(self.repo.read_thread(tid))
                    except LeslieError as exc:
                        corrupt[self.layout.relative(self.layout.thread_file(tid))] = exc.message
                self._report_corrupt(corrupt)
                if corrupt:
                    return True  # never write an index that leaves out a thread we could not read
                index = build_index(threads)
                data = dumps_canonical(index.to_json())
                try:
                    current: bytes | None = read_bytes(self.layout.index_path, INDEX_CAP)
                except FileNotFoundError:
                    current = None
                except LeslieError as exc:
                    self._event("error", message=exc.message)
                    return True
                if current == data:
                    self._last_written = hashlib.sha256(data).hexdigest()
                    return True
                previous = self._decode(current)
                if current is not None and previous is None:
                    backup = self.layout.state_dir / "backups" / (
                        f"thread_relations.{time.strftime('%Y%m%dT%H%M%S')}.json")
                    atomic_write(backup, current)
                self._last_written = hashlib.sha256(data).hexdigest()
                self.repo.write_index(lock, index)
        except LockTimeoutError as exc:
            self._event("error", message=exc.message)
            return False
        except LeslieError as exc:
            self._event("error", message=exc.message)
            return True
        fields: dict[str, Any] = {"reason": reason, **_diff(previous, index)}
        if current is not None and previous is None:
            fields["replaced_unreadable_index"] = True
        self._event("index_updated", **fields)
        for callback in self.on_index_updated:
            callback(index)
        return True

    def refresh_contexts(self) -> None:
        """Re-render the cached `<thread_context>` blocks (`blocks.contexts_dir`) whose inputs changed.

        The caches are keyed by the stat signatures of everything a context reads, so a stale entry is
        never served; refreshing here only spares the next agent prompt the render. Entries of threads
        that are gone are deleted.
        """
        from leslie.inject.blocks import contexts_dir, inputs_key, refresh
        from leslie.store.jsonio import StrictJSONError, loads_strict
        from leslie.store.model import is_thread_id

        folder = Path(contexts_dir(str(self.repo.root)))
        try:
            refuse_links(folder)  # never list, nor delete in, a folder a link leads to
            names = sorted(n for n in os.listdir(folder) if n.endswith(".json") and is_thread_id(n[:-5]))
        except (OSError, LeslieError):
            return
        refreshed, dropped = [], []
        for name in names:
            thread_id, cache = name[: -len(".json")], folder / name
            try:
                key = inputs_key(str(self.repo.root), thread_id)
            except NotFoundError:
                cache.unlink(missing_ok=True)  # the thread is gone or deleted: its context with it
                dropped.append(thread_id)
                continue
            except LeslieError as exc:
                self._event("error", message=f"cannot refresh the cached context of {thread_id}: {exc}")
                continue
            try:
                if loads_strict(read_bytes(cache)).get("key") == key:
                    continue
            except (OSError, LeslieError, StrictJSONError, AttributeError):
                pass  # unreadable: render it again
            try:
                refresh(self.repo, thread_id)
            except (LeslieError, OSError, ValueError) as exc:
                self._event("error", message=f"cannot refresh the cached context of {thread_id}: {exc}")
                continue
            refreshed.append(thread_id)
        if refreshed or dropped:
            self._event("contexts_refreshed", threads=refreshed, dropped=dropped)

    def _decode(self, data: bytes | None) -> Index | None:
        if data is None:
            return None
        from leslie.store.jsonio import StrictJSONError, loads_strict
        from leslie.store.relations import index_from_json

        try:
            return index_from_json(loads_strict(data), Path(self.layout.relative(self.layout.index_path)))
        except (StrictJSONError, LeslieError):
            return None

    def _report_corrupt(self, corrupt: dict[str, str]) -> None:
        for path, message in sorted(corrupt.items()):
            if self._reported_corrupt.get(path) != message:
                self._event("corrupt_file", path=path, error=message)
        self._reported_corrupt = dict(corrupt)


def describe(event: dict[str, Any]) -> str:
    """One readable line for an event (the human form of `leslie watch`)."""
    name = str(event["event"])
    if name == "started":
        rescan = f"rescan every {event['rescan']:g} s" if event["rescan"] > 0 else "no periodic rescan"
        return (f"watching {event['root']} ({event['mode']} observer, debounce {event['debounce']:g} s, "
                f"{rescan}); Ctrl-C to stop")
    if name == "index_updated":
        parts = [f"+{t}" for t in event["added"]] + [f"-{t}" for t in event["removed"]]
        parts += [f"~{t}" for t in event["changed"]]
        return f"index updated ({event['reason']}): {' '.join(parts) or 'rewritten'}"
    if name == "write_to_closed_thread":
        return f"write into {event['status']} thread {event['thread']}: {event['path']}"
    if name == "corrupt_file":
        return f"corrupt: {event['error']} (index left unchanged)"
    if name == "contexts_refreshed":
        gone = f"; dropped {', '.join(event['dropped'])}" if event["dropped"] else ""
        return f"refreshed cached contexts: {', '.join(event['threads']) or '-'}{gone}"
    if name == "observer_restarted":
        return f"watching again ({event['mode']} observer)"
    if name == "observer_fallback":
        return f"falling back to the polling observer: {event['reason']}"
    if name == "error":
        return f"error: {event['message']}"
    return name


def watch(repo: Repository, emit: Emit, *, polling: bool = False, debounce: float = 0.2,
          rescan: float = 30.0) -> int:
    """Run the watcher on `repo` until SIGINT/SIGTERM; returns the exit code (0). A linked `.leslie` is
    refused (CorruptStateError): the watcher would observe, and rebuild, another folder's files."""
    refuse_links(repo.layout.leslie_dir)
    return Watcher(repo, emit, polling=polling, debounce=debounce, rescan=rescan).run()
