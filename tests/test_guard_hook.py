"""The write guard as agents meet it: `leslie hook claude-code|codex` PreToolUse and `leslie check-write`,
through the real executable, with the repository found from the written path as well as from `cwd`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from conftest import Result, run_leslie
from leslie.ops.threads import spawn
from leslie.store.repository import Repository

OWN = "thread-own"
OTHER = "thread-other"
O = f".leslie/threads/{OTHER}"  # noqa: E741
M = f".leslie/threads/{OWN}"


@pytest.fixture
def root(repo: Repository) -> Path:
    spawn(repo, "Own work", thread_id=OWN)
    spawn(repo, "Someone else's", thread_id=OTHER)
    return repo.root


def pre_tool_use(cwd: Path, name: str, tool_input: dict[str, Any]) -> str:
    return json.dumps({"session_id": "s1", "transcript_path": None, "cwd": str(cwd), "permission_mode": "default",
                       "hook_event_name": "PreToolUse", "tool_name": name, "tool_input": tool_input})


def decision(result: Result) -> str | None:
    assert result.code == 0, result.stderr
    if not result.stdout:
        return None
    return str(json.loads(result.stdout)["hookSpecificOutput"]["permissionDecision"])


def hook(agent: str, cwd: Path, name: str, tool_input: dict[str, Any], env: dict[str, str] | None = None) -> str | None:
    return decision(run_leslie("hook", agent, cwd=cwd, input=pre_tool_use(cwd, name, tool_input),
                               env={"LESLIE_THREAD": OWN} if env is None else env))


@pytest.mark.parametrize("agent", ["claude-code", "codex"])
def test_a_write_from_outside_the_repository_is_denied(root: Path, tmp_path: Path, agent: str) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    assert hook(agent, outside, "Bash", {"command": f"echo x > {root}/{O}/plan.md"}) == "deny"
    assert hook(agent, outside, "Bash", {"command": f"cat {root}/{O}/plan.md"}) is None
    assert hook(agent, outside, "Bash", {"command": f"rm -rf {root}"}) == "deny"
    assert hook(agent, outside, "Bash", {"command": "rm -rf build"}) is None


def test_file_tools_from_outside_the_repository(root: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    assert hook("claude-code", outside, "Write", {"file_path": f"{root}/{O}/plan.md", "content": "x"}) == "deny"
    assert hook("claude-code", outside, "Write", {"file_path": f"{root}/{M}/plan.md", "content": "x"}) == "allow"
    assert hook("claude-code", outside, "Write", {"file_path": str(outside / "x.py"), "content": "x"}) is None


def test_from_another_leslie_repository_the_thread_is_this_repositorys(root: Path, tmp_path: Path) -> None:
    """No LESLIE_THREAD: the thread is the session's in the written repository (here its current thread)."""
    other_repo = tmp_path / "b"
    (other_repo / ".leslie" / "threads").mkdir(parents=True)
    assert run_leslie("switch", OWN, cwd=root).code == 0
    write = {"file_path": f"{root}/{O}/plan.md", "content": "x"}
    assert hook("claude-code", other_repo, "Write", write, env={}) == "deny"
    own = {"file_path": f"{root}/{M}/plan.md", "content": "x"}
    assert hook("claude-code", other_repo, "Write", own, env={}) == "allow"


def test_leslies_state_is_not_for_file_tools(root: Path) -> None:
    for path in (f"{M}/thread.json", ".leslie/config.toml", ".leslie/thread_relations.json",
                 ".leslie/templates/thread_context.xml.j2", ".leslie/state/current_thread"):
        assert hook("claude-code", root, "Write", {"file_path": str(root / path), "content": "x"}) == "deny", path
        assert hook("claude-code", root, "Edit", {"file_path": path, "old_string": "a", "new_string": "b"}) == "deny"
    assert hook("claude-code", root, "Edit", {"file_path": f"{M}/progress.md", "old_string": "a",
                                              "new_string": "b"}) == "allow"


def test_an_internal_error_on_a_command_near_leslie_denies(root: Path) -> None:
    bad = {"LESLIE_THREAD": "garbage id"}  # whose thread this is cannot be known
    assert hook("claude-code", root, "Bash", {"command": "echo x > .Leslie/notes"}, env=bad) == "deny"
    result = run_leslie("hook", "claude-code", cwd=root, input=pre_tool_use(root, "Bash", {"command": "make"}),
                        env=bad)
    assert result.code == 0 and result.stdout == "" and "garbage id" in result.stderr


# -- leslie check-write -----------------------------------------------------------------------------------
def test_check_write_finds_the_root_from_the_path(root: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    denied = run_leslie("check-write", f"{root}/{O}/plan.md", "--thread", OWN, cwd=outside)
    assert denied.code == 1 and OTHER in denied.stderr
    assert run_leslie("check-write", f"{root}/{M}/plan.md", "--thread", OWN, cwd=outside).code == 0
    assert run_leslie("switch", OWN, cwd=root).code == 0
    assert run_leslie("check-write", f"{root}/{O}/plan.md", cwd=outside).code == 1  # the thread: root's current
    assert run_leslie("check-write", "x", "--thread", OWN, cwd=outside).code == 3


def test_check_write_denies_leslies_state(root: Path) -> None:
    for path in (f"{M}/thread.json", ".leslie/config.toml", ".leslie/thread_relations.json", ".leslie"):
        result = run_leslie("check-write", path, "--thread", OWN, cwd=root)
        assert result.code == 1 and "leslie" in result.stderr, path
    assert run_leslie("check-write", f"{M}/design/api.md", "--thread", OWN, cwd=root).code == 0


# -- links out of the own thread, other repositories (Claude Code 2.1.332 findings) ------------------------

def test_a_write_through_a_link_in_the_own_thread_to_outside_gets_no_opinion(root: Path, tmp_path: Path) -> None:
    """`thread-own/out -> /tmp/somewhere`: as written the path is the own thread's asset, resolved it is
    outside the repository. An explicit `allow` would skip Claude Code's own permission check for a write
    anywhere, so the guard allows only when both views allow; here it has no opinion (empty output)."""
    somewhere = tmp_path / "somewhere"
    somewhere.mkdir()
    (root / M / "out").symlink_to(somewhere)
    for cwd, path in ((root, f"{M}/out/x"), (tmp_path, f"{root}/{M}/out/x")):
        result = run_leslie("hook", "claude-code", cwd=cwd, env={"LESLIE_THREAD": OWN},
                            input=pre_tool_use(cwd, "Write", {"file_path": path, "content": "x"}))
        assert (result.code, result.stdout) == (0, ""), result
        edit = {"file_path": path, "old_string": "a", "new_string": "b"}
        assert hook("claude-code", cwd, "Edit", edit) is None
    assert hook("claude-code", root, "Write", {"file_path": f"{M}/plan.md", "content": "x"}) == "allow"
    (root / M / "inside").symlink_to(root / M / "design", target_is_directory=True)
    assert hook("claude-code", root, "Write", {"file_path": f"{M}/inside/x.md", "content": "x"}) == "allow"
    (root / M / "peek").symlink_to(root / O)
    assert hook("claude-code", root, "Write", {"file_path": f"{M}/peek/plan.md", "content": "x"}) == "deny"
    (root / "shortcut").symlink_to(root / M)  # outside .leslie/ as written, the own thread resolved
    assert hook("claude-code", root, "Write", {"file_path": "shortcut/plan.md", "content": "x"}) is None


@pytest.fixture
def elsewhere(tmp_path: Path) -> Path:
    """A second leslie repository, with its own thread-b, beside `root`."""
    from conftest import git
    from leslie.ops.bootstrap import init_repository

    other_root = tmp_path / "elsewhere"
    other_root.mkdir()
    git("init", "-q", "-b", "main", cwd=other_root)
    init_repository(other_root)
    spawn(Repository(other_root), "Another repository's thread", thread_id="thread-b")
    return other_root


def test_another_repositorys_threads_are_never_judged_as_this_repositorys(root: Path, elsewhere: Path) -> None:
    """From `root`, where the session's thread is thread-own, `elsewhere/.leslie/threads/thread-b/plan.md` is
    another repository's thread: the guard has no opinion (it denied the write as if thread-b were one of
    this repository's threads), whether the thread comes from LESLIE_THREAD or from `leslie switch`."""
    target = f"{elsewhere}/.leslie/threads/thread-b/plan.md"
    for env in ({"LESLIE_THREAD": OWN}, {}):
        if not env:
            assert run_leslie("switch", OWN, cwd=root).code == 0
        assert hook("claude-code", root, "Write", {"file_path": target, "content": "x"}, env=env) is None
        assert hook("codex", root, "Bash", {"command": f"echo x > {target}"}, env=env) is None
        assert hook("claude-code", root, "Bash", {"command": f"rm -rf {elsewhere}/.leslie/threads"}, env=env) is None
        assert hook("claude-code", root, "Bash", {"command": f"echo x > {root}/{O}/plan.md"}, env=env) == "deny"
    assert run_leslie("check-write", target, "--thread", OWN, cwd=root).code == 0
    assert run_leslie("check-write", target, cwd=root, env={"LESLIE_THREAD": OWN}).code == 0
    assert run_leslie("check-write", target, cwd=root).code == 0  # root's current thread, from `switch`
    assert run_leslie("check-write", f"{root}/{O}/plan.md", target, cwd=root).code == 1


def test_another_repository_with_a_thread_of_its_own_is_judged_by_it(root: Path, elsewhere: Path) -> None:
    """`elsewhere` has a current thread of its own (`leslie switch` there): a path into it is judged as that
    thread's, never as this repository's."""
    from leslie.ops.threads import spawn as spawn_thread

    spawn_thread(Repository(elsewhere), "Its own current thread", thread_id="thread-c")
    assert run_leslie("switch", "thread-c", cwd=elsewhere).code == 0
    other_plan = {"file_path": f"{elsewhere}/.leslie/threads/thread-b/plan.md", "content": "x"}
    assert hook("claude-code", root, "Write", other_plan) == "deny"
    denied = run_leslie("check-write", other_plan["file_path"], "--thread", OWN, cwd=root)
    assert denied.code == 1 and "thread-c" in denied.stderr and OWN not in denied.stderr
