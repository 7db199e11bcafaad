"""Reads that ask the resident watcher what changed: `leslie list`'s activity times, `leslie find`'s records,
`leslie status`'s `thread.json` times (`ops/doctor.quick_problems`) and the tree's rows (`ops/tree_drawing.py`: `list
--tree`, the graphs).

Each keeps, in the derived store (`store.derived`), what it read from each thread's files last time, and
each must stay exact after an in-place edit (an agent appending to `progress.md` changes nothing else on disk).
Without help that takes a `stat` of every file they depend on, on every run: most of what each costs at 10,000
threads. With the warm process running, its watcher (`guard/watcher.py`: inotify, ordered, with a barrier)
can say which paths under `.leslie/` changed since a *mark*; only the threads under those paths are read
again. Anything short of a complete answer (no watcher, a watch still being set up, another epoch, too many
changes, an overflow) means reading every thread, as without a watcher.

What is stored is vouched for by a mark, kept beside it in the store's `meta` table under the reader's key,
as `{"mark": [epoch, seq] | null, "token": ...}`. The rule that keeps every stored value exact:

1. A reader loads that value before it reads any stored row or any file.
2. It asks the watcher for what changed since the mark, and trusts the stored rows of the other threads.
3. It writes rows only in a write transaction that finds the stored value still the one it loaded (or last
   wrote), and writes a fresh token with them, so any other reader's later write finds a value it did not
   load and writes nothing. Its last write moves the mark to the watcher's new one.

So every stored row was read after the mark stored with it was taken, or its thread did not change since: a
reader that finds the value changed under it simply does not save, and the next one reads again.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Callable, Mapping
from typing import Any

from leslie.store import drawings
from leslie.store.derived import contended, transaction, with_store

# How a caller asks the resident watcher (`leslie.server.watcher.ask`): (root, since) -> its answer. The write
# guard's hooks ask with it too (`guard.tripwire`).
Ask = Callable[[str, object], dict[str, object] | None]


def is_mark(mark: object) -> bool:
    """Whether `mark` is a watcher's mark, `[epoch, seq]`."""
    return isinstance(mark, list) and len(mark) == 2 and isinstance(mark[0], str) and type(mark[1]) is int


class Vouched:
    """One reader's view of the watcher for one run (`key`: "activity", "find", "thread_times" or "tree"; see
    the module)."""

    def __init__(self, key: str, ask: Ask | None) -> None:
        self.key = "watched:" + key
        self.ask = ask
        self.held: str | None = None  # the stored value this reader loaded, or last wrote
        self.since: object = None  # the mark of that value
        self.mark: list[Any] | None = None  # the watcher's new mark (None: no answer)
        self.lost = False  # another reader wrote meanwhile: this one writes nothing more

    def load(self, db: sqlite3.Connection) -> None:
        """Read the stored value (before any stored row or file is read)."""
        row = db.execute("SELECT value FROM meta WHERE key = ?", (self.key,)).fetchone()
        self.held = row[0] if row is not None and isinstance(row[0], str) else None
        try:
            doc = json.loads(self.held) if self.held is not None else None
        except ValueError:
            doc = None
        mark = doc.get("mark") if isinstance(doc, dict) else None
        self.since = mark if is_mark(mark) else None

    def changed(self, root: str | os.PathLike[str]) -> set[str] | None:
        """The threads with a path changed since the loaded mark; None when every thread must be read."""
        if self.ask is None:
            return None
        reply = self.ask(os.fspath(root), self.since)
        mark = reply.get("mark") if isinstance(reply, dict) else None
        if not is_mark(mark):
            return None
        assert isinstance(reply, dict) and isinstance(mark, list)
        self.mark = mark
        changed = reply.get("changed")
        if self.since is None or not isinstance(changed, list):
            return None
        threads: set[str] = set()
        for path in changed:
            parts = path.split("/") if isinstance(path, str) else []
            if parts[:1] != ["threads"]:
                continue
            if len(parts) < 2:  # the threads folder itself (made anew): what is in it was not seen arrive
                return None
            threads.add(parts[1])
        return threads

    def advances(self) -> bool:
        """Whether the final write would move the mark (else a reader that changed nothing need not write)."""
        return self.mark is not None and self.mark != self.since

    def keep(self, db: sqlite3.Connection, *, final: bool) -> bool:
        """In a write transaction, before its rows are written: whether they may be (see the module). Writes
        the new stored value: the loaded mark again, or the watcher's new one when `final`."""
        if self.lost:
            return False
        row = db.execute("SELECT value FROM meta WHERE key = ?", (self.key,)).fetchone()
        if (row[0] if row is not None else None) != self.held:
            self.lost = True
            return False
        mark = self.mark if final and self.mark is not None else self.since
        self.held = json.dumps({"mark": mark, "token": os.urandom(8).hex()})
        db.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (self.key, self.held))
        if final:
            self.since = mark
        return True


def keep_times(root: str | os.PathLike[str], vouched: Vouched, table: str, fresh: Mapping[str, int | None],
               changed: set[str] | None, loaded: int = 0) -> int | None:
    """Store the times a reader read now (`fresh`: thread → time) in its `table` (`id`, `ns`), under the
    watcher's new mark and only if the stored value is still the one it loaded (see the module). After a full
    read (`changed` None) every other row goes; after a watched one, the rows of the threads the watcher saw
    change and that were not read again (filtered out, gone). Rows written or removed count as one more write
    of the table (`store.drawings.written`).

    Returns that count once the stored rows hold what was read (`loaded`, the count read with them, when there
    was nothing to write), or None when they do not: no mark from the watcher, another reader wrote first, or a
    busy store (best effort: it is left as it is)."""
    if vouched.mark is None:
        return None
    if not (fresh or vouched.advances()):
        return loaded

    def keep(db: sqlite3.Connection, _persistent: bool) -> int | None:
        try:
            with transaction(db):
                if not vouched.keep(db, final=True):
                    return None
                gone = [(t,) for t in changed.difference(fresh)] if changed is not None else []
                if changed is None:
                    db.execute(f"DELETE FROM {table}")
                db.executemany(f"DELETE FROM {table} WHERE id = ?", gone)
                db.executemany(f"INSERT OR REPLACE INTO {table} VALUES (?, ?)", fresh.items())
                if changed is None or fresh or gone:
                    return drawings.count_write(db, table)
                return drawings.written(db, table)
        except sqlite3.OperationalError as exc:
            if not contended(exc):
                raise
        return None

    return with_store(root, keep)
