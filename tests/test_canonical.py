"""canonical.py: the index's canonical text, spliced in place, and the fingerprint that vouches for leslie's bytes."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import run_leslie, state_dir
from index_model import STATUSES, apply_op, ops
from leslie.ops.threads import spawn
from leslie.store.canonical import CanonicalText, fingerprint
from leslie.store.jsonio import dumps_canonical
from leslie.store.model import Thread
from leslie.store.relations import Index, build_index, decode_index
from leslie.store.repository import INDEX_CHECKED_FILE, Repository

NAMES = [f"thread-{c}" for c in "abcdefgh"]


def _thread(tid: str, refs: dict[str, tuple[str, ...]] | None = None) -> Thread:
    return Thread(id=tid, title=f"títle {tid} ✓ \"q\"", intent=f"intent of {tid}\nsecond line", objective="obj-1",
                  references=refs or {}, created_at="2026-01-01T00:00:00Z")


OPS = ops(len(NAMES), 8)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(OPS, st.booleans()), max_size=10))
def test_spliced_bytes_equal_a_rebuild_and_pass_the_full_check(batches: list[tuple[list[tuple[str, int, int]],
                                                                                     bool]]) -> None:
    """Each batch is one command: the index read from the last bytes (vouched for by the fingerprint, or checked in
    full), edited lazily, written by splicing. The bytes equal the encoder's of a rebuild, and they pass the
    full check: what makes it sound to skip that check for bytes leslie wrote."""
    sources: dict[str, Thread] = {}
    data = dumps_canonical(Index.empty().to_json())
    for command, known in batches:
        index = decode_index(data, Path("i"), Path("i"), known=known)
        assert index.source() is not None  # lazy: the splice is what is tested
        for op, i, j in command:
            apply_op(index, sources, op, NAMES[i], NAMES[j], STATUSES[j % 4], _thread)
        data = index.to_bytes()
        assert data == dumps_canonical(build_index(sources.values()).to_json())
        assert CanonicalText.parse(data) is not None


def test_the_fingerprint_tells_any_change_of_the_bytes_or_of_the_file(tmp_path: Path) -> None:
    data = dumps_canonical(build_index([_thread("thread-a"), _thread("thread-b", {"thread-a": ()})]).to_json())
    held = tmp_path / "index"
    held.write_bytes(data)
    st = os.stat(held)
    assert fingerprint(data, st) == fingerprint(bytes(data), os.stat(held))
    edited = data.replace(b"thread-a \xe2\x9c\x93", b"thread-A \xe2\x9c\x93")  # the same length
    assert edited != data and len(edited) == len(data) and fingerprint(edited, st) != fingerprint(data, st)
    assert fingerprint(data + b" ", st) != fingerprint(data, st)
    # The same bytes in another file (a checkout writes a new one): another inode, another fingerprint.
    twin = tmp_path / "twin"
    twin.write_bytes(data)
    assert fingerprint(data, os.stat(twin)) != fingerprint(data, st)


def test_a_committed_record_does_not_spare_a_clone_the_check(repo_root: Path, tmp_path: Path) -> None:
    """A hostile repository commits `state/index.checked` beside its index: the clone's index is a new file, so
    the record vouches for nothing and the index is checked in full (a hand-made index is refused, exit 4)."""
    assert run_leslie("spawn", "--intent", "first", "--id", "thread-a", cwd=repo_root).code == 0
    record = state_dir(repo_root) / INDEX_CHECKED_FILE
    index_path = repo_root / ".leslie" / "thread_relations.json"
    forged = index_path.read_bytes().replace(b'"status": "active"', b'"status": "absent"')
    clone = tmp_path / "clone"
    shutil.copytree(repo_root, clone)  # new files: new inodes and times, as a checkout makes them
    (clone / ".leslie" / "thread_relations.json").write_bytes(forged)
    forged_identity = os.stat(clone / ".leslie" / "thread_relations.json")
    # Even a record made for the forged bytes in the attacker's own checkout names that checkout's file.
    elsewhere = tmp_path / "attacker-index"
    elsewhere.write_bytes(forged)
    (state_dir(clone) / INDEX_CHECKED_FILE).write_bytes(fingerprint(forged, os.stat(elsewhere)))
    assert record.exists() and forged_identity.st_ino != os.stat(elsewhere).st_ino
    source_repo = Repository(clone)
    assert not source_repo.known_index(forged)
    result = run_leslie("spawn", "--intent", "second", cwd=clone)
    assert result.code == 4, result.stderr


def test_a_write_records_the_fingerprint_and_the_next_read_skips_the_check(repo: Repository) -> None:
    spawn(repo, "first", thread_id="thread-a")
    spawn(repo, "second", thread_id="thread-b")
    recorded = (repo.layout.state_dir / INDEX_CHECKED_FILE).read_bytes()
    assert recorded == fingerprint(repo.layout.index_path.read_bytes(), os.stat(repo.layout.index_path))
    source = repo.read_index().source()
    assert source is not None and source.known


def test_a_rebuilt_index_is_recorded_too(repo_root: Path) -> None:
    """`doctor --fix` writes a whole rebuilt index (not a splice): its fingerprint is recorded as well, so the
    reads after it do not check its layout again."""
    assert run_leslie("spawn", "--intent", "first", "--id", "thread-a", cwd=repo_root).code == 0
    index_path = repo_root / ".leslie" / "thread_relations.json"
    record = state_dir(repo_root) / INDEX_CHECKED_FILE
    index_path.write_bytes(index_path.read_bytes().replace(b'"title": "first"', b'"title": "stale"'))
    record.unlink()
    result = run_leslie("doctor", "--fix", cwd=repo_root)
    assert result.code == 0 and "rebuilt" in result.stdout, result.stdout + result.stderr
    data = index_path.read_bytes()
    assert b'"title": "first"' in data
    assert record.read_bytes() == fingerprint(data, os.stat(index_path))
    source = Repository.discover(repo_root).read_index().source()
    assert source is not None and source.known


def test_a_reader_records_an_index_it_checked_in_full_when_the_lock_is_free(repo_root: Path) -> None:
    """An index git wrote (here: the same bytes in a new file) is checked in full by the first read, which
    records it, under the lock, so the next read skips the check; never while a writer holds the lock, and
    never for bytes that are not canonical."""
    from leslie.store.files import acquire_index_lock

    assert run_leslie("spawn", "--intent", "first", "--id", "thread-a", cwd=repo_root).code == 0
    index_path = repo_root / ".leslie" / "thread_relations.json"
    record = state_dir(repo_root) / INDEX_CHECKED_FILE
    data = index_path.read_bytes()
    index_path.unlink()
    index_path.write_bytes(data)  # a checkout: a new file, its record no longer matches
    repo = Repository.discover(repo_root)
    with acquire_index_lock(repo.layout):  # a writer at work: the reader does not wait, nor record
        source = repo.read_index().source()
        assert source is not None and not source.known
    assert record.read_bytes() != fingerprint(data, os.stat(index_path))
    assert run_leslie("show", "thread-a", cwd=repo_root).code == 0
    assert record.read_bytes() == fingerprint(data, os.stat(index_path))
    source = repo.read_index().source()
    assert source is not None and source.known
    compact = dumps_canonical(repo.read_index().to_json()).replace(b"\n  ", b"\n ")  # valid JSON, not canonical
    index_path.unlink()
    index_path.write_bytes(compact)
    before = record.read_bytes()
    assert run_leslie("show", "thread-a", cwd=repo_root).code == 0
    assert record.read_bytes() == before


def test_the_first_read_of_a_fresh_clone_records_its_index(repo_root: Path, tmp_path: Path) -> None:
    """A clone has no lock file until its first mutation: its first read checks the index in full and records
    it all the same (making the lock file), so the reads after it skip the check. Without that, every read of
    a clone nobody changed paid the check (~25 ms at 10,000 threads, ~0.4 s at 100,000)."""
    from conftest import git

    assert run_leslie("spawn", "--intent", "first", "--id", "thread-a", cwd=repo_root).code == 0
    git("add", "-A", cwd=repo_root)
    git("-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-m", "threads", cwd=repo_root)
    clone = tmp_path / "clone"
    git("clone", "-q", str(repo_root), str(clone), cwd=tmp_path)
    index_path = clone / ".leslie" / "thread_relations.json"
    lock, record = state_dir(clone) / "index.lock", state_dir(clone) / INDEX_CHECKED_FILE
    assert not lock.exists() and not record.exists()
    result = run_leslie("show", "thread-a", cwd=clone)
    assert result.code == 0, result.stderr
    assert record.read_bytes() == fingerprint(index_path.read_bytes(), os.stat(index_path))
    assert lock.is_file() and not lock.is_symlink()
    source = Repository.discover(clone).read_index().source()
    assert source is not None and source.known


@pytest.mark.parametrize("kind", ["link", "fifo", "folder"])
def test_a_reader_never_records_through_a_hostile_lock_file(repo_root: Path, tmp_path: Path, kind: str) -> None:
    """A committed `state/index.lock` that is a link (to a file outside), a FIFO or a folder: the read neither
    follows nor waits on it, records nothing, and leaves the outside file as it was."""
    assert run_leslie("spawn", "--intent", "first", "--id", "thread-a", cwd=repo_root).code == 0
    index_path = repo_root / ".leslie" / "thread_relations.json"
    record = state_dir(repo_root) / INDEX_CHECKED_FILE
    lock = state_dir(repo_root) / "index.lock"
    outside = tmp_path / "outside"
    outside.write_text("keep")
    lock.unlink()
    if kind == "link":
        lock.symlink_to(outside)
    elif kind == "fifo":
        os.mkfifo(lock)
    else:
        lock.mkdir()
    data = index_path.read_bytes()
    index_path.unlink()
    index_path.write_bytes(data)  # an index git wrote: the read checks it in full and would record it
    before = record.read_bytes()
    result = run_leslie("show", "thread-a", cwd=repo_root)
    assert result.code == 0, result.stderr
    assert record.read_bytes() == before and outside.read_text() == "keep"


def test_an_index_changed_behind_leslies_back_is_checked_in_full(repo_root: Path) -> None:
    """The record vouches only for the exact bytes: an edit of the same length is found and refused (exit 4)."""
    assert run_leslie("spawn", "--intent", "first", "--id", "thread-a", cwd=repo_root).code == 0
    index_path = repo_root / ".leslie" / "thread_relations.json"
    data = index_path.read_bytes()
    assert (state_dir(repo_root) / INDEX_CHECKED_FILE).read_bytes() == fingerprint(data, os.stat(index_path))
    index_path.write_bytes(data.replace(b'"status": "active"', b'"status": "absent"'))
    result = run_leslie("spawn", "--intent", "second", cwd=repo_root)
    assert result.code == 4, result.stderr
    assert "thread_relations.json" in result.stderr


def test_doctor_trusts_the_fingerprint_for_the_layout_only_and_writes_none(repo: Repository,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """An index leslie wrote (its fingerprint recorded) spares doctor the layout check, not the comparison of
    every entry with the rebuild; an index it did not write is checked in full; doctor records nothing."""
    from leslie.ops import doctor
    from leslie.store import relations

    spawn(repo, "first", thread_id="thread-a")
    spawn(repo, "second", thread_id="thread-b")
    record = repo.layout.state_dir / INDEX_CHECKED_FILE
    seen: list[bool] = []
    real = relations.decode_index

    def spy(data: bytes, path: Path, shown: Path, *, known: bool = False) -> Index:
        seen.append(known)
        return real(data, path, shown, known=known)

    monkeypatch.setattr(doctor, "decode_index", spy)
    assert doctor.run_doctor(repo).problems == [] and seen == [True]
    # A thread.json changed by hand: the vouched-for index no longer matches a rebuild, and doctor says so.
    thread_file = repo.layout.thread_file("thread-b")
    thread_file.write_text(thread_file.read_text(encoding="utf-8").replace('"second"', '"Second"', 1),
                           encoding="utf-8")
    problems = doctor.run_doctor(repo).problems
    assert seen[-1] is True and any("differs from a rebuild" in p for p in problems), problems
    # The same bytes in another file (a copy, a checkout): not vouched for, checked in full, nothing recorded.
    index_path = repo.layout.index_path
    before = record.read_bytes()
    index_path.write_bytes(index_path.read_bytes())
    doctor.run_doctor(repo)
    assert seen[-1] is False and record.read_bytes() == before


def test_doctor_finds_an_id_list_out_of_order(repo: Repository) -> None:
    """The same entries with an ID list out of order: not the canonical encoding, known to leslie or not."""
    from leslie.ops import doctor
    from leslie.ops.threads import reference

    for name in "abc":
        spawn(repo, name, thread_id=f"thread-{name}")
    reference(repo, "thread-a", "thread-b")
    reference(repo, "thread-a", "thread-c")
    index_path = repo.layout.index_path
    canonical = index_path.read_bytes()
    assert doctor.run_doctor(repo).problems == []
    disordered = canonical.replace(b'"thread-b",\n        "thread-c"', b'"thread-c",\n        "thread-b"', 1)
    assert disordered != canonical
    index_path.write_bytes(disordered)
    assert any("thread_relations.json" in p for p in doctor.run_doctor(repo).problems)
