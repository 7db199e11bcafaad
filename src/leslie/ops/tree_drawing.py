"""The tree's rows and drawings in the derived store: `load_tree` (the tree as every `thread.json` says, reading
only the files that changed) and `TreeDrawing` (what is drawn of it for a program or a pipe, kept).

What the tree shows of each `thread.json` is kept in the derived store (`store.derived`, table `tree`) with the
file's signature, so a run reads only the files that changed since the last one: one `lstat` per thread instead
of a strict read and parse (at 10,000 threads, most of what `list --tree` cost). With the warm process's
watcher, not even that: only the threads it saw change are looked at (`ops/watched.py`).

**Drawings.** What is drawn of the tree (`list --tree` piped or on a terminal, with `--json` piped, the
graphs) is kept in the store too (`store.drawings`, `TreeDrawing`), with what it was drawn from: the version of
the stored rows (how many times they were written, `meta.tree_rows`), the index's mirror (the signature of the
index file), and a key of the drawing, its filters, the objectives and the code that drew it. A later run
gives the kept text when all of these are the same and every stored row is what it would use as it is (the
watcher saw no change in the thread's `thread.json`, or its signature is the stored one): the tree of 10,000
threads is then one query instead of tens of thousands of Python objects made and drawn again. A drawing is
kept only when every row the tree was made of is stored at that version (a row read but not stored, or a write
that lost a race to another reader, keeps nothing), and only while the store is still at it.

**Pieces.** Every drawing of the tree is one piece per thread (a thread's plain or terminal lines, its JSON
object, its graph node and edges) in a frame of the groups; each thread's piece is kept too (`store.drawings`,
"Pieces"), so the first read after a change draws only what the change touched (`TreeDrawing._framed`): it
reads and stores the rows of the threads that may have changed (the watcher's, or those whose signature
moved), which makes the pieces that show them go (theirs, and those of the threads that reference them), then
frames the drawing from one read of every live thread's row and the kept pieces: a full node only for a
thread without a kept piece, a bare one (no references: its piece shows it) for the others. A thread in the
order (SPEC §14) is drawn each time: its piece shows the order, which the index holds, not the rows. A run
that drew new pieces keeps them and not the whole drawing; the next run, made of kept pieces only, keeps the
whole.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import stat
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, NamedTuple

from leslie.ops.find_index import RACY_NS, exact_signature, settled
from leslie.ops.tree import Entry, ThreadNode, Tree, Wanted, build_tree, grouped, order_of, thread_nodes, wanted
from leslie.ops.watched import Ask, Vouched
from leslie.store import drawings
from leslie.store.derived import contended, rows_where_in, transaction, with_index_table, with_store
from leslie.store.fsio import FOLDER_FLAGS
from leslie.store.model import TOMBSTONE, Objective
from leslie.store.repository import Repository

# Every thread the index names, with what the store keeps of its `thread.json` (NULLs: nothing kept).
_ROWS = ("SELECT t.id, r.sig, r.title, r.status, r.objective, r.created_at, r.targets, r.scopes "
         "FROM threads t LEFT JOIN tree r USING (id) ORDER BY t.id")
# What a drawing made of pieces looks at: each thread's stored signature (NULL: no row), of every thread of the
# index, or of those without a stored row and (`_SIGNED_IN`) those given (the threads the watcher saw change).
_SIGNED = "SELECT t.id, r.sig FROM threads t LEFT JOIN tree r USING (id)"
_UNSIGNED = _SIGNED + " WHERE r.id IS NULL"
_STORED = "SELECT t.id, r.sig FROM threads t JOIN tree r USING (id)"  # the threads with a stored row
_SIGNED_IN = _STORED + " WHERE t.id IN ({})"
_FEW = 64  # up to this many threads to look at, one `lstat` of each folder rather than a listing of them all
_GONE = "SELECT id FROM tree WHERE id NOT IN (SELECT id FROM threads)"
_COUNTS = "SELECT (SELECT count(*) FROM threads), (SELECT count(*) FROM tree)"
_ORDER = "SELECT id, comes_after FROM threads WHERE comes_after != ''"  # the index's order edges (SPEC §14)
# The live threads of the tree, for a drawing made of pieces: the stored rows alone, which at the version a frame
# is made at are all of threads in the index (the rows of those gone from it were removed when it was stored).
_FRAME = "SELECT id, title, status, objective, created_at FROM tree WHERE status != ?"
_LIVE = ("SELECT t.id, r.title, r.status, r.objective, r.created_at, r.targets, r.scopes FROM threads t "
         "JOIN tree r USING (id) WHERE r.status != '" + TOMBSTONE + "' AND t.id IN ({})")


def load_tree(repo: Repository, *, objective: Wanted = None, status: Wanted = None,
              ask: Ask | None = None) -> Tree:
    """The repository's tree: every thread the index names, as its `thread.json` says (see the module), and
    every objective. When the resident watcher answers `ask` (`ops/watched.py`), the stored rows of the threads
    it saw no change in are used without a look at their files. A corrupt `thread.json` fails the command
    naming it (exit 4), as a strict read does."""
    return TreeDrawing(repo, None, objective=objective, status=status, ask=ask).tree()


class TreeDrawing:
    """One drawing of the repository's tree (`name`: which drawing, e.g. "mermaid"), kept in the derived store
    with what it was drawn from (see the module, "Drawings"):

        drawing = TreeDrawing(repo, "mermaid", ask=asker())
        text = drawing.stored()
        if text is None:
            text = render_mermaid(drawing.tree())
            drawing.keep(text)

    `name` None draws nothing: `tree()` alone, as `load_tree`. A drawing made of one piece per thread names
    the function that draws a thread's piece (`piece`), and draws each node of `tree()` with `pieces`, which
    gives the kept piece of the threads that have one (see the module, "Pieces"):

        drawing = TreeDrawing(repo, "plain", piece=plain_piece)
        text = drawing.stored() or "".join(drawing.draw(plain_lines))"""

    def __init__(self, repo: Repository, name: str | None, *, objective: Wanted = None, status: Wanted = None,
                 ask: Ask | None = None, piece: Callable[[ThreadNode], str] | None = None) -> None:
        self.repo, self.name, self.objective, self.status = repo, name, objective, status
        self.piece = piece if name is not None else None
        self.pieces = Pieces({}, piece) if piece is not None else None
        self.vouched = Vouched("tree", ask)
        self.objectives = repo.objectives()
        self.key = None if name is None else _drawing_key(name, self.objectives, objective, status)
        self.look = with_index_table(repo, self._look)
        self.version = self.look.version  # of the rows the tree was made of, once they are all stored

    def _look(self, db: sqlite3.Connection, *, every: bool = False) -> _Look:
        """What the store holds now: the kept drawing if still exact, else the rows of the threads to look at
        (for a drawing made of pieces, the signatures of those that may have changed; `every`: every row, and
        no kept drawing looked for)."""
        self.vouched.load(db)  # the stored rows' mark, before the rows; then the watcher's word
        changed = self.vouched.changed(self.repo.root)
        written, index = drawings.written(db, "tree"), drawings.mirrored_index(db)
        version = drawings.versioned("tree", written, index)
        if self.key is not None and version is not None and not every:
            drawn = drawings.kept(db, self.key, version)
            if drawn is not None and _rows_current(db, self.repo, changed):
                return _Look(changed, [], [], {}, written, index, drawn)
        gone = [row[0] for row in db.execute(_GONE)]
        if self.piece is None or every:
            rows = db.execute(_ROWS).fetchall()
        elif changed is None:
            rows = db.execute(_SIGNED).fetchall()
        else:  # only the threads that may have changed, and those without a stored row
            indexed, stored = db.execute(_COUNTS).fetchone()
            # No stored row of a thread gone from the index, and as many rows as threads: one row each.
            rows = [] if not gone and indexed == stored else db.execute(_UNSIGNED).fetchall()
            rows += rows_where_in(db, _SIGNED_IN, sorted(changed))
        after = {tid: set(ids.split(",")) for tid, ids in db.execute(_ORDER)}
        return _Look(changed, rows, gone, after, written, index, None)

    def stored(self) -> str | None:
        """The stored drawing, when it was drawn from the tree as it is now."""
        if self.look.drawn is not None and self.vouched.advances():  # move the mark past what changed nothing
            with_store(self.repo.root, lambda db, _persistent: _keep(db, [], [], self.vouched))
        return self.look.drawn

    def tree(self) -> Tree:
        """The tree as it is now (the stored rows of the threads whose `thread.json` is unchanged, the others
        read strictly and stored)."""
        look = self.look
        if look.drawn is not None:  # rows not fetched: look again, as a reader with no drawing
            self.key = None
            look = self.look = with_index_table(self.repo, self._look)
        if self.piece is not None:
            framed = self._framed(look)
            if framed is not None:
                return framed
            self.pieces = Pieces({}, self.piece)  # the tree made of every row, and drawn whole
            look = with_index_table(self.repo, lambda db: self._look(db, every=True))
        entries, self.version = _entries(self.repo, look, self.vouched)
        after = look.after
        self.look = look._replace(rows=[], gone=[])  # not held while the tree is drawn (100,000 rows: ~30 MB)
        del look
        return build_tree(entries, self.objectives, objective=self.objective, status=self.status, after=after)

    def _framed(self, look: _Look) -> Tree | None:
        """The tree of a drawing made of pieces (see the module): the threads that may have changed read and
        stored, then the tree framed from the store, the threads with a kept piece left bare. None when the
        stored rows could not all be brought up to the files, or most threads have no kept piece: the tree is
        then made from every row (and the pieces drawn of it are kept)."""
        _entries_read, fresh, complete = _read(self.repo, look)
        version = _store(self.repo, look, self.vouched, fresh, complete)
        if version is None:  # not stored: the store is not the files
            return None
        framed = with_store(self.repo.root, lambda db, persistent: self._frame(db, version, look.after) if persistent
                            else None)
        if framed is not None:
            self.version = version
        return framed

    def _frame(self, db: sqlite3.Connection, version: str, after: Mapping[str, Iterable[str]]) -> Tree | None:
        """The tree from the stored rows at `version` (None when the store has moved on), in one read."""
        assert self.piece is not None and self.name is not None
        db.execute("BEGIN")
        try:
            if drawings.current_version(db, "tree") != version:
                return None
            rows = db.execute(_FRAME, (TOMBSTONE,)).fetchall()
            kept = drawings.pieces(db, self.name)
            for tid in set(after).union(*after.values()):  # a piece shows no order: none of a thread in it
                kept.pop(tid, None)
            drawn = {row[0] for row in rows if row[0] not in kept}
            if len(drawn) > max(_FEW, len(rows) // 2):  # most to draw (a first drawing): from every row
                return None
            nodes = _drawn_nodes(db, drawn, after)
        finally:
            db.execute("COMMIT")
        objectives_wanted, statuses_wanted = wanted(self.objective), wanted(self.status)
        rows.sort(key=lambda row: (row[4], row[1].casefold(), row[0]))  # `thread_order`
        members: dict[str | None, list[ThreadNode]] = {}
        for tid, title, status, objective, created_at in rows:
            if ((objectives_wanted is None or objective in objectives_wanted)
                    and (statuses_wanted is None or status in statuses_wanted)):
                node = nodes.get(tid)
                if node is None:  # bare: its kept piece shows it
                    node = ThreadNode(tid, title, status, created_at, ())
                members.setdefault(objective, []).append(node)
        self.pieces = Pieces(kept, self.piece)
        return grouped(self.objectives, {oid: tuple(found) for oid, found in members.items()}, self.objective,
                        self.status, True)

    def draw(self, lines: Callable[[Tree, Callable[[ThreadNode], str]], Iterable[str]]) -> Iterable[str]:
        """What `lines` draws of `tree()` for a drawing made of pieces, each thread's piece given by `pieces` (the
        kept one, or drawn now and kept with the drawing)."""
        tree = self.tree()  # settles which threads' kept pieces still stand
        assert self.pieces is not None, "a drawing made of pieces names its piece"
        return lines(tree, self.pieces)

    @property
    def keepable(self) -> bool:
        """Whether a text drawn of `tree()` would be kept: every row the tree was made of is stored."""
        return self.key is not None and self.version is not None

    def keep(self, text: str | None) -> None:
        """Store `text`, what was drawn of `tree()`, when every row the tree was made of is stored, at the version
        the store is still at; or, when pieces were drawn for it, those pieces (see the module), even of a text
        too long to be kept whole (None). Best effort, as every write to the store."""
        if self.key is None or self.version is None:
            return
        if self.name is not None and self.pieces is not None and self.pieces.drawn:
            drawings.keep_pieces(str(self.repo.root), self.name, self.version, self.pieces.drawn)
        elif text is not None:
            drawings.keep(str(self.repo.root), self.key, self.version, text)


class Pieces:
    """The pieces of one drawing (see the module): calling it with a node gives the thread's kept piece, else
    draws it with `draw` (and remembers it in `drawn`, to be kept, unless the thread is in the order)."""

    def __init__(self, kept: dict[str, str], draw: Callable[[ThreadNode], str]) -> None:
        self.kept, self.draw = kept, draw
        self.drawn: dict[str, str] = {}

    def __call__(self, node: ThreadNode) -> str:
        found = self.kept.get(node.id)
        if found is None:
            found = self.draw(node)
            if not (node.after or node.before):
                self.drawn[node.id] = found
        return found


class _Look(NamedTuple):
    """What one read transaction of the store found."""

    changed: set[str] | None  # the threads the watcher saw change since the stored rows' mark (None: say all)
    rows: list[Any]  # threads of the index, with their stored rows or signatures (none when a drawing was found)
    gone: list[str]  # stored rows of threads no longer in the index
    after: dict[str, set[str]]  # the index's order edges (SPEC §14): the threads each comes after, from its mirror
    written: int  # how many times the stored rows were written (meta `tree_rows`)
    index_sig: str | None  # of the index file the mirror was made from (None: a table of this command only)
    drawn: str | None  # the stored drawing, still exact

    @property
    def version(self) -> str | None:
        """Of the stored rows and of the index they go with (None: nothing is drawn from them)."""
        return drawings.versioned("tree", self.written, self.index_sig)


def _drawing_key(name: str, objectives: Iterable[Objective], objective: Wanted, status: Wanted) -> str:
    """What a drawing depends on besides the stored rows and the index: the drawing, its filters, the objectives
    (read from their files on every run) and the code that draws it."""
    return drawings.key(name, sorted(wanted(objective) or ()), sorted(wanted(status) or ()),
                        [(o.id, o.title, o.status) for o in objectives])


def _drawn_nodes(db: sqlite3.Connection, ids: set[str], after: Mapping[str, Iterable[str]]) -> dict[str, ThreadNode]:
    """The nodes of the live threads `ids` (those to be drawn now), from their stored rows and those of the
    threads they reference or are in order with."""
    entries = [_entry(row) for row in rows_where_in(db, _LIVE, sorted(ids))]
    around = {target for entry in entries for target in entry.references} | set(after).union(*after.values())
    live: dict[str, Entry] = {entry.id: entry for entry in entries}
    live.update((row[0], _entry(row)) for row in rows_where_in(db, _LIVE, sorted(around - live.keys())))
    return {node.id: node for node in thread_nodes(list(entries), live, order_of(live, after))}


def _entry(row: Any) -> Entry:
    tid, title, status, objective, created_at, targets, scopes = row
    return Entry(tid, title, status, objective, created_at, _references(targets, scopes))


def _rows_current(db: sqlite3.Connection, repo: Repository, changed: set[str] | None) -> bool:
    """Whether every thread's stored row is what `_entries` would use as it is: with the watcher's word, the
    threads it saw change have the `thread.json` stored; without it, every thread has. Every thread of the index
    has a stored row at any version a drawing was kept at (`TreeDrawing.keep`)."""
    stored = db.execute(_STORED).fetchall() if changed is None else rows_where_in(db, _SIGNED_IN, sorted(changed))
    now = _signatures(repo, [tid for tid, _sig in stored])
    return all(now.get(tid) == sig for tid, sig in stored)


def _read(repo: Repository, look: _Look) -> tuple[dict[str, Entry], list[tuple[Any, ...]], bool]:
    """The threads of `look.rows` whose stored row may not be their `thread.json`, read strictly: a stored row is
    used when the watcher saw no change in the thread since the rows' mark, or (`changed` None: it was not asked,
    or could not say) when the file has the signature stored with it (taken before the file is read, so a change
    after the read shows next time; one stored within the racy second never matches). Their entries, their rows
    to store, and whether every one can be (a signature was taken of each)."""
    limit = time.time_ns() - RACY_NS
    changed = look.changed
    sigs = _signatures(repo, [row[0] for row in look.rows if changed is None or row[1] is None or row[0] in changed])
    read: dict[str, Entry] = {}
    fresh: list[tuple[Any, ...]] = []
    complete = True
    stale = [row[0] for row in look.rows  # no stored row, or one the watcher or the signature does not vouch for
             if row[1] is None or ((changed is None or row[0] in changed) and sigs.get(row[0]) != row[1])]
    for tid, thread in zip(stale, repo.read_threads(stale), strict=True):
        read[tid] = Entry(tid, thread.title, thread.status, thread.objective, thread.created_at, thread.references)
        sig = sigs.get(tid)
        if sig is None:
            complete = False
        else:
            fresh.append((tid, settled(sig, limit), thread.title, thread.status, thread.objective,
                          thread.created_at, *_stored_references(thread.references)))
    return read, fresh, complete


def _store(repo: Repository, look: _Look, vouched: Vouched, fresh: list[tuple[Any, ...]], complete: bool) -> str | None:
    """Store the rows read now and forget the threads gone from the index (`_keep`): the version of the stored
    rows, which are then every thread's `thread.json`, or None when some could not be stored."""
    version = look.version if complete else None
    if fresh or look.gone or vouched.advances():
        written = with_store(repo.root, lambda db, persistent: _keep(db, fresh, look.gone, vouched) if persistent
                             else None)
        if fresh or look.gone:  # the rows' new version, with the index they were read for
            version = None if version is None or written is None else drawings.versioned("tree", written,
                                                                                          look.index_sig)
    return version


def _entries(repo: Repository, look: _Look, vouched: Vouched) -> tuple[list[Entry], str | None]:
    """The entries of the index's threads (`look.rows`: each with its stored row, if any): from the stored row,
    or read strictly and stored (`_read`). With them, the version of the stored rows that are exactly these
    entries, or None when some could not be stored."""
    read, fresh, complete = _read(repo, look)
    entries = list(read.values())
    entries += [Entry(tid, title, status, objective, created_at, _references(targets, scopes))
                for tid, _sig, title, status, objective, created_at, targets, scopes in look.rows if tid not in read]
    return entries, _store(repo, look, vouched, fresh, complete)


def _stored_references(references: dict[str, tuple[str, ...]]) -> tuple[str, str | None]:
    """A thread's references as the store keeps them: the targets joined by commas, and the scopes as JSON
    only when one is not the whole thread (most are: no JSON to decode for them)."""
    if any(references.values()) or any("," in target for target in references):
        return "", json.dumps({target: list(scope) for target, scope in references.items()})
    return ",".join(references), None


def _references(targets: str, scopes: str | None) -> dict[str, Any]:
    if scopes is not None:
        found: dict[str, Any] = json.loads(scopes)
        return found
    return dict.fromkeys(targets.split(","), ()) if targets else {}


def _signatures(repo: Repository, ids: list[str]) -> dict[str, bytes]:
    """The exact signature of each thread's `thread.json` now (`find_index.exact_signature`), for the threads
    whose folder is a folder (not a link: those are read strictly, and fail as every read does); one `lstat`
    each, relative to the threads folder. The folders are known from one listing of the threads folder, or,
    for the few threads a watcher saw change, from an `lstat` of each."""
    if not ids:
        return {}
    try:
        folder = os.open(repo.layout.threads_dir, FOLDER_FLAGS)
    except OSError:
        return {}
    try:
        if len(ids) <= _FEW:
            folders = {tid for tid in ids if _is_folder(tid, folder)}
        else:
            with os.scandir(folder) as listing:
                folders = {entry.name for entry in listing if entry.is_dir(follow_symlinks=False)}
        found: dict[str, bytes] = {}
        lstat = os.lstat
        for tid in ids:
            if tid in folders:
                with contextlib.suppress(OSError):  # no thread.json: read strictly, and fail as a read does
                    found[tid] = exact_signature(lstat(tid + "/thread.json", dir_fd=folder))
        return found
    finally:
        os.close(folder)


def _is_folder(name: str, folder: int) -> bool:
    try:
        return stat.S_ISDIR(os.lstat(name, dir_fd=folder).st_mode)
    except OSError:
        return False


def _keep(db: sqlite3.Connection, fresh: list[tuple[Any, ...]], gone: Iterable[str], vouched: Vouched) -> int | None:
    """Store what was read now and forget the threads no longer in the index, under the watcher's new mark and
    only if the stored mark is still the one this run loaded (`ops/watched.py`); rows written or removed count
    as one more write of the rows (`tree_rows`), and the pieces drawn from them go with them
    (`drawings.forget_pieces`). That count then, None when nothing was written. Best effort: a busy store is
    left as it is."""
    gone = list(gone)
    try:
        with transaction(db):
            if not vouched.keep(db, final=True) or not (fresh or gone):
                return None
            db.executemany("DELETE FROM tree WHERE id = ?", [(tid,) for tid in gone])
            db.executemany("INSERT OR REPLACE INTO tree VALUES (?, ?, ?, ?, ?, ?, ?, ?)", fresh)
            drawings.forget_pieces(db, [row[0] for row in fresh] + gone)
            return drawings.count_write(db, "tree")
    except sqlite3.OperationalError as exc:
        if not contended(exc):
            raise
    return None
