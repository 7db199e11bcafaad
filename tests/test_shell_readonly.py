"""Which shell commands the write guard's second line may leave unwatched: only ones that cannot write."""

from __future__ import annotations

import json

import pytest

from conftest import run_leslie, state_dir
from leslie.guard.shell.readonly import read_only
from leslie.ops.threads import spawn
from leslie.store.repository import Repository


@pytest.mark.parametrize("command", [
    "ls -la .leslie/threads",
    "cat .leslie/threads/thread-other/plan.md | grep -n TODO | head -5",
    "git status --short && git diff --stat; git log --oneline -5",
    "find . -name '*.py' -newer setup.cfg",
    "wc -l src/*.py",
    "sort names.txt | cut -d, -f1",
    "test -f plan.md || echo missing",
    "git branch",
])
def test_readers_are_read_only(command: str) -> None:
    assert read_only(command)


@pytest.mark.parametrize("command", [
    "",
    "echo x > .leslie/threads/thread-other/plan.md",  # a redirection
    "cat a >> b",
    "python -c 'open(\".leslie/threads/thread-other/plan.md\", \"w\")'",  # an interpreter
    "ls $(rm -rf .leslie)",  # a command substitution
    "ls `touch x`",
    "find . -name plan.md -delete",
    "find . -exec rm {} +",
    "git diff --output=.leslie/threads/thread-other/plan.md",
    "git -c core.pager=rm log",
    "git log --ext-diff",
    "git checkout -- .",
    "git branch -D main",
    "git -C elsewhere status",  # conservative: -C's folder is not understood, so watched
    "sort -o out.txt in.txt",
    "sort --output=out.txt in.txt",
    "env rm x",
    "uniq in.txt out.txt",
    "sed -n 'w out' in.txt",
    "awk '{print > \"x\"}' in.txt",
    "grep 'a|b' file",  # a quoted separator: not understood, so watched
    "cat <<EOF\nx\nEOF",
    "ls; (rm x)",
    "xargs rm < list",
    "ls " + "a" * 5000,  # too long to bother
])
def test_anything_else_is_watched(command: str) -> None:
    assert not read_only(command)


def test_a_read_only_call_takes_no_snapshot_and_a_writer_does(repo: Repository) -> None:
    spawn(repo, "Own", thread_id="thread-own")
    spawn(repo, "Other", thread_id="thread-other")
    manifest = state_dir(repo.root) / "guard" / "manifest.json"

    def pre_tool_use(command: str) -> None:
        payload = {"session_id": "s", "transcript_path": None, "cwd": str(repo.root), "hook_event_name": "PreToolUse",
                   "tool_name": "Bash", "tool_input": {"command": command}, "tool_use_id": command}
        result = run_leslie("hook", "claude-code", cwd=repo.root, input=json.dumps(payload),
                            env={"LESLIE_THREAD": "thread-own"})
        assert result.code == 0, result.stderr

    pre_tool_use("ls -la .leslie/threads/thread-other && git status")
    assert not manifest.exists()
    pre_tool_use("make --version")
    assert manifest.exists()
