"""The derived store: what reads at scale need, kept in SQLite outside the repository.

`list`, `status` and `objective list` need a few fields of every thread in the index, and `find` needs to know
which files may hold a text. Decoding a 40 MB index or reading 300,000 files on every run costs seconds at
100,000 threads, so both are kept in one SQLite database per repository (the standard library's `sqlite3`,
FTS5 for the text), derived from the files. It is private, rebuildable and never trusted on its own:

- **Where.** `$XDG_CACHE_HOME/leslie/` (else `~/.cache/leslie/`), a folder only its owner may enter (0700,
  owned by this user), one database per repository named after a digest of the repository's real path. It is
  never under the repository, so a cloned repository cannot plant one (docs/security.md, "The derived store").
- **Stale data is found from the files.** The index's rows (`threads`) are kept with the signature of the
  index file they came from (device, inode, size, mtime, ctime: every write of the index is a new file renamed
  into place, so the inode and ctime change with each); `find`'s records keep each entry's own signature
  (`ops/find_index.py`). A database that is missing, corrupt, of another schema version or another repository
  is rebuilt, silently.
- **Concurrency.** WAL: readers never wait; one writer at a time, and a writer that finds the database busy
  for longer than `BUSY_SECONDS` leaves it as it is (the next reader refreshes it).
- **One connection per command.** A thread keeps the connection it opened (`open_store`, `release`): a
  command opens the store once however often it uses it (docs/design.md, "Reads at scale").
- **Failure is never an error.** Any `sqlite3` error, an unusable cache folder or a read-only disk: the same
  tables are built from the files in an in-memory database for this one command, and the command's output is
  the same (`with_store`).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import sqlite3
import stat
import threading
from collections.abc import Callable, Iterable, Iterator
from itertools import chain
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol, TypeVar

from leslie.store import machine
from leslie.store.fsio import file_signature

if TYPE_CHECKING:
    from pathlib import Path

    from leslie.store.files import Layout
    from leslie.store.relations import Index

T = TypeVar("T")


class Repository(Protocol):
    """What the store needs of a repository: `store.repository.Repository`, which imports this module."""

    @property
    def root(self) -> Path: ...

    @property
    def layout(self) -> Layout: ...

    def read_index(self) -> Index: ...

SCHEMA_VERSION = 7  # bump when a table changes: an older database is then rebuilt (or brought up to it)
BUSY_SECONDS = 1.0  # how long a writer waits for another one before leaving the database as it is
SUFFIX = ".sqlite3"

# One row per thread of the index (`targets`/`sources`: the IDs it references and that reference it, sorted and
# joined by commas); `created_at` and `intent` are NULL for an entry written by a leslie older than those keys.
# `folders`, `docs` and `texts` are `find`'s (ops/find_index.py); `activity` is `list`'s activity times, kept
# only while the resident watcher vouches for them (ops/watched.py, ops/listing.py), and `thread_times`
# `status`'s likewise (ops/doctor.py); `tree` is what `list --tree` and the graphs show of each thread's
# `thread.json`, kept with the file's signature (ops/tree_drawing.py); `fields` the title and intent of each recorded
# thread's `thread.json`, parsed strictly when `find` last read it (ops/find_index.py).
_SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value) WITHOUT ROWID;
CREATE TABLE threads (
    id TEXT PRIMARY KEY, title TEXT NOT NULL, status TEXT NOT NULL, objective TEXT,
    created_at TEXT, intent TEXT, targets TEXT NOT NULL, sources TEXT NOT NULL
) WITHOUT ROWID;
CREATE INDEX threads_objective ON threads (objective);
CREATE TABLE folders (thread TEXT PRIMARY KEY, paths BLOB NOT NULL, sigs BLOB NOT NULL, fields INTEGER NOT NULL)
    WITHOUT ROWID;
CREATE TABLE docs (id INTEGER PRIMARY KEY, thread TEXT NOT NULL, path BLOB NOT NULL, kind TEXT NOT NULL);
CREATE INDEX docs_thread ON docs (thread);
"""
# Added in version 2; a version 1 database gains it and keeps the rest (`find`'s texts take minutes to make
# again at 100,000 threads).
_ACTIVITY = "CREATE TABLE activity (id TEXT PRIMARY KEY, ns INTEGER NOT NULL) WITHOUT ROWID"
# Added in version 3, likewise: `status`'s times of each thread folder's thread.json (NULL: none), kept only
# while the resident watcher vouches for them (ops/doctor.py, `quick_problems`), and the tree's rows.
_THREAD_TIMES = "CREATE TABLE thread_times (id TEXT PRIMARY KEY, ns INTEGER) WITHOUT ROWID"
_TREE = ("CREATE TABLE tree (id TEXT PRIMARY KEY, sig BLOB NOT NULL, title TEXT NOT NULL, status TEXT NOT NULL, "
         "objective TEXT, created_at TEXT NOT NULL, targets TEXT NOT NULL, scopes TEXT) WITHOUT ROWID")
# Added in version 4, likewise: `find`'s fields of each recorded thread.
_FIELDS = "CREATE TABLE fields (thread TEXT PRIMARY KEY, title TEXT NOT NULL, intent TEXT NOT NULL) WITHOUT ROWID"
# Added in version 5: the drawings of the tree (`list --tree` piped, its JSON, the graphs), each kept with the
# version of the tree's rows and of the index's mirror it was drawn from (ops/tree_drawing.py, "Drawings").
_DRAWINGS = ("CREATE TABLE drawings (key TEXT PRIMARY KEY, version TEXT NOT NULL, made INTEGER NOT NULL, "
             "text TEXT NOT NULL)")
# Added in version 6: each thread's piece of a drawing of the tree, kept while the tree's rows it was drawn from
# stay as they are (store/drawings.py, "Pieces").
_PIECES = ("CREATE TABLE pieces (form TEXT NOT NULL, id TEXT NOT NULL, text TEXT NOT NULL, PRIMARY KEY (form, id)) "
           "WITHOUT ROWID")
_PIECES_ID = "CREATE INDEX pieces_id ON pieces (id)"  # a thread's pieces of every form go at once
# Added in version 7: each thread's order edges (SPEC §14: the threads it comes after, joined by commas), so that
# the tree need not read the index for them; the rows are then made again from the index.
_ORDER = ("ALTER TABLE threads ADD COLUMN comes_after TEXT NOT NULL DEFAULT ''",
          "DELETE FROM meta WHERE key IN ('index', 'invariants')")
# What each older version lacks, in the order the versions came.
_ADDED = {2: (_ACTIVITY,), 3: (_THREAD_TIMES, _TREE), 4: (_FIELDS,), 5: (_DRAWINGS,), 6: (_PIECES, _PIECES_ID),
          7: _ORDER}
# `find`'s texts: FTS5 with the trigram tokenizer (SQLite 3.34 or later, built with FTS5); a plain table where
# the SQLite underneath has neither, which `find` then searches with `instr` alone (ops/find_index.py).
_TEXTS = "CREATE VIRTUAL TABLE texts USING fts5 (body, tokenize = 'trigram case_sensitive 1', detail = none)"
_PLAIN_TEXTS = "CREATE TABLE texts (rowid INTEGER PRIMARY KEY, body TEXT NOT NULL)"

_ROW_SQL = "INSERT INTO threads VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
_REPLACE_ROW_SQL = "INSERT OR REPLACE INTO threads VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"  # a mutation's edited rows


def database_path(root: str | os.PathLike[str]) -> str | None:
    """Where the database of the repository at `root` lives (not created here), or None without a cache
    folder: a digest of the repository's real path, so each checkout has its own and none is inside one."""
    folder = machine.cache_folder()
    if folder is None:
        return None
    key = hashlib.sha256(os.fsencode(os.path.realpath(root))).hexdigest()[:32]
    return os.path.join(folder, key + SUFFIX)


def _usable_file(path: str) -> bool:
    """Whether `path` (and its WAL files) is absent or a regular file of this user's: anything else in its
    place (a link, a folder) is removed first, never opened."""
    for suffix in ("", "-wal", "-shm"):
        try:
            info = os.lstat(path + suffix)
        except FileNotFoundError:
            continue
        except OSError:
            return False
        if not stat.S_ISREG(info.st_mode) or info.st_uid != os.geteuid():
            try:
                if stat.S_ISDIR(info.st_mode):
                    import shutil

                    shutil.rmtree(path + suffix)
                else:
                    os.unlink(path + suffix)
            except OSError:
                return False
    return True


def discard(path: str) -> None:
    """Remove a database that cannot be used (corrupt, not a database): it is rebuilt from the files."""
    for suffix in ("", "-wal", "-shm"):
        with contextlib.suppress(OSError):
            os.unlink(path + suffix)


def _connect(path: str, busy: float | None = None) -> sqlite3.Connection:
    connection = sqlite3.connect(path, timeout=BUSY_SECONDS if busy is None else busy, isolation_level=None)
    try:
        connection.execute("PRAGMA trusted_schema = OFF")
        if path != ":memory:":
            connection.execute("PRAGMA journal_mode = WAL")
            connection.execute("PRAGMA synchronous = NORMAL")  # a cache: a crash may lose the last writes, no more
    except BaseException:
        connection.close()
        raise
    return connection


def _prepare(connection: sqlite3.Connection, root: str) -> None:
    """Give `connection` this schema for the repository at `root`: kept when it is already that, brought up to
    it from an older version (`_ADDED`), else every table dropped and made again (a database of an unknown
    version, or of another repository)."""
    if _is_current(connection, root):
        return
    with transaction(connection):
        if _is_current(connection, root):  # another process made it meanwhile
            return
        for old in range(1, SCHEMA_VERSION):
            if _is_current(connection, root, version=old):
                for statement in chain.from_iterable(_ADDED[v] for v in range(old + 1, SCHEMA_VERSION + 1)):
                    connection.execute(statement)
                connection.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
                return
        _drop_everything(connection)
        for statement in [*_SCHEMA.split(";"), *chain.from_iterable(_ADDED.values())]:
            if statement.strip():
                connection.execute(statement)
        try:
            connection.execute(_TEXTS)
        except sqlite3.OperationalError:  # no FTS5, or no trigram tokenizer
            connection.execute(_PLAIN_TEXTS)
        connection.execute("INSERT INTO meta VALUES ('root', ?)", (root,))
        connection.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")


def _drop_everything(connection: sqlite3.Connection) -> None:
    """Drop every table, view and trigger (virtual tables first: their shadow tables go with them)."""
    def names(sql: str) -> list[tuple[str, str]]:
        return connection.execute(sql).fetchall()

    found = names("SELECT 'table', name FROM sqlite_schema WHERE type = 'table' AND sql LIKE 'CREATE VIRTUAL TABLE%'")
    found += names("SELECT type, name FROM sqlite_schema WHERE type IN ('view', 'trigger', 'table') "
                   "AND name NOT LIKE 'sqlite!_%' ESCAPE '!'")
    for kind, name in found:
        quoted = '"' + name.replace('"', '""') + '"'
        connection.execute(f"DROP {kind.upper()} IF EXISTS {quoted}")


def _is_current(connection: sqlite3.Connection, root: str, version: int = SCHEMA_VERSION) -> bool:
    if connection.execute("PRAGMA user_version").fetchone()[0] != version:
        return False
    found = connection.execute("SELECT value FROM meta WHERE key = 'root'").fetchone()
    return found is not None and found[0] == root


@contextlib.contextmanager
def transaction(connection: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """A write transaction (`BEGIN IMMEDIATE`: the write lock taken first, so it never fails half-way for a
    lock); committed at the end, rolled back on any exception. OperationalError when another writer held
    the database for longer than `BUSY_SECONDS`."""
    connection.execute("BEGIN IMMEDIATE")
    try:
        yield connection
    except BaseException:
        with contextlib.suppress(sqlite3.Error):
            connection.execute("ROLLBACK")
        raise
    connection.execute("COMMIT")


def memory_store() -> sqlite3.Connection:
    """An empty in-memory database with the schema: what a command uses when the file cannot be."""
    connection = _connect(":memory:")
    _prepare(connection, "")
    return connection


def contended(exc: sqlite3.Error) -> bool:
    """Whether `exc` means another process holds the database (it is then left alone), rather than a
    database that is broken, of another kind, or on a failing disk (it is then removed and rebuilt)."""
    name = getattr(exc, "sqlite_errorname", "") or ""
    return name.startswith(("SQLITE_BUSY", "SQLITE_LOCKED")) or "locked" in str(exc)


class _Kept(NamedTuple):
    """The connection a thread keeps open to one database, so that a command's every use of the store (a
    tree read makes four) opens and closes it once: ~0.6 ms to open, ~0.65 ms to close (the last connection
    to a WAL database checkpoints it), each time."""

    path: str
    pid: int  # a connection is never used across a fork
    file: tuple[int, int]  # the database's device and inode when opened: a file made anew since is reopened
    connection: sqlite3.Connection


class _Local(threading.local):
    store: _Kept | None = None  # the connection this thread keeps, if any


_kept = _Local()
# Connections whose file another process removed and made anew (`discard`): never closed. Closing the last
# connection to a WAL database deletes `<name>-wal` and `<name>-shm` by name: the new file's, which its own
# connections are using (docs/design.md, "Reads at scale: the derived store").
_orphans: list[sqlite3.Connection] = []


def open_store(root: str | os.PathLike[str]) -> tuple[sqlite3.Connection, str | None]:
    """(a connection to the repository's database, its path), or (an in-memory database, None) when the file
    cannot be used. A file that fails to open as this schema's database is removed and made anew once.

    The connection is the one this thread keeps to that database (opened by the first call, kept until
    another database is opened, the file is made anew, or the thread or process ends): give it back with
    `release`, which closes any other."""
    path = database_path(root)
    if path is not None and machine.private_folder(os.path.dirname(path)) and _usable_file(path):
        real_root = os.path.realpath(root)
        kept = _kept_connection(path)
        if kept is not None:
            try:
                _prepare(kept, real_root)
                return kept, path
            except sqlite3.Error:
                _forget()
        for _attempt in range(2):
            connection = None
            try:
                connection = _connect(path)
                _prepare(connection, real_root)
                _keep_open(path, connection)
                return connection, path
            except sqlite3.Error as exc:
                if connection is not None:
                    connection.close()
                if contended(exc):
                    break
                discard(path)
    return memory_store(), None


def _keep_open(path: str, connection: sqlite3.Connection) -> None:
    """Keep `connection` for this thread's next uses of `path` (not when the file is already gone again:
    `release` then closes it)."""
    try:
        info = os.stat(path)
    except OSError:
        return
    _forget()
    _kept.store = _Kept(path, os.getpid(), (info.st_dev, info.st_ino), connection)


def _kept_connection(path: str) -> sqlite3.Connection | None:
    """The connection this thread keeps to `path`, when it is still the file it opened."""
    kept = _kept.store
    if kept is None or kept.path != path or kept.pid != os.getpid():
        return None
    return kept.connection if _same_file(kept) else None


def _same_file(kept: _Kept) -> bool:
    try:
        info = os.stat(kept.path)
    except OSError:
        return False
    return (info.st_dev, info.st_ino) == kept.file


def _forget() -> None:
    """Close the connection this thread keeps: not one whose file was made anew since (`_orphans`), nor one
    inherited through a fork (dropped, never used)."""
    kept = _kept.store
    _kept.store = None
    if kept is None or kept.pid != os.getpid():
        return
    if _same_file(kept):
        kept.connection.close()
    else:
        _orphans.append(kept.connection)


def release(connection: sqlite3.Connection) -> None:
    """Give back a connection from `open_store`: the kept one stays open (out of any transaction a failure
    left open; closed when it holds temporary tables, which serve one command only), any other is closed."""
    kept = _kept.store
    if kept is None or kept.connection is not connection:
        connection.close()
        return
    try:
        if connection.in_transaction:
            connection.execute("ROLLBACK")
        if connection.execute("SELECT 1 FROM temp.sqlite_master LIMIT 1").fetchone() is not None:
            _forget()
    except sqlite3.Error:
        _forget()


def with_store(root: str | os.PathLike[str], work: Callable[[sqlite3.Connection, bool], T]) -> T:
    """`work(connection, persistent)` on the repository's database, or again on an in-memory one when that
    fails with any `sqlite3` error (a broken file is removed: the next command rebuilds it). `persistent` is
    False for the in-memory one. `work` must give the same answer wherever it runs: the files decide it."""
    connection, path = open_store(root)
    try:
        if path is None:
            return work(connection, False)
        try:
            return work(connection, True)
        except sqlite3.Error as exc:
            if not contended(exc):
                _forget()
                discard(path)
    finally:
        release(connection)
    connection = memory_store()
    try:
        return work(connection, False)
    finally:
        connection.close()


# -- the index's rows ------------------------------------------------------------------------------------------
def with_index_table(repo: Repository, query: Callable[[sqlite3.Connection], T], *,
                     invariants: bool = False) -> T:
    """`query(connection)` on a `threads` table that mirrors `repo`'s index now (see the module). The table is
    brought up to date first when the index changed (the index is read as `repo.read_index()` reads it, with
    the same errors); `invariants=True` also wants the verdict of SPEC §2 invariants 1-3 (`invariants_hold`).

    `query` runs inside one read transaction, so it sees one version of the table."""
    def work(connection: sqlite3.Connection, persistent: bool) -> T:
        signature = file_signature(repo.layout.index_path) if persistent else None
        if signature is None or not _index_current(connection, signature, invariants):
            _refresh(repo, connection, signature, invariants)
        connection.execute("BEGIN")
        try:
            return query(connection)
        finally:
            connection.execute("COMMIT")

    return with_store(repo.root, work)


def printable_as_stored(repo: Repository, index: Index) -> bool:
    """Whether `leslie relations` prints the index file `index` was just read from as it is
    (`Index.is_stored_encoding`: canonical, unedited, its ID lists strictly sorted). Finding the lists sorted
    reads every line of the file in Python (~20 ms at 10,000 threads, ~0.25 s at 100,000), so a yes is kept
    with the file's signature (meta `index_sorted`): a later run that read the same file asks only the store. A
    no is found again each time (a hand edit, until leslie writes the index anew). The fingerprint leslie
    records of the index cannot stand for it: bytes the layout check verified are recorded whatever their
    lists' order."""
    origin = index.origin
    if origin is None or not index.streams():  # not the file's bytes as read, or not canonical: nothing to keep
        return index.is_stored_encoding()

    def work(db: sqlite3.Connection, persistent: bool) -> bool:
        found = db.execute("SELECT value FROM meta WHERE key = 'index_sorted'").fetchone()
        if found is not None and found[0] == origin:
            return True
        if not index.is_stored_encoding():
            return False
        if persistent:
            keep_meta(db, "index_sorted", origin)
        return True

    return with_store(repo.root, work)


def keep_meta(connection: sqlite3.Connection, key: str, value: str) -> None:
    """Store `value` under `key` in `meta`, in a write transaction of its own. Best effort, as every write of
    what a reader found: a busy store keeps what it had (the next reader finds it again)."""
    try:
        with transaction(connection):
            connection.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, value))
    except sqlite3.OperationalError as exc:
        if not contended(exc):
            raise


def invariants_hold(connection: sqlite3.Connection) -> bool:
    """The invariants' verdict kept with the table (after `with_index_table(..., invariants=True)`)."""
    found = connection.execute("SELECT value FROM meta WHERE key = 'invariants'").fetchone()
    return found is not None and found[0] == 1


def _index_current(connection: sqlite3.Connection, signature: str, invariants: bool) -> bool:
    found = dict(connection.execute("SELECT key, value FROM meta WHERE key IN ('index', 'invariants')"))
    return found.get("index") == signature and (not invariants or found.get("invariants") is not None)


def _refresh(repo: Repository, connection: sqlite3.Connection, signature: str | None, invariants: bool) -> None:
    """Fill the `threads` table from the index. Kept (with `signature`) only when the index is the same file
    after the read as before it: a writer that replaced it meanwhile would leave rows of one index keyed by
    another. Without a signature, when the index changed meanwhile, or when another writer keeps the database
    busy, the rows go to temporary tables that serve this command only."""
    if signature is None:
        _fill_temporary(connection, repo.read_index(), invariants)
        return
    try:
        connection.execute("BEGIN IMMEDIATE")
    except sqlite3.OperationalError as exc:
        if not contended(exc):
            raise
        _fill_temporary(connection, repo.read_index(), invariants)
        return
    try:
        if _index_current(connection, signature, invariants):  # another reader did it while this one waited
            connection.execute("COMMIT")
            return
        connection.execute("DELETE FROM meta WHERE key IN ('index', 'invariants')")
        connection.execute("DELETE FROM threads")
        index = repo.read_index()
        holds = _fill(connection, index, invariants)
        if file_signature(repo.layout.index_path) == signature:
            connection.execute("INSERT INTO meta VALUES ('index', ?)", (signature,))
            if holds is not None:
                connection.execute("INSERT INTO meta VALUES ('invariants', ?)", (int(holds),))
            connection.execute("COMMIT")
            return
        connection.execute("ROLLBACK")
    except BaseException:
        with contextlib.suppress(sqlite3.Error):
            connection.execute("ROLLBACK")
        raise
    _fill_temporary(connection, index, invariants)


def _fill_temporary(connection: sqlite3.Connection, index: Index, invariants: bool) -> None:
    """`index`'s rows in temporary tables, which hide the stored ones for the rest of this connection."""
    connection.execute("CREATE TEMP TABLE threads AS SELECT * FROM main.threads WHERE 0")
    connection.execute("CREATE TEMP TABLE meta (key TEXT PRIMARY KEY, value) WITHOUT ROWID")
    holds = _fill(connection, index, invariants)
    if holds is not None:
        connection.execute("INSERT INTO temp.meta VALUES ('invariants', ?)", (int(holds),))


def _fill(connection: sqlite3.Connection, index: Index, invariants: bool) -> bool | None:
    """Insert every thread of `index` into `threads`; the invariants' verdict when asked, else None.

    An unedited index read from a canonical file is decoded a slice at a time (bounded memory): its two
    sections hold the same IDs in the same (ascending) order, so they are read side by side, and the verdict
    is found from the edges on the way (`relations.MirrorCheck`). Any other index is already decoded whole.
    """
    from leslie.store.relations import MirrorCheck, invariant_problems

    if not index.streams():
        connection.executemany(_ROW_SQL, _decoded_rows(index))
        return not invariant_problems(index) if invariants else None
    check = MirrorCheck() if invariants else None

    def rows() -> Iterator[tuple[Any, ...]]:
        threads = chain.from_iterable(chunk.items() for chunk in index.stored_entries("threads"))
        relations = chain.from_iterable(chunk.items() for chunk in index.stored_entries("relations"))
        for (thread_id, entry), (_same_id, relation) in zip(threads, relations, strict=True):
            if check is not None:
                check.add(thread_id, relation)
            yield _row(thread_id, entry, _joined(relation["references_to"]), _joined(relation["referenced_by"]),
                       _joined(relation.get("after", ())))

    connection.executemany(_ROW_SQL, rows())
    return check.holds if check is not None else None


def _decoded_rows(index: Index) -> Iterator[tuple[Any, ...]]:
    threads, references_to, referenced_by = index.threads, index.references_to, index.referenced_by
    after = index.after
    for thread_id in sorted(threads):
        yield _row(thread_id, threads[thread_id], _joined(references_to.get(thread_id, ())),
                   _joined(referenced_by.get(thread_id, ())), _joined(after.get(thread_id, ())))


def _row(thread_id: str, entry: dict[str, Any], targets: str, sources: str, after: str) -> tuple[Any, ...]:
    complete = "created_at" in entry and "intent" in entry
    return (thread_id, entry.get("title", ""), entry.get("status", ""), entry.get("objective"),
            entry["created_at"] if complete else None, entry["intent"] if complete else None, targets, sources,
            after)


def _joined(ids: Iterable[str]) -> str:
    """IDs sorted, each once, joined by commas (as the index's sets make them)."""
    return ",".join(sorted(set(ids)))


# A mutation holds the index lock: it waits this long at most for a reader refreshing the database.
MUTATION_BUSY_SECONDS = 0.1


def index_rewritten(repo: Repository, index: Index) -> None:
    """After a mutation replaced the index with `index` (read from a canonical file, edited in place, under the
    lock): when the database holds the rows of the very file it was read from (`Index.origin`), bring them up
    to date with the entries it changed, in proportion to the change, so that the next read need not decode
    the whole index. Best effort: a database that is missing, busy or failing is left as it is, and the next
    reader finds it stale by the index's signature. The invariants' verdict is dropped (the next `status`
    finds it again from the file)."""
    path = database_path(repo.root)
    after = file_signature(repo.layout.index_path)
    if path is None or after is None or index.origin is None or file_signature(path) is None:
        return
    try:
        connection = _connect(path, MUTATION_BUSY_SECONDS)
    except sqlite3.Error:
        return
    try:
        if not _is_current(connection, os.path.realpath(repo.root)):
            return
        with transaction(connection):
            found = connection.execute("SELECT value FROM meta WHERE key = 'index'").fetchone()
            if found is None or found[0] != index.origin:
                return
            for thread_id, entry, targets, sources, after_ids in index.edited_entries():
                if entry is None:
                    connection.execute("DELETE FROM threads WHERE id = ?", (thread_id,))
                else:
                    connection.execute(_REPLACE_ROW_SQL,
                                       _row(thread_id, entry, _joined(targets), _joined(sources), _joined(after_ids)))
            connection.execute("UPDATE meta SET value = ? WHERE key = 'index'", (after,))
            connection.execute("DELETE FROM meta WHERE key = 'invariants'")
    except sqlite3.Error:
        return
    finally:
        connection.close()


def rows_where_in(connection: sqlite3.Connection, sql: str, values: Iterable[Any]) -> list[Any]:
    """The rows of `sql`, whose one `IN ({})` takes `values`, a few hundred at a time (SQLite caps the number of
    parameters of a statement; no JSON function needed)."""
    values = list(values)
    found: list[Any] = []
    for start in range(0, len(values), 500):
        part = values[start:start + 500]
        found += connection.execute(sql.format(", ".join("?" * len(part))), part).fetchall()
    return found
