"""The store's os-only primitives against hostile files: links, FIFOs, devices, oversized files."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from leslie.errors import CorruptStateError
from leslie.store.fsio import FileLock, atomic_write, read_in_folder, read_regular, refuse_links
from leslie.store.jsonio import StrictJSONError, loads_strict


@pytest.fixture
def leslie_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "repo" / ".leslie"
    (folder / "state").mkdir(parents=True)
    return folder


def test_write_through_a_linked_state_folder_is_refused(leslie_dir: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (leslie_dir / "state").rmdir()
    (leslie_dir / "state").symlink_to(outside)
    with pytest.raises(CorruptStateError, match="symbolic link"):
        atomic_write(leslie_dir / "state" / "sessions" / "x.json", b"{}")
    with pytest.raises(CorruptStateError, match="symbolic link"):
        atomic_write(leslie_dir / "state" / "x.json", b"{}", durable=False, recycle=True)
    assert list(outside.iterdir()) == []


def test_a_linked_leslie_folder_is_refused(tmp_path: Path) -> None:
    real = tmp_path / "elsewhere"
    real.mkdir()
    (tmp_path / "repo").mkdir()
    (tmp_path / "repo" / ".leslie").symlink_to(real)
    with pytest.raises(CorruptStateError, match="symbolic link"):
        atomic_write(tmp_path / "repo" / ".leslie" / "thread_relations.json", b"{}")
    assert list(real.iterdir()) == []


def test_write_replacing_a_file_link_is_refused(leslie_dir: Path, tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("precious")
    (leslie_dir / "state" / "current_thread").symlink_to(victim)
    with pytest.raises(CorruptStateError, match="symbolic link"):
        atomic_write(leslie_dir / "state" / "current_thread", b"thread-x\n")
    assert victim.read_text() == "precious"
    assert (leslie_dir / "state" / "current_thread").is_symlink()


def test_recycled_write_never_writes_through_a_committed_spare_link(leslie_dir: Path, tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("precious")
    (leslie_dir / "state" / ".s.json.spare").symlink_to(victim)
    with pytest.raises(OSError):
        atomic_write(leslie_dir / "state" / "s.json", b"{}", durable=False, recycle=True)
    assert victim.read_text() == "precious"


def test_lock_file_link_is_refused(leslie_dir: Path, tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    (leslie_dir / "state" / "s.lock").symlink_to(victim)
    with pytest.raises(CorruptStateError, match="symbolic link"), FileLock(str(leslie_dir / "state" / "s.lock")):
        pass
    assert not victim.exists()


def test_read_regular_refuses_links_fifos_folders_and_oversized_files(leslie_dir: Path) -> None:
    (leslie_dir / "zero").symlink_to("/dev/zero")
    with pytest.raises(CorruptStateError, match="symbolic link"):
        read_regular(leslie_dir / "zero")
    os.mkfifo(leslie_dir / "fifo")
    done: list[BaseException] = []

    def read_fifo() -> None:
        try:
            read_regular(leslie_dir / "fifo")
        except BaseException as exc:
            done.append(exc)

    reader = threading.Thread(target=read_fifo, daemon=True)
    reader.start()
    reader.join(5)
    assert done and isinstance(done[0], CorruptStateError) and "not a regular file" in str(done[0])
    with pytest.raises(CorruptStateError, match="folder"):
        read_regular(leslie_dir / "state")
    (leslie_dir / "big").write_bytes(b"x" * 101)
    with pytest.raises(CorruptStateError, match="larger than"):
        read_regular(leslie_dir / "big", limit=100)
    assert read_regular(leslie_dir / "big", limit=101) == b"x" * 101
    with pytest.raises(FileNotFoundError):
        read_regular(leslie_dir / "missing")


def test_read_regular_tail_reads_the_end_of_a_larger_file(leslie_dir: Path) -> None:
    (leslie_dir / "log").write_bytes(b"0123456789")
    assert read_regular(leslie_dir / "log", limit=4, tail=True) == b"6789"
    assert read_regular(leslie_dir / "log", limit=10, tail=True) == b"0123456789"
    (leslie_dir / "zero").symlink_to("/dev/zero")
    with pytest.raises(CorruptStateError, match="symbolic link"):
        read_regular(leslie_dir / "zero", limit=4, tail=True)


def test_read_regular_refuses_a_file_in_a_linked_thread_folder(leslie_dir: Path, tmp_path: Path) -> None:
    (tmp_path / "fake").mkdir()
    (tmp_path / "fake" / "thread.json").write_text("{}")
    (leslie_dir / "threads").mkdir()
    (leslie_dir / "threads" / "thread-x").symlink_to(tmp_path / "fake")
    with pytest.raises(CorruptStateError, match="symbolic link"):
        read_regular(leslie_dir / "threads" / "thread-x" / "thread.json")
    assert refuse_links(leslie_dir / "threads") is not None


@pytest.mark.parametrize(("data", "problem"), [
    (b"[" * 100_000 + b"]" * 100_000, "deeply"),
    (b"[" * 70 + b"]" * 70, "deeper than 64"),
    (b"1" * 5000, "4300"),
    (b'["\\ud800"]', "lone surrogate"),
    (b'{"\\uDFFF": 1}', "lone surrogate"),
])
def test_loads_strict_refuses_hostile_json(data: bytes, problem: str) -> None:
    with pytest.raises(StrictJSONError, match=problem):
        loads_strict(data)


def test_loads_strict_keeps_paired_surrogate_escapes() -> None:
    assert loads_strict(b'["\\ud83d\\ude00"]') == ["\U0001f600"]


def test_read_in_folder_reads_regular_files_within_the_cap_and_nothing_else(tmp_path: Path) -> None:
    folder = tmp_path / "folder"
    folder.mkdir()
    (folder / "small").write_bytes(b"x" * 10)
    (folder / "at-cap").write_bytes(b"y" * 64)
    (folder / "over-cap").write_bytes(b"z" * 65)
    (folder / "link").symlink_to(folder / "small")
    (folder / "sub").mkdir()
    os.mkfifo(folder / "fifo")  # opening it must not block, reading it must not wait for a writer
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        assert read_in_folder(fd, "small", 64) == b"x" * 10
        assert read_in_folder(fd, b"at-cap", 64) == b"y" * 64
        for name in ("over-cap", "link", "sub", "fifo", "missing"):
            assert read_in_folder(fd, name, 64) is None, name
    finally:
        os.close(fd)
