"""store.py: root discovery, strict reads, atomic writes, the lock (library and real CLI)."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import held_lock, run_leslie, tree_digest
from leslie.errors import CorruptStateError, LockTimeoutError, NotFoundError, StorageError
from leslie.ops.threads import spawn
from leslie.store.files import (
    DEFAULT_LOCK_TIMEOUT,
    Layout,
    acquire_index_lock,
    find_root,
    lock_timeout,
    read_json,
    read_repository_file,
    repository_target,
    write_json,
    write_repository_file,
)
from leslie.store.fsio import TEMP_SUFFIX, atomic_write
from leslie.store.repository import Repository

# -- root discovery -----------------------------------------------------------------------------------


def test_find_root_walks_up(repo_root: Path) -> None:
    deep = repo_root / "src" / "pkg" / "deep"
    deep.mkdir(parents=True)
    assert find_root(deep) == repo_root
    assert find_root(repo_root) == repo_root


def test_find_root_nearest_wins(repo_root: Path) -> None:
    inner = repo_root / "sub"
    (inner / ".leslie").mkdir(parents=True)
    (inner / "x").mkdir()
    assert find_root(inner / "x") == inner


def test_find_root_explicit_and_env(repo_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    assert find_root(elsewhere, explicit=repo_root) == repo_root
    monkeypatch.setenv("LESLIE_ROOT", str(repo_root))
    assert find_root(elsewhere) == repo_root
    monkeypatch.setenv("LESLIE_ROOT", "")  # empty means unset
    with pytest.raises(NotFoundError):
        find_root(elsewhere)


def test_find_root_explicit_without_leslie(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(NotFoundError, match="run `leslie init` there first"):
        find_root(explicit=tmp_path)
    monkeypatch.setenv("LESLIE_ROOT", str(tmp_path))
    with pytest.raises(NotFoundError):
        find_root(tmp_path)


def test_find_root_none(tmp_path: Path) -> None:
    with pytest.raises(NotFoundError, match=r"no \.leslie/ found"):
        find_root(tmp_path)


def test_a_file_named_leslie_is_not_a_root(tmp_path: Path) -> None:
    (tmp_path / ".leslie").write_text("not a folder")
    with pytest.raises(NotFoundError):
        find_root(tmp_path)


def test_cli_finds_root_from_a_subfolder(repo_root: Path) -> None:
    sub = repo_root / "a" / "b"
    sub.mkdir(parents=True)
    result = run_leslie("spawn", "--intent", "from below", "--id", "thread-below", cwd=sub)
    assert result.code == 0, result.stderr
    assert (repo_root / ".leslie/threads/thread-below/thread.json").is_file()


@pytest.mark.parametrize("where", ["before", "after"])
def test_cli_root_option_before_and_after_the_command(repo_root: Path, tmp_path: Path, where: str) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    root_args = ["--root", str(repo_root)]
    args = [*root_args, "spawn", "--intent", "x", "--id", "thread-r"] if where == "before" else [
        "spawn", "--intent", "x", "--id", "thread-r", *root_args]
    assert run_leslie(*args, cwd=outside).code == 0
    listed = run_leslie(*(["--root", str(repo_root), "--json", "list"] if where == "before"
                          else ["list", "--json", "--root", str(repo_root)]), cwd=outside)
    assert listed.code == 0 and '"thread-r"' in listed.stdout


def test_cli_leslie_root_env(repo_root: Path, tmp_path: Path) -> None:
    result = run_leslie("spawn", "--intent", "x", "--id", "thread-env", cwd=tmp_path,
                        env={"LESLIE_ROOT": str(repo_root)})
    assert result.code == 0, result.stderr
    assert (repo_root / ".leslie/threads/thread-env").is_dir()


def test_cli_root_option_beats_env(repo_root: Path, tmp_path: Path) -> None:
    result = run_leslie("list", "--json", "--root", str(repo_root), cwd=tmp_path,
                        env={"LESLIE_ROOT": str(tmp_path)})
    assert result.code == 0, result.stderr


def test_cli_no_root(tmp_path: Path) -> None:
    result = run_leslie("list", cwd=tmp_path)
    assert result.code == 3
    assert "no .leslie/ found" in result.stderr and "leslie init" in result.stderr
    assert "Traceback" not in result.stderr


# -- strict reads -------------------------------------------------------------------------------------

CORRUPT_CONTENTS = {
    "duplicate keys": b'{"a": 1, "a": 2}',
    "NaN": b'{"a": NaN}',
    "Infinity": b'{"a": Infinity}',
    "BOM": b'\xef\xbb\xbf{"a": 1}',
    "truncated": b'{"a": [1,',
    "conflict markers": b'<<<<<<< HEAD\n{"a": 1}\n=======\n{"a": 2}\n>>>>>>> other\n',
    "invalid UTF-8": b'{"a": "\xc3\x28"}',
    "empty": b"",
}


@pytest.mark.parametrize("content", CORRUPT_CONTENTS.values(), ids=CORRUPT_CONTENTS.keys())
def test_read_json_corruption_names_the_file(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "state.json"
    path.write_bytes(content)
    with pytest.raises(CorruptStateError) as info:
        read_json(path)
    assert info.value.exit_code == 4
    assert str(path) in info.value.message and "leslie doctor --fix" in info.value.message


def test_read_json_folder_in_place_of_file(tmp_path: Path) -> None:
    (tmp_path / "state.json").mkdir()
    with pytest.raises(CorruptStateError, match="is a folder where a file was expected"):
        read_json(tmp_path / "state.json")


def test_read_json_missing_file_is_not_corruption(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        read_json(tmp_path / "absent.json")


def test_read_json_under_a_regular_file_is_missing(tmp_path: Path) -> None:
    # A file in a folder's place holds no state file: "none yet", as for a missing one (the write that may
    # follow fails with its own error).
    (tmp_path / "file").write_text("x")
    with pytest.raises(FileNotFoundError):
        read_json(tmp_path / "file" / "state.json")


def test_cli_corrupt_index_exit_4(repo_root: Path) -> None:
    # One case through the executable here; test_bad_input.py runs every defect of every state file.
    index = repo_root / ".leslie/thread_relations.json"
    index.write_bytes(CORRUPT_CONTENTS["duplicate keys"])
    result = run_leslie("spawn", "--intent", "x", cwd=repo_root)
    assert result.code == 4
    assert "thread_relations.json: duplicate key 'a'" in result.stderr and "leslie doctor --fix" in result.stderr
    assert "Traceback" not in result.stderr
    assert index.read_bytes() == CORRUPT_CONTENTS["duplicate keys"]


# -- atomic writes ------------------------------------------------------------------------------------


def _temps(folder: Path) -> list[Path]:
    return [p for p in folder.rglob("*") if p.name.endswith(TEMP_SUFFIX)]


def test_atomic_write_creates_replaces_and_leaves_no_temp(tmp_path: Path) -> None:
    path = tmp_path / "new" / "deeper" / "file.json"
    atomic_write(path, b"one")
    assert path.read_bytes() == b"one"
    inode = path.stat().st_ino
    atomic_write(path, b"two, longer")
    assert path.read_bytes() == b"two, longer"
    assert path.stat().st_ino != inode  # replaced by rename, not rewritten in place
    assert _temps(tmp_path) == []
    assert sorted(p.name for p in path.parent.iterdir()) == ["file.json"]


def test_atomic_write_large_payload(tmp_path: Path) -> None:
    data = os.urandom(3 * 1024 * 1024)
    atomic_write(tmp_path / "big", data)
    assert (tmp_path / "big").read_bytes() == data


def test_atomic_write_under_a_regular_file_is_storage_error(tmp_path: Path) -> None:
    (tmp_path / "plain").write_text("x")
    with pytest.raises(StorageError) as info:
        atomic_write(tmp_path / "plain" / "child.json", b"{}")
    assert info.value.exit_code == 6
    assert "plain/child.json" in info.value.message
    assert (tmp_path / "plain").read_text() == "x"


def test_atomic_write_onto_a_folder_is_corruption_and_leaves_no_temp(tmp_path: Path) -> None:
    target = tmp_path / "index.json"
    (target / "inside").mkdir(parents=True)
    with pytest.raises(CorruptStateError, match="is a folder where a file was expected"):
        atomic_write(target, b"{}")
    assert _temps(tmp_path) == []


def test_atomic_write_file_size_limit_keeps_old_file(tmp_path: Path) -> None:
    # RLIMIT_FSIZE makes write() fail with EFBIG even for root: an honest "disk full".
    path = tmp_path / "f"
    path.write_bytes(b"old")
    code = (
        "import resource, sys\n"
        "from pathlib import Path\n"
        "from leslie.store.fsio import atomic_write\n"
        "from leslie.errors import StorageError\n"
        "resource.setrlimit(resource.RLIMIT_FSIZE, (1000, 1000))\n"
        "try:\n"
        "    atomic_write(Path(sys.argv[1]), b'x' * 5000)\n"
        "except StorageError as exc:\n"
        "    print(exc.exit_code, exc.message)\n"
    )
    out = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, check=True)
    assert out.stdout.startswith("6 cannot write") and "File too large" in out.stdout
    assert path.read_bytes() == b"old"
    assert _temps(tmp_path) == []


def test_write_json_is_canonical_and_skips_identical_bytes(tmp_path: Path) -> None:
    path = tmp_path / "doc.json"
    assert write_json(path, {"b": 1, "a": ["é"]}) is True
    assert path.read_bytes() == '{\n  "a": [\n    "é"\n  ],\n  "b": 1\n}\n'.encode()
    inode = path.stat().st_ino
    assert write_json(path, {"a": ["é"], "b": 1}) is False
    assert path.stat().st_ino == inode
    assert write_json(path, {"a": []}) is True


# -- the lock -----------------------------------------------------------------------------------------


def test_lock_timeout_value(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LESLIE_LOCK_TIMEOUT", raising=False)
    assert lock_timeout() == DEFAULT_LOCK_TIMEOUT == 30.0
    monkeypatch.setenv("LESLIE_LOCK_TIMEOUT", "0.25")
    assert lock_timeout() == 0.25
    monkeypatch.setenv("LESLIE_LOCK_TIMEOUT", "-3")
    assert lock_timeout() == 0.0
    monkeypatch.setenv("LESLIE_LOCK_TIMEOUT", "soon")
    assert lock_timeout() == DEFAULT_LOCK_TIMEOUT


def test_lock_timeout_in_library(repo_root: Path) -> None:
    with held_lock(repo_root):
        start = time.monotonic()
        with pytest.raises(LockTimeoutError) as info, acquire_index_lock(Layout(repo_root), timeout=0.3):
            pass
        assert time.monotonic() - start < 5
    assert info.value.exit_code == 5 and "nothing was changed" in info.value.message
    with acquire_index_lock(Layout(repo_root), timeout=0.3):
        pass  # free again once the holder is gone


@pytest.mark.parametrize(
    "args",
    [
        ["objective", "create", "blocked"],
        ["reference", "--thread", "thread-a", "--target", "thread-b"],
        ["rm", "thread-b"],
        ["switch", "thread-a"],
        ["doctor", "--fix"],
    ],
)
def test_cli_lock_timeout_exit_5_and_nothing_changed(repo_root: Path, args: list[str]) -> None:
    for tid in ("thread-a", "thread-b"):
        spawn(Repository(repo_root), tid, thread_id=tid)
    before = tree_digest(repo_root / ".leslie")
    with held_lock(repo_root):
        result = run_leslie(*args, cwd=repo_root, env={"LESLIE_LOCK_TIMEOUT": "0.5"})
    assert result.code == 5, result.stderr
    assert "within 0.5 s" in result.stderr and "index.lock" in result.stderr
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert tree_digest(repo_root / ".leslie") == before


def test_read_only_commands_do_not_wait_for_the_lock(repo_root: Path) -> None:
    spawn(Repository(repo_root), "x", thread_id="thread-a")
    with held_lock(repo_root):
        for args in (["list"], ["show", "thread-a"], ["relations"], ["doctor"], ["objective", "list"]):
            result = run_leslie(*args, cwd=repo_root, env={"LESLIE_LOCK_TIMEOUT": "0.5"})
            assert result.code == 0, (args, result.stderr)


def test_atomic_write_refuses_to_replace_a_fifo(tmp_path: Path) -> None:
    """A rename over a device or FIFO would turn it into a regular file; the write is refused instead."""
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(StorageError, match="not a regular file"):
        atomic_write(fifo, b"data")
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pipe"]


def test_repository_target_follows_links_only_inside_the_repository(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    (root / "docs").mkdir(parents=True)
    (root / ".git" / "hooks").mkdir(parents=True)
    (root / ".leslie").mkdir()
    outside = tmp_path / "outside.txt"
    outside.write_text("precious")
    assert repository_target(root, root / "AGENTS.md") == root.resolve() / "AGENTS.md"
    (root / "AGENTS.md").symlink_to("docs/AGENTS.md")
    assert repository_target(root, root / "AGENTS.md") == root.resolve() / "docs" / "AGENTS.md"
    write_repository_file(root, root / "AGENTS.md", b"block\n")
    assert (root / "docs" / "AGENTS.md").read_bytes() == b"block\n" and (root / "AGENTS.md").is_symlink()
    for name, target in (("CLAUDE.md", outside), ("hooks.json", ".git/hooks/post-checkout"),
                         ("state.md", ".leslie/thread_relations.json")):
        (root / name).symlink_to(target)
        with pytest.raises(CorruptStateError, match=f"^{name}: leads") as info:
            write_repository_file(root, root / name, b"x")
        assert info.value.exit_code == 4 and "remove the link" in info.value.message
    (root / ".claude").symlink_to(tmp_path)  # a linked folder is no better than a linked file
    with pytest.raises(CorruptStateError, match="outside the repository"):
        read_repository_file(root, root / ".claude" / "settings.json")
    assert outside.read_text() == "precious"
    assert read_repository_file(root, root / "missing.md") is None
    # A folder of its own (git hooks): a link may lead anywhere inside it, nowhere else.
    hooks = root / ".git" / "hooks"
    (hooks / "post-merge").symlink_to("post-merge.real")
    assert repository_target(root, hooks / "post-merge", within=root / ".git") == hooks.resolve() / "post-merge.real"
    (hooks / "post-checkout").symlink_to(outside)
    with pytest.raises(CorruptStateError):
        repository_target(root, hooks / "post-checkout", within=root / ".git")
