"""guard/snapshots.py: the second line's records are untrusted input, read and used so that none can steer it.

A manifest, a copy's name or a record of the guard's may come from a clone, a merge or any process: a key
`scan` could not have produced makes the manifest corrupt, no path is joined that leaves the protected files,
and a record nested too deeply is damage like invalid JSON (the red team's findings 1 and 2). The hook-level
tests are in test_tripwire.py and test_hostile.py.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from leslie.errors import CorruptStateError
from leslie.guard import quarantine, snapshots, tripwire
from leslie.store import mutations

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


BAD_KEYS = ["../.git/config", "threads/../../.git/config", f"threads/{OTHER}/../../../x", "/etc/passwd",
            "//etc/passwd", "threads//x", "threads/./x", "threads/x/", "threads/x/.", "threads/x/..", "./threads/x",
            "state/guard/manifest.json", "state", "threadsX/a", "thread_relations.json/x", "", ".", "..",
            "threads/x\0y", "config.toml\0"]


@pytest.mark.parametrize("key", BAD_KEYS)
def test_a_manifest_key_scan_could_not_produce_makes_it_corrupt(root: str, key: str) -> None:
    manifest = json.loads(Path(snapshots.manifest_path(root)).read_text())
    for field in ("files", "digests"):
        entry = ["f", 1, 1, 1] if field == "files" else snapshots.NOT_COPIED
        write_manifest(root, **{field: {**manifest[field], key: entry}})
        for scanned in (None, snapshots.scan(root)):
            with pytest.raises(CorruptStateError, match="not a path the write guard protects"):
                snapshots.load_manifest(root, scanned)
        write_manifest(root, **{field: manifest[field]})
    assert snapshots.load_manifest(root) is not None


def test_every_path_scan_produces_is_a_valid_key(root: str) -> None:
    """Any file name the system allows in a thread's folder (a backslash, a newline, bytes that are not
    UTF-8, dots) is a key a manifest may hold: refusing one would set every manifest aside for good."""
    folder = Path(root, ".leslie", "threads", OTHER)
    names = ["a\\b", "..\\..\\x", "line\nbreak", "...", ".hidden", "-rf", " space ", "thread.json~"]
    for name in names:
        (folder / name).write_text("x")
    os.mkdir(os.fsencode(folder) + b"/not-utf8-\xff")
    tripwire.sweep(root)
    manifest = snapshots.load_manifest(root)
    assert manifest is not None
    keys = set(manifest["files"])
    assert {f"threads/{OTHER}/{name}" for name in names} <= keys
    assert all(snapshots.is_protected_rel(key) for key in keys)
    assert snapshots.is_protected_rel(f"threads/{OTHER}/not-utf8-\udcff")


@pytest.mark.parametrize("key", ["../.git/config", "threads/../../x", "/tmp/x", "threads/x\0", "state/x"])
def test_nothing_is_joined_outside_the_protected_files(root: str, key: str, tmp_path: Path) -> None:
    """Where a relative path becomes a real one, it is checked again: restore, re-made folders, quarantine,
    copies and change times refuse a path outside the protected files, whoever handed it over."""
    git_config = Path(root, ".git", "config")
    before = git_config.read_bytes()
    calls = [lambda: snapshots.restore_file(root, key, b"[core]\n\tfsmonitor = evil\n"),
             lambda: snapshots.restore_folder(root, key),
             lambda: snapshots.real_folders_to(root, key, create=True),
             lambda: quarantine.put_aside(root, key, "batch"),
             lambda: snapshots.copy_content(root, key),
             lambda: snapshots.change_time(root, key, None),
             lambda: snapshots.protected_path(root, key)]
    for call in calls:
        with pytest.raises(CorruptStateError, match="not a path the write guard protects"):
            call()
    assert git_config.read_bytes() == before
    assert not Path(mutations.guard_dir(root), "quarantine").exists()


def test_a_copy_is_named_by_its_digest_only(root: str) -> None:
    manifest = snapshots.load_manifest(root)
    assert manifest is not None
    digest = manifest["digests"][f"threads/{OTHER}/plan.md"]
    assert snapshots.is_digest(digest) and snapshots.load_copy(root, digest) is not None
    for name in ("../../../../.git/config", "/etc/passwd", digest.upper(), digest[:-1], digest + "0", "", "-",
                 digest[:2] + "/" + digest[3:]):
        assert snapshots.load_copy(root, name) is None, name
        assert not snapshots.valid_digest(name) or name in ("", "-")
    with pytest.raises(CorruptStateError, match="not a copy's name"):
        snapshots._object_path(root, "../../../../.git/config")


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
    guard = Path(mutations.guard_dir(root))
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
    (guard / snapshots.MARK_FILE).write_bytes(deep)
    assert snapshots.load_mark(root) is None
