"""guard/snapshots.py: the second line's records are untrusted input, read so that none can switch it off.

A record of the guard's may come from a clone, a merge or any process: a record nested too deeply is damage
like invalid JSON (the red team's finding 2). The hook-level tests are in test_tripwire.py.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from leslie.errors import CorruptStateError
from leslie.guard import snapshots, tripwire

OTHER = "thread-other"


@pytest.fixture
def root(two_threads: Path) -> str:
    """`two_threads` with the guard's first snapshot taken (every file copied)."""
    tripwire.sweep(str(two_threads))
    return str(two_threads)


def write_manifest(root: str, **changes: object) -> dict[str, object]:
    manifest = json.loads(Path(snapshots.manifest_path(root)).read_text())
    manifest.update(changes)
    Path(snapshots.manifest_path(root)).write_text(json.dumps(manifest))
    return manifest


@pytest.mark.parametrize("content", [b"[" * 100_000 + b"]" * 100_000, b'{"files": ' + b"[" * 5000 + b"]" * 5000 + b"}",
                                     b"[]", b'"x"', b"\xff\xfe", b"", b"{\"version\": 2"])
def test_a_manifest_that_cannot_be_read_is_corrupt_never_an_internal_error(root: str, content: bytes) -> None:
    Path(snapshots.manifest_path(root)).write_bytes(content)
    with pytest.raises(CorruptStateError):
        snapshots.load_manifest(root)


@pytest.mark.parametrize("changes", [{"head": ["x"]}, {"copies": "12"}, {"copies": [1]}, {"pending": "yes"},
                                     {"version": 1}])
def test_a_manifest_of_another_shape_is_corrupt(root: str, changes: dict[str, object]) -> None:
    write_manifest(root, **changes)
    with pytest.raises(CorruptStateError, match="not a manifest of the write guard"):
        snapshots.load_manifest(root)


def test_fields_leslie_does_not_write_are_dropped(root: str) -> None:
    write_manifest(root, extra=[[[[["deep"]]]]])
    manifest = snapshots.load_manifest(root)
    assert manifest is not None and "extra" not in manifest


def test_records_that_cannot_be_read_are_damage(root: str) -> None:
    guard = Path(root, ".leslie", "state", "guard")
    deep = b"[" * 100_000 + b"]" * 100_000
    (guard / "record.json").write_bytes(deep)
    with pytest.raises(CorruptStateError, match="nested too deeply"):
        snapshots.load_json(str(guard / "record.json"), 1 << 20)
    with pytest.raises(CorruptStateError, match="larger than leslie reads"):
        snapshots.load_json(str(guard / "record.json"), 1000)
    (guard / "link.json").symlink_to(guard / "record.json")
    with pytest.raises(CorruptStateError, match="symbolic link"):
        snapshots.load_json(str(guard / "link.json"), 1 << 20)
    os.mkfifo(guard / "fifo.json")
    with pytest.raises(CorruptStateError, match="not a regular file"):
        snapshots.load_json(str(guard / "fifo.json"), 1 << 20)
    assert snapshots.load_json(str(guard / "missing.json"), 1 << 20) is None
    (guard / "lines.jsonl").write_bytes(b'{"a": 1}\n' + deep + b'\n{not json\n\n[2]\n')
    assert snapshots.load_json_lines(str(guard / "lines.jsonl"), 1 << 20) == ([{"a": 1}, [2]], 2)
    Path(root, ".leslie", "state", "guard", snapshots.MARK_FILE).write_bytes(deep)
    assert snapshots.load_mark(root) is None
