"""Texts drawn of the derived store's rows, kept in the store for the next run (table `drawings`).

A read that draws the same text from the same rows again and again (`list --tree` piped, the graphs, `list`
piped) keeps what it drew with the *version* of what it drew it from, and a later run gives the kept text when
its own version is the same. A version is a text that starts with its family (`tree 12 <index signature>`,
`activity 7 <index signature>`): a family's writer counts its rows' writes in the store's `meta` table, and a
drawing kept at a version of one family makes the other drawings of that family go, not another family's.

What a version must cover, and when a drawing may be kept, is the reader's to say (`ops/tree_drawing.py`,
`ops/listing.py`); here is only the table.

**Pieces** (table `pieces`). A drawing of the tree is mostly one piece per thread, the same wherever the thread
stands (its line and its references' lines, its JSON object), framed by what the tree's shape adds (the groups,
the order of the threads). So each thread's piece is kept too, under the drawing's form: after a change, a
drawing is framed again from the kept pieces of the threads the change did not touch, and only the others are
drawn. A piece depends on the stored rows of the tree (its thread's, and its references' targets'): whoever
writes a row deletes, in the same transaction, the pieces that depend on it (`forget_pieces`), so a piece
found is exact for the rows stored beside it. Pieces are kept only at the version of the rows they were drawn
from, and by the code that drew them (meta `pieces_code`: other code finds none, and its first keep empties the
table).
"""

from __future__ import annotations

import functools
import hashlib
import json
import sqlite3
import time
from collections.abc import Callable
from typing import Protocol

from leslie.store.derived import contended, transaction, with_store
from leslie.version import loaded_code


class Drawing(Protocol):
    """A reader whose text is kept here (`ops.tree_drawing.TreeDrawing`, `ops.listing.Listing`): `stored()` is the kept
    text, if still exact; else the caller draws it from what the reader read (which settles `keepable`) and hands
    it to `keep`."""

    def stored(self) -> str | None: ...

    @property
    def keepable(self) -> bool: ...

    def keep(self, text: str | None) -> None: ...  # None: drawn, but too long to keep whole (`MAX_TEXT`)


MAX_TEXT = 16 << 20  # characters of a drawing kept (a tree of 100,000 threads is drawn anew each time)
MAX_KEPT = 8  # drawings kept per repository (the latest ones)


def written(db: sqlite3.Connection, family: str) -> int:
    """How many times `family`'s rows were written (meta `<family>_rows`)."""
    found = db.execute("SELECT value FROM meta WHERE key = ?", (family + "_rows",)).fetchone()
    return 0 if found is None else int(found[0])


def count_write(db: sqlite3.Connection, family: str) -> int:
    """Count one more write of `family`'s rows, in the caller's write transaction; the count now."""
    db.execute("INSERT INTO meta VALUES (?, 1) ON CONFLICT (key) DO UPDATE SET value = value + 1", (family + "_rows",))
    return written(db, family)


def versioned(family: str, count: int, index: str | None) -> str | None:
    """The version of a text drawn from `family`'s rows at that write `count` and from the index's mirror made
    of the index file of signature `index` (None: a mirror of this command only, and nothing drawn is kept)."""
    return None if index is None else f"{family} {count} {index}"


SEEN = "seen"  # the family of a version that is a digest of all a text was drawn from (`seen`)


def seen(data: bytes, index: str | None) -> str | None:
    """The version of a text drawn from nothing but the index's mirror (file signature `index`) and what
    `data` holds, all read by the run that drew it (`ops.listing`: every activity time, without the watcher's
    word): it vouches for itself, so it is kept whatever the store's rows (`_write_at`)."""
    return None if index is None else f"{SEEN} {hashlib.sha256(data).hexdigest()} {index}"


def mirrored_index(db: sqlite3.Connection) -> str | None:
    """The signature of the index file the store's `threads` table mirrors (`store.derived`); None when the
    table is one of this command only."""
    found = db.execute("SELECT value FROM meta WHERE key = 'index'").fetchone()
    return None if found is None else str(found[0])


def current_version(db: sqlite3.Connection, family: str) -> str | None:
    """The version the store is at for `family` (see `versioned`)."""
    return versioned(family, written(db, family), mirrored_index(db))


def key(*what: object) -> str:
    """The key of a kept text: a digest of what it depends on (JSON values) and of the code that draws it
    (`code_digest`). With nothing given, the digest of the code alone."""
    return hashlib.sha256(json.dumps([*what, code_digest()]).encode("utf-8", "surrogatepass")).hexdigest()


@functools.cache
def code_digest() -> str:
    """The digest of the code this process runs (`leslie.version.loaded_code`, the same for its whole life):
    made once, not at every key (~0.3 ms each; a tree read after a change makes three). The warm process
    makes it before it forks (`cli/preload.py`)."""
    return hashlib.sha256(json.dumps(loaded_code()).encode("utf-8", "surrogatepass")).hexdigest()


def kept(db: sqlite3.Connection, key: str, version: str) -> str | None:
    """The drawing kept under `key` at `version`, if any."""
    found = db.execute("SELECT text FROM drawings WHERE key = ? AND version = ?", (key, version)).fetchone()
    return None if found is None else str(found[0])


def _write_at(root: str, version: str, write: Callable[[sqlite3.Connection], None]) -> None:
    """`write(db)` in a write transaction of the repository's store, when the store is still at `version` of its
    family (else what is written was drawn from rows another run has since written). Best effort, as every write
    to the store: a busy store, or one of this command only, keeps nothing. A `seen` version needs no such
    check: it names what the text was drawn from."""
    family = version.split(" ", 1)[0]

    def store(db: sqlite3.Connection, persistent: bool) -> None:
        if not persistent:
            return
        try:
            with transaction(db):
                if family == SEEN or current_version(db, family) == version:
                    write(db)
        except sqlite3.OperationalError as exc:
            if not contended(exc):
                raise

    with_store(root, store)


def keep(root: str, key: str, version: str, text: str) -> None:
    """Keep `text` under `key` at `version` (see `_write_at`); the older drawings of its family go."""
    if len(text) > MAX_TEXT:
        return
    family = version.split(" ", 1)[0]

    def write(db: sqlite3.Connection) -> None:
        db.execute("DELETE FROM drawings WHERE version != ? AND substr(version, 1, ?) = ?",
                   (version, len(family) + 1, family + " "))
        db.execute("INSERT OR REPLACE INTO drawings VALUES (?, ?, ?, ?)", (key, version, time.time_ns(), text))
        db.execute("DELETE FROM drawings WHERE key NOT IN (SELECT key FROM drawings ORDER BY made DESC LIMIT ?)",
                   (MAX_KEPT,))

    _write_at(root, version, write)


def _pieces_current(db: sqlite3.Connection, code: str) -> bool:
    found = db.execute("SELECT value FROM meta WHERE key = 'pieces_code'").fetchone()
    return found is not None and found[0] == code


def pieces(db: sqlite3.Connection, form: str) -> dict[str, str]:
    """The kept pieces of `form`, by thread ID (none when other code kept them)."""
    if not _pieces_current(db, key()):
        return {}
    return dict(db.execute("SELECT id, text FROM pieces WHERE form = ?", (form,)))


_FEW = 64  # threads whose referencers are looked for one by one; past that, every piece goes
# The pieces of the threads whose stored references may name the ID given: a thread ID within the joined targets
# or the scopes' JSON (one that holds it as a part of a longer ID too: a piece more is drawn again, no more).
_REFERENCING = ("DELETE FROM pieces WHERE id IN (SELECT id FROM tree WHERE instr(targets, ?) > 0 "
                "OR (scopes IS NOT NULL AND instr(scopes, ?) > 0))")


def forget_pieces(db: sqlite3.Connection, ids: list[str]) -> None:
    """In the caller's write transaction (the one that writes the tree's rows of `ids`), delete every form's
    pieces that show the threads `ids`: theirs, and those of the threads referencing one of them (their lines
    show the target's title and status). Many threads at once (a first read, a checkout): every piece."""
    if len(ids) > _FEW:
        db.execute("DELETE FROM pieces")
        return
    for tid in ids:  # an ID is `[a-z0-9-]`: written as it is in the joined targets and in the scopes' JSON
        db.execute("DELETE FROM pieces WHERE id = ?", (tid,))
        db.execute(_REFERENCING, (tid, tid))


def keep_pieces(root: str, form: str, version: str, drawn: dict[str, str]) -> None:
    """Keep the pieces `drawn` of `form` at `version` of the tree's rows (see `_write_at`); pieces of other code
    go first. A form may name a variant after a space (`terminal 120 colour`: a terminal's width and colours):
    the pieces of the form's other variants go too, so a terminal resized again and again keeps one set."""
    code = key()
    kind, _, variant = form.partition(" ")

    def write(db: sqlite3.Connection) -> None:
        if not _pieces_current(db, code):
            db.execute("DELETE FROM pieces")
            db.execute("INSERT OR REPLACE INTO meta VALUES ('pieces_code', ?)", (code,))
        elif variant:
            db.execute("DELETE FROM pieces WHERE form != ? AND substr(form, 1, ?) = ?", (form, len(kind) + 1,
                                                                                       kind + " "))
        db.executemany("INSERT OR REPLACE INTO pieces VALUES (?, ?, ?)",
                       [(form, tid, text) for tid, text in drawn.items()])

    _write_at(root, version, write)
