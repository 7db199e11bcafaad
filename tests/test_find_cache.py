"""`leslie find`'s private cache (`ops/find_cache.py`, `ops/find_scan.py`): the same hits warm, cold or stale,
and a cache from anywhere but this user's leslie is never believed."""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import git, run_leslie
from leslie.errors import CorruptStateError
from leslie.ops import find as find_module
from leslie.ops import find_cache, find_scan
from leslie.ops.find import MAX_DEPTH, MAX_FILE_BYTES, Hit, _matches, find
from leslie.ops.find_cache import SHARD_CAP, SIGNATURE, Cache, cache_dir, shard_of
from leslie.ops.find_scan import read_text
from leslie.ops.objectives import create_objective
from leslie.ops.threads import remove, retitle, spawn
from leslie.store import forked
from leslie.store.repository import Repository

WORDS = ["ledger", "needle", "plan", "straße", "title", '"title"', "zanzibar", "café"]


SAVERS = "savers"  # the file (in a test's own folder) where each shard's save records the process saving it


@pytest.fixture(autouse=True, params=["alone", "forked", "threaded"])
def sharing(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[str]:
    """Every test three times: the shards checked here, shared with a forked child (`store.forked`) as at
    scale, and with another thread running (as in the board's server: no fork, and the working directory
    left alone, paths taken relative to the folder's descriptor). Forked, this process pauses after each
    shard it saves, so that the child surely takes some."""
    monkeypatch.setattr(forked, "SPLIT_FROM", 2 if request.param == "forked" else 10**9)
    real_save, parent = find_scan._Shard.save, os.getpid()

    def save(shard: find_scan._Shard) -> None:
        real_save(shard)
        with open(tmp_path / SAVERS, "a") as log:
            log.write(f"{os.getpid()}\n")
        if os.getpid() == parent and request.param == "forked":
            time.sleep(0.005)

    monkeypatch.setattr(find_scan._Shard, "save", save)
    if request.param != "threaded":
        yield request.param
        return
    done = threading.Event()
    other = threading.Thread(target=done.wait)
    other.start()
    try:
        yield request.param
    finally:
        done.set()
        other.join()


def test_the_working_directory_is_the_callers_again(notes: Repository, trusting: None, sharing: str,
                                                    monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Alone, the scan runs in the threads folder (cheaper `lstat` calls) and returns to where it was, also
    when the scan fails; with another thread running, the working directory is never changed."""
    here = tmp_path / "elsewhere"
    here.mkdir()
    monkeypatch.chdir(here)
    seen: list[str] = []
    real_threads = find_scan._Shard.threads

    def threads(shard: find_scan._Shard, thread_ids: Any) -> Any:
        seen.append(os.getcwd())
        return real_threads(shard, thread_ids)

    monkeypatch.setattr(find_scan._Shard, "threads", threads)
    warm(notes)
    assert os.getcwd() == str(here)
    threads_dir = os.path.realpath(notes.layout.threads_dir)
    assert set(seen) == ({str(here)} if sharing == "threaded" else {threads_dir})

    def fail(shard: find_scan._Shard, thread_ids: Any) -> Any:
        raise OSError("the scan failed")

    monkeypatch.setattr(find_scan._Shard, "threads", fail)
    with pytest.raises(OSError, match="the scan failed"):
        find(notes, "ledger")
    assert os.getcwd() == str(here)


def test_a_repository_given_by_a_relative_path(notes: Repository, trusting: None,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """A relative root: the scan cannot leave the working directory (its paths would point elsewhere), so
    it takes them relative to the folder's descriptor, and finds the same."""
    monkeypatch.chdir(notes.root)
    relative = Repository(Path("."))
    for word in WORDS:
        assert as_json(relative, word) == reference(notes, word), word
        assert as_json(relative, word) == reference(notes, word), word  # warm
    assert os.getcwd() == str(notes.root)


def test_a_forked_child_takes_shards_at_scale(notes: Repository, trusting: None, sharing: str,
                                             tmp_path: Path) -> None:
    warm(notes)
    savers = set((tmp_path / SAVERS).read_text().split())
    assert str(os.getpid()) in savers
    assert (len(savers) > 1) == (sharing == "forked")  # a child each run, when forked


@pytest.fixture
def trusting(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Files written a moment ago are trusted (no 1-second racy window), so the cache itself is exercised.

    A short sleep after each cached run (`warm`) keeps an edit out of the timestamp tick the cache saw.
    """
    monkeypatch.setattr(find_module, "RACY_NS", 0)
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
    (folder / "artifacts").mkdir(exist_ok=True)
    (folder / "artifacts" / "dump.bin").write_bytes(b"needle\0needle")
    return repo


def span(records: Any, path: str) -> tuple[int, int]:
    """Where the text of `path` (relative to the threads folder) sits in its shard's text."""
    at = records[2].index(os.fsencode(path))
    spans = memoryview(records[5]).cast("q")
    return spans[2 * at], spans[2 * at + 1]


def as_json(repo: Repository, word: str) -> list[dict[str, Any]]:
    return [hit.to_json() for hit in find(repo, word)]


def _reference_files(folder: str, rel: str = "", depth: int = 0) -> Iterator[tuple[str, str]]:
    """The files `find` searched before it had a cache: sorted, links never followed, 16 levels deep."""
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


def reference(repo: Repository, text: str) -> list[dict[str, Any]]:
    """`find` as it was before the cache (every file read, every thread.json looked at), to compare with."""
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
        raw = read_text(os.path.join(folder, "thread.json"))
        if (not is_folder or raw is None or "\\u" in raw or any(c in needle for c in '"\\')
                or any(ord(c) < 0x20 for c in needle) or needle in raw.casefold()):
            thread = repo.read_thread(thread_id)
            for where, value in (("title", thread.title), ("intent", thread.intent)):
                hits += [Hit("thread", thread.id, thread.title, where, n, line) for n, line in _matches(value, needle)]
        if not is_folder:
            continue
        for rel, path in _reference_files(folder):
            content = read_text(path)
            if content is not None:
                hits += [Hit("thread", thread_id, entry["title"], rel, n, line, f".leslie/threads/{thread_id}/{rel}")
                         for n, line in _matches(content, needle)]
    return [hit.to_json() for hit in hits]


def uncached(repo: Repository, word: str) -> list[dict[str, Any]]:
    """The hits with no cache at all (no key: nothing read or written), which every cached run must equal."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(find_cache, "user_key", lambda: None)
        return as_json(repo, word)


def warm(repo: Repository) -> None:
    """Run every word once (filling or refreshing the cache), and assert each equals the uncached hits."""
    for word in WORDS:
        expected = reference(repo, word)
        assert as_json(repo, word) == expected, word
        assert uncached(repo, word) == expected, word
    time.sleep(0.05)


def shards(repo: Repository) -> list[Path]:
    folder = Path(cache_dir(str(repo.layout.leslie_dir)))
    return sorted(p for p in folder.iterdir() if p.name not in ("threads", "titles")) if folder.is_dir() else []


def test_cache_is_written_and_used(notes: Repository, trusting: None) -> None:
    warm(notes)
    assert shards(notes), "find wrote no cache"
    assert (Path(cache_dir(str(notes.layout.leslie_dir))) / "threads").is_file()
    # A cache this user's leslie wrote is believed: rewritten (with the key) to say plan.md holds nothing, the
    # hit in it is gone, which shows the files are not read again. A forger lacks the key (the tests below).
    cache = Cache(str(notes.layout.leslie_dir), str(notes.root))
    name = f"{shard_of('thread-led'):02x}"
    loaded = cache.load(name)
    assert loaded is not None
    records, text = loaded
    start, end = span(records, "thread-led/plan.md")
    lie = text[:start] + b"x" * (end - start) + text[end:]
    cache.save(name, records, lie)
    assert [h["where"] for h in as_json(notes, "ledger tables")] == []
    assert [h["where"] for h in uncached(notes, "ledger tables")] == ["plan.md"]


def test_stale_entries_are_read_again(notes: Repository, trusting: None) -> None:
    folder = notes.layout.thread_dir("thread-led")
    warm(notes)
    # In place, same size, its mtime put back: only the ctime tells (and the cache must see it).
    plan = folder / "plan.md"
    before = plan.stat()
    plan.write_text(plan.read_text(encoding="utf-8").replace("ledger", "zanzib"), encoding="utf-8")
    os.utime(plan, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert plan.stat().st_size == before.st_size and plan.stat().st_mtime_ns == before.st_mtime_ns
    warm(notes)
    assert [h["where"] for h in as_json(notes, "zanzib")] == ["plan.md"]
    # Replaced (a new inode), removed, a new file in design/ and a new subfolder, a file turned binary.
    replacement = folder / "new-plan.tmp"
    replacement.write_text("the needle moved here\n", encoding="utf-8")
    os.replace(replacement, plan)
    warm(notes)
    (folder / "design" / "schema.md").unlink()
    (folder / "design" / "api.md").write_text("API needle\n", encoding="utf-8")
    (folder / "design" / "deep").mkdir()
    (folder / "design" / "deep" / "more.md").write_text("deep needle\n", encoding="utf-8")
    warm(notes)
    assert [h["where"] for h in as_json(notes, "needle")] == ["design/api.md", "design/deep/more.md", "plan.md"]
    (folder / "design" / "deep" / "more.md").write_bytes(b"needle\0binary now")
    warm(notes)
    # A file edited inside an unchanged subfolder (the folder's mtime does not move on an in-place edit).
    api = folder / "design" / "api.md"
    before = api.stat()
    api.write_text("API spool\n", encoding="utf-8")
    os.utime(api, ns=(before.st_atime_ns, before.st_mtime_ns))
    warm(notes)
    assert [h["where"] for h in as_json(notes, "needle")] == ["plan.md"]


def test_threads_come_and_go_and_thread_json_edited_by_hand(notes: Repository, trusting: None) -> None:
    warm(notes)
    remove(notes, "thread-led")
    warm(notes)
    assert [h["id"] for h in as_json(notes, "ledger")] == ["obj-pay"]
    spawn(notes, "A ledger again", title="Ledger two", thread_id="thread-led2")
    warm(notes)
    retitle(notes, "thread-led2", "Ledger renamed")  # a file hit shows the index's title: the new one
    warm(notes)
    assert {h["title"] for h in as_json(notes, "ledger again")} == {"Ledger renamed"}
    # thread.json edited in place by hand (the index is now stale): its fields are found from the file.
    path = notes.layout.thread_file("thread-cache")
    before = path.stat()
    data = json.loads(path.read_text(encoding="utf-8"))
    data["title"] = "Cache zanzib"
    path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    warm(notes)
    assert [(h["id"], h["where"]) for h in as_json(notes, "zanzib")] == [("thread-cache", "title")]
    data["intent"] = "caf\u00e9 spelled with an escape"
    path.write_text(json.dumps(data, ensure_ascii=True), encoding="utf-8")
    warm(notes)
    assert ("thread-cache", "intent") in [(h["id"], h["where"]) for h in as_json(notes, "café")]


def test_files_changed_within_the_racy_window_are_not_trusted(notes: Repository,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """A file changed within a second of the run that cached it is kept with a signature that never matches
    (a second change in the same timestamp tick would keep its ctime); a later run records it for real."""
    plan = notes.layout.thread_dir("thread-led") / "plan.md"
    assert as_json(notes, "ledger") == uncached(notes, "ledger")
    cache = Cache(str(notes.layout.leslie_dir), str(notes.root))
    name = f"{shard_of('thread-led'):02x}"

    def recorded() -> tuple[int, int, int, int]:
        loaded = cache.load(name)
        assert loaded is not None
        at = loaded[0][2].index(b"thread-led/plan.md")
        return SIGNATURE.unpack_from(loaded[0][4], at * SIGNATURE.size)  # type: ignore[return-value]

    assert recorded()[3] == -1
    before = plan.stat()
    plan.write_text(plan.read_text(encoding="utf-8").replace("ledger", "zanzib"), encoding="utf-8")
    os.utime(plan, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert [h["where"] for h in as_json(notes, "zanzib")] == ["plan.md"]
    monkeypatch.setattr(find_module, "RACY_NS", 0)  # as if a second had passed
    as_json(notes, "zanzib")
    assert recorded() == (plan.stat().st_ino, plan.stat().st_size, plan.stat().st_mtime_ns, plan.stat().st_ctime_ns)


def _forge(repo: Repository, name: str, data: bytes) -> Path:
    folder = Path(cache_dir(str(repo.layout.leslie_dir)))
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).unlink(missing_ok=True)
    (folder / name).write_bytes(data)
    return folder / name


def _lying_records(repo: Repository) -> tuple[Any, bytes]:
    """This repository's real record of thread-led, with every text replaced by nothing of interest."""
    cache = Cache(str(repo.layout.leslie_dir), str(repo.root))
    loaded = cache.load(f"{shard_of('thread-led'):02x}")
    assert loaded is not None
    records, text = loaded
    return records, bytes(b if b == 0 else ord("x") for b in text)


def test_a_forged_cache_is_never_believed(notes: Repository, trusting: None, tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    warm(notes)
    name = f"{shard_of('thread-led'):02x}"
    expected = uncached(notes, "ledger")
    records, lie = _lying_records(notes)
    # The same lie under another key (an attacker's own leslie, committed with the repository): ignored.
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "attacker"))
    Cache(str(notes.layout.leslie_dir), str(notes.root)).save(name, records, lie)
    monkeypatch.undo()
    monkeypatch.setattr(find_module, "RACY_NS", 0)
    assert as_json(notes, "ledger") == expected
    # Its records unmarshalled without any MAC, garbage, a truncated file, crafted marshal bytes: ignored.
    good = (Path(cache_dir(str(notes.layout.leslie_dir))) / name).read_bytes()
    import marshal
    for data in (b"", b"garbage" * 100, good[:len(good) // 2], good[:-1], good + b"x",
                 find_cache.MAGIC + bytes(32) + (5).to_bytes(8, "big") + (0).to_bytes(8, "big") + b"\xff" * 5,
                 find_cache.MAGIC + bytes(32) + marshal.dumps(records)):
        _forge(notes, name, data)
        _forge(notes, "threads", data)
        assert as_json(notes, "ledger") == expected


def test_the_titles_come_from_the_index_when_their_file_is_lost(notes: Repository, trusting: None) -> None:
    """The live IDs and their titles are cached in two files (the scan starts after loading the IDs alone);
    the titles file lost, forged or of another index, the hits' titles come from the index read again."""
    warm(notes)
    expected = uncached(notes, "ledger")
    assert {hit["title"] for hit in expected} >= {"Ledger migration"}
    cache = Cache(str(notes.layout.leslie_dir), str(notes.root))
    loaded = cache.load("titles")
    assert loaded is not None
    sig, titles = loaded[0]
    folder = Path(cache_dir(str(notes.layout.leslie_dir)))
    # This user's file for another index (its signature differs), a file not this user's, none at all.
    cache.save("titles", (b"another index", tuple(tuple("lie" for _ in ids) for ids in titles)), b"")
    assert as_json(notes, "ledger") == expected
    _forge(notes, "titles", b"garbage")
    assert as_json(notes, "ledger") == expected
    (folder / "titles").unlink()
    assert as_json(notes, "ledger") == expected
    assert cache.load("titles") == loaded  # written again, as it was
    # This user's file for this index is believed: the titles are not read from the index again.
    cache.save("titles", (sig, tuple(tuple(f"told {n}" for n in range(len(ids))) for ids in titles)), b"")
    assert all(hit["title"].startswith("told ") for hit in as_json(notes, "ledger") if hit["kind"] == "thread"
               and hit["path"] is not None)


def test_linked_huge_and_special_cache_files(notes: Repository, trusting: None, tmp_path: Path) -> None:
    warm(notes)
    expected = uncached(notes, "ledger")
    name = f"{shard_of('thread-led'):02x}"
    path = _forge(notes, name, b"")
    with open(path, "wb") as handle:  # sparse: over the cap without writing it
        handle.truncate(SHARD_CAP + 1)
    assert as_json(notes, "ledger") == expected
    path.unlink()
    os.mkfifo(path)  # opening it must not block
    assert as_json(notes, "ledger") == expected
    assert path.is_fifo()  # nor is it replaced (a write never replaces a special file)
    path.unlink()
    assert as_json(notes, "ledger") == expected  # written again
    # This user's own, valid, lying file, reached through a link: not read (and not written through).
    records, lie = _lying_records(notes)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    Cache(str(notes.layout.leslie_dir), str(notes.root)).save(name, records, lie)
    os.replace(Path(cache_dir(str(notes.layout.leslie_dir))) / name, elsewhere / name)
    os.symlink(elsewhere / name, path)
    assert as_json(notes, "ledger") == expected
    assert path.is_symlink()
    # The whole folder a link: nothing read through it, nothing written through it.
    folder = Path(cache_dir(str(notes.layout.leslie_dir)))
    for child in folder.iterdir():
        child.unlink()
    folder.rmdir()
    os.symlink(elsewhere, folder)
    before = sorted(os.listdir(elsewhere))
    assert as_json(notes, "ledger") == expected
    assert sorted(os.listdir(elsewhere)) == before


def test_the_key_must_be_private_and_this_users(notes: Repository, trusting: None) -> None:
    warm(notes)
    key = Path(os.environ["XDG_STATE_HOME"]) / "leslie" / "cache.key"
    assert key.stat().st_mode & 0o777 == 0o600
    records, lie = _lying_records(notes)
    Cache(str(notes.layout.leslie_dir), str(notes.root)).save(f"{shard_of('thread-led'):02x}", records, lie)
    key.chmod(0o644)  # readable by others: no secret, so no cache is believed (nor written)
    assert as_json(notes, "ledger") == uncached(notes, "ledger")


def test_cli_read_only_state_and_doctor(notes: Repository) -> None:
    root = notes.root
    first = run_leslie("find", "ledger", cwd=root)
    assert first.code == 0, first.stderr
    assert shards(notes)
    again = run_leslie("find", "ledger", cwd=root)
    assert (again.code, again.stdout, again.stderr) == (0, first.stdout, "")
    doctor = run_leslie("doctor", cwd=root)
    assert doctor.code == 0, doctor.stdout + doctor.stderr
    assert "find" not in doctor.stdout + doctor.stderr
    assert ".leslie/state" not in git("status", "--porcelain", "--ignored=no", cwd=root)
    # A write of the cache killed midway leaves a temp file with the usual name: doctor knows it, --fix removes it.
    leftover = Path(cache_dir(str(notes.layout.leslie_dir))) / ".07.0badc0de.leslie-tmp"
    leftover.write_bytes(b"half a shard")
    os.utime(leftover, (time.time() - 3600, time.time() - 3600))
    stale = run_leslie("doctor", cwd=root)
    assert stale.code == 1 and "stale temporary file .git/leslie/find/.07.0badc0de.leslie-tmp" in stale.stdout
    assert run_leslie("doctor", "--fix", cwd=root).code == 0
    assert not leftover.exists() and shards(notes)
    # The cache cannot be written (its folder is a file): find works the same, silently.
    folder = Path(cache_dir(str(notes.layout.leslie_dir)))
    for child in folder.iterdir():
        child.unlink()
    folder.rmdir()
    folder.write_text("not a folder\n")
    blocked = run_leslie("find", "ledger", cwd=root)
    assert (blocked.code, blocked.stdout, blocked.stderr) == (0, first.stdout, "")


def test_fields_are_parsed_only_when_they_may_match(notes: Repository, trusting: None) -> None:
    """A thread.json is parsed (strictly, failing on bad JSON) only when its text may hold the needle or spells
    letters with `\\u` escapes, as before the cache: an invalid `\\U` escape (casefolded, it would read `\\u`)
    does not make every search fail."""
    path = notes.layout.thread_file("thread-f00")
    raw = path.read_text(encoding="utf-8").replace('"Filler 0"', '"Filler \\\\U0041 0"', 1)
    assert "\\\\U0041" in raw
    path.write_text(raw.replace("\\\\U0041", "\\U0041"), encoding="utf-8")
    for _ in range(2):  # cold, then warm
        assert as_json(notes, "ledger tables")[0]["where"] == "plan.md"
        time.sleep(0.05)
    with pytest.raises(CorruptStateError):
        find(notes, "filler")  # a needle its text holds: parsed, and the bad escape reported (exit 4)


def test_hostile_folders_the_same_cold_and_warm(notes: Repository, trusting: None, tmp_path: Path) -> None:
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
    # A NUL after the first 8 KiB (searched): the cache's separator, replaced in its copy; needles either side.
    (folder / "late-nul.md").write_bytes(b"a" * 9000 + b"\nneedle one\0needle two\n")
    words = ["needle", "straße", "needle two", "e\0n", "depth 1", "caf\ufffd"]
    for _ in range(2):
        for word in words:
            assert as_json(notes, word) == reference(notes, word), word
        time.sleep(0.05)
    # After caching: a searched file becomes a link, and a linked folder a real one.
    (folder / "notes.md").unlink()
    os.symlink(outside / "secret.md", folder / "notes.md")
    (folder / "design").unlink()
    (folder / "design").mkdir()
    (folder / "design" / "real.md").write_text("needle in a real folder\n", encoding="utf-8")
    for word in words:
        assert as_json(notes, word) == reference(notes, word), word
