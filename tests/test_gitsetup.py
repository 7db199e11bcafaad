"""`leslie git setup` / `init --git`: attributes, drivers, chained hooks, hooksPath, worktrees, idempotence."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from conftest import LESLIE_EXE, git, run_leslie, tree_digest
from leslie.ops.gitsetup import BLOCK_BEGIN, HOOK_NAMES, hook_block, setup_git

BIN_DIR = str(Path(LESLIE_EXE).parent)


def _hooks(root: Path) -> Path:
    return root / ".git" / "hooks"


def _commit_all(root: Path, message: str) -> None:
    git("add", "-A", cwd=root)
    git("commit", "-q", "-m", message, cwd=root)


def test_check_lists_what_is_missing_then_setup_installs_it(repo_root: Path) -> None:
    before = run_leslie("git", "setup", "--check", cwd=repo_root)
    assert before.code == 1
    for item in ("merge.leslie-relations.driver", "merge.leslie-thread.driver", "post-merge", "post-checkout",
                 "post-rewrite", "thread.json merge=leslie-thread"):
        assert item in before.stdout
    assert run_leslie("git", "setup", cwd=repo_root).code == 0
    after = run_leslie("--json", "git", "setup", "--check", cwd=repo_root)
    assert after.code == 0 and json.loads(after.stdout) == {"ok": True, "missing": []}
    driver = git("config", "merge.leslie-relations.driver", cwd=repo_root).strip()
    assert driver == f"{LESLIE_EXE} merge-relations %O %A %B"
    thread_driver = git("config", "merge.leslie-thread.driver", cwd=repo_root)
    assert "merge-relations --kind thread --path %P %O %A %B" in thread_driver
    assert git("config", "merge.leslie-relations.name", cwd=repo_root).strip()
    attributes = (repo_root / ".gitattributes").read_text().splitlines()
    assert attributes.count(".leslie/thread_relations.json merge=leslie-relations") == 1
    assert git("check-attr", "merge", ".leslie/threads/thread-x/thread.json", cwd=repo_root).strip().endswith(
        "leslie-thread")
    for name in HOOK_NAMES:
        hook = _hooks(repo_root) / name
        assert hook.stat().st_mode & stat.S_IXUSR
        text = hook.read_text()
        assert text.startswith("#!/bin/sh\n") and "doctor --fix --quiet" in text and LESLIE_EXE in text


def test_a_thread_driver_without_the_path_is_outdated_and_replaced(repo_root: Path) -> None:
    # Set up by an older leslie: git did not pass the file's path, so a thread.json's id went unchecked.
    assert run_leslie("git", "setup", cwd=repo_root).code == 0
    git("config", "merge.leslie-thread.driver", f"{LESLIE_EXE} merge-relations --kind thread %O %A %B", cwd=repo_root)
    check = run_leslie("git", "setup", "--check", cwd=repo_root)
    assert check.code == 1 and "merge.leslie-thread.driver" in check.stdout
    assert run_leslie("git", "setup", cwd=repo_root).code == 0
    assert "--path %P" in git("config", "merge.leslie-thread.driver", cwd=repo_root)


def test_setup_is_idempotent(repo_root: Path) -> None:
    first = run_leslie("--json", "git", "setup", cwd=repo_root)
    assert json.loads(first.stdout)["changed"]
    snapshot = (tree_digest(_hooks(repo_root)), (repo_root / ".gitattributes").read_bytes(),
                (repo_root / ".git" / "config").read_bytes())
    second = run_leslie("--json", "git", "setup", cwd=repo_root)
    assert second.code == 0 and json.loads(second.stdout) == {"changed": []}
    assert snapshot == (tree_digest(_hooks(repo_root)), (repo_root / ".gitattributes").read_bytes(),
                        (repo_root / ".git" / "config").read_bytes())


def test_init_git_registers_everything(tmp_path: Path) -> None:
    root = tmp_path / "fresh"
    root.mkdir()
    git("init", "-q", "-b", "main", cwd=root)
    result = run_leslie("init", "--git", cwd=root)
    assert result.code == 0, result.stderr
    assert run_leslie("git", "setup", "--check", cwd=root).code == 0


def test_setup_outside_git_is_a_usage_error(tmp_path: Path) -> None:
    root = tmp_path / "plain"
    root.mkdir()
    assert run_leslie("init", cwd=root).code == 0
    result = run_leslie("git", "setup", cwd=root)
    assert result.code == 2
    assert "not inside a git working tree" in result.stderr


def test_existing_shell_hook_is_kept_and_still_runs(repo_root: Path) -> None:
    hook = _hooks(repo_root) / "post-checkout"
    hook.parent.mkdir(parents=True, exist_ok=True)
    original = "#!/bin/sh\necho \"existing hook ran $3\" >> existing.log\nexit 0\n"
    hook.write_text(original)
    hook.chmod(0o755)
    assert run_leslie("git", "setup", cwd=repo_root).code == 0
    text = hook.read_text()
    assert text.count(BLOCK_BEGIN) == 1
    assert text.endswith(original.split("\n", 1)[1])  # the user's lines, unchanged, after leslie's block
    assert run_leslie("git", "setup", cwd=repo_root).code == 0
    assert hook.read_text() == text

    # Both parts run: the user's (log line) and leslie's (a stale index gets rebuilt), despite `exit 0`.
    tid = run_leslie("spawn", "--intent", "x", cwd=repo_root).stdout.strip()
    _commit_all(repo_root, "one thread")
    thread_file = repo_root / ".leslie" / "threads" / tid / "thread.json"
    thread_file.write_text(thread_file.read_text().replace('"title": "x"', '"title": "edited by hand"'))
    assert run_leslie("doctor", cwd=repo_root).code == 1
    git("checkout", "-q", "-b", "other", cwd=repo_root)
    assert (repo_root / "existing.log").read_text() == "existing hook ran 1\n"
    assert run_leslie("doctor", cwd=repo_root).code == 0
    assert "edited by hand" in (repo_root / ".leslie" / "thread_relations.json").read_text()


def test_a_hook_that_is_not_a_shell_script_is_left_alone(repo_root: Path) -> None:
    hook = _hooks(repo_root) / "post-merge"
    hook.parent.mkdir(parents=True, exist_ok=True)
    hook.write_text("#!/usr/bin/env python3\nprint('mine')\n")
    hook.chmod(0o755)
    before = hook.read_bytes()
    result = run_leslie("git", "setup", cwd=repo_root)
    assert result.code == 0
    assert "not a shell script" in result.stderr
    assert hook.read_bytes() == before
    check = run_leslie("git", "setup", "--check", cwd=repo_root)
    assert check.code == 1 and "post-merge hook" in check.stdout
    assert "post-checkout" not in check.stdout


def test_block_is_updated_in_place_when_the_executable_moves(repo_root: Path) -> None:
    hook = _hooks(repo_root) / "post-rewrite"
    hook.parent.mkdir(parents=True, exist_ok=True)
    hook.write_text("#!/bin/bash\n" + hook_block("/old/place/leslie", "", "post-rewrite") + "echo mine\n")
    hook.chmod(0o700)
    setup_git(repo_root)
    text = hook.read_text()
    assert text.count(BLOCK_BEGIN) == 1 and "/old/place" not in text and LESLIE_EXE in text
    assert text.startswith("#!/bin/bash\n") and text.endswith("echo mine\n")
    assert stat.S_IMODE(hook.stat().st_mode) & 0o700 == 0o700


def test_core_hooks_path_is_respected(repo_root: Path) -> None:
    git("config", "core.hooksPath", "team-hooks", cwd=repo_root)
    assert run_leslie("git", "setup", cwd=repo_root).code == 0
    for name in HOOK_NAMES:
        assert (repo_root / "team-hooks" / name).is_file()
        assert not (_hooks(repo_root) / name).exists()
    assert run_leslie("git", "setup", "--check", cwd=repo_root).code == 0


def test_worktrees_share_driver_and_hooks(repo_root: Path) -> None:
    assert run_leslie("git", "setup", cwd=repo_root).code == 0
    _commit_all(repo_root, "leslie")
    worktree = repo_root.parent / "wt"
    git("worktree", "add", "-q", "-b", "wt", str(worktree), cwd=repo_root)
    check = run_leslie("git", "setup", "--check", cwd=worktree)
    assert check.code == 0, check.stdout
    assert not (Path(git("rev-parse", "--absolute-git-dir", cwd=worktree).strip()) / "hooks").exists()


def test_hooks_never_fail_git_when_leslie_is_missing(repo_root: Path, tmp_path: Path) -> None:
    for name in HOOK_NAMES:
        hook = _hooks(repo_root) / name
        hook.parent.mkdir(parents=True, exist_ok=True)
        hook.write_text("#!/bin/sh\n" + hook_block(str(tmp_path / "gone" / "leslie"), "", name))
        hook.chmod(0o755)
    _commit_all(repo_root, "base")
    env_path = os.pathsep.join(p for p in os.environ["PATH"].split(os.pathsep) if p != BIN_DIR)
    import subprocess

    proc = subprocess.run(["git", "checkout", "-q", "-b", "other"], cwd=repo_root, capture_output=True,
                          text=True, env={**os.environ, "PATH": env_path}, check=False)
    assert proc.returncode == 0 and proc.stderr == ""


def test_leslie_root_below_the_git_top(tmp_path: Path) -> None:
    top = tmp_path / "mono"
    sub = top / "pkg" / "app"
    sub.mkdir(parents=True)
    git("init", "-q", "-b", "main", cwd=top)
    assert run_leslie("init", "--git", "--root", str(sub), cwd=top).code == 0
    assert (sub / ".gitattributes").is_file()
    hook = (_hooks(top) / "post-checkout").read_text()
    assert "--root pkg/app" in hook and "[ -d pkg/app/.leslie ]" in hook
    tid = run_leslie("spawn", "--intent", "x", cwd=sub).stdout.strip()
    _commit_all(top, "base")
    (sub / ".leslie" / "thread_relations.json").write_text("{}\n")
    git("checkout", "-q", "-b", "other", cwd=top)
    assert tid in (sub / ".leslie" / "thread_relations.json").read_text()


@pytest.mark.parametrize("hook", ["post-merge", "post-checkout", "post-rewrite"])
def test_hook_block_is_valid_shell(hook: str, tmp_path: Path) -> None:
    import subprocess

    script = tmp_path / "h.sh"
    script.write_text("#!/bin/sh\n" + hook_block(LESLIE_EXE, "sub dir", hook))
    assert subprocess.run(["sh", "-n", str(script)], check=False).returncode == 0
