"""`leslie find`'s full-text index in the derived store (`ops/find_index.py`, `store/derived.py`): the same hits
current, stale, missing, corrupt or unusable, and nothing in a repository can plant or steer it."""

from __future__ import annotations

import json
import os
import sqlite3
import stat
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import damage_database, database_bytes, git, run_leslie
from leslie.context.scaffold import scaffold_lines
from leslie.errors import CorruptStateError
from leslie.ops import find_index
from leslie.ops.find import MAX_DEPTH, MAX_FILE_BYTES, Hit, _matches, find
from leslie.ops.objectives import create_objective
from leslie.ops.threads import remove, retitle, spawn
from leslie.store import derived, machine
from leslie.store.repository import Repository

WORDS = ["ledger", "needle", "plan", "straße", "title", '"title"', "zanzibar", "café", "le", "n"]


@pytest.fixture
def trusting(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Files written a moment ago are trusted (no 1-second racy window), so the index itself is exercised.

    A short sleep after each indexed run (`warm`) keeps an edit out of the timestamp tick the index saw.
    """
    monkeypatch.setattr(find_index, "RACY_NS", 0)
    monkeypatch.setattr("leslie.ops.find.RACY_NS", 0)
    yield


@pytest.fixture
def notes(repo: Repository) -> Repository:
    create_objective(repo, "Payments Launch", objective_id="obj-pay", description="Ship it.\nWith the LEDGER.")
    spawn(repo, "Move the ledger", title="Ledger migration", objective="obj-pay", thread_id="thread-led")
    spawn(repo, "Unrelated", title="Cache warmup", objective="obj-pay", thread_id="thread-cache")
    for number in range(12):
        spawn(repo, f"Filler {number}", title=f"Filler {number}", thread_id=f"thread-f{number:02d}")
    folder = repo.layout.thread_dir("thread-led")
    (folder / "plan.md").write_text("# Plan\n\n- [ ] move the ledger tables\n", encoding="utf-8")
    (folder / "design").mkdir(exist_ok=True)
    (folder / "design" / "schema.md").write_text("nothing\n  Straße LEDGER v2 needle \n", encoding="utf-8")
    (folder / "design.md").write_text("a file beside its folder: searched after it\n", encoding="utf-8")
    (folder / "artifacts").mkdir(exist_ok=True)
    (folder / "artifacts" / "dump.bin").write_bytes(b"needle\0needle")
    return repo


def database(repo: Repository) -> Path:
    path = derived.database_path(repo.root)
    assert path is not None
    return Path(path)


def as_json(repo: Repository, word: str) -> list[dict[str, Any]]:
    return [hit.to_json() for hit in find(repo, word)]


def _reference_files(folder: str, rel: str = "", depth: int = 0) -> Iterator[tuple[str, str]]:
    """The files `find` searches: sorted, links never followed, 16 levels deep."""
    try:
        entries = sorted(os.scandir(folder), key=lambda e: e.name)
    except OSError:
        return
    for entry in entries:
        name = rel + entry.name
        if entry.is_symlink():
            continue
        if entry.is_dir(follow_symlinks=False):
            if depth < MAX_DEPTH:
                yield from _reference_files(entry.path, name + "/", depth + 1)
        elif entry.is_file(follow_symlinks=False) and name != "thread.json":
            yield name, entry.path


def _read(path: str) -> str | None:
    fd = os.open(os.path.dirname(path), os.O_RDONLY | os.O_DIRECTORY)
    try:
        return find_index.read_text(fd, os.path.basename(path))
    finally:
        os.close(fd)


def reference(repo: Repository, text: str) -> list[dict[str, Any]]:
    """`find` without any index (every file read, every thread.json looked at), to compare with."""
    needle = text.casefold()
    hits: list[Hit] = []
    for objective in repo.objectives():
        for where, value in (("title", objective.title), ("description", objective.description or "")):
            hits += [Hit("objective", objective.id, objective.title, where, n, line)
                     for n, line in _matches(value, needle)]
    threads_dir = str(repo.layout.threads_dir)
    for thread_id, entry in sorted(repo.read_index().threads.items()):
        folder = os.path.join(threads_dir, thread_id)
        is_folder = os.path.isdir(folder) and not os.path.islink(folder)
        raw = _read(os.path.join(folder, "thread.json")) if is_folder else None
        if (not is_folder or raw is None or "\\u" in raw or any(c in needle for c in '"\\')
                or any(ord(c) < 0x20 for c in needle) or needle in raw.casefold()):
            thread = repo.read_thread(thread_id)
            for where, value in (("title", thread.title), ("intent", thread.intent)):
                hits += [Hit("thread", thread.id, thread.title, where, n, line) for n, line in _matches(value, needle)]
        if not is_folder:
            continue
        for rel, path in _reference_files(folder):
            content = _read(path)
            if content is not None:
                scaffold = scaffold_lines(rel, content)  # spawn's heading is no hit (issue 33)
                hits += [Hit("thread", thread_id, entry["title"], rel, n, line, f".leslie/threads/{thread_id}/{rel}")
                         for n, line in _matches(content, needle) if n not in scaffold]
    return [hit.to_json() for hit in hits]


def unindexed(repo: Repository, word: str, tmp_path: Path) -> list[dict[str, Any]]:
    """The hits when no database can be used (the cache folder cannot be made): an in-memory one, empty."""
    blocked = tmp_path / "blocked-cache"
    blocked.write_text("not a folder\n")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("XDG_CACHE_HOME", str(blocked))
        return as_json(repo, word)


def warm(repo: Repository, tmp_path: Path) -> None:
    """Run every word once (filling or refreshing the index), and assert each equals the hits without it."""
    for word in WORDS:
        expected = reference(repo, word)
        assert as_json(repo, word) == expected, word
        assert unindexed(repo, word, tmp_path) == expected, word
    time.sleep(0.05)


def stored_signature(repo: Repository, thread_id: str, rel: str) -> tuple[int, int, int, int]:
    with sqlite3.connect(database(repo)) as db:
        paths, sigs = db.execute("SELECT paths, sigs FROM folders WHERE thread = ?", (thread_id,)).fetchone()
    at = paths.split(b"\0").index(os.fsencode(f"{thread_id}/{rel}"))
    return find_index.SIGNATURE.unpack_from(sigs, at * find_index.SIGNATURE.size)  # type: ignore[return-value]


def test_the_index_is_written_and_used(notes: Repository, trusting: None, tmp_path: Path) -> None:
    warm(notes, tmp_path)
    path = database(notes)
    assert path.is_file() and not path.is_relative_to(notes.root)
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    # A stored text is believed while its file's signature is unchanged: rewritten to say plan.md holds
    # nothing, the hit in it is gone, which shows the file is not read again.
    with sqlite3.connect(path) as db:
        (doc,) = db.execute("SELECT id FROM docs WHERE thread = 'thread-led' AND path = ?",
                            (b"thread-led/plan.md",)).fetchone()
        db.execute("UPDATE texts SET body = 'nothing of interest' WHERE rowid = ?", (doc,))
    assert [h["where"] for h in as_json(notes, "ledger tables")] == []
    assert [h["where"] for h in unindexed(notes, "ledger tables", tmp_path)] == ["plan.md"]


def test_stale_entries_are_read_again(notes: Repository, trusting: None, tmp_path: Path) -> None:
    folder = notes.layout.thread_dir("thread-led")
    warm(notes, tmp_path)
    # In place, same size, its mtime put back: only the ctime tells (and the check must see it).
    plan = folder / "plan.md"
    before = plan.stat()
    plan.write_text(plan.read_text(encoding="utf-8").replace("ledger", "zanzib"), encoding="utf-8")
    os.utime(plan, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert plan.stat().st_size == before.st_size and plan.stat().st_mtime_ns == before.st_mtime_ns
    warm(notes, tmp_path)
    assert [h["where"] for h in as_json(notes, "zanzib")] == ["plan.md"]
    # Replaced (a new inode), removed, a new file in design/ and a new subfolder, a file turned binary.
    replacement = folder / "new-plan.tmp"
    replacement.write_text("the needle moved here\n", encoding="utf-8")
    os.replace(replacement, plan)
    warm(notes, tmp_path)
    (folder / "design" / "schema.md").unlink()
    (folder / "design" / "api.md").write_text("API needle\n", encoding="utf-8")
    (folder / "design" / "deep").mkdir()
    (folder / "design" / "deep" / "more.md").write_text("deep needle\n", encoding="utf-8")
    warm(notes, tmp_path)
    assert [h["where"] for h in as_json(notes, "needle")] == ["design/api.md", "design/deep/more.md", "plan.md"]
    (folder / "design" / "deep" / "more.md").write_bytes(b"needle\0binary now")
    warm(notes, tmp_path)
    # A file edited inside an unchanged subfolder (the folder's mtime does not move on an in-place edit).
    api = folder / "design" / "api.md"
    before = api.stat()
    api.write_text("API spool\n", encoding="utf-8")
    os.utime(api, ns=(before.st_atime_ns, before.st_mtime_ns))
    warm(notes, tmp_path)
    assert [h["where"] for h in as_json(notes, "needle")] == ["plan.md"]


def test_threads_come_and_go_and_thread_json_edited_by_hand(notes: Repository, trusting: None,
                                                            tmp_path: Path) -> None:
    warm(notes, tmp_path)
    remove(notes, "thread-led")
    warm(notes, tmp_path)
    assert [h["id"] for h in as_json(notes, "ledger")] == ["obj-pay"]
    with sqlite3.connect(database(notes)) as db:  # a thread no longer live leaves the index
        assert db.execute("SELECT count(*) FROM docs WHERE thread = 'thread-led'").fetchone() == (0,)
        assert db.execute("SELECT count(*) FROM folders WHERE thread = 'thread-led'").fetchone() == (0,)
    spawn(notes, "A ledger again", title="Ledger two", thread_id="thread-led2")
    warm(notes, tmp_path)
    retitle(notes, "thread-led2", "Ledger renamed")  # a file hit shows the index's title: the new one
    warm(notes, tmp_path)
    assert {h["title"] for h in as_json(notes, "ledger again")} == {"Ledger renamed"}
    # thread.json edited in place by hand (the index is now stale): its fields are found from the file.
    path = notes.layout.thread_file("thread-cache")
    before = path.stat()
    data = json.loads(path.read_text(encoding="utf-8"))
    data["title"] = "Cache zanzib"
    path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    warm(notes, tmp_path)
    assert [(h["id"], h["where"]) for h in as_json(notes, "zanzib")] == [("thread-cache", "title")]
    data["intent"] = "caf\u00e9 spelled with an escape"
    path.write_text(json.dumps(data, ensure_ascii=True), encoding="utf-8")
    warm(notes, tmp_path)
    assert ("thread-cache", "intent") in [(h["id"], h["where"]) for h in as_json(notes, "café")]


@pytest.mark.parametrize("chunk", [1, 2, 3])
def test_records_checked_in_small_chunks(notes: Repository, trusting: None, tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch, chunk: int) -> None:
    """The records are checked a chunk at a time: chunks whose threads are all gone, some gone, or one
    changed among unchanged ones give the same hits as no index."""
    monkeypatch.setattr(find_index, "CHECKED", chunk)
    warm(notes, tmp_path)
    remove(notes, "thread-led")
    warm(notes, tmp_path)
    (notes.layout.thread_dir("thread-cache") / "plan.md").write_text("now a ledger note\n", encoding="utf-8")
    warm(notes, tmp_path)
    assert "thread-cache" in [h["id"] for h in as_json(notes, "ledger")]


def test_files_changed_within_the_racy_window_are_not_trusted(notes: Repository,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """A file changed within a second of the run that indexed it is kept with a signature that never matches
    (a second change in the same timestamp tick would keep its ctime); a later run records it for real."""
    plan = notes.layout.thread_dir("thread-led") / "plan.md"
    assert as_json(notes, "ledger") == reference(notes, "ledger")
    assert stored_signature(notes, "thread-led", "plan.md")[3] == -1
    before = plan.stat()
    plan.write_text(plan.read_text(encoding="utf-8").replace("ledger", "zanzib"), encoding="utf-8")
    os.utime(plan, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert [h["where"] for h in as_json(notes, "zanzib")] == ["plan.md"]
    monkeypatch.setattr("leslie.ops.find.RACY_NS", 0)  # as if a second had passed
    as_json(notes, "zanzib")
    now = plan.stat()
    assert stored_signature(notes, "thread-led", "plan.md") == (now.st_ino, now.st_size, now.st_mtime_ns,
                                                                 now.st_ctime_ns)


@pytest.mark.parametrize("damage", ["garbage", "truncated", "zeroed pages", "empty", "folder", "link",
                                    "another schema", "another repository", "foreign tables"])
def test_a_damaged_or_foreign_database_is_rebuilt_silently(notes: Repository, trusting: None, tmp_path: Path,
                                                           damage: str) -> None:
    warm(notes, tmp_path)
    expected = {word: reference(notes, word) for word in WORDS}
    path = database(notes)
    good = database_bytes(path)
    elsewhere = tmp_path / "elsewhere.sqlite3"
    damage_database(path, damage, elsewhere)
    for word in WORDS:
        assert as_json(notes, word) == expected[word], (damage, word)
    assert path.is_file() and not path.is_symlink()
    with sqlite3.connect(path) as db:  # rebuilt: this schema, this repository, texts again
        assert db.execute("PRAGMA user_version").fetchone() == (derived.SCHEMA_VERSION,)
        assert db.execute("SELECT value FROM meta WHERE key = 'root'").fetchone() == (os.path.realpath(notes.root),)
        assert db.execute("SELECT count(*) FROM docs").fetchone()[0] > 0
        assert db.execute("SELECT count(*) FROM sqlite_schema WHERE name IN ('planted', 'spy')").fetchone() == (0,)
    if damage == "link":
        assert elsewhere.read_bytes() == good  # nothing read or written through the link


def test_nothing_a_repository_holds_can_plant_or_steer_the_index(notes: Repository, trusting: None,
                                                                tmp_path: Path) -> None:
    """The database lives in the user's cache folder, named after the repository's real path: a clone (or a
    repository that commits a database, an old cache, a `.git/leslie/`) has its own, made from its own files."""
    warm(notes, tmp_path)
    path = database(notes)
    planted = tmp_path / "planted.sqlite3"
    planted.write_bytes(database_bytes(path))
    with sqlite3.connect(planted) as db:  # this repository's own index, lying: nothing holds the needle
        db.execute("UPDATE texts SET body = 'x'")
    for place in (".leslie/state/find", ".leslie/cache", ".git/leslie/find"):
        (notes.root / place).mkdir(parents=True, exist_ok=True)
        (notes.root / place / path.name).write_bytes(planted.read_bytes())
    git("add", "-A", "-f", cwd=notes.root)
    git("commit", "-qm", "with planted databases", cwd=notes.root)
    clone = tmp_path / "clone"
    git("clone", "-q", str(notes.root), str(clone), cwd=tmp_path)
    cloned = Repository(clone)
    assert database(cloned) != path and not database(cloned).is_relative_to(clone)
    assert [h["where"] for h in as_json(cloned, "ledger tables")] == ["plan.md"]
    assert [h["where"] for h in as_json(notes, "ledger tables")] == ["plan.md"]
    for place in (".leslie/state/find", ".leslie/cache"):
        assert (clone / place / path.name).read_bytes() == planted.read_bytes()  # never touched


def test_a_loose_cache_folder_is_made_private(notes: Repository, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "loose" / "leslie"
    folder.mkdir(parents=True, mode=0o755)
    folder.chmod(0o755)
    monkeypatch.setenv("XDG_CACHE_HOME", str(folder.parent))
    expected = reference(notes, "ledger")
    assert as_json(notes, "ledger") == expected
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700 and any(folder.iterdir())
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/cache")  # ignored, as the XDG spec says: the home's is used
    assert machine.cache_folder() == os.path.join(os.environ["HOME"], ".cache", "leslie")
    assert as_json(notes, "ledger") == expected


def test_a_busy_database_is_left_alone(notes: Repository, trusting: None, tmp_path: Path,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """Another process holding the write lock: the search answers from the files (it waits at most
    BUSY_SECONDS for the lock), writes nothing, and the next search catches up."""
    monkeypatch.setattr(derived, "BUSY_SECONDS", 0.05)
    warm(notes, tmp_path)
    (notes.layout.thread_dir("thread-cache") / "progress.md").write_text("a quokka needle\n", encoding="utf-8")
    time.sleep(0.05)
    holder = sqlite3.connect(database(notes), isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        assert as_json(notes, "needle") == reference(notes, "needle")
        assert as_json(notes, "ledger") == reference(notes, "ledger")
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert as_json(notes, "needle") == reference(notes, "needle")
    with sqlite3.connect(database(notes)) as db:
        assert db.execute("SELECT count(*) FROM texts WHERE instr(body, 'quokka')").fetchone() == (1,)


def test_concurrent_searches_build_one_index(notes: Repository) -> None:
    """Several `leslie find` processes at once on an empty index: each answers, none fails or waits long."""
    expected = run_leslie("find", "needle", cwd=notes.root)
    derived.discard(str(database(notes)))
    results: list[Any] = []

    def search() -> None:
        results.append(run_leslie("find", "needle", cwd=notes.root, timeout=60))

    workers = [threading.Thread(target=search) for _ in range(6)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert [(r.code, r.stdout, r.stderr) for r in results] == [(expected.code, expected.stdout, "")] * 6


def test_a_search_reads_one_snapshot_while_another_builds_the_index(notes: Repository,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """The deterministic form of the race above: another search builds the whole index just after this one has
    asked which stored texts hold the needle (none yet). This one must not pair the other's records, or the
    documents it kept, with the texts it read before them: it finds every hit."""
    expected = reference(notes, "needle")
    derived.discard(str(database(notes)))
    time.sleep(find_index.RACY_NS / 1e9 + 0.1)  # the other search, a process of its own, then trusts what it reads
    matches = find_index._Search.matches

    def then_another_search(search: Any, thread: str | None = None) -> Any:
        found = matches(search) if thread is None else matches(search, thread)
        if not found and thread is None:  # once: the first run, on the empty index
            other = run_leslie("find", "needle", cwd=notes.root, timeout=60)
            assert other.code == 0, other.stderr
        return found

    monkeypatch.setattr(find_index._Search, "matches", then_another_search)
    assert as_json(notes, "needle") == expected


def test_cli_and_doctor(notes: Repository, tmp_path: Path) -> None:
    root = notes.root
    git("add", "-A", cwd=root)
    git("commit", "-qm", "notes", cwd=root)
    first = run_leslie("find", "ledger", cwd=root)
    assert first.code == 0, first.stderr
    again = run_leslie("find", "ledger", cwd=root)
    assert (again.code, again.stdout, again.stderr) == (0, first.stdout, "")
    doctor = run_leslie("doctor", cwd=root)
    assert doctor.code == 0, doctor.stdout + doctor.stderr
    assert git("status", "--porcelain", cwd=root) == ""  # nothing written into the repository
    # No cache folder can be made: find works the same, silently.
    blocked = tmp_path / "blocked"
    blocked.write_text("not a folder\n")
    cold = run_leslie("find", "ledger", cwd=root, env={"XDG_CACHE_HOME": str(blocked)})
    assert (cold.code, cold.stdout, cold.stderr) == (0, first.stdout, "")


def test_fields_are_parsed_only_when_they_may_match(notes: Repository, trusting: None) -> None:
    """A thread.json is parsed (strictly, failing on bad JSON) only when its text may hold the needle or spells
    letters with `\\u` escapes: an invalid `\\U` escape (casefolded, it would read `\\u`) does not make every
    search fail."""
    path = notes.layout.thread_file("thread-f00")
    raw = path.read_text(encoding="utf-8").replace('"Filler 0"', '"Filler \\\\U0041 0"', 1)
    assert "\\\\U0041" in raw
    path.write_text(raw.replace("\\\\U0041", "\\U0041"), encoding="utf-8")
    for _ in range(2):  # unindexed, then indexed
        assert as_json(notes, "ledger tables")[0]["where"] == "plan.md"
        time.sleep(0.05)
    with pytest.raises(CorruptStateError):
        find(notes, "filler")  # a needle its text holds: parsed, and the bad escape reported (exit 4)


def test_hostile_folders_the_same_unindexed_and_indexed(notes: Repository, trusting: None, tmp_path: Path) -> None:
    folder = notes.layout.thread_dir("thread-cache")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.md").write_text("needle outside\n", encoding="utf-8")
    os.symlink(outside / "secret.md", folder / "linked.md")
    os.symlink(outside, folder / "design")
    os.mkfifo(folder / "pipe.md")
    (folder / "big.md").write_bytes(b"needle\n" + b"x" * MAX_FILE_BYTES)
    deep = folder
    for level in range(MAX_DEPTH + 3):
        deep = deep / f"d{level}"
        deep.mkdir()
        (deep / "at.md").write_text(f"needle at depth {level}\n", encoding="utf-8")
    (folder / "notes.md").write_bytes(b"caf\xe9 needle \xff STRASSE\n")
    (folder / b"caf\xe9-\xff.md".decode("utf-8", "surrogateescape")).write_bytes(b"needle in a file named in latin-1\n")
    # A NUL after the first 8 KiB (searched): replaced in the index's copy; needles either side.
    (folder / "late-nul.md").write_bytes(b"a" * 9000 + b"\nneedle one\0needle two\n")
    words = ["needle", "straße", "needle two", "e\0n", "depth 1", "caf\ufffd", "latin", "\udcff", 'a"b', "ne"]
    for _ in range(2):
        for word in words:
            assert as_json(notes, word) == reference(notes, word), word
        time.sleep(0.05)
    # After indexing: a searched file becomes a link, and a linked folder a real one.
    (folder / "notes.md").unlink()
    os.symlink(outside / "secret.md", folder / "notes.md")
    (folder / "design").unlink()
    (folder / "design").mkdir()
    (folder / "design" / "real.md").write_text("needle in a real folder\n", encoding="utf-8")
    for word in words:
        assert as_json(notes, word) == reference(notes, word), word


def test_without_fts5_the_texts_are_searched_with_instr(notes: Repository, trusting: None, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """An SQLite without FTS5 or the trigram tokenizer (older than 3.34, or built without them): the texts go
    to a plain table, searched with `instr`, and every search gives the same hits."""
    monkeypatch.setattr(derived, "_TEXTS", "CREATE VIRTUAL TABLE texts USING no_such_module (body)")
    warm(notes, tmp_path)
    with sqlite3.connect(database(notes)) as db:
        assert db.execute("SELECT sql FROM sqlite_schema WHERE name = 'texts'").fetchone()[0].startswith(
            "CREATE TABLE texts")
        assert db.execute("SELECT count(*) FROM texts").fetchone()[0] > 0
    warm(notes, tmp_path)
