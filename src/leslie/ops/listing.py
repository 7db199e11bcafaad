"""What `leslie list` shows: one row per thread, filtered, sorted, limited, and grouped by objective.

Everything comes from the index (`.leslie/thread_relations.json`: objective, status, title, `created_at`,
`intent`, the references both ways; read through the derived store, `store.derived`, so that it is decoded only
when it changed) and two `stat` calls per thread, without opening any `thread.json`:

- a thread's **activity** (`updated_at`) is the newest mtime of its `thread.json` (every change leslie makes:
  status, title, references, objective) and its `progress.md` (the agent's log), else its `created_at`. It is
  not stored: a field rewritten on every change would make every merge of `thread.json` conflict;
- an index written by a leslie older than these keys still lists correctly: the few entries without
  `created_at`/`intent` are completed from their `thread.json` (`leslie doctor --fix` upgrades the index).

The drawing (table, plain lines) is `cli/list_view.py`; the JSON form is `Row.to_json`.
"""

from __future__ import annotations

import os
import sqlite3
import time
from array import array
from collections.abc import Sequence
from dataclasses import dataclass
from operator import itemgetter
from typing import Any, Final, NamedTuple, TypeVar

from leslie.errors import LeslieError, NotFoundError, UsageError
from leslie.ops.objectives import describe_objectives
from leslie.ops.objectives import titled as objectives_titled
from leslie.ops.watched import Ask, Vouched, keep_times
from leslie.store import drawings
from leslie.store.derived import with_index_table, with_store
from leslie.store.model import SETTABLE_THREAD_STATUSES, Objective
from leslie.store.names import is_id_text, resolve_objective_id
from leslie.store.repository import Repository

SORT_KEYS = ("activity", "created", "title", "id", "status")
ACTIVITY_FILES = ("thread.json", "progress.md")


class Row(NamedTuple):
    """One thread as `leslie list` shows it.

    A named tuple, so that the plain and JSON forms can be drawn from tuples of the same shape made straight
    from the store's rows (`listed`), without an object per thread: at 100,000 threads making them, and the
    garbage collector's passes over them, cost a tenth of `list`."""

    id: str
    title: str
    status: str
    objective: str | None
    objective_title: str | None
    intent: str
    created_at: str
    activity: int  # nanoseconds since the epoch: the newest of the mtimes above, else `created_at`
    targets: str  # the IDs this thread references, joined by commas ("" for none): split only when asked
    sources: str  # the IDs referencing this thread, likewise

    @property
    def references_to(self) -> tuple[str, ...]:
        return tuple(self.targets.split(",")) if self.targets else ()

    @property
    def referenced_by(self) -> tuple[str, ...]:
        return tuple(self.sources.split(",")) if self.sources else ()

    @property
    def updated_at(self) -> str:
        """The activity as `YYYY-MM-DDTHH:MM:SSZ` (UTC), like `created_at`."""
        return iso_time(self.activity // 1_000_000_000)

    def to_json(self, held_by: dict[str, Any] | None = None) -> dict[str, Any]:
        """The row as `leslie list --json` prints it (keys sorted); `held_by`: its live claim, if any."""
        return {"created_at": self.created_at, "held_by": held_by, "id": self.id, "intent": self.intent,
                "objective": self.objective,
                "objective_title": self.objective_title, "referenced_by": list(self.referenced_by),
                "references_to": list(self.references_to), "status": self.status, "title": self.title,
                "updated_at": self.updated_at}


# A row's fields as a plain tuple, in `Row`'s order (a `Row` is one too).
RowFields = tuple[str, str, str, str | None, str | None, str, str, int, str, str]
# The positions in a row of the fields the sorts use (`Row._fields`; tests/test_listing.py checks them).
_ID: Final = 0
_TITLE: Final = 1
_STATUS: Final = 2
_CREATED: Final = 6
_ACTIVITY: Final = 7
_STORED: Final = 8  # in the query's rows (`listed`), not a row's: the activity time the store kept, or NULL
_ENTRY_CREATED, _ENTRY_INTENT = 4, 5  # likewise: NULL in an entry an older leslie wrote
_R = TypeVar("_R", bound=RowFields)


@dataclass(frozen=True)
class Group:
    """The threads of one objective (`objective` None: threads without one) in the order shown."""

    objective: str | None
    title: str | None  # None: no objective, or an objective whose objective.json is missing
    status: str | None
    rows: tuple[Row, ...]


@dataclass(frozen=True)
class Filters:
    """What `leslie list` was asked to show: statuses and objectives (each empty: any), sort key, limit."""

    statuses: frozenset[str] = frozenset()
    objectives: frozenset[str] = frozenset()
    sort: str = "activity"
    limit: int | None = None


_DAYS: dict[int, str] = {}
# Each distinct second formatted once: threads made or touched in a burst share their seconds (a `list` of
# 100,000 threads formats a few thousand distinct times, not 100,000). Bounded: a long-lived process (the
# board) must not keep every second it ever saw.
_TIMES: dict[int, str] = {}
_TIMES_KEPT = 200_000


def iso_time(seconds: int) -> str:
    """`seconds` since the epoch as `YYYY-MM-DDTHH:MM:SSZ`; cached per second, the date part per day (a
    `strftime` per thread costs more than the two stats behind the time at 100,000 threads)."""
    text = _TIMES.get(seconds)
    if text is not None:
        return text
    day, rest = divmod(seconds, 86400)
    date = _DAYS.get(day)
    if date is None:
        date = _DAYS[day] = time.strftime("%Y-%m-%d", time.gmtime(day * 86400))
    text = f"{date}T{rest // 3600:02d}:{rest // 60 % 60:02d}:{rest % 60:02d}Z"
    if len(_TIMES) < _TIMES_KEPT:
        _TIMES[seconds] = text
    return text


def _parse_time(text: str) -> int:
    """A stored `YYYY-MM-DDTHH:MM:SSZ` as seconds since the epoch; 0 when it is absent or malformed."""
    if len(text) != 20 or text[4] != "-" or text[10] != "T" or text[19] != "Z":
        return 0
    try:
        fields = (int(text[0:4]), int(text[5:7]), int(text[8:10]), int(text[11:13]), int(text[14:16]),
                  int(text[17:19]))
    except ValueError:
        return 0
    year, month, day, hour, minute, second = fields
    if not 1 <= month <= 12 or year < 1:  # `calendar.timegm` raised here: a hand-edited index failed `list`
        return 0
    return _days_before(year, month) * 86400 + (day - 1) * 86400 + hour * 3600 + minute * 60 + second


def _days_before(year: int, month: int) -> int:
    """Days from 1970-01-01 to the first of `month` (1-12) of `year`, proleptic Gregorian, as `calendar.timegm`
    counts them (not `calendar`: it imports `datetime` and `locale`, 2-3 ms on every `list`)."""
    year -= month <= 2  # a year that starts in March: the leap day is its last
    era, year_of_era = divmod(year, 400)
    day_of_year = (153 * (month + (-3 if month > 2 else 9)) + 2) // 5
    return era * 146_097 + year_of_era * 365 + year_of_era // 4 - year_of_era // 100 + day_of_year - 719_468


def parse_filters(repo: Repository, *, statuses: list[str], objectives: list[str], sort: str = "activity",
                  limit: int | None = None) -> Filters:
    """Check and resolve the options of `leslie list`; any bad value is one UsageError (exit 2).

    A `--status` value may hold several statuses separated by commas. An `--objective` value is an objective
    ID, a unique prefix of one, or an objective's exact title (case-insensitive when no title matches exactly).
    """
    wanted: set[str] = set()
    for value in statuses:
        for part in value.split(","):
            status = part.strip()
            if status not in SETTABLE_THREAD_STATUSES:
                raise UsageError(f"unknown status {status!r} for --status: choose from "
                                 f"{', '.join(SETTABLE_THREAD_STATUSES)} (repeat --status for several)")
            wanted.add(status)
    if sort not in SORT_KEYS:
        raise UsageError(f"unknown sort key {sort!r} for --sort: choose from {', '.join(SORT_KEYS)}")
    if limit is not None and limit < 1:
        raise UsageError(f"--limit must be at least 1 (got {limit})")
    known = {o.id: o for o in repo.objectives()} if objectives else {}
    chosen = frozenset(objective_by_name(repo, text, known) for text in objectives)
    return Filters(frozenset(wanted), chosen, sort, limit)


def objective_by_name(repo: Repository, text: str, known: dict[str, Objective]) -> str:
    """The ID of the objective `text` names: its ID, a unique prefix of it, or its exact title."""
    if text in known:
        return text
    titled = objectives_titled(list(known.values()), text)
    if len(titled) == 1:
        return titled[0].id
    if titled:
        raise UsageError(f"several objectives are titled {text!r} ({describe_objectives(titled)}): name one by "
                         "its ID")
    if is_id_text(text, "objective"):
        try:
            found = resolve_objective_id(repo.root, text)  # a prefix of several: a UsageError with titles
        except NotFoundError:
            found = ""
        if found in known:
            return found
    listed = f"the objectives: {describe_objectives(list(known.values()))}" if known else "there are none yet"
    raise UsageError(f"no objective has the ID, ID prefix or title {text!r} ({listed})")


def _activities(threads_fd: int, thread_ids: Sequence[str]) -> list[int]:
    """The newest mtime (nanoseconds) of each thread's ACTIVITY_FILES, 0 when neither is there.

    `stat` relative to the open threads folder (`dir_fd`): the kernel walks two names, not the whole path.
    A link is not followed: a hostile `progress.md` pointing elsewhere must not lend its time. These two calls
    are most of what `list` costs per thread (~5 µs each), so they are written out, not looped.
    """
    stat = os.stat
    times: list[int] = []
    append = times.append
    for thread_id in thread_ids:
        try:
            state = stat(thread_id + "/thread.json", dir_fd=threads_fd, follow_symlinks=False).st_mtime_ns
        except OSError:
            state = 0
        try:
            log = stat(thread_id + "/progress.md", dir_fd=threads_fd, follow_symlinks=False).st_mtime_ns
        except OSError:
            append(state)
            continue
        append(log if log > state else state)
    return times


def _activity_times(repo: Repository, entries: list[Any], changed: set[str] | None,
                    vouched: Vouched) -> tuple[list[int], dict[str, int] | None]:
    """The activity time of each row of `entries` (the thread's ID first, the stored time last): read now
    (`_activities`), except where the watcher saw no change since the stored time (`changed`: the threads it
    saw change; None: every thread is read); with them, the times read now, to be kept when the watcher gave a
    mark (None: nothing to keep)."""
    ids = [e[_ID] for e in entries]
    try:
        threads_fd = os.open(repo.layout.threads_dir, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:  # no threads folder (a fresh repository): no activity to find, times fall back
        return [0] * len(ids), None
    try:
        if changed is None:
            times = _activities(threads_fd, ids)
            fresh = dict(zip(ids, times, strict=True)) if vouched.mark is not None else {}
        else:
            todo = [e[_ID] for e in entries if e[_STORED] is None or e[_ID] in changed]
            fresh = dict(zip(todo, _activities(threads_fd, todo), strict=True))
            times = [fresh[e[_ID]] if e[_STORED] is None or e[_ID] in changed else e[_STORED] for e in entries]
    finally:
        os.close(threads_fd)
    return times, fresh


def load_rows(repo: Repository, filters: Filters) -> list[Row]:
    """The threads of the index that pass `filters`, sorted and limited (not grouped): `listed` as `Row`s."""
    return list(map(Row._make, listed(repo, filters)))


def listed(repo: Repository, filters: Filters, *, intents: bool = True, ask: Ask | None = None) -> list[RowFields]:
    """The threads of the index that pass `filters`, sorted and limited (not grouped), each as the fields of its
    `Row` in a plain tuple (what the plain and JSON forms draw from). `intents=False` leaves `intent` and
    `sources` empty, for the forms that show neither (the plain lines, the table): at 100,000 threads the two
    columns are a tenth of what is read from the store.

    The index's fields come from the derived store (`store.derived`: the index is decoded only when it
    changed); the activity times from two `stat` calls per thread (`_activities`), or, when the resident
    watcher answers `ask` (`ops/watched.py`), from the store for every thread it saw no change in.
    """
    return Listing(repo, filters, intents=intents, ask=ask).rows()


class _Look(NamedTuple):
    """What one read transaction of the store found for a listing."""

    changed: set[str] | None  # the threads the watcher saw change since the stored times' mark (None: say all)
    entries: list[Any]  # the index's rows that pass the filters, with their stored times (none: a kept text)
    written: int  # how many times the stored activity times were written (`store.drawings.written`)
    index_sig: str | None  # of the index file the mirror was made from (None: a table of this command only)
    drawn: str | None  # the kept text, still exact


class Listing:
    """The rows of `list` (`rows()`, see `listed`); with a `name`, also the text drawn of them for a pipe, kept
    in the derived store (`store.drawings`) for the next run while nothing it shows changed:

        listing = Listing(repo, filters, name="plain", intents=False, ask=asker())
        text = listing.stored()
        if text is None:
            text = plain_text(listing.rows())
            listing.keep(text)

    A kept text is given on the resident watcher's word that no file under any thread's folder changed since
    the stored activity times' mark, with the index's mirror and those times as they were when it was kept (the
    version: the index file's signature and how many times the times were written), and with the same name,
    filters, objectives and code (the key); `also` is anything else the text shows, as JSON (`--json`: the live
    claims, which the clock ends as much as the files). Without the watcher's word, every time is read, and a
    text drawn from the same times and index is given (`_seen`)."""

    def __init__(self, repo: Repository, filters: Filters, *, name: str | None = None, also: object = None,
                 intents: bool = True, ask: Ask | None = None) -> None:
        self.repo, self.filters, self.intents = repo, filters, intents
        self.vouched = Vouched("activity", ask)
        self.titles = {o.id: o.title for o in repo.objectives()}
        self.key = None if name is None else _listing_key(name, also, filters, self.titles)
        self.version: str | None = None  # of the stored times the rows were made from, once they are all stored
        self.look = with_index_table(repo, self._look)
        self.times: tuple[list[int], dict[str, int] | None] | None = None  # read by `stored` (no watcher's word)

    def _look(self, db: sqlite3.Connection) -> _Look:
        statuses, objectives = sorted(self.filters.statuses), sorted(self.filters.objectives)
        where = []
        if statuses:
            where.append(f"status IN ({', '.join('?' * len(statuses))})")
        if objectives:
            where.append(f"objective IN ({', '.join('?' * len(objectives))})")
        changed = None
        if self.vouched.ask is not None:  # the stored times' mark, then the watcher's word, before the times
            self.vouched.load(db)
            changed = self.vouched.changed(self.repo.root)
        written, index = drawings.written(db, "activity"), drawings.mirrored_index(db)
        version = drawings.versioned("activity", written, index)
        if self.key is not None and version is not None and changed == set():
            drawn = drawings.kept(db, self.key, version)
            if drawn is not None:
                return _Look(changed, [], written, index, drawn)
        # Without intents, an entry an older leslie wrote still shows as one (`created_at` NULL): it is completed.
        columns = "intent, targets, sources" if self.intents else "'', targets, ''"
        stored = "NULL FROM threads" if changed is None else "a.ns FROM threads LEFT JOIN activity a USING (id)"
        sql = (f"SELECT id, title, status, objective, created_at, {columns}, {stored}"
               f"{' WHERE ' + ' AND '.join(where) if where else ''} ORDER BY id")
        return _Look(changed, db.execute(sql, [*statuses, *objectives]).fetchall(), written, index, None)

    def stored(self) -> str | None:
        """The kept text, when it was drawn from the listing as it is now. Without the watcher's word, every
        activity time is read here (and kept for `rows`): a text drawn from the same times, and the same index,
        is still exact (`_seen`)."""
        if self.look.drawn is not None and self.vouched.advances():  # move the mark past what changed nothing
            keep_times(self.repo.root, self.vouched, "activity", {}, set(), self.look.written)
        if self.look.drawn is not None or self.key is None or self.look.changed is not None:
            return self.look.drawn
        key, version = self.key, self._seen()
        if version is None:
            return None
        text = with_store(self.repo.root, lambda db, _persistent: drawings.kept(db, key, version))
        fresh = self.times[1] if self.times is not None else None
        if text is not None and fresh is not None:  # the watcher's first answer: it vouches for these from now on
            count = keep_times(self.repo.root, self.vouched, "activity", fresh, None, self.look.written)
            watched = None if count is None else drawings.versioned("activity", count, self.look.index_sig)
            if watched is not None:
                drawings.keep(str(self.repo.root), key, watched, text)
        return text

    def _seen(self) -> str | None:
        """Read every activity time now (for `rows`), and give the version of a text drawn from them: their
        digest, with the index file's signature (`drawings.seen`). None when a row would read its thread.json
        (an entry an older leslie wrote), which no time vouches for."""
        entries = self.look.entries
        self.times = _activity_times(self.repo, entries, None, self.vouched)
        if any(entry[_ENTRY_CREATED] is None or entry[_ENTRY_INTENT] is None for entry in entries):
            return None
        self.version = drawings.seen(array("q", self.times[0]).tobytes(), self.look.index_sig)
        return self.version

    def rows(self) -> list[RowFields]:
        """The rows as they are now, sorted and limited."""
        look = self.look
        if look.drawn is not None:  # rows not fetched: look again, as a listing with no text
            self.key = None
            look = self.look = with_index_table(self.repo, self._look)
        titles = self.titles
        read, self.times = self.times, None
        times, fresh = read or _activity_times(self.repo, look.entries, look.changed, self.vouched)
        kept = None if fresh is None else keep_times(self.repo.root, self.vouched, "activity", fresh, look.changed,
                                                     look.written)
        if kept is not None or read is None:  # else the version of the times `stored` read (`_seen`)
            self.version = None if kept is None else drawings.versioned("activity", kept, look.index_sig)
        # One comprehension: at 100,000 threads every step per row shows. The rare rows (an entry an older leslie
        # wrote, a thread with neither activity file) are completed by `_completed`.
        rows: list[RowFields] = [
            (tid, title, status, objective, titles.get(objective or ""), intent, created_at, modified, targets,
             sources)
            if modified and created_at is not None and intent is not None
            else _completed(self.repo, tid, title, status, objective, titles.get(objective or ""), created_at,
                            intent, modified, targets, sources)
            for (tid, title, status, objective, created_at, intent, targets, sources, _stored), modified
            in zip(look.entries, times, strict=True)]
        self.look = look._replace(entries=[])  # the store's tuples: not kept beside the rows
        del look
        _sort_id_ordered(rows, self.filters.sort)  # the rows come in ID order (the query's ORDER BY)
        return rows if self.filters.limit is None else rows[:self.filters.limit]

    @property
    def keepable(self) -> bool:
        """Whether a text drawn of `rows()` would be kept: the times the rows were made from are all stored."""
        return self.key is not None and self.version is not None

    def keep(self, text: str | None) -> None:
        """Keep `text`, what was drawn of `rows()`, when the times the rows were made from are all stored, at the
        version the store is still at (None: too long to keep). Best effort, as every write to the store."""
        if text is not None and self.key is not None and self.version is not None:
            drawings.keep(str(self.repo.root), self.key, self.version, text)


def _listing_key(name: str, also: object, filters: Filters, titles: dict[str, str]) -> str:
    """What a kept listing depends on besides the stored times and the index: the form and what else it shows,
    the filters, the objectives' titles (read from their files on every run) and the code that draws it."""
    return drawings.key(name, also, sorted(filters.statuses), sorted(filters.objectives), filters.sort, filters.limit,
                        sorted(titles.items()))


def _completed(repo: Repository, tid: str, title: str, status: str, objective: str | None,
               objective_title: str | None, created_at: str | None, intent: str | None, modified: int,
               targets: str, sources: str) -> RowFields:
    """The row of an entry an older leslie wrote (no `created_at`/`intent`: read from its thread.json), or of
    a thread with neither activity file (its creation time stands for its activity)."""
    if created_at is None or intent is None:
        created_at, intent = _from_thread_json(repo, tid)
    activity = modified or _parse_time(created_at) * 1_000_000_000
    return (tid, title, status, objective, objective_title, intent, created_at, activity, targets, sources)


def _from_thread_json(repo: Repository, thread_id: str) -> tuple[str, str]:
    """(created_at, intent) of an entry written by an older leslie, read from its thread.json ("" when it
    cannot be read: `list` shows what it can, `leslie doctor` says what is wrong)."""
    try:
        thread = repo.read_thread(thread_id)
    except LeslieError:
        return "", ""
    return thread.created_at, thread.intent


_STATUS_ORDER = {status: n for n, status in enumerate(SETTABLE_THREAD_STATUSES)}


def sort_rows(rows: list[Row], key: str) -> list[Row]:
    """`rows` in the order of `key`: activity and created newest first, title A-Z (case-insensitive), ID, or
    status (active, paused, done, archived; newest activity first within each). Ties go by ID."""
    rows = sorted(rows, key=itemgetter(_ID))  # the tie-break: the sorts below are stable
    _sort_id_ordered(rows, key)
    return rows


def _sort_id_ordered(rows: list[_R], key: str) -> None:
    """Sort `rows`, already in ID order, in place by `key` (see `sort_rows`)."""
    if key == "activity":
        rows.sort(key=itemgetter(_ACTIVITY), reverse=True)
    elif key == "created":
        rows.sort(key=itemgetter(_CREATED), reverse=True)
    elif key == "title":
        rows.sort(key=lambda r: r[_TITLE].casefold())
    elif key == "status":
        rows.sort(key=itemgetter(_ACTIVITY), reverse=True)
        rows.sort(key=lambda r: _STATUS_ORDER.get(r[_STATUS], len(_STATUS_ORDER)))


def group_rows(repo: Repository, rows: list[Row], sort: str = "activity") -> list[Group]:
    """`rows` grouped by objective, each group keeping the rows' order.

    Groups come in the order of their first row (by activity: the group with the newest activity first),
    but by objective title for `--sort title` and by ID for `--sort id`; threads without an objective last.
    """
    members: dict[str | None, list[Row]] = {}
    for row in rows:
        members.setdefault(row.objective, []).append(row)
    known = {o.id: o for o in repo.objectives()} if members else {}
    groups = []
    for objective, group_rows_ in members.items():
        found = known.get(objective or "")
        groups.append(Group(objective, found.title if found else None, found.status if found else None,
                            tuple(group_rows_)))
    if sort == "title":
        groups.sort(key=lambda g: (g.title or g.objective or "").casefold())
    elif sort == "id":
        groups.sort(key=lambda g: g.objective or "")
    groups.sort(key=lambda g: g.objective is None)  # stable: only moves the objective-less group last
    return groups
