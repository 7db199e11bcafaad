"""Which files `leslie find` must read: a full-text index of the thread folders in the derived store.

For every live thread the derived store (`store.derived`) keeps a record in `folders`: every entry `find` looks
at in the thread's folder (the folder and its subfolders, its `thread.json`, each searched file, paths relative
to the threads folder), the signature each had when it was last read (inode, size, mtime and ctime in ns),
and whether its fields must be parsed whatever the text. Each searched file's casefolded text is a row of
`texts`, an FTS5 table with the trigram tokenizer, and `docs` says whose file each row is. A search:

1. checks every recorded entry with one `lstat` (relative to a descriptor of the threads folder, links never
   followed), all of them in one pass; with the resident watcher's word, only the entries of the threads it
   saw change (`ops/watched.py`);
2. asks FTS5 which texts hold the needle: each of its trigrams, then `instr` for the exact substring;
3. lists and reads again each thread folder that changed (or is new), reusing the text of every file whose
   signature still matches; looks for the needle in what it read; and writes those threads' records back,
   a batch at a time (a busy or read-only database is left as it is: the answer is the same).

The answer names, per thread, whether its fields may hold the needle and which files may; only those files
are then read for their hits (`ops/find.py`), so a stale record can cost a read, never a hit. The fields come
with the answer when the store knows them: each walk parses the `thread.json` it reads as strictly as every
read does, and keeps its title and intent in `fields`, written and removed with the thread's record, so they
describe the file whenever the record still matches it; else `find` reads the file (and fails naming it).

**Complete records.** A search that leaves a record of every live thread, and of no other, says so in the
store's `meta` (`COMPLETE`): the signature of the index file whose threads it searched. Every other write of the
records forgets it. A later search with the watcher's word, of that same index file, then knows without reading
them that every live thread has a record and that the watcher's word covers them all: it reads only the records
of the threads the watcher saw change and the few whose fields are always parsed (at 10,000 threads, instead of
the thread and flag of all 10,000). Another index file (a thread added or taken out by hand, a checkout) is
another signature, and every record is looked at as before; so is a store whose count of records is not the
count of live threads (a write that did not forget the claim, such as an older leslie's).

A file changed twice within one timestamp tick could keep its ctime, so a signature taken less than `RACY_NS`
after its ctime is stored as never matching (-1): that file is read again next time (git's "racily clean"
entries). A folder's mtime moves when an entry is added, removed or renamed in it, so an unchanged folder
needs no listing; an in-place edit moves only the file's own times, which is why every file is checked.
"""

from __future__ import annotations

import os
import sqlite3
import stat
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from operator import attrgetter
from struct import Struct
from typing import Any, NamedTuple

from leslie.context.scaffold import scaffold_lines, without_lines
from leslie.errors import CorruptStateError
from leslie.ops.watched import Ask, Vouched
from leslie.store import derived
from leslie.store.fsio import FOLDER_FLAGS, read_in_folder
from leslie.store.repository import Repository

MAX_FILE_BYTES = 1024 * 1024  # a bigger asset is not a note a person wrote: skipped, not searched
MAX_DEPTH = 16  # folders nested deeper than this inside a thread are not searched
RACY_NS = 1_000_000_000
BATCH = 1000  # changed threads read, searched and written at a time: bounded memory on a first run
CHECKED = 4096  # stored records checked at a time
_MOST_TRIGRAMS = 64  # of a long needle, this many trigrams narrow enough (the exact test is `instr`)
_BINARY_SNIFF = 8192  # a NUL byte in the first 8 KiB marks a file as binary, as git and grep decide
# meta: the index (its file's signature, `drawings.mirrored_index`) whose every thread, and no other, has a record
COMPLETE = "find_complete"

SIGNATURE = Struct("<Qqqq")  # inode, size, mtime ns, ctime ns: one bytes object holds a thread's entries
_SIGNED = attrgetter("st_ino", "st_size", "st_mtime_ns", "st_ctime_ns")
_SEP = b"\0"  # between a record's paths: no file name holds one

Fields = tuple[str, str]  # a thread's title and intent, as its `thread.json` says


class Found(NamedTuple):
    """What `find` must look at in one thread: whether its fields may hold the needle, with their values when
    the store knows them for the `thread.json` there now (None: it reads the file), and its files that may."""

    fields: bool
    known: Fields | None
    files: list[str]


Todo = dict[str, Found]


def read_text(folder_fd: int, path: str | bytes) -> str | None:
    """A regular, small, non-binary file's text (UTF-8, undecodable bytes replaced), `path` relative to the
    folder open as `folder_fd` and every part of it opened without following a link; None to skip it."""
    parts = os.fsencode(path).split(b"/")
    fd = folder_fd
    try:
        for part in parts[:-1]:
            inner = os.open(part, FOLDER_FLAGS, dir_fd=fd)
            if fd != folder_fd:
                os.close(fd)
            fd = inner
        return _read_file(fd, parts[-1])
    except OSError:  # a link in the way (O_NOFOLLOW), gone, unreadable: not searched
        return None
    finally:
        if fd != folder_fd:
            os.close(fd)


def _read_file(folder_fd: int, name: bytes) -> str | None:
    """The text of a searched file (None when it cannot be read as one, or looks binary)."""
    return _as_text(read_in_folder(folder_fd, name, MAX_FILE_BYTES))


def _as_text(data: bytes | None) -> str | None:
    if data is None or b"\0" in data[:_BINARY_SNIFF]:
        return None
    return data.decode("utf-8", errors="replace")


def folded(text: str) -> str:
    """What the index keeps of a text: casefolded, NUL replaced (SQLite text may hold one, but the needle
    never does: a replaced NUL can only add a match, a file read again, never hide one)."""
    return text.casefold().replace("\0", "\1")


def json_may_escape(needle: str) -> bool:
    """Whether `needle` holds a character JSON escapes (quote, backslash, control): a field holding it then
    need not hold it verbatim in the raw `thread.json`, so every thread's fields are parsed."""
    return any(c in needle for c in '"\\') or any(ord(c) < 0x20 for c in needle)


def signature(info: os.stat_result, limit_ns: int) -> bytes:
    """What a record keeps of `info`: ctime -1 (never matching) when it is within the racy window."""
    ctime = info.st_ctime_ns
    return SIGNATURE.pack(info.st_ino, info.st_size, info.st_mtime_ns, ctime if ctime < limit_ns else -1)


def exact_signature(info: os.stat_result) -> bytes:
    """The signature of `info` as it is now, to compare with a kept one (which then matches only when it was
    kept outside the racy window)."""
    return SIGNATURE.pack(*_SIGNED(info))


def settled(exact: bytes, limit_ns: int) -> bytes:
    """What a record keeps of an exact signature: as `signature` keeps the `stat` it was made from."""
    inode, size, mtime, ctime = SIGNATURE.unpack(exact)
    return exact if ctime < limit_ns else SIGNATURE.pack(inode, size, mtime, -1)


def signatures(fd: int, paths: Sequence[bytes]) -> bytes:
    """The packed signatures of `paths` (relative to folder `fd`) now, one `lstat` each; OSError when one is
    gone. A comprehension, not `map(partial(os.lstat, dir_fd=fd), ...)`: a partial with a keyword builds a dict
    for every call, ~10 % of 400,000 calls."""
    lstat, pack = os.lstat, SIGNATURE.pack
    return b"".join([pack(*_SIGNED(lstat(path, dir_fd=fd))) for path in paths])


@dataclass
class _Record:
    """A thread's record: its entries' paths (relative to the threads folder, joined by NUL) and their packed
    signatures, in the order of its listing, and whether its fields are parsed whatever the needle."""

    paths: bytes
    sigs: bytes
    fields: bool


@dataclass
class _Walked:
    """A thread folder listed and read anew: its record, the texts of the files read now (path relative to the
    threads folder, kind: "j" thread.json or "f" a file, text), the documents kept from the old record (its
    unchanged files), and the fields of its `thread.json` as read now."""

    record: _Record
    texts: list[tuple[bytes, str, str]] = field(default_factory=list)
    kept: dict[bytes, int] = field(default_factory=dict)
    fields: Fields | None = None


@dataclass
class _Checked:
    """What the check of the stored records found: the live threads whose every entry is unchanged, those of
    them whose fields are parsed whatever the needle, the threads recorded that are no longer live."""

    unchanged: set[str] = field(default_factory=set)
    always: set[str] = field(default_factory=set)
    gone: list[str] = field(default_factory=list)


class _Search:
    """One search: the needle, the threads folder, and the database (`persistent`: the repository's, which
    the search brings up to date; else an in-memory one, which it does not fill)."""

    def __init__(self, repo: Repository, db: sqlite3.Connection, persistent: bool, threads_fd: int, needle: str,
                 limit_ns: int, vouched: Vouched) -> None:
        self.repo, self.db, self.fd, self.limit = repo, db, threads_fd, limit_ns
        self.writable = persistent
        self.vouched = vouched
        self.complete_for: str | None = None  # the stored `COMPLETE` (read with the records, `complete`)
        self.needle: str | None = needle
        try:
            needle.encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate (undecodable argv): no shortcut, every file is read
            self.needle = None
        if "\0" in needle:
            self.needle = None
        self.fields_always = json_may_escape(needle)

    # -- what the index knows ------------------------------------------------------------------------------
    def matches(self, thread: str | None = None) -> dict[str, list[tuple[int, bytes, str]]]:
        """Per thread (or of `thread` alone), the stored texts that hold the needle: (document, path, kind)."""
        needle = self.needle
        join = "SELECT d.id, d.thread, d.path, d.kind FROM texts JOIN docs d ON d.id = texts.rowid"
        only, of = ("", ()) if thread is None else (" AND d.thread = ?", (thread,))
        if needle is None:
            rows = self.db.execute("SELECT id, thread, path, kind FROM docs d WHERE 1" + only, of).fetchall()
        else:
            rows = []
            if len(needle) >= 3:
                grams = sorted({needle[i:i + 3] for i in range(len(needle) - 2)})[:_MOST_TRIGRAMS]
                query = " AND ".join('"' + gram.replace('"', '""') + '"' for gram in grams)
                try:
                    rows = self.db.execute(f"{join} WHERE texts MATCH ? AND instr(texts.body, ?) > 0{only}",
                                           (query, needle, *of)).fetchall()
                    needle = None
                except sqlite3.OperationalError:  # `texts` is a plain table (no FTS5 here): `instr` alone
                    pass
            if needle is not None:  # shorter than a trigram, or no FTS5: every stored text scanned (in C)
                rows = self.db.execute(f"{join} WHERE instr(texts.body, ?) > 0{only}", (needle, *of)).fetchall()
        found: dict[str, list[tuple[int, bytes, str]]] = {}
        for doc, owner, path, kind in rows:
            found.setdefault(owner, []).append((doc, path, kind))
        return found

    def holds(self, text: str) -> bool:
        return self.needle is None or self.needle in text

    # -- checking ------------------------------------------------------------------------------------------
    def check(self, live: set[str], changed: set[str] | None, *, complete: bool = False) -> _Checked:
        """Every stored record against the files, `CHECKED` threads at a time (bounded memory). The common
        case, nothing changed, is one pass of `lstat` calls and one comparison per chunk. With the watcher's
        word (`changed`: the threads it saw change, `ops/watched.py`) the others are vouched for: of their
        records only the thread and its flag are read (at 10,000 threads 4.6 ms instead of 7.6 with the paths
        and signatures), and only the records of the threads it saw change are checked. `complete`: the records
        are those of the live threads exactly (`COMPLETE`), so not even their flags are read, only the few that
        say a thread's fields are parsed whatever the needle."""
        checked = _Checked()
        if changed is None:
            cursor = self.db.execute("SELECT thread, paths, sigs, fields FROM folders")
            while rows := cursor.fetchmany(CHECKED):
                self._check_records(checked, live, rows)
            return checked
        if complete:  # a record of every live thread and of no other: none of them need be read to know it
            checked.gone = [row[0] for row in derived.rows_where_in(
                self.db, "SELECT thread FROM folders WHERE thread IN ({})", sorted(changed - live))]
            checked.unchanged = live - changed
            checked.always = {thread for (thread,) in self.db.execute("SELECT thread FROM folders WHERE fields")
                              if thread not in changed}
        else:
            cursor = self.db.execute("SELECT thread, fields FROM folders")
            while flags := cursor.fetchmany(CHECKED):
                checked.gone += [thread for thread, _always in flags if thread not in live]
                trusted = [(thread, always) for thread, always in flags if thread in live and thread not in changed]
                checked.unchanged.update([thread for thread, _always in trusted])
                checked.always.update([thread for thread, always in trusted if always])
        records = derived.rows_where_in(self.db, "SELECT thread, paths, sigs, fields FROM folders WHERE thread IN ({})",
                                        sorted(changed & live))
        for start in range(0, len(records), CHECKED):
            self._check_records(checked, live, records[start:start + CHECKED])
        return checked

    def _check_records(self, checked: _Checked, live: set[str], rows: list[Any]) -> None:
        """One chunk of stored records against the files: one pass of `lstat` calls, then thread by thread
        when something differs."""
        threads = [row[0] for row in rows]
        if not live.issuperset(threads):
            checked.gone += [thread for thread in threads if thread not in live]
            rows = [row for row in rows if row[0] in live]
            threads = [row[0] for row in rows]
        try:
            now = signatures(self.fd, _SEP.join([row[1] for row in rows]).split(_SEP)) if rows else b""
        except OSError:  # something is gone: thread by thread
            now = b""
        if now != b"".join([row[2] for row in rows]):
            rows = [row for row in rows if self._unchanged(row[1], row[2])]
            threads = [row[0] for row in rows]
        checked.unchanged.update(threads)
        checked.always.update([row[0] for row in rows if row[3]])

    def _unchanged(self, paths: bytes, sigs: bytes) -> bool:
        try:
            return signatures(self.fd, paths.split(_SEP)) == sigs
        except OSError:
            return False

    # -- listing and reading a thread folder anew ------------------------------------------------------------
    def walk(self, thread: str, old: dict[bytes, tuple[bytes, int]]) -> _Walked | None:
        """The thread's folder listed as `find` always listed it (sorted, links never followed, MAX_DEPTH),
        each file's text reused from `old` (path → (signature, document)) when its signature matches, else
        read. None when the folder is not a folder (its fields are then read, and fail as they always did)."""
        name = os.fsencode(thread)
        try:
            info = os.lstat(name, dir_fd=self.fd)
            folder = os.open(name, FOLDER_FLAGS, dir_fd=self.fd) if stat.S_ISDIR(info.st_mode) else None
        except OSError:
            folder = None
        if folder is None:
            return None
        # Each signature is taken before the folder is listed or the file read: a change after it shows.
        walked = _Walked(_Record(name, signature(info, self.limit), True))
        try:
            self._thread_json(folder, name, old, walked)
            self._visit(folder, name, 0, old, walked)
        finally:
            os.close(folder)
        return walked

    def _thread_json(self, folder: int, name: bytes, old: dict[bytes, tuple[bytes, int]], walked: _Walked) -> None:
        try:
            info = os.lstat(b"thread.json", dir_fd=folder)
        except OSError:
            return
        if not stat.S_ISREG(info.st_mode):
            return
        data = read_in_folder(folder, b"thread.json", MAX_FILE_BYTES)
        raw = _as_text(data)
        # Outside its escapes JSON text is the text itself; a `\u` escape may spell a letter another way.
        walked.record.fields = raw is None or "\\u" in raw
        walked.fields = self._fields(os.fsdecode(name), data)
        self._add(walked, name + b"/thread.json", "j", info, old, None if raw is None else folded(raw))

    def _fields(self, thread: str, data: bytes | None) -> Fields | None:
        """The title and intent in `thread`'s `thread.json` bytes, parsed as every read parses them
        (`Repository.parse_thread`); None when they cannot be: `find` then reads the file, and fails naming it."""
        try:
            parsed = self.repo.parse_thread(thread, data) if data is not None else None
        except CorruptStateError:
            return None
        return None if parsed is None else (parsed.title, parsed.intent)

    def _add(self, walked: _Walked, path: bytes, kind: str, info: os.stat_result,
             old: dict[bytes, tuple[bytes, int]], text: str | None) -> None:
        record = walked.record
        record.paths += _SEP + path
        known = old.get(path)
        if known is not None and known[0] == exact_signature(info):
            record.sigs += known[0]
            walked.kept[path] = known[1]
            return
        record.sigs += signature(info, self.limit)
        if text is not None:
            walked.texts.append((path, kind, text))

    def _visit(self, folder: int, rel: bytes, depth: int, old: dict[bytes, tuple[bytes, int]],
               walked: _Walked) -> None:
        try:
            entries = sorted(os.scandir(folder), key=attrgetter("name"))
        except OSError:
            return
        for entry in entries:
            path = rel + b"/" + os.fsencode(entry.name)
            try:
                if entry.is_symlink():
                    continue
                if entry.is_dir(follow_symlinks=False):
                    if depth >= MAX_DEPTH:
                        continue
                    walked.record.paths += _SEP + path
                    walked.record.sigs += signature(entry.stat(follow_symlinks=False), self.limit)
                    inner = os.open(entry.name, FOLDER_FLAGS, dir_fd=folder)
                    try:
                        self._visit(inner, path, depth + 1, old, walked)
                    finally:
                        os.close(inner)
                elif entry.is_file(follow_symlinks=False) and not (depth == 0 and entry.name == "thread.json"):
                    info = entry.stat(follow_symlinks=False)
                    known = old.get(path)
                    unchanged = known is not None and known[0] == exact_signature(info)
                    text = None if unchanged else _read_file(folder, os.fsencode(entry.name))
                    if text is not None and depth == 0:  # spawn's scaffold is no hit (`find` skips its lines)
                        text = without_lines(text, scaffold_lines(entry.name, text))
                    self._add(walked, path, "f", info, old, None if text is None else folded(text))
            except OSError:  # gone meanwhile: not searched, as a file that cannot be opened
                continue

    # -- writing back ----------------------------------------------------------------------------------------
    def previous(self, thread: str) -> tuple[dict[bytes, tuple[bytes, int]], list[tuple[int, bytes, str]]]:
        """The thread's stored documents (`old_documents`) and those of them that hold the needle, read in one
        transaction: as one writer left them, so a document kept from them is judged by its own text."""
        self.db.execute("BEGIN")
        try:
            old = self.old_documents(thread)
            return old, self.matches(thread).get(thread, []) if old else []
        finally:
            self.db.execute("COMMIT")

    def old_documents(self, thread: str) -> dict[bytes, tuple[bytes, int]]:
        """path → (its recorded signature, its document) for each stored text of `thread`."""
        row = self.db.execute("SELECT paths, sigs FROM folders WHERE thread = ?", (thread,)).fetchone()
        if row is None:
            return {}
        docs = dict(self.db.execute("SELECT path, id FROM docs WHERE thread = ?", (thread,)))
        size = SIGNATURE.size
        return {path: (row[1][n * size:(n + 1) * size], docs[path])
                for n, path in enumerate(row[0].split(_SEP)) if path in docs}

    def save(self, walked: dict[str, _Walked | None], gone: Sequence[str] = (), *, final: bool = False,
             complete: str | None = None) -> None:
        """Write the records of `walked` (None: drop the thread's record) and drop those of `gone`; the `final`
        write also moves the watcher's mark (`ops/watched.py`), and says which index the records are complete
        for (`complete`: the search left a record of every live thread of that index; see `COMPLETE`), which
        every other write forgets. A database that is busy, or that another search wrote to since this one
        began, is left as it is for the rest of this search."""
        marker = complete if final else None
        if not self.writable or not (walked or gone or (final and (self.vouched.advances()
                                                                  or marker != self.complete_for))):
            return
        try:
            with derived.transaction(self.db) as db:
                if not self.vouched.keep(db, final=final):
                    self.writable = False
                    return
                if marker is None:
                    db.execute("DELETE FROM meta WHERE key = ?", (COMPLETE,))
                else:
                    db.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (COMPLETE, marker))
                self.complete_for = marker
                for thread in [*walked, *gone]:
                    found = walked.get(thread)
                    kept = set(found.kept.values()) if found is not None else set()
                    stale = [(doc,) for (doc,) in db.execute("SELECT id FROM docs WHERE thread = ?", (thread,))
                             if doc not in kept]
                    db.executemany("DELETE FROM texts WHERE rowid = ?", stale)
                    db.executemany("DELETE FROM docs WHERE id = ?", stale)
                    if found is None or found.fields is None:
                        db.execute("DELETE FROM fields WHERE thread = ?", (thread,))
                    if found is None:
                        db.execute("DELETE FROM folders WHERE thread = ?", (thread,))
                        continue
                    for path, kind, text in found.texts:
                        doc = db.execute("INSERT INTO docs (thread, path, kind) VALUES (?, ?, ?)",
                                         (thread, path, kind)).lastrowid
                        db.execute("INSERT INTO texts (rowid, body) VALUES (?, ?)", (doc, text))
                    record = found.record
                    db.execute("INSERT OR REPLACE INTO folders VALUES (?, ?, ?, ?)",
                               (thread, record.paths, record.sigs, int(record.fields)))
                    if found.fields is not None:  # written with the record: current while the record is
                        db.execute("INSERT OR REPLACE INTO fields VALUES (?, ?, ?)", (thread, *found.fields))
        except sqlite3.OperationalError as exc:
            if not derived.contended(exc):
                raise
            self.writable = False

    def complete(self, index: str | None, live: int) -> bool:
        """Whether the records are those of the `live` threads of the index file `index` exactly: the stored
        `COMPLETE` names that index (kept in `complete_for`), and as many threads have a record (one count, in
        C: a second check against a write that did not forget the claim, such as an older leslie's)."""
        row = self.db.execute("SELECT value FROM meta WHERE key = ?", (COMPLETE,)).fetchone()
        self.complete_for = row[0] if row is not None and isinstance(row[0], str) else None
        return (index is not None and self.complete_for == index
                and self.db.execute("SELECT count(*) FROM folders").fetchone()[0] == live)

    def known_fields(self, threads: Sequence[str]) -> dict[str, Fields]:
        """The stored fields of `threads`, each of whose record was just found unchanged: written with that
        record (`save`), they are what its `thread.json` holds now, and need no read."""
        found = derived.rows_where_in(self.db, "SELECT thread, title, intent FROM fields WHERE thread IN ({})",
                                      threads)
        return {thread: (title, intent) for thread, title, intent in found}

    # -- what may hold the needle ----------------------------------------------------------------------------
    def recorded(self, fields: bool, docs: Sequence[tuple[int, bytes, str]],
                 kept: dict[bytes, int] | None = None) -> tuple[bool, list[bytes]]:
        """(parse its fields?, its files that may hold the needle) from the stored texts `docs` that hold it
        (only those of `kept`, when given: the others were read anew)."""
        fields = self.fields_always or fields
        files = []
        for doc, path, kind in docs:
            if kept is not None and kept.get(path) != doc:
                continue
            if kind == "j":
                fields = True
            else:
                files.append(path)
        return fields, files

    def fresh(self, walked: _Walked, docs: Sequence[tuple[int, bytes, str]]) -> tuple[bool, list[bytes]]:
        """(parse its fields?, its files that may hold the needle) of a folder listed anew."""
        fields, files = self.recorded(walked.record.fields, docs, walked.kept)
        for path, kind, text in walked.texts:
            if self.holds(text):
                if kind == "j":
                    fields = True
                else:
                    files.append(path)
        return fields, files


def _shown(thread: str, files: list[bytes]) -> list[str]:
    """`files` relative to the thread's folder, in the order of its listing (each folder's entries sorted by
    name, a subfolder's files where the subfolder is): the order they are searched in."""
    skip = len(thread) + 1
    return sorted((os.fsdecode(path[skip:]) for path in files), key=lambda rel: rel.split("/"))


def to_search(repo: Repository, threads_dir: str, live: Sequence[str], needle: str, limit_ns: int,
              ask: Ask | None = None, index: str | None = None) -> Todo:
    """For each live thread (IDs sorted) that may hold `needle` (casefolded): whether to parse its fields, and
    which of its files to read, in the order they are searched. `ask` is the resident watcher's
    (`ops/watched.py`): with its answer, only the records of the threads it saw change are checked. `index`:
    the signature of the index file `live` was read from (`drawings.mirrored_index`), None when unknown."""
    try:
        fd = os.open(threads_dir, FOLDER_FLAGS)
    except OSError:  # no threads folder: every thread's fields are read (and fail as they would)
        return {thread: Found(True, None, []) for thread in live}
    try:
        return derived.with_store(repo.root, lambda db, persistent: _to_search(
            _Search(repo, db, persistent, fd, needle, limit_ns, Vouched("find", ask)), live, repo.root, index))
    finally:
        os.close(fd)


def _to_search(search: _Search, live: Sequence[str], root: str | os.PathLike[str], index: str | None) -> Todo:
    seen = None  # the threads the watcher saw change (None: unknown, every record is checked)
    if search.writable:  # the stored records' mark first, before any record is read (ops/watched.py)
        search.vouched.load(search.db)
        seen = search.vouched.changed(root)
    # The stored texts, records and fields read in one transaction: one snapshot of what one writer left. Read
    # apart, another search's write between them could pair its new records with texts read before it, which
    # name no file (a concurrent first search then missed a hit).
    search.db.execute("BEGIN")
    try:
        matches = search.matches()
        checked = search.check(set(live), seen, complete=search.complete(index, len(live)))
        todo: Todo = {}
        unchanged = checked.unchanged
        candidates = unchanged if search.fields_always else unchanged.intersection(matches).union(checked.always)
        for thread in candidates:
            fields, files = search.recorded(thread in checked.always, matches.get(thread, ()))
            if fields or files:
                todo[thread] = Found(fields, None, _shown(thread, files))
        known = search.known_fields([thread for thread, found in todo.items() if found.fields])
    finally:
        search.db.execute("COMMIT")
    for thread, values in known.items():
        todo[thread] = todo[thread]._replace(known=values)
    # `unchanged` holds live threads only: as many as `live`, and none changed or is new (the common case).
    changed = [] if len(unchanged) == len(live) else [thread for thread in live if thread not in unchanged]
    all_recorded = True  # every live thread has a record once this search's writes are done
    for batch in _batches(changed):
        walked: dict[str, _Walked | None] = {}
        for thread in batch:
            old, holding = search.previous(thread)
            found = search.walk(thread, old)
            walked[thread] = found
            if found is None:
                todo[thread] = Found(True, None, [])
                all_recorded = False
                continue
            fields, files = search.fresh(found, holding)
            if fields or files:
                todo[thread] = Found(fields, found.fields, _shown(thread, files))
        search.save(walked)
    search.save({}, checked.gone, final=True, complete=index if all_recorded else None)
    return todo


def _batches(items: Sequence[str]) -> Iterator[Sequence[str]]:
    for start in range(0, len(items), BATCH):
        yield items[start:start + BATCH]
