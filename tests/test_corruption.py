"""Corruption corpus: damaged state files are refused with the right exit code and never made worse.

For the index and for a `thread.json`, each kind of damage (truncation, conflict markers, duplicate keys,
NaN, a BOM, wrong types, an empty file, a folder in place of the file, unreadable permissions) is put on
disk, then real `leslie` commands run against it. Each must exit 4 (6 when the file cannot be read at all)
with one message naming the file, and leave `.leslie/` byte for byte as it was. `leslie doctor` must report
it; `leslie doctor --fix` must rebuild the derived index, and must never delete a thread, rewrite a damaged
source file, or drop other threads' references to it: restoring the file by hand brings everything back.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from conftest import LESLIE_EXE, run_leslie, state_dir, tree_digest
from leslie.ops.threads import spawn
from leslie.store.jsonio import dumps_canonical
from leslie.store.repository import Repository

Damage = Callable[[bytes], bytes]


def truncate(data: bytes) -> bytes:
    return data[: len(data) // 2]


def conflict(data: bytes) -> bytes:
    return b"<<<<<<< HEAD\n" + data + b"=======\n" + data + b">>>>>>> other-branch\n"


def bom(data: bytes) -> bytes:
    return b"\xef\xbb\xbf" + data


def empty(_data: bytes) -> bytes:
    return b""


def whitespace(_data: bytes) -> bytes:
    return b"  \n"


def not_utf8(data: bytes) -> bytes:
    return data.replace(b'"', b'\xff"', 1)


def duplicate_line(needle: bytes) -> Damage:
    """Repeat the line holding `needle` (a duplicate key with a different value)."""
    def damage(data: bytes) -> bytes:
        lines = data.split(b"\n")
        i = next(n for n, line in enumerate(lines) if needle in line)
        twin = lines[i].replace(b'"active"', b'"done"') if b'"active"' in lines[i] else lines[i]
        return b"\n".join([*lines[:i + 1], twin if twin.endswith(b",") else twin + b",", *lines[i + 1:]])
    return damage


def replace_bytes(old: bytes, new: bytes) -> Damage:
    def damage(data: bytes) -> bytes:
        assert old in data, old
        return data.replace(old, new, 1)
    return damage


INDEX_DAMAGE: dict[str, Damage] = {
    "truncated": truncate,
    "conflict-markers": conflict,
    "duplicate-key": duplicate_line(b'"status": "active"'),
    "duplicate-thread": duplicate_line(b'"thread-c": {'),
    "nan": replace_bytes(b'"objective": "obj-default"', b'"objective": NaN'),
    "infinity": replace_bytes(b'"version": "1.0"', b'"version": Infinity'),
    "bom": bom,
    "empty": empty,
    "whitespace": whitespace,
    "not-utf8": not_utf8,
    "wrong-type-threads": replace_bytes(b'"threads": {', b'"threads": [], "x": {'),
    "wrong-type-title": replace_bytes(b'"title": "thread a"', b'"title": 42'),
    "wrong-type-edges": replace_bytes(b'"references_to": []', b'"references_to": "thread-a"'),
    "wrong-version": replace_bytes(b'"version": "1.0"', b'"version": "9.9"'),
    "not-an-object": lambda _data: b"[1, 2, 3]\n",
}

THREAD_DAMAGE: dict[str, Damage] = {
    "truncated": truncate,
    "conflict-markers": conflict,
    "duplicate-key": duplicate_line(b'"status": "active"'),
    "nan": replace_bytes(b'"version": 1', b'"version": NaN'),
    "bom": bom,
    "empty": empty,
    "not-utf8": not_utf8,
    "wrong-type-references": replace_bytes(b'"references": {}', b'"references": []'),
    "wrong-type-title": replace_bytes(b'"title": "thread b"', b'"title": null'),
    "wrong-type-scope": replace_bytes(b'"references": {}', b'"references": {"thread-c": "plan.md"}'),
    "unknown-status": replace_bytes(b'"status": "active"', b'"status": "finished"'),
    "wrong-id": replace_bytes(b'"id": "thread-b"', b'"id": "thread-x"'),
    "not-an-object": lambda _data: b'"thread-b"\n',
}


def assert_doctor_restores(root: Path, index: Path, good: bytes) -> None:
    """`doctor` reports the damaged index (exit 1); `doctor --fix` writes back exactly the good one."""
    assert run_leslie("doctor", cwd=root).code == 1
    assert run_leslie("doctor", "--fix", cwd=root).code == 0
    assert index.read_bytes() == good


def assert_refused(root: Path, argv: list[str], code: int, names: str) -> None:
    before = tree_digest(root / ".leslie")
    result = run_leslie(*argv, cwd=root)
    assert result.code == code, (argv, result.code, result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    assert result.stderr.count("leslie: error:") == 1, result.stderr
    assert names in result.stderr, result.stderr
    assert tree_digest(root / ".leslie") == before, f"{argv} changed .leslie/"


def thread_folders(repo: Repository) -> list[str]:
    return sorted(p.name for p in repo.layout.threads_dir.iterdir() if p.is_dir())


# -- the index ----------------------------------------------------------------------------------------------

INDEX_COMMANDS = [
    ["reference", "--thread", "thread-c", "--target", "thread-a"],  # lite path (no Typer)
    ["spawn", "--intent", "new thread", "--id", "thread-new"],  # lite path
    ["unreference", "--thread=thread-a", "--", "thread-b"],  # Typer's path (`--` is Typer's to read)
    ["retitle", "thread-c", "New title"],
    ["list", "--json"],
    ["relations"],
]


@pytest.mark.parametrize("damage", sorted(INDEX_DAMAGE))
def test_damaged_index(three_threads: Repository, damage: str) -> None:
    """Every damage against a mutation through each CLI path (lite and Typer); all commands on one kind."""
    root = three_threads.root
    index = three_threads.layout.index_path
    good = index.read_bytes()
    index.write_bytes(INDEX_DAMAGE[damage](good))
    for argv in INDEX_COMMANDS if damage == "duplicate-key" else INDEX_COMMANDS[:1] + INDEX_COMMANDS[3:4]:
        assert_refused(root, argv, 4, "thread_relations.json")
    if damage == "truncated":
        assert "leslie doctor --fix" in run_leslie("retitle", "thread-c", "x", cwd=root).stderr
    check = run_leslie("doctor", cwd=root)
    assert check.code == 1
    assert "thread_relations.json" in check.stdout
    folders = thread_folders(three_threads)
    fixed = run_leslie("doctor", "--fix", cwd=root)
    assert fixed.code == 0, fixed.stdout + fixed.stderr
    assert index.read_bytes() == good
    assert thread_folders(three_threads) == folders
    assert run_leslie("doctor", cwd=root).code == 0
    # the damaged copy was kept
    assert any(p.read_bytes() == INDEX_DAMAGE[damage](good) for p in (state_dir(root)).rglob("*.json")) \
        or not INDEX_DAMAGE[damage](good)


def test_folder_in_place_of_the_index(three_threads: Repository) -> None:
    root = three_threads.root
    index = three_threads.layout.index_path
    good = index.read_bytes()
    index.unlink()
    index.mkdir()
    for argv in INDEX_COMMANDS[:1] + INDEX_COMMANDS[3:5]:
        assert_refused(root, argv, 4, "thread_relations.json")
    assert_doctor_restores(root, index, good)


def test_missing_index_is_rebuilt_not_an_error(three_threads: Repository) -> None:
    """A fresh clone without the (derived) index: reads rebuild it, doctor --fix writes it."""
    root = three_threads.root
    index = three_threads.layout.index_path
    good = index.read_bytes()
    index.unlink()
    listed = run_leslie("list", "--json", cwd=root)
    assert listed.code == 0, listed.stderr
    assert_doctor_restores(root, index, good)


def test_stale_but_valid_index_is_repaired_by_doctor(three_threads: Repository) -> None:
    """Valid JSON that no longer matches the threads (say, an old copy restored): doctor --fix rebuilds it."""
    root = three_threads.root
    index = three_threads.layout.index_path
    good = index.read_bytes()
    stale = good.replace(b'"references_to": [\n        "thread-b"\n      ]', b'"references_to": []')
    assert stale != good
    index.write_bytes(stale)
    check = run_leslie("doctor", cwd=root)
    assert check.code == 1
    assert "mirror" in check.stdout or "differs" in check.stdout
    assert run_leslie("doctor", "--fix", cwd=root).code == 0
    assert index.read_bytes() == good


# -- thread.json ------------------------------------------------------------------------------------------

THREAD_COMMANDS = [
    ["reference", "--thread", "thread-b", "--target", "thread-c"],  # the damaged thread as source
    ["reference", "--thread", "thread-c", "--target", "thread-b"],  # ... and as target
    ["retitle", "thread-b", "New title"],
    ["set-status", "thread-b", "done"],
    ["show", "thread-b"],
    ["spawn", "--intent", "child", "--parent", "thread-b"],
]


@pytest.mark.parametrize("damage", sorted(THREAD_DAMAGE))
def test_damaged_thread_json(three_threads: Repository, damage: str) -> None:
    root = three_threads.root
    path = three_threads.layout.thread_file("thread-b")
    good = path.read_bytes()
    bad = THREAD_DAMAGE[damage](good)
    path.write_bytes(bad)
    for argv in THREAD_COMMANDS if damage == "duplicate-key" else THREAD_COMMANDS[:3]:
        assert_refused(root, argv, 4, "thread-b/thread.json")
    check_damaged_source_survives_doctor(three_threads, path, good, bad)


def test_folder_in_place_of_thread_json(three_threads: Repository) -> None:
    path = three_threads.layout.thread_file("thread-b")
    good = path.read_bytes()
    path.unlink()
    path.mkdir()
    for argv in THREAD_COMMANDS[:3]:
        assert_refused(three_threads.root, argv, 4, "thread-b/thread.json")
    check = run_leslie("doctor", "--fix", cwd=three_threads.root)
    assert check.code == 1
    assert path.is_dir()
    assert set(three_threads.read_thread("thread-a").references) == {"thread-b"}
    path.rmdir()
    path.write_bytes(good)
    assert run_leslie("doctor", "--fix", cwd=three_threads.root).code == 0
    assert run_leslie("doctor", cwd=three_threads.root).code == 0


def check_damaged_source_survives_doctor(repo: Repository, path: Path, good: bytes, bad: bytes) -> None:
    """doctor reports the file; --fix leaves it, its folder and the references to it alone; restoring it heals."""
    root = repo.root
    check = run_leslie("doctor", cwd=root)
    assert check.code == 1
    assert "thread-b/thread.json" in check.stdout
    folders = thread_folders(repo)
    a_before = repo.layout.thread_file("thread-a").read_bytes()
    fixed = run_leslie("doctor", "--fix", cwd=root)
    assert fixed.code == 1, fixed.stdout  # a damaged source is not derived: it stays a problem
    assert "doctor never deletes a thread" in fixed.stdout
    assert path.read_bytes() == bad
    assert thread_folders(repo) == folders
    assert repo.layout.thread_file("thread-a").read_bytes() == a_before, "a reference to thread-b was dropped"
    path.write_bytes(good)
    assert run_leslie("doctor", "--fix", cwd=root).code == 0
    assert run_leslie("doctor", cwd=root).code == 0
    assert repo.layout.index_path.read_bytes() == dumps_canonical(repo.rebuild_index().to_json())
    assert repo.read_index().referenced_by["thread-b"] == {"thread-a"}


def test_damaged_objective_json(three_threads: Repository) -> None:
    path = three_threads.layout.objective_file("obj-default")
    path.write_bytes(truncate(path.read_bytes()))
    assert_refused(three_threads.root, ["spawn", "--intent", "x"], 4, "obj-default/objective.json")
    assert_refused(three_threads.root, ["objective", "list"], 4, "obj-default/objective.json")
    assert run_leslie("doctor", cwd=three_threads.root).code == 1


def test_a_title_with_line_separator_and_equals_signs_is_not_a_conflict(repo: Repository) -> None:
    """Only git's conflict markers at the start of a real line count: U+2028 or U+0085 in a title is data.

    `str.splitlines` breaks lines there too, so a title like this once made its own thread.json unreadable.
    """
    title = "before\u2028======= after\x85>>>>>>> end"
    spawn(repo, "odd title", title=title, thread_id="thread-odd")
    assert repo.read_thread("thread-odd").title == title
    assert run_leslie("show", "thread-odd", "--json", cwd=repo.root).code == 0
    assert run_leslie("doctor", cwd=repo.root).code == 0


# -- unreadable files -------------------------------------------------------------------------------------


@pytest.fixture
def unprivileged() -> Iterator[tuple[Path, dict[str, str], Callable[[], None] | None]]:
    """A folder an unprivileged user owns, its environment, and how to become that user (None: we are one).

    Root reads any file whatever its mode, so an honest permission test needs another user: as root, the
    test runs leslie as `nobody`, when that user can run this interpreter at all; otherwise it is skipped.
    """
    base = Path(tempfile.mkdtemp(prefix="leslie-perm-"))
    base.chmod(0o755)
    env = {**os.environ, "HOME": str(base)}
    demote: Callable[[], None] | None = None
    if os.geteuid() == 0:
        nobody = 65534

        def demote() -> None:
            os.setgid(nobody)
            os.setuid(nobody)

        try:
            runs = subprocess.run([LESLIE_EXE, "--version"], preexec_fn=demote, capture_output=True, env=env,
                                  check=False).returncode == 0
        except OSError:
            runs = False
        if not runs:
            shutil.rmtree(base)
            pytest.skip("running as root, whom file modes do not stop, and the unprivileged user `nobody` "
                        f"cannot run this interpreter ({sys.executable}); the read side of permission errors "
                        "is untestable here")
    try:
        yield base, env, demote
    finally:
        for folder, dirs, files in os.walk(base):
            for name in dirs + files:
                os.chmod(os.path.join(folder, name), 0o700, follow_symlinks=False)
        shutil.rmtree(base)


@pytest.mark.parametrize("target", ["index", "thread"])
def test_unreadable_file(unprivileged: tuple[Path, dict[str, str], Callable[[], None] | None], target: str) -> None:
    base, env, demote = unprivileged
    root = base / "repo"
    root.mkdir()
    from leslie.ops.bootstrap import init_repository

    init_repository(root)
    repo = Repository(root)
    spawn(repo, "thread a", thread_id="thread-a")
    spawn(repo, "thread b", thread_id="thread-b")
    if demote is not None:
        for folder, dirs, files in os.walk(base):
            for name in [*dirs, *files, "."]:
                os.chown(os.path.join(folder, name), 65534, 65534, follow_symlinks=False)
    path = repo.layout.index_path if target == "index" else repo.layout.thread_file("thread-b")
    path.chmod(0)

    def leslie(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([LESLIE_EXE, *argv], cwd=root, env=env, preexec_fn=demote, capture_output=True,
                              text=True, check=False, timeout=60)

    def digest() -> dict[str, str]:
        path.chmod(0o600)  # so that this process can hash it too when it is not root
        try:
            return tree_digest(root / ".leslie")
        finally:
            path.chmod(0)

    before = digest()
    for argv in (["reference", "--thread", "thread-a", "--target", "thread-b"], ["retitle", "thread-b", "T"]):
        result = leslie(*argv)
        assert result.returncode == 6, (argv, result.stderr)
        assert "Permission denied" in result.stderr and path.name in result.stderr, result.stderr
        assert "Traceback" not in result.stderr
    assert digest() == before
    assert leslie("doctor").returncode == 1
    fixed = leslie("doctor", "--fix")
    assert (path.stat().st_mode & 0o777) == 0 or target == "index"
    assert sorted(p.name for p in repo.layout.threads_dir.iterdir()) == ["thread-a", "thread-b"]
    if target == "index":
        assert fixed.returncode == 0, fixed.stdout + fixed.stderr
        assert leslie("doctor").returncode == 0
    else:
        assert fixed.returncode == 1
