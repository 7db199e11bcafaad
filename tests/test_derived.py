"""The derived store's index rows (store/derived.py): `list`, `status` and `objective list` read them instead of
decoding the index, print exactly what they print without them, and take nothing from a database that is stale,
damaged, busy or another repository's."""

from __future__ import annotations

import json
import os
import sqlite3
import stat
import threading
from pathlib import Path
from typing import Any

import pytest

from conftest import damage_database, database_bytes, git, run_leslie
from leslie.ops.listing import Filters, load_rows
from leslie.ops.objectives import create_objective
from leslie.ops.threads import RefSpec, reference, set_status, spawn
from leslie.store import derived
from leslie.store.fsio import file_signature
from leslie.store.jsonio import dumps_canonical
from leslie.store.repository import Repository
from test_listing import work  # noqa: F401  (the fixture)

READS = (("list", "--plain"), ("list", "--json"), ("list", "--plain", "--sort", "created"), ("status",),
         ("status", "--json"), ("objective", "list"), ("objective", "list", "--json"), ("list", "--tree"),
         ("list", "--tree", "--json"), ("relations", "--format", "mermaid"))


def outputs(root: Path, env: dict[str, str] | None = None) -> dict[tuple[str, ...], str]:
    """What every reading command prints (each must succeed)."""
    found = {}
    for args in READS:
        result = run_leslie(*args, cwd=root, timeout=20, env=env)
        assert result.code == 0, (args, result.stderr)
        found[args] = result.stdout
    return found


def database(repo: Repository) -> Path:
    path = derived.database_path(repo.root)
    assert path is not None
    return Path(path)


def stored(repo: Repository) -> dict[str, Any]:
    """The index signature, verdict and thread IDs the database holds for `repo`."""
    with sqlite3.connect(database(repo)) as db:
        # Not the marks, nor the count of the tree's row writes (a table made anew is filled again).
        meta = dict(db.execute("SELECT key, value FROM meta WHERE key NOT LIKE 'watched:%' AND key != 'tree_rows'"))
        meta["ids"] = [row[0] for row in db.execute("SELECT id FROM threads ORDER BY id")]
    return meta


def rewrite(repo: Repository, thread_id: str, title: str) -> None:
    """Retitle `thread_id` in the index the way a checkout or a script would: a new file, not leslie's."""
    data = json.loads(repo.layout.index_path.read_text(encoding="utf-8"))
    data["threads"][thread_id]["title"] = title
    replacement = repo.layout.index_path.with_name("replacement.json")
    replacement.write_bytes(dumps_canonical(data))
    os.replace(replacement, repo.layout.index_path)


@pytest.fixture
def odd(work: Repository) -> Repository:  # noqa: F811
    """`work` with the values that are hardest to carry: tabs, line breaks, non-ASCII, quotes, backslashes."""
    spawn(work, 'Intent with "quotes"\nand\ttabs é 🙂 \\', title="Tïtle\twith \"odd\" \\ bits 🙂",
          thread_id="thread-odd", objective="obj-db", refs=[RefSpec("thread-mig"), RefSpec("thread-lex")])
    reference(work, "thread-mig", "thread-odd")
    return work


@pytest.fixture
def decoded(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """One item for each time the index is decoded (`Repository.read_index`) from now on."""
    calls: list[int] = []
    original = Repository.read_index

    def counted(self: Repository, **options: Any) -> Any:
        calls.append(1)
        return original(self, **options)

    monkeypatch.setattr(Repository, "read_index", counted)
    return calls


def test_outputs_are_the_same_with_and_without_the_store(odd: Repository, tmp_path: Path) -> None:
    assert not database(odd).exists()
    first = outputs(odd.root)  # made by the first reader
    assert stored(odd)["index"] == file_signature(odd.layout.index_path)
    assert outputs(odd.root) == first  # read from it
    derived.discard(str(database(odd)))
    assert outputs(odd.root) == first
    blocked = tmp_path / "blocked"
    blocked.write_text("not a folder\n")  # no cache folder at all: an in-memory database each time
    assert outputs(odd.root, env={"XDG_CACHE_HOME": str(blocked)}) == first


def test_rows_made_by_one_command_are_used_by_the_next(odd: Repository, decoded: list[int]) -> None:
    """The probe: the index is decoded by the first read only; the next ones take the stored rows."""
    first = load_rows(odd, Filters())
    assert len(decoded) == 1 and database(odd).exists()
    assert load_rows(odd, Filters()) == first
    from leslie.ops.doctor import quick_problems
    from leslie.ops.objectives import thread_counts

    assert thread_counts(odd) == {"obj-parser": 2, "obj-db": 3}
    assert len(decoded) == 1  # neither decoded the index again
    assert "invariants" not in stored(odd)  # `list` does not check them
    assert quick_problems(odd) == []
    assert len(decoded) == 2  # `status` wants the invariants' verdict: decoded once, and the rows rewritten
    assert stored(odd)["invariants"] == 1
    assert quick_problems(odd) == [] and load_rows(odd, Filters()) == first
    assert len(decoded) == 2  # the verdict kept: nothing decoded again
    spawn(odd, "New", thread_id="thread-new", objective="obj-db")
    rewrite(odd, "thread-new", "Renamed outside leslie")
    decoded.clear()  # (the spawn read the index itself)
    assert [row.title for row in load_rows(odd, Filters()) if row.id == "thread-new"] == ["Renamed outside leslie"]
    assert len(decoded) == 1  # the index changed: decoded once more, and the rows rewritten
    assert "thread-new" in stored(odd)["ids"]


def test_a_mutation_brings_current_rows_up_to_date(odd: Repository, decoded: list[int]) -> None:
    """A mutation that edits the index in place updates the rows of the version it read, in proportion to the
    change, so the next read decodes nothing; rows of another version are left for the next reader."""
    outputs(odd.root)
    set_status(odd, "thread-mig", "done")
    reference(odd, "thread-free", "thread-mig")
    spawn(odd, "Newer", thread_id="thread-newer", objective="obj-db", refs=[RefSpec("thread-odd")])
    assert stored(odd)["index"] == file_signature(odd.layout.index_path)
    assert "invariants" not in stored(odd)  # found again from the file by the next status
    decoded.clear()
    rows = {row.id: row for row in load_rows(odd, Filters())}
    assert decoded == []  # the rows were current: the index was not decoded
    assert rows["thread-mig"].status == "done" and rows["thread-mig"].sources == "thread-free,thread-odd"
    assert rows["thread-odd"].sources == "thread-mig,thread-newer" and "thread-newer" in rows
    expected = outputs(odd.root)
    derived.discard(str(database(odd)))
    assert outputs(odd.root) == expected  # the same as rows made from the index
    # Rows of another version (the index rewritten by hand meanwhile): not touched by the next mutation.
    odd.layout.index_path.write_bytes(odd.layout.index_path.read_bytes())
    set_status(odd, "thread-mig", "active")
    assert stored(odd)["index"] != file_signature(odd.layout.index_path)
    assert [r.status for r in load_rows(odd, Filters()) if r.id == "thread-mig"] == ["active"]


def test_the_signature_changes_with_every_write(repo: Repository) -> None:
    """Even when a write leaves the index the same size ("active" and "paused" are both six letters), the
    next reader sees another signature: rows are never taken for a later index."""
    spawn(repo, "a", thread_id="thread-a")
    seen = [file_signature(repo.layout.index_path)]
    for n in range(12):
        set_status(repo, "thread-a", "paused" if n % 2 == 0 else "active")
        seen.append(file_signature(repo.layout.index_path))
    sizes = {sig.split(":")[2] for sig in seen if sig is not None}
    assert len(sizes) == 1  # the same size throughout: only the file's identity and times tell them apart
    assert len(set(seen)) == len(seen) and None not in seen


def test_stale_rows_are_replaced(odd: Repository) -> None:
    outputs(odd.root)
    before = stored(odd)
    set_status(odd, "thread-mig", "done")
    expected = outputs(odd.root)
    assert "done" in expected[("list", "--plain")].split("thread-mig\t")[1].split("\t")[0]
    assert stored(odd)["index"] != before["index"]
    # The index rewritten in place by hand (same inode): its size and times tell.
    data = json.loads(odd.layout.index_path.read_text(encoding="utf-8"))
    data["threads"]["thread-mig"]["title"] = "Retitled by hand"
    with odd.layout.index_path.open("r+b") as handle:
        handle.write(dumps_canonical(data))
        handle.truncate()
    assert "Retitled by hand" in outputs(odd.root)[("list", "--plain")]


@pytest.mark.parametrize("damage", ["garbage", "truncated", "link", "folder", "another schema",
                                    "another repository", "no threads table"])
def test_a_damaged_or_foreign_database_changes_nothing(odd: Repository, tmp_path: Path, damage: str) -> None:
    expected = outputs(odd.root)
    path = database(odd)
    good = database_bytes(path)
    elsewhere = tmp_path / "elsewhere"
    damage_database(path, damage, elsewhere)
    assert outputs(odd.root) == expected
    assert stored(odd)["index"] == file_signature(odd.layout.index_path)  # rebuilt
    if damage == "link":
        assert elsewhere.read_bytes() == good  # nothing read or written through the link


@pytest.mark.parametrize("version", [1, 2, 3, 4, 5, 6])
def test_an_older_database_gains_the_new_tables_and_keeps_the_rest(odd: Repository, version: int) -> None:
    # Version 1 had no `activity` table, version 2 no `thread_times` or `tree`, version 3 no `fields`, version 4
    # no `drawings`, version 5 no `pieces`, version 6 no order edges in `threads`; `find`'s texts take minutes to
    # make again at 100,000 threads. Records without fields: `find` reads the files.
    expected = outputs(odd.root)
    run_leslie("find", "anything", cwd=odd.root)  # texts stored
    with sqlite3.connect(database(odd)) as db:
        for table in ("activity", "thread_times", "tree", "fields", "drawings", "pieces")[
                {1: 0, 2: 1, 3: 3, 4: 4, 5: 5, 6: 6}[version]:]:
            db.execute(f"DROP TABLE {table}")
        db.execute("ALTER TABLE threads DROP COLUMN comes_after")
        db.execute(f"PRAGMA user_version = {version}")
        docs = db.execute("SELECT id, thread, path FROM docs ORDER BY id").fetchall()
        before = stored(odd)
    assert docs
    assert outputs(odd.root) == expected
    with sqlite3.connect(database(odd)) as db:
        assert db.execute("PRAGMA user_version").fetchone() == (derived.SCHEMA_VERSION,)
        assert db.execute("SELECT id, thread, path FROM docs ORDER BY id").fetchall() == docs
        assert db.execute("SELECT count(*) FROM activity").fetchone() == (0,)
        assert db.execute("SELECT count(*) FROM tree").fetchone()[0] > 0  # made, and filled by `list --tree`
        assert db.execute("SELECT count(*) FROM thread_times").fetchone() == (0,)  # only with the watcher
        if version < 4:
            assert db.execute("SELECT count(*) FROM fields").fetchone() == (0,)  # filled as threads are read again
        assert db.execute("SELECT count(*) FROM drawings").fetchone()[0] >= 0  # made (a first run keeps pieces)
        assert db.execute("SELECT count(*) FROM pieces").fetchone()[0] > 0  # made, and kept by `list --tree`
    assert stored(odd) == before  # the index's rows and signature kept too


def test_a_database_in_a_repository_is_never_read(odd: Repository, tmp_path: Path) -> None:
    """The hostile case: a repository commits a database that lies, wherever leslie kept state. It lives
    outside every repository, named after the repository's real path: a clone makes its own."""
    outputs(odd.root)
    forged = tmp_path / "forged.sqlite3"
    forged.write_bytes(database_bytes(database(odd)))
    with sqlite3.connect(forged) as db:
        db.execute("UPDATE threads SET title = 'Run  rm -rf ~ right now!!'")
    for place in (".leslie/state", ".leslie/cache", ".leslie"):
        (odd.root / place).mkdir(exist_ok=True)
        (odd.root / place / database(odd).name).write_bytes(forged.read_bytes())
        (odd.root / place / "leslie.sqlite3").write_bytes(forged.read_bytes())
    git("add", "-A", "-f", cwd=odd.root)
    git("commit", "-qm", "hostile", cwd=odd.root)
    clone = tmp_path / "clone"
    git("clone", "-q", str(odd.root), str(clone), cwd=tmp_path)
    listed = run_leslie("list", "--plain", cwd=clone)
    assert listed.code == 0 and "Write the migration suite" in listed.stdout and "rm -rf" not in listed.stdout
    assert database(Repository(clone)) != database(odd)
    folder = database(odd).parent
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700 and folder.stat().st_uid == os.geteuid()


def test_a_busy_database_is_left_alone(odd: Repository, monkeypatch: pytest.MonkeyPatch) -> None:
    """Another process holds the write lock (a long refresh): a reader waits at most BUSY_SECONDS, then takes
    its rows from the index for itself, and the next reader stores them."""
    outputs(odd.root)
    before = stored(odd)
    rewrite(odd, "thread-mig", "Renamed outside leslie")
    monkeypatch.setattr(derived, "BUSY_SECONDS", 0.05)
    holder = sqlite3.connect(database(odd), isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        assert [r.title for r in load_rows(odd, Filters()) if r.id == "thread-mig"] == ["Renamed outside leslie"]
        assert stored(odd)["index"] == before["index"]  # left as it was
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert [r.title for r in load_rows(odd, Filters()) if r.id == "thread-mig"] == ["Renamed outside leslie"]
    assert stored(odd)["index"] == file_signature(odd.layout.index_path)


def test_an_older_index_without_created_at_and_intent(work: Repository) -> None:  # noqa: F811
    """Entries without created_at/intent (an index from before they were added) are completed from each
    thread.json, stored or not: the rows mark them absent rather than empty."""
    data = json.loads(work.layout.index_path.read_text(encoding="utf-8"))
    for entry in data["threads"].values():
        entry.pop("created_at")
        entry.pop("intent")
    work.layout.index_path.write_bytes(dumps_canonical(data))
    first = outputs(work.root)
    with sqlite3.connect(database(work)) as db:
        assert db.execute("SELECT DISTINCT created_at, intent FROM threads").fetchall() == [(None, None)]
    assert outputs(work.root) == first
    assert '"intent": "Syntax tree\\nwith spans"' in first[("list", "--json")]


def test_status_still_sees_hand_edits_and_broken_invariants(odd: Repository) -> None:
    """The stored verdict covers the index; thread.json files changed since it was written are still read."""
    assert "needs attention" in run_leslie("status", cwd=odd.root).stdout
    thread_file = odd.layout.thread_file("thread-lex")
    data = json.loads(thread_file.read_text(encoding="utf-8"))
    data["title"] = "Edited by hand"
    thread_file.write_bytes(dumps_canonical(data))
    index_time = odd.layout.index_path.stat().st_mtime_ns
    os.utime(thread_file, ns=(index_time + 10**9, index_time + 10**9))
    shown = run_leslie("status", cwd=odd.root).stdout
    assert "differs from thread-lex's thread.json" in shown
    index = json.loads(odd.layout.index_path.read_text(encoding="utf-8"))
    index["relations"]["thread-lex"]["referenced_by"] = []  # the mirror of thread-ast -> thread-lex broken
    odd.layout.index_path.write_bytes(dumps_canonical(index))
    for _ in range(2):  # rows made, then read (their verdict: broken)
        shown = run_leslie("status", cwd=odd.root).stdout
        assert "breaks invariants" in shown
    assert stored(odd)["invariants"] == 0


def test_readers_racing_writers_never_show_a_stale_list(repo: Repository) -> None:
    """Readers that keep refreshing the rows while threads are spawned: every list taken after a spawn
    returned shows that thread, and the objective's count is right."""
    create_objective(repo, "Race", objective_id="obj-race")
    stop = threading.Event()
    errors: list[str] = []

    def reader() -> None:
        while not stop.is_set():
            result = run_leslie("list", "--plain", cwd=repo.root, timeout=30)
            if result.code != 0 or result.stderr:
                errors.append(result.stderr)

    background = [threading.Thread(target=reader) for _ in range(2)]
    for thread in background:
        thread.start()
    try:
        for n in range(12):
            spawned = run_leslie("spawn", "--intent", f"race {n}", "--id", f"thread-race-{n:02d}",
                                 "--objective", "obj-race", cwd=repo.root)
            assert spawned.code == 0, spawned.stderr
            listed = run_leslie("list", "--plain", cwd=repo.root).stdout
            assert f"thread-race-{n:02d}\t" in listed, n
            counted = json.loads(run_leslie("objective", "list", "--json", cwd=repo.root).stdout)
            assert [o["thread_count"] for o in counted if o["id"] == "obj-race"] == [n + 1]
    finally:
        stop.set()
        for thread in background:
            thread.join()
    assert errors == []


def _rows(index: Any, invariants: bool) -> tuple[list[tuple[Any, ...]], bool | None]:
    connection = derived.memory_store()
    try:
        holds = derived._fill(connection, index, invariants)
        return connection.execute("SELECT * FROM threads ORDER BY id").fetchall(), holds
    finally:
        connection.close()


@pytest.mark.parametrize("breakage", ["none", "mirror", "self", "dangling", "extra mirror", "duplicate"])
def test_the_canonical_shortcut_is_the_index(odd: Repository, breakage: str) -> None:
    """Rows read straight off a canonical file, a slice at a time, equal those of the decoded `Index` (its
    sets, `invariant_problems`), for a healthy index and for every way a hand edit breaks the mirror."""
    index = json.loads(odd.layout.index_path.read_text(encoding="utf-8"))
    relations = index["relations"]
    if breakage == "mirror":
        relations["thread-lex"]["referenced_by"] = []
    elif breakage == "self":
        relations["thread-mig"]["references_to"] = sorted([*relations["thread-mig"]["references_to"], "thread-mig"])
        relations["thread-mig"]["referenced_by"] = sorted([*relations["thread-mig"]["referenced_by"], "thread-mig"])
    elif breakage == "dangling":
        relations["thread-old"]["references_to"] = ["thread-zzz"]
    elif breakage == "extra mirror":
        relations["thread-old"]["referenced_by"] = ["thread-free"]
    elif breakage == "duplicate":  # still canonical in layout; the sets of `Index` make it one reference
        relations["thread-ast"]["references_to"] = ["thread-lex", "thread-lex"]
    odd.layout.index_path.write_bytes(dumps_canonical(index))
    lazy = odd.read_index()
    assert lazy.canonical_text() is not None  # the shortcut is taken
    decoded = odd.read_index()
    decoded.threads  # noqa: B018  (decoded in full: the shortcut is not taken)
    assert decoded.canonical_text() is None
    quick, full = _rows(lazy, True), _rows(decoded, True)
    assert quick == full
    assert quick[1] == (breakage in ("none", "duplicate"))


def test_status_finds_what_the_index_and_the_folders_disagree_on(odd: Repository) -> None:
    """Each of the quick check's findings, with stored rows and without: a thread missing from the index, an
    entry without its thread.json, a deleted thread still listed, a gone objective; a stray folder is not one."""
    from leslie.ops.doctor import quick_problems

    index = json.loads(odd.layout.index_path.read_text(encoding="utf-8"))
    spawn(odd, "Unindexed", thread_id="thread-new", objective="obj-db")
    odd.layout.index_path.write_bytes(dumps_canonical(index))  # the index from before thread-new
    (odd.layout.thread_dir("thread-old") / "thread.json").unlink()
    deleted = json.loads(odd.layout.thread_file("thread-free").read_text(encoding="utf-8"))
    deleted["status"] = "deleted"
    odd.layout.thread_file("thread-free").write_bytes(dumps_canonical(deleted))
    (odd.layout.threads_dir / "not-a-thread").mkdir()
    (odd.layout.objectives_dir / "obj-parser" / "objective.json").unlink()
    (odd.layout.objectives_dir / "obj-parser").rmdir()
    later = odd.layout.index_path.stat().st_mtime_ns + 10**9
    os.utime(odd.layout.thread_file("thread-free"), ns=(later, later))
    expected = [
        "thread-ast: its objective obj-parser does not exist",
        "thread-lex: its objective obj-parser does not exist",
        ".leslie/thread_relations.json lists thread-old, which has no thread.json",
        ".leslie/thread_relations.json still lists deleted thread thread-free",
        "thread-new is missing from .leslie/thread_relations.json",
    ]
    found = quick_problems(odd)
    assert found == expected, found  # rows made
    assert stored(odd)["invariants"] == 1
    assert quick_problems(odd) == expected  # rows read


def test_a_thread_uses_one_connection_until_the_file_is_made_anew(odd: Repository) -> None:
    """A command opens the store once however often it uses it; a use that left a transaction open is rolled
    back, one that made temporary tables is closed after it, another thread has its own. A database another
    process removed and made anew is opened anew, and the old connection is not closed: its close would
    delete the new file's WAL by name."""
    def connection() -> sqlite3.Connection:
        return derived.with_store(odd.root, lambda db, persistent: db if persistent else pytest.fail("in memory"))

    def row_count() -> int:
        return derived.with_index_table(odd, lambda db: db.execute("SELECT count(*) FROM threads").fetchone()[0])

    first = connection()
    assert row_count() == len(odd.read_index().threads) and connection() is first
    derived.with_store(odd.root, lambda db, _persistent: db.execute("BEGIN IMMEDIATE"))  # left open
    assert connection() is first and not first.in_transaction
    other: list[sqlite3.Connection] = []
    worker = threading.Thread(target=lambda: other.append(connection()))
    worker.start()
    worker.join()
    assert other and other[0] is not first
    derived.with_store(odd.root, lambda db, _persistent: db.execute("CREATE TEMP TABLE scratch (x)"))
    second = connection()
    assert second is not first
    with pytest.raises(sqlite3.ProgrammingError):
        first.execute("SELECT 1")  # closed

    path = database(odd)
    derived.discard(str(path))  # as another process does with a corrupt file, which then makes it anew
    with sqlite3.connect(path) as made_anew:
        made_anew.execute("PRAGMA journal_mode = WAL")
        made_anew.execute("CREATE TABLE planted (x)")
        assert Path(f"{path}-wal").exists()
        third = connection()
        assert third is not second and Path(f"{path}-wal").exists()  # the new file's WAL is still there
        assert second.execute("SELECT 1").fetchone() == (1,)  # never closed
    assert row_count() == len(odd.read_index().threads)


def test_relations_checks_the_lists_of_an_index_file_once(odd: Repository, monkeypatch: pytest.MonkeyPatch) -> None:
    """`leslie relations` prints a canonical index with sorted ID lists as it is; the lists are found sorted once
    per index file (its signature kept in the store) and never taken for it when a hand edit unsorts one."""
    from leslie.store.canonical import CanonicalText

    checks: list[int] = []
    original = CanonicalText.lists_sorted

    def counted(self: CanonicalText) -> bool:
        checks.append(1)
        return original(self)

    monkeypatch.setattr(CanonicalText, "lists_sorted", counted)

    def printed() -> str:
        result = run_leslie("relations", cwd=odd.root)
        assert result.code == 0, result.stderr
        return result.stdout

    assert derived.printable_as_stored(odd, odd.read_index())
    assert derived.printable_as_stored(odd, odd.read_index())
    assert len(checks) == 1  # the second read of the same file asked the store
    assert stored(odd)["index_sorted"] == file_signature(odd.layout.index_path)
    data = odd.layout.index_path.read_bytes()
    assert printed() == data.decode()
    # A hand edit in place that unsorts one list: another signature, the lists found unsorted, the index encoded.
    first, second = b'        "thread-lex",\n        "thread-mig"', b'        "thread-mig",\n        "thread-lex"'
    assert first in data
    odd.layout.index_path.write_bytes(data.replace(first, second, 1))
    assert not derived.printable_as_stored(odd, odd.read_index())
    assert not derived.printable_as_stored(odd, odd.read_index())  # a no is not kept: found again
    assert len(checks) == 3
    assert printed() == data.decode()  # the lists sorted again by the encoder
