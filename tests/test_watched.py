"""Reads that ask the resident watcher what changed (`ops/watched.py`): `list`'s activity times, `find`'s
records, `status`'s thread.json times and the tree's rows. Real inotify through the watcher (`guard/watcher.py`,
asked in this process as the server asks it), real files, the real derived store; each read is checked against
the same read without a watcher."""

from __future__ import annotations

import json
import os
import random
import shutil
import time
from typing import Any

import pytest

from conftest import retitle_in_place, state_dir
from conftest import watcher_ask as ask
from leslie.cli.list_view import json_chunks, plain_text
from leslie.cli.tree_view import json_lines, json_piece, plain_lines, plain_piece
from leslie.errors import NotFoundError
from leslie.guard import watcher as guard_watcher
from leslie.ops import doctor, find_index, listing, tree_drawing
from leslie.ops.find import find
from leslie.ops.graphs import mermaid_piece, render_mermaid
from leslie.ops.listing import Filters, Listing, listed
from leslie.ops.objectives import create_objective, retitle_objective
from leslie.ops.threads import RefSpec, reference, remove, retitle, set_status, spawn, unreference
from leslie.ops.tree import Tree
from leslie.ops.watched import Vouched
from leslie.store import derived
from leslie.store.repository import Repository

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc/sys/fs/inotify"), reason="inotify is Linux's")

ALL = Filters(frozenset(), frozenset(), "activity", None)


def settle(repo: Repository) -> None:
    """Ask until the watch is set up."""
    deadline = time.monotonic() + 20
    while "mark" not in (ask(str(repo.root), None) or {}):
        assert time.monotonic() < deadline, "the watcher never gave a mark"
        time.sleep(0.05)


class Stats:
    """The threads whose activity files `list` looked at, per call of `listed`."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.read: list[str] = []
        real = listing._activities

        def counted(threads_fd: int, thread_ids: Any) -> list[int]:
            self.read += thread_ids
            return real(threads_fd, thread_ids)

        monkeypatch.setattr(listing, "_activities", counted)

    def take(self) -> list[str]:
        read, self.read = self.read, []
        return sorted(read)


def watched_list(repo: Repository, filters: Filters = ALL) -> list[Any]:
    """`listed` with the watcher, checked against `listed` without it (every file looked at)."""
    rows = listed(repo, filters, ask=ask)
    assert rows == listed(repo, filters), "the watched list differs from the one read from every file"
    return rows


def plain_watched(repo: Repository, filters: Filters = ALL, *, watched: bool = True) -> bool:
    """`list` piped: the kept text, else the text drawn now and kept (`Listing`), checked against the text of the
    rows read without the watcher (every file looked at); whether it was given from the store. `watched=False`:
    the same without the watcher's word."""
    listing = Listing(repo, filters, name="plain", intents=False, ask=ask if watched else None)
    text = listing.stored()
    given = text is not None
    if text is None:
        text = plain_text(listing.rows())
        listing.keep(text)
    assert text == plain_text(listed(repo, filters, intents=False)), "the kept listing is not the listing"
    return given


def forge_listings(repo: Repository) -> None:
    def forge(db: Any, _persistent: bool) -> None:
        assert db.execute("UPDATE drawings SET text = 'forged' WHERE version LIKE 'activity %'").rowcount > 0

    derived.with_store(repo.root, forge)


def given_text(repo: Repository, filters: Filters = ALL) -> str | None:
    return Listing(repo, filters, name="plain", intents=False, ask=ask).stored()


@pytest.fixture
def threads(repo: Repository) -> list[str]:
    return [spawn(repo, f"Thread {n}", thread_id=f"thread-{n}").thread.id for n in range(6)]


@pytest.fixture
def listed_once(repo: Repository, threads: list[str], watcher: None, monkeypatch: pytest.MonkeyPatch) -> Stats:
    """The watch set up, one watched `list` made (its times stored), and the counter of what `list` reads."""
    settle(repo)
    stats = Stats(monkeypatch)
    watched_list(repo)
    assert stats.take() == sorted(threads * 2)  # the first watched read reads all (and so does the oracle)
    return stats


def test_list_reads_again_only_the_threads_the_watcher_saw_change(repo: Repository, listed_once: Stats) -> None:
    stats = listed_once
    listed(repo, ALL, ask=ask)
    assert stats.take() == []  # nothing changed: no thread's files looked at
    with open(repo.layout.thread_dir("thread-3") / "progress.md", "a", encoding="utf-8") as log:
        log.write("- appended in place\n")  # what an agent does: no rename, no other file touched
    rows = listed(repo, ALL, ask=ask)
    assert stats.take() == ["thread-3"]
    assert rows[0][0] == "thread-3"  # newest activity first
    assert rows == listed(repo, ALL)


def test_what_a_watched_list_keeps_stays_exact_through_random_changes(repo: Repository, threads: list[str],
                                                                       watcher: None) -> None:
    """The rows, and the plain text kept of them (`plain_watched`), each checked against the same read from
    every file after every change."""
    settle(repo)
    rng = random.Random(31)
    live = list(threads)
    given = 0
    for step in range(40):
        action = rng.choice(["append", "touch", "spawn", "status", "remove", "rewrite", "filtered"])
        target = rng.choice(live)
        folder = repo.layout.thread_dir(target)
        if action == "append":
            with open(folder / "progress.md", "a", encoding="utf-8") as log:
                log.write(f"- step {step}\n")
        elif action == "touch":
            stamp = 1_700_000_000 + rng.randrange(10**6)
            os.utime(folder / "thread.json", (stamp, stamp))
        elif action == "spawn":
            live.append(spawn(repo, f"New {step}", thread_id=f"thread-new-{step}").thread.id)
        elif action == "status":
            set_status(repo, target, rng.choice(["paused", "active"]))
        elif action == "remove" and len(live) > 2:
            remove(repo, target, force=True)
            live.remove(target)
        elif action == "rewrite":
            (folder / "progress.md").unlink(missing_ok=True)  # no progress file: thread.json's time counts
        else:
            watched_list(repo, Filters(frozenset({"paused"}), frozenset(), "activity", None))
            given += plain_watched(repo, Filters(frozenset({"paused"}), frozenset(), "activity", None))
        watched_list(repo)
        given += plain_watched(repo) + plain_watched(repo)
    assert given > 40  # most second texts (and some first ones) were given from the store


def test_a_kept_listing_is_given_until_what_it_shows_changes(repo: Repository, threads: list[str],
                                                            watcher: None) -> None:
    """Each change comes after the kept text was forged: the forged text shows while nothing changed (it is
    given from the store), and any change to what `list` shows draws it anew."""
    objective = create_objective(repo, "Ship it").id
    spawn(repo, "Under it", thread_id="thread-under", objective=objective)
    settle(repo)
    assert not plain_watched(repo)  # drawn and kept
    forge_listings(repo)
    assert given_text(repo) == "forged" and given_text(repo) == "forged"

    def changed_by(change: Any, filters: Filters = ALL) -> None:
        forge_listings(repo)
        change()
        assert given_text(repo, filters) is None
        assert not plain_watched(repo, filters)  # drawn anew (and checked), then kept
        assert plain_watched(repo, filters)

    def append() -> None:  # an agent's log, in place: nothing else on disk moves
        with open(repo.layout.thread_dir("thread-3") / "progress.md", "a", encoding="utf-8") as log:
            log.write("- appended in place\n")

    changed_by(append)
    changed_by(lambda: os.utime(repo.layout.thread_file("thread-2"), (1_700_000_000, 1_700_000_000)))
    changed_by((repo.layout.thread_dir("thread-4") / "progress.md").unlink)  # thread.json's time counts
    changed_by(lambda: set_status(repo, "thread-1", "paused"))  # the index
    changed_by(lambda: retitle_objective(repo, objective, "Ship it now"))  # an objective's file: the key
    changed_by(lambda: spawn(repo, "New", thread_id="thread-new", objective=objective))
    changed_by(lambda: remove(repo, "thread-new", force=True))
    changed_by(lambda: None, Filters(frozenset({"paused"}), frozenset(), "activity", None))  # other filters
    changed_by(lambda: None, Filters(frozenset(), frozenset(), "title", 3))  # another sort, a limit
    assert "Ship it now" in plain_text(listed(repo, ALL, intents=False))


def test_a_kept_json_listing_shows_the_claims_as_they_are(repo: Repository, threads: list[str],
                                                         watcher: None) -> None:
    """`list --json` shows each thread's live claim: what it is kept with besides the rows (`also`), so another
    claim draws it anew, and the text kept for one set of claims is never given for another (each check compares
    the text with the one drawn from every file for those claims)."""
    settle(repo)

    def given(claims: dict[str, Any]) -> bool:
        listing = Listing(repo, ALL, name="json", also=claims, ask=ask)
        text = listing.stored()
        if text is None:
            text = "".join(json_chunks(listing.rows(), claims))
            listing.keep(text)
        assert text == "".join(json_chunks(listed(repo, ALL), claims))
        return text is not None and listing.look.drawn is not None

    held = {"thread-2": {"agent": "codex", "session": "s1"}}
    assert not given({}) and given({})
    assert not given(held) and given(held)
    kept = json.loads(Listing(repo, ALL, name="json", also=held, ask=ask).stored() or "null")
    assert {row["id"]: row["held_by"] for row in kept}["thread-2"] == held["thread-2"]
    assert given({})  # kept beside it: the text of no claims, still exact


def plain_unwatched(repo: Repository, filters: Filters = ALL) -> bool:
    return plain_watched(repo, filters, watched=False)


def test_without_the_watchers_word_the_times_read_vouch_for_a_kept_listing(repo: Repository, threads: list[str],
                                                                          watcher: None) -> None:
    """Without a mark from the watcher every activity time is read: a text drawn from the same times and the same
    index is given again (its version is their digest, `drawings.seen`); any time changed, forward or back, or the
    index, and it is drawn anew."""
    assert not plain_unwatched(repo) and plain_unwatched(repo)
    assert Listing(repo, ALL, name="plain", intents=False).version is None  # nothing read before `stored`
    with open(repo.layout.thread_dir("thread-3") / "progress.md", "a", encoding="utf-8") as log:
        log.write("- appended in place\n")
    assert not plain_unwatched(repo) and plain_unwatched(repo)
    older = time.time() - 3600
    for name in ("thread.json", "progress.md"):  # its activity: the newer of the two
        os.utime(repo.layout.thread_dir("thread-4") / name, (older, older))
    assert not plain_unwatched(repo) and plain_unwatched(repo)
    retitle(repo, "thread-1", "Renamed")
    assert not plain_unwatched(repo) and plain_unwatched(repo)
    only_active = Filters(frozenset({"active"}), frozenset(), "activity", None)
    assert not plain_unwatched(repo, only_active) and plain_unwatched(repo, only_active)
    settle(repo)
    assert plain_watched(repo)  # the watcher's first answer is "everything": the same times, the same text
    found = stored(repo, "activity")  # and the times read are stored under its mark: it vouches from now on
    assert found is not None and found["mark"] is not None
    assert plain_watched(repo) and Listing(repo, ALL, name="plain", intents=False, ask=ask).look.drawn is not None
    rng = random.Random(26)
    given = 0
    for step in range(30):
        target = rng.choice(threads)
        action = rng.choice(["append", "touch", "retitle", "status", "none"])
        if action == "append":
            with open(repo.layout.thread_dir(target) / "progress.md", "a", encoding="utf-8") as log:
                log.write(f"- step {step}\n")
        elif action == "touch":
            stamp = time.time() + rng.choice([-7200, 7200])
            os.utime(repo.layout.thread_file(target), (stamp, stamp))
        elif action == "retitle":
            retitle(repo, target, f"Title {step}")
        elif action == "status":
            set_status(repo, target, rng.choice(["paused", "active"]))
        given += plain_unwatched(repo)
    assert given >= 3  # some runs changed nothing the listing shows


def test_a_listing_too_long_to_keep_is_written_whole_and_not_kept(repo: Repository, threads: list[str],
                                                                  monkeypatch: pytest.MonkeyPatch,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """`print_kept` writes the pieces as they are made and lets go of them once they are longer than a kept text
    may be (`drawings.MAX_TEXT`): 100,000 threads' JSON is never held whole."""
    from leslie.cli.common import print_kept
    from leslie.cli.list_view import plain_chunks
    from leslie.store import drawings

    handed: list[int | None] = []
    real_keep = Listing.keep

    def keep(self: Listing, text: str | None) -> None:
        handed.append(None if text is None else len(text))
        real_keep(self, text)

    monkeypatch.setattr(Listing, "keep", keep)

    def printed() -> str:
        listing = Listing(repo, ALL, name="plain", intents=False)
        print_kept(listing, lambda: plain_chunks(listing.rows()))
        return capsys.readouterr().out

    whole = plain_text(listed(repo, ALL, intents=False))
    monkeypatch.setattr(drawings, "MAX_TEXT", len(whole) - 1)
    assert printed() == whole and Listing(repo, ALL, name="plain", intents=False).stored() is None
    assert handed == [None]  # never joined whole to be kept
    monkeypatch.setattr(drawings, "MAX_TEXT", len(whole))
    assert printed() == whole and Listing(repo, ALL, name="plain", intents=False).stored() == whole
    assert handed == [None, len(whole)]


def test_a_listing_that_lost_the_race_for_the_times_keeps_nothing(repo: Repository, threads: list[str],
                                                                 watcher: None) -> None:
    settle(repo)
    assert not plain_watched(repo) and plain_watched(repo)
    with open(repo.layout.thread_dir("thread-3") / "progress.md", "a", encoding="utf-8") as log:
        log.write("- appended in place\n")
    slow = Listing(repo, ALL, name="plain", intents=False, ask=ask)
    assert slow.stored() is None
    listed(repo, ALL, ask=ask)  # another reader reads the change and stores its time first
    text = plain_text(slow.rows())
    assert slow.vouched.lost and slow.version is None
    slow.keep(text)
    assert given_text(repo) is None  # nothing kept: the next run draws (and keeps) it
    assert not plain_watched(repo) and plain_watched(repo)


def test_a_listing_drawn_from_times_stored_over_since_keeps_nothing(repo: Repository, threads: list[str],
                                                                   watcher: None) -> None:
    """The store must still be at the version of the times a text was drawn from when it is kept: else it is not
    kept, and the text another reader kept of the newer times stays."""
    settle(repo)
    slow = Listing(repo, ALL, name="plain", intents=False, ask=ask)
    text = plain_text(slow.rows())
    with open(repo.layout.thread_dir("thread-3") / "progress.md", "a", encoding="utf-8") as log:
        log.write("- appended in place\n")
    assert not plain_watched(repo)  # another reader: the change read, its time stored, its text kept
    slow.keep(text)
    assert given_text(repo) == plain_text(listed(repo, ALL, intents=False)) != text


def test_a_kept_listing_given_moves_the_mark(repo: Repository, threads: list[str], watcher: None) -> None:
    """A change outside the threads' folders (here the config) moves the watcher's mark and changes nothing
    `list` shows: the kept text is given, and the stored mark moves past it."""
    settle(repo)
    assert not plain_watched(repo) and plain_watched(repo)
    before = stored(repo, "activity")
    (repo.root / ".leslie" / "config.toml").write_text("# edited\n", encoding="utf-8")
    deadline = time.monotonic() + 10
    while ask(str(repo.root), None)["mark"] == before["mark"]:  # type: ignore[index]
        assert time.monotonic() < deadline, "the watcher never saw the config change"
        time.sleep(0.05)
    assert plain_watched(repo)
    assert stored(repo, "activity")["mark"] == ask(str(repo.root), None)["mark"]  # type: ignore[index]


def test_a_listing_and_the_trees_drawings_are_kept_side_by_side(repo: Repository, threads: list[str],
                                                               watcher: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """Keeping a drawing makes only its own family's older versions go: a listing and a tree drawn one after the
    other after a change are both given next time."""
    monkeypatch.setattr(tree_drawing, "RACY_NS", 0)
    settle(repo)
    for step in range(3):
        retitle_in_place(repo, "thread-2", f"Edited {step}")
        assert not plain_watched(repo)
        assert drawn_watched(repo) == 0
        assert plain_watched(repo) and drawn_watched(repo) == 0  # made of kept pieces, then kept whole
        assert plain_watched(repo) and drawn_watched(repo) == 3


def test_a_reader_that_lost_a_race_writes_nothing(repo: Repository, threads: list[str]) -> None:
    def both(db: Any, _persistent: bool) -> tuple[bool, bool, bool]:
        first, second = Vouched("activity", None), Vouched("activity", None)
        first.load(db)
        second.load(db)
        with derived.transaction(db):
            wrote_first = first.keep(db, final=True)
        with derived.transaction(db):
            wrote_second = second.keep(db, final=True)
        with derived.transaction(db):
            again = first.keep(db, final=True)  # the first goes on: the value is still the one it wrote
        return wrote_first, wrote_second, again

    assert derived.with_store(repo.root, both) == (True, False, True)


def test_another_watch_or_no_watcher_means_reading_every_thread(repo: Repository, threads: list[str],
                                                                 listed_once: Stats) -> None:
    stats = listed_once
    guard_watcher.stop_all()  # a new watch: a new epoch, the stored mark means nothing to it
    settle(repo)
    watched_list(repo)
    assert stats.take() == sorted(threads * 2)
    listed(repo, ALL, ask=lambda root, since: None)  # no watcher answers
    assert stats.take() == sorted(threads)
    listed(repo, ALL, ask=lambda root, since: {"state": "starting"})
    assert stats.take() == sorted(threads)


def test_a_threads_folder_made_anew_means_reading_every_thread(repo: Repository, threads: list[str],
                                                               listed_once: Stats) -> None:
    threads_dir = repo.layout.threads_dir
    shutil.copytree(threads_dir, threads_dir.with_name("copy"))
    for name in os.listdir(threads_dir.with_name("copy")):
        stamp = 1_600_000_000
        os.utime(threads_dir.with_name("copy") / name / "thread.json", (stamp, stamp))
    shutil.rmtree(threads_dir)
    threads_dir.with_name("copy").rename(threads_dir)
    watched_list(repo)
    assert listed_once.take() == sorted(threads * 2)  # every thread read again, by the watched read too


def test_a_watched_read_leaves_no_guard_folder(repo: Repository, threads: list[str], watcher: None) -> None:
    settle(repo)
    watched_list(repo)
    assert not (state_dir(repo.root) / "guard").exists()  # else leslie's own writes would be logged from now


def stored(repo: Repository, key: str) -> dict[str, Any] | None:
    def read(db: Any, _persistent: bool) -> Any:
        row = db.execute("SELECT value FROM meta WHERE key = ?", ("watched:" + key,)).fetchone()
        return None if row is None else json.loads(row[0])

    found: dict[str, Any] | None = derived.with_store(repo.root, read)
    return found


def test_the_mark_is_kept_with_what_it_vouches_for(repo: Repository, threads: list[str], watcher: None) -> None:
    settle(repo)
    watched_list(repo)
    first = stored(repo, "activity")
    assert first is not None and first["mark"][0] == ask(str(repo.root), None)["mark"][0]  # type: ignore[index]
    listed(repo, ALL, ask=ask)
    assert stored(repo, "activity") == first  # nothing changed: nothing written
    (repo.layout.thread_dir("thread-1") / "plan.md").write_text("# Plan\nmore\n", encoding="utf-8")
    listed(repo, ALL, ask=ask)
    after = stored(repo, "activity")
    assert after is not None and after["mark"][1] > first["mark"][1] and after["token"] != first["token"]


def find_watched(repo: Repository, text: str) -> list[Any]:
    """`find` with the watcher, checked against `find` without it."""
    hits = find(repo, text, ask=ask)
    assert hits == find(repo, text), "the watched find differs from the one that checked every file"
    return hits


class Signed:
    """The record entries `find` checked with `lstat`, per search."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.count = 0
        real = find_index.signatures

        def counted(fd: int, paths: Any) -> bytes:
            self.count += len(paths)
            return real(fd, paths)

        monkeypatch.setattr(find_index, "signatures", counted)

    def take(self) -> int:
        count, self.count = self.count, 0
        return count


def test_find_checks_only_the_threads_the_watcher_saw_change(repo: Repository, threads: list[str], watcher: None,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    settle(repo)
    signed = Signed(monkeypatch)
    assert find_watched(repo, "zanzibar") == []
    find(repo, "zanzibar", ask=ask)  # records and mark stored by now
    signed.take()
    assert find(repo, "zanzibar", ask=ask) == []
    assert signed.take() == 0  # nothing changed: no entry checked
    with open(repo.layout.thread_dir("thread-4") / "progress.md", "a", encoding="utf-8") as log:
        log.write("- met Zanzibar\n")
    hits = find_watched(repo, "zanzibar")
    assert [(h.id, h.where) for h in hits] == [("thread-4", "progress.md")]
    (repo.layout.thread_dir("thread-2") / "design").mkdir()
    (repo.layout.thread_dir("thread-2") / "design" / "notes.md").write_text("zanzibar too\n", encoding="utf-8")
    assert [(h.id, h.where) for h in find_watched(repo, "zanzibar")] == [("thread-2", "design/notes.md"),
                                                                          ("thread-4", "progress.md")]


def test_a_watched_find_keeps_the_flags_of_threads_it_does_not_check_and_forgets_removed_ones(
        repo: Repository, threads: list[str], watcher: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """With the watcher's word, a thread it saw no change in is not checked (its record's paths and signatures
    are not even read), yet its record still says its fields are parsed whatever the needle (a `thread.json`
    with `\\u` escapes, whose stored text does not hold the title as written); and the record of a thread gone
    from the index is forgotten."""
    path = repo.layout.thread_file("thread-1")
    data = json.loads(path.read_text(encoding="utf-8"))
    data["title"] = "Crème brûlée"
    path.write_text(json.dumps(data), encoding="utf-8")  # ASCII only: "Cr\u00e8me"
    settle(repo)
    find(repo, "crème", ask=ask)
    find(repo, "crème", ask=ask)  # the records and the mark stored by now
    signed = Signed(monkeypatch)
    assert [(h.id, h.where) for h in find_watched(repo, "crème")] == [("thread-1", "title")]

    def recorded_threads(db: Any, _persistent: bool) -> list[str]:
        return [row[0] for row in db.execute("SELECT thread FROM folders ORDER BY thread")]

    remove(repo, "thread-2", force=True)
    assert [(h.id, h.where) for h in find(repo, "crème", ask=ask)] == [("thread-1", "title")]
    assert derived.with_store(repo.root, recorded_threads) == sorted(set(threads) - {"thread-2"})
    signed.take()
    assert [(h.id, h.where) for h in find_watched(repo, "crème")] == [("thread-1", "title")]
    find(repo, "crème", ask=ask)
    signed.take()
    assert [(h.id, h.where) for h in find(repo, "crème", ask=ask)] == [("thread-1", "title")]
    assert signed.take() == 0  # nothing changed since: no entry checked


class Checks:
    """Whether each search's check of the stored records took them as complete (`find_index.COMPLETE`), with the
    watcher's word (without it, every record is checked)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.complete: list[bool] = []
        real = find_index._Search.check

        def check(search: Any, live: set[str], changed: set[str] | None, *, complete: bool = False) -> Any:
            self.complete.append(complete and changed is not None)  # without the watcher's word, every record
            return real(search, live, changed, complete=complete)

        monkeypatch.setattr(find_index._Search, "check", check)

    def take(self) -> list[bool]:
        taken, self.complete = self.complete, []
        return taken


def stored_complete(repo: Repository) -> tuple[str | None, str | None]:
    """(the index the records are stored as complete for, the index the store mirrors)."""

    def read(db: Any, _persistent: bool) -> tuple[str | None, str | None]:
        found = db.execute("SELECT value FROM meta WHERE key = ?", (find_index.COMPLETE,)).fetchone()
        index = db.execute("SELECT value FROM meta WHERE key = 'index'").fetchone()
        return (None if found is None else found[0]), (None if index is None else index[0])

    return derived.with_store(repo.root, read)


def drop_from_index(repo: Repository, thread_id: str) -> None:
    """Take a thread (one no other references) out of the index by hand; its folder stays."""
    from leslie.store.jsonio import dumps_canonical

    data = json.loads(repo.layout.index_path.read_text(encoding="utf-8"))
    del data["threads"][thread_id], data["relations"][thread_id]
    repo.layout.index_path.write_bytes(dumps_canonical(data))


def test_a_watched_find_over_complete_records_reads_none_of_theirs(repo: Repository, threads: list[str],
                                                                   watcher: None,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """A search that left a record of every live thread says so, for the index it searched; the next one with
    the watcher's word then reads no record of a thread the watcher saw no change in, not even its flag, and
    finds what a search that checks every file finds."""
    settle(repo)
    find(repo, "zanzibar", ask=ask)
    find(repo, "zanzibar", ask=ask)  # records and mark stored by now
    complete, index = stored_complete(repo)
    assert complete is not None and complete == index
    checks, signed = Checks(monkeypatch), Signed(monkeypatch)
    assert find(repo, "zanzibar", ask=ask) == []
    assert checks.take() == [True] and signed.take() == 0
    with open(repo.layout.thread_dir("thread-4") / "progress.md", "a", encoding="utf-8") as log:
        log.write("- met Zanzibar\n")
    assert [(h.id, h.where) for h in find(repo, "zanzibar", ask=ask)] == [("thread-4", "progress.md")]
    assert checks.take() == [True]
    assert stored_complete(repo)[0] == index  # the changed thread's record written again: still complete
    assert [(h.id, h.where) for h in find_watched(repo, "zanzibar")] == [("thread-4", "progress.md")]


def test_records_are_complete_only_for_the_index_they_were_made_for(repo: Repository, threads: list[str],
                                                                    watcher: None,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """A thread taken out of the index by hand changes no thread folder the watcher sees: the records, complete
    for the index before, are not taken as complete for the new one; the thread's record goes, and its files
    are no longer searched. A live thread whose folder is gone leaves the records incomplete."""
    (repo.layout.thread_dir("thread-2") / "plan.md").write_text("zanzibar\n", encoding="utf-8")
    settle(repo)
    find(repo, "zanzibar", ask=ask)
    find(repo, "zanzibar", ask=ask)
    before, whole = stored_complete(repo)[0], repo.layout.index_path.read_bytes()
    checks = Checks(monkeypatch)
    drop_from_index(repo, "thread-2")
    assert find_watched(repo, "zanzibar") == []
    assert checks.take()[0] is False  # the watched search: another index
    complete, index = stored_complete(repo)
    assert complete == index != before  # the dropped thread's record gone: complete for the new index

    def recorded_threads(db: Any, _persistent: bool) -> list[str]:
        return [row[0] for row in db.execute("SELECT thread FROM folders ORDER BY thread")]

    assert "thread-2" not in derived.with_store(repo.root, recorded_threads)
    repo.layout.index_path.write_bytes(whole)  # back in the index, with no record: read, and its hit found
    assert [(h.id, h.where) for h in find_watched(repo, "zanzibar")] == [("thread-2", "plan.md")]
    assert checks.take()[0] is False
    shutil.rmtree(repo.layout.thread_dir("thread-3"))  # a live thread without a folder: no record of it
    with pytest.raises(NotFoundError, match="thread-3"):  # its fields are read, and the read fails naming it
        find(repo, "zanzibar", ask=ask)
    assert stored_complete(repo)[0] is None


def test_a_record_dropped_by_a_write_that_kept_the_claim_is_read_again(repo: Repository, threads: list[str],
                                                                       watcher: None,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """A write of the records that did not forget `COMPLETE` (an older leslie's): the count of records no longer
    the count of live threads, they are not taken as complete, and the thread without a record is read."""
    (repo.layout.thread_dir("thread-5") / "plan.md").write_text("zanzibar\n", encoding="utf-8")
    settle(repo)
    find(repo, "zanzibar", ask=ask)
    find(repo, "zanzibar", ask=ask)

    def drop(db: Any, _persistent: bool) -> None:
        with derived.transaction(db):
            db.execute("DELETE FROM folders WHERE thread = 'thread-5'")

    derived.with_store(repo.root, drop)
    assert stored_complete(repo)[0] is not None
    checks = Checks(monkeypatch)
    assert [(h.id, h.where) for h in find_watched(repo, "zanzibar")] == [("thread-5", "plan.md")]
    assert checks.take()[0] is False


def test_what_a_watched_find_keeps_stays_exact_through_random_changes(repo: Repository, threads: list[str],
                                                                       watcher: None,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    settle(repo)
    checks = Checks(monkeypatch)
    rng = random.Random(36)
    words = ["zanzibar", "quokka", "marmot"]
    live = list(threads)
    dropped = 0
    for step in range(40):
        target = rng.choice(live)
        folder = repo.layout.thread_dir(target)
        action = rng.choice(["append", "write", "nested", "remove-file", "spawn", "remove", "drop"])
        word = rng.choice(words)
        if action == "append":
            with open(folder / "plan.md", "a", encoding="utf-8") as plan:
                plan.write(f"{word} {step}\n")
        elif action == "write":
            (folder / "progress.md").write_text(f"- {word}\n", encoding="utf-8")
        elif action == "nested":
            (folder / "artifacts" / "deep").mkdir(parents=True, exist_ok=True)
            (folder / "artifacts" / "deep" / f"n{step}.txt").write_text(word, encoding="utf-8")
        elif action == "remove-file":
            (folder / "plan.md").unlink(missing_ok=True)
        elif action == "spawn":
            live.append(spawn(repo, f"About {word}", thread_id=f"thread-new-{step}").thread.id)
        elif action == "drop" and len(live) > 2:  # out of the index by hand, its folder left: no thread folder moves
            drop_from_index(repo, target)
            live.remove(target)
            dropped += 1
        elif len(live) > 2:
            remove(repo, target, force=True)
            live.remove(target)
        for needle in words:
            find_watched(repo, needle)
    assert dropped >= 2 and checks.complete.count(True) >= 60  # most watched searches found the records complete


def recorded(monkeypatch: pytest.MonkeyPatch, module: Any, name: str) -> list[str]:
    """The thread IDs (or folder names) each call of `module.name(first, names)` is given, as they come."""
    looked: list[str] = []
    real = getattr(module, name)

    def counted(first: Any, names: Any) -> Any:
        looked.extend(names)
        return real(first, names)

    monkeypatch.setattr(module, name, counted)
    return looked


def problems_watched(repo: Repository) -> list[str]:
    """`status`'s doctor look with the watcher, checked against the same look at every thread.json."""
    found = doctor.quick_problems(repo, ask)
    assert found == doctor.quick_problems(repo), "the watched look differs from the one at every thread.json"
    return found


def test_status_looks_only_at_the_thread_folders_the_watcher_saw_change(
        repo: Repository, threads: list[str], watcher: None, monkeypatch: pytest.MonkeyPatch) -> None:
    settle(repo)
    looked = recorded(monkeypatch, doctor, "_thread_json_times")
    assert doctor.quick_problems(repo, ask) == []
    assert sorted(looked) == sorted(threads)  # the first watched look: every folder
    looked.clear()
    assert doctor.quick_problems(repo, ask) == []
    assert looked == []  # nothing changed: no thread.json looked at
    retitle_in_place(repo, "thread-2", "Edited by hand")
    problems = doctor.quick_problems(repo, ask)
    assert looked == ["thread-2"]
    assert problems == [".leslie/thread_relations.json differs from thread-2's thread.json"]
    looked.clear()
    assert doctor.quick_problems(repo, ask) == problems and looked == []  # its stored time says so still


def test_what_a_watched_status_keeps_stays_exact_through_random_changes(repo: Repository, threads: list[str],
                                                                         watcher: None) -> None:
    settle(repo)
    rng = random.Random(35)
    live = list(threads)
    seen: list[int] = []
    for step in range(40):
        action = rng.choice(["edit", "touch", "spawn", "status", "remove", "unlink", "stray", "restore"])
        live = [t for t in live if repo.layout.thread_file(t).exists()] or live  # an unlinked one stays unlinked
        target = rng.choice(live)
        folder = repo.layout.thread_dir(target)
        path = folder / "thread.json"
        if action == "edit" and path.exists():
            data = json.loads(path.read_text(encoding="utf-8"))
            data["title"] = f"Edited {step}"
            with open(path, "r+", encoding="utf-8") as handle:
                handle.write(json.dumps(data))
                handle.truncate()
        elif action == "touch" and path.exists():
            stamp = time.time() + rng.choice([-3600, 3600])  # older or newer than the index
            os.utime(path, (stamp, stamp))
        elif action == "spawn":
            live.append(spawn(repo, f"New {step}", thread_id=f"thread-new-{step}").thread.id)
        elif action == "status" and path.exists():
            set_status(repo, target, rng.choice(["paused", "active"]))
        elif action == "remove" and len(live) > 2 and path.exists():
            remove(repo, target, force=True)
            live.remove(target)
        elif action == "unlink":
            path.unlink(missing_ok=True)  # listed, without a thread.json
        elif action == "stray":
            (repo.layout.threads_dir / f"thread-stray-{step}").mkdir()  # a folder without a thread.json
        elif action == "restore":
            for stray in repo.layout.threads_dir.glob("thread-stray-*"):
                stray.rmdir()
        seen.append(len(problems_watched(repo)))
    assert max(seen) >= 3  # the sequence did make problems to find (hand edits, missing files, strays)


def tree_watched(repo: Repository) -> Tree:
    """The tree with the watcher, checked against the tree without it (a look at every thread.json)."""
    found = tree_drawing.load_tree(repo, ask=ask)
    assert found == tree_drawing.load_tree(repo), "the watched tree differs from the tree of every thread.json"
    return found


def drawn_watched(repo: Repository) -> int:
    """The graph and the piped tree (plain and JSON, made of pieces) drawn with the watcher as the commands draw
    them (kept, or drawn now and kept), each checked against the same drawing of the tree read without it; how
    many were given from the store."""
    given = 0
    # The first to see a change reads the thread.json and stores it: a tree made of pieces, then the graph.
    for name, piece, lines in (("plain", plain_piece, plain_lines), ("json", json_piece, json_lines),
                               ("mermaid", mermaid_piece, lambda shape, piece: [render_mermaid(shape, piece)])):
        drawing = tree_drawing.TreeDrawing(repo, name, ask=ask, piece=piece)
        text = drawing.stored()
        given += text is not None
        if text is None:
            text = "".join(drawing.draw(lines))
            drawing.keep(text)
        assert text == "".join(lines(tree_drawing.load_tree(repo), piece)), f"the {name} drawing is not the tree's"
    return given


def test_a_kept_drawing_is_given_until_the_watcher_sees_a_thread_json_change(
        repo: Repository, threads: list[str], watcher: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tree_drawing, "RACY_NS", 0)
    settle(repo)
    assert drawn_watched(repo) == 0  # drawn, and its pieces kept
    assert drawn_watched(repo) == 0  # made of kept pieces, and kept whole
    looked = recorded(monkeypatch, tree_drawing, "_signatures")

    def given() -> bool:
        return tree_drawing.TreeDrawing(repo, "mermaid", ask=ask).stored() is not None

    assert given() and looked == []  # no thread.json looked at
    (repo.layout.thread_dir("thread-2") / "progress.md").write_text("- more\n", encoding="utf-8")
    assert given() and looked == ["thread-2"]  # its thread.json looked at: unchanged
    looked.clear()
    assert given() and looked == []  # the mark moved past it
    retitle_in_place(repo, "thread-2", "Edited by hand")
    assert not given() and looked == ["thread-2"]
    assert drawn_watched(repo) == 0  # drawn anew, and checked against the tree read without the watcher


def test_the_tree_looks_only_at_the_threads_the_watcher_saw_change(
        repo: Repository, threads: list[str], watcher: None, monkeypatch: pytest.MonkeyPatch) -> None:
    settle(repo)
    looked = recorded(monkeypatch, tree_drawing, "_signatures")
    tree_drawing.load_tree(repo, ask=ask)
    assert sorted(looked) == sorted(threads)  # the first watched look: every thread.json
    looked.clear()
    tree_drawing.load_tree(repo, ask=ask)
    assert looked == []  # nothing changed: no thread.json looked at
    retitle_in_place(repo, "thread-2", "Edited by hand")
    shown = tree_drawing.load_tree(repo, ask=ask)
    assert looked == ["thread-2"]
    assert "Edited by hand" in [node.title for node in shown.threads()]
    looked.clear()
    assert tree_drawing.load_tree(repo, ask=ask) == shown and looked == []  # stored as read


def test_a_thread_new_to_the_index_whose_files_did_not_change_is_drawn(
        repo: Repository, threads: list[str], watcher: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """A thread folder that was there before the index named it (the index put back as a checkout or `doctor
    --fix` writes it): the watcher saw only the index change, and the thread has no stored row; it is read and
    drawn all the same."""
    monkeypatch.setattr(tree_drawing, "RACY_NS", 0)
    settle(repo)
    index = repo.layout.index_path
    without = index.read_bytes()
    spawn(repo, "Here before the index", thread_id="thread-early")
    with_it = index.read_bytes()

    def put_back(data: bytes) -> None:
        replacement = index.with_name("replacement.json")
        replacement.write_bytes(data)
        os.replace(replacement, index)

    put_back(without)
    drawn_watched(repo)
    drawn_watched(repo)  # the mark past the thread's folder being made
    put_back(with_it)
    drawn_watched(repo)
    assert "Here before the index" in "".join(plain_lines(tree_drawing.load_tree(repo, ask=ask), plain_piece))


def test_what_a_watched_tree_keeps_stays_exact_through_random_changes(repo: Repository, threads: list[str],
                                                                       watcher: None,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tree_drawing, "RACY_NS", 0)  # the rows read now match next time: drawings are given and checked
    settle(repo)
    rng = random.Random(36)
    live = list(threads)
    titles: set[str] = set()
    given = 0
    for step in range(40):
        action = rng.choice(["edit", "retitle", "spawn", "status", "reference", "unreference", "remove", "none"])
        source, target = rng.choice(live), rng.choice(live)
        path = repo.layout.thread_file(source)
        if action == "edit":  # by hand, in place: the index says otherwise, the tree shows the file
            data = json.loads(path.read_text(encoding="utf-8"))
            data["title"] = f"Edited {step}"
            data["references"] = {target: ["plan.md"]} if source != target else {}
            with open(path, "r+", encoding="utf-8") as handle:
                handle.write(json.dumps(data))
                handle.truncate()
        elif action == "retitle":
            retitle(repo, source, f"Retitled {step}")
        elif action == "spawn":
            live.append(spawn(repo, f"New {step}", thread_id=f"thread-new-{step}",
                              refs=[RefSpec(target)]).thread.id)
        elif action == "status":
            set_status(repo, source, rng.choice(["paused", "active", "done"]))
        elif action == "reference" and source != target:
            reference(repo, source, target, rng.choice([(), ("plan.md",)]))
        elif action == "unreference" and target in json.loads(path.read_text(encoding="utf-8"))["references"]:
            unreference(repo, source, target)
        elif action == "remove" and len(live) > 3:
            remove(repo, source, force=True)
            live.remove(source)
        titles.update(node.title for node in tree_watched(repo).threads())
        given += drawn_watched(repo) + drawn_watched(repo)
    assert any(title.startswith("Edited") for title in titles)  # the hand edits did show
    assert given > 40  # most second drawings (and some first ones) were given from the store
