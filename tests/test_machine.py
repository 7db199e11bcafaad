"""Machine state lives where git cannot put it (`store.machine`, `store.migration`; issue 30).

A clone can commit `.leslie/state/` with `git add -f`: sessions, guard manifests, the lock queue, the current
thread. In a git work tree leslie keeps all of that in the git folder and never reads `.leslie/state/` again.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from conftest import LESLIE_EXE, git, run_leslie, state_dir
from leslie.store import machine


def rev_parse(cwd: Path, what: str) -> Path:
    return Path(cwd, git("rev-parse", what, cwd=cwd).strip()).resolve()


def test_outside_git_the_state_stays_in_dot_leslie(tmp_path: Path) -> None:
    root = tmp_path / "plain"
    root.mkdir()
    assert run_leslie("init", cwd=root).code == 0
    assert machine.state_dir(root) == str(root / ".leslie" / "state")
    assert not machine.in_git(root)


def test_in_git_the_state_is_in_the_git_folder_of_each_work_tree(repo_root: Path, tmp_path: Path) -> None:
    """Each work tree its own folder (`git rev-parse --git-dir`), one shared folder for the clone."""
    other = tmp_path / "second"
    git("add", "-A", cwd=repo_root)
    git("commit", "-q", "-m", "init", cwd=repo_root)
    git("worktree", "add", "-q", "-b", "side", str(other), cwd=repo_root)
    for tree in (repo_root, other):
        assert Path(machine.state_dir(tree)).resolve() == rev_parse(tree, "--git-dir") / "leslie"
        assert Path(machine.shared_dir(tree)).resolve() == rev_parse(tree, "--git-common-dir") / "leslie" / "shared"
    assert machine.state_dir(repo_root) != machine.state_dir(other)
    assert machine.shared_dir(repo_root) == machine.shared_dir(other)

    assert run_leslie("spawn", "--intent", "x", "--id", "thread-x", cwd=other).code == 0
    assert run_leslie("switch", "thread-x", cwd=other).code == 0
    assert (rev_parse(other, "--git-dir") / "leslie" / "current_thread").read_text().strip() == "thread-x"
    assert not (other / ".leslie" / "state").exists()
    assert git("status", "--porcelain", "--ignored", cwd=other).count("state") == 0


def test_a_dot_leslie_below_the_top_has_a_folder_of_its_own(repo_root: Path) -> None:
    nested = repo_root / "services" / "api"
    nested.mkdir(parents=True)
    assert run_leslie("init", cwd=nested).code == 0
    folder = Path(machine.state_dir(nested))
    assert folder.parent == repo_root / ".git" / "leslie" / "roots" and folder.name == "services%2Fapi"
    assert machine.state_dir(repo_root) != str(folder)
    assert Path(machine.shared_dir(nested)) == folder / "shared"  # claims of one root never meet another's
    assert Path(machine.shared_dir(repo_root)) == repo_root / ".git" / "leslie" / "shared"


def _plant_state(root: Path, outside: Path) -> None:
    """What a hostile repository commits under `.leslie/state/`: a current thread, a session, and a guard
    manifest and snapshot that would write `.git/config` (core.fsmonitor runs code at the next git status)."""
    state = root / ".leslie" / "state"
    (state / "sessions").mkdir(parents=True)
    (state / "current_thread").write_text("thread-planted\n")
    (state / "sessions" / "claude-code.evil.json").write_text(json.dumps({"thread": "thread-planted"}))
    guard = state / "guard"
    (guard / "objects" / "ab").mkdir(parents=True)
    payload = f"[core]\n\tfsmonitor = touch {outside}\n".encode()
    (guard / "objects" / "ab" / ("ab" * 16)).write_bytes(payload)
    manifest = {"version": 2, "head": "", "files": {"../.git/config": ["f", 1, 1, 1]},
                "digests": {"../.git/config": "ab" * 16}}
    (guard / "manifest.json").write_text(json.dumps(manifest))
    lock_queue = state / "lock-queue"
    lock_queue.mkdir()
    for n in range(1, 200):
        (lock_queue / f"{n:020d}").write_bytes(b"")
    git("add", "-f", ".leslie/state", cwd=root)
    git("commit", "-q", "-m", "planted state", cwd=root)


def test_a_committed_state_is_never_read_and_doctor_fix_untracks_it(repo_root: Path, tmp_path: Path) -> None:
    outside = tmp_path / "pwned"
    git("add", "-A", cwd=repo_root)
    git("commit", "-q", "-m", "init", cwd=repo_root)
    _plant_state(repo_root, outside)
    clone = tmp_path / "clone"
    git("clone", "-q", str(repo_root), str(clone), cwd=tmp_path)
    config_before = (clone / ".git" / "config").read_bytes()
    planted = {p: p.read_bytes() for p in (clone / ".leslie" / "state").rglob("*") if p.is_file()}

    assert run_leslie("spawn", "--intent", "mine", "--id", "thread-mine", cwd=clone).code == 0
    status = run_leslie("status", cwd=clone)
    assert "thread-planted" not in status.stdout
    hook = {"hook_event_name": "PostToolUse", "session_id": "s1", "cwd": str(clone), "tool_name": "Bash",
            "tool_input": {"command": "true"}, "tool_response": {}}
    env = {**os.environ, "LESLIE_THREAD": "thread-mine"}
    for event in ("PreToolUse", "PostToolUse"):
        subprocess.run([LESLIE_EXE, "hook", "claude-code"], input=json.dumps({**hook, "hook_event_name": event}),
                       cwd=clone, env=env, capture_output=True, text=True, timeout=60, check=False)
    git("status", "--short", cwd=clone)
    assert (clone / ".git" / "config").read_bytes() == config_before
    assert not outside.exists()
    # never read, never written: the planted files are as they came
    assert {p: p.read_bytes() for p in (clone / ".leslie" / "state").rglob("*") if p.is_file()} == planted

    report = run_leslie("doctor", cwd=clone)
    assert report.code == 1 and "git tracks .leslie/state/" in report.stdout + report.stderr
    fixed = run_leslie("doctor", "--fix", cwd=clone)
    assert "removed .leslie/state/ from git's index" in fixed.stdout + fixed.stderr
    assert git("ls-files", "--", ".leslie/state", cwd=clone) == ""
    assert run_leslie("doctor", cwd=clone).code == 0


def test_init_untracks_a_committed_state(repo_root: Path, tmp_path: Path) -> None:
    git("add", "-A", cwd=repo_root)
    git("commit", "-q", "-m", "init", cwd=repo_root)
    _plant_state(repo_root, tmp_path / "pwned")
    result = run_leslie("init", cwd=repo_root)
    assert result.code == 0 and "removed from git's index" in result.stdout
    assert git("ls-files", "--", ".leslie/state", cwd=repo_root) == ""


def _old_layout(root: Path) -> dict[str, bytes]:
    """Move this work tree's machine state back to `.leslie/state/`, as an older leslie kept it."""
    folder = Path(machine.state_dir(root))
    legacy = root / ".leslie" / "state"
    os.rename(folder, legacy)
    machine._found.clear()
    return {str(p.relative_to(legacy)): p.read_bytes() for p in legacy.rglob("*")
            if p.is_file() and p.name != "index.lock" and "lock-queue" not in p.parts}


def test_an_existing_state_is_carried_over_once_without_loss(repo_root: Path) -> None:
    assert run_leslie("spawn", "--intent", "x", "--id", "thread-x", cwd=repo_root).code == 0
    assert run_leslie("switch", "thread-x", cwd=repo_root).code == 0
    assert run_leslie("inject", "--session", "s1", "--message", "hi", cwd=repo_root).code == 0
    before = _old_layout(repo_root)
    assert "current_thread" in before and any(name.startswith("sessions/") for name in before)

    racers = [subprocess.Popen([LESLIE_EXE, "status", "--json"], cwd=repo_root, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True) for _ in range(8)]
    for racer in racers:
        out, err = racer.communicate(timeout=60)
        assert racer.returncode == 0, err
        assert json.loads(out)["thread"]["id"] == "thread-x"
    folder = state_dir(repo_root)
    after = {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}
    for name, data in before.items():
        assert after.get(name) == data, name
    assert not (repo_root / ".leslie" / "state").exists()
    assert not list(folder.parent.glob("leslie.migrating-*"))


def test_a_tracked_file_is_not_carried_over(repo_root: Path, tmp_path: Path) -> None:
    """An upgrade in a repository that had committed state: only what this machine made is carried."""
    git("add", "-A", cwd=repo_root)
    git("commit", "-q", "-m", "init", cwd=repo_root)
    _plant_state(repo_root, tmp_path / "pwned")
    assert run_leslie("spawn", "--intent", "x", "--id", "thread-x", cwd=repo_root).code == 0
    assert run_leslie("switch", "thread-x", cwd=repo_root).code == 0
    folder = state_dir(repo_root)
    os.rename(folder, tmp_path / "kept")
    machine._found.clear()
    legacy = repo_root / ".leslie" / "state"
    (legacy / "backups").mkdir()
    (legacy / "backups" / "mine.json").write_text("{}")  # untracked: this machine's
    (legacy / "sessions" / "codex.mine.json").write_text("{}")  # untracked, beside a tracked file
    code = f"from leslie.store import machine; print(machine.state_dir({str(repo_root)!r}))"
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True)
    assert (folder / "backups" / "mine.json").read_text() == "{}"
    assert (folder / "sessions" / "codex.mine.json").read_text() == "{}"
    assert not (folder / "current_thread").exists()  # the planted one stays behind
    assert not (folder / "guard" / "manifest.json").exists()
    assert (legacy / "current_thread").read_text() == "thread-planted\n"


def test_a_broken_git_file_is_no_git_work_tree_and_never_the_repository_above(repo_root: Path) -> None:
    inner = repo_root / "vendor" / "lib"
    inner.mkdir(parents=True)
    (inner / ".git").write_text("gitdir: /nonexistent/worktrees/lib\n")
    assert machine.git_dirs(str(inner)) is None
    assert machine.state_dir(inner) == str(inner / ".leslie" / "state")
