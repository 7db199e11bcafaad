"""Two real agents in two worktrees of one clone at once (SPEC §13): Claude Code works on thread-own in its
worktree, Codex on thread-other in another; each thread references the other.

Each gets its own thread's block, sees the other's plan as it is in the other worktree now (uncommitted), is
denied a write into it (a shell command of Claude's), and `leslie who` lists both sessions, each holding its thread.
"""

from __future__ import annotations

import copy
import json

import pytest

from e2e.harness.checks import assert_unchanged, denials, tool_results_mention
from e2e.harness.clients import ClaudeSession, CodexSession
from e2e.harness.server import MockModelServer, Reply, ToolCall, strings_in
from e2e.harness.world import LESLIE, OTHER, OWN, World

pytestmark = [pytest.mark.claude, pytest.mark.codex]


def in_worktree(world: World, thread: str) -> World:
    """The world seen from `thread`'s worktree: the same home, proxy, hook log and wrapper; its own folder and
    current thread."""
    seen = copy.copy(world)
    seen.repo = world.repo.parent / "repo.worktrees" / thread
    seen.env = {**world.env, "LESLIE_THREAD": thread}
    return seen


def blocks_of(mock: MockModelServer, thread: str) -> list[str]:
    """The `<thread_context>` blocks of `thread` in the newest main request."""
    needle = f'<thread_context thread="{thread}"'
    return [text[text.rindex(needle):] for text in strings_in(mock.main_requests()[-1].body) if needle in text]


def test_two_agents_in_two_worktrees(world: World, anthropic: MockModelServer, openai: MockModelServer) -> None:
    world.leslie("hooks", "install", "claude-code", "--executable", str(world.wrapper))
    world.leslie("hooks", "install", "codex", "--executable", str(world.wrapper))
    world.run(LESLIE, "reference", OWN, env={"LESLIE_THREAD": OTHER})  # each thread reads the other
    world.commit("hooks; thread-other reads thread-own")
    world.leslie("worktree", "add", OWN)
    world.leslie("worktree", "add", OTHER)
    a, b = in_worktree(world, OWN), in_worktree(world, OTHER)
    a_plan = a.repo / ".leslie" / "threads" / OWN / "plan.md"
    b_plan = b.repo / ".leslie" / "threads" / OTHER / "plan.md"
    a_plan.write_text("# Plan\n\n- [ ] step written in worktree A, not committed\n", encoding="utf-8")
    b_plan.write_text("# Plan\n\n- [ ] step written in worktree B, not committed\n", encoding="utf-8")

    claude = ClaudeSession(a, anthropic)
    codex = CodexSession(b, openai)
    codex.trust_hooks()
    claude.prompt("hello")
    codex.prompt("hello")

    own_block = blocks_of(anthropic, OWN)[-1]  # Claude's own thread's block, reading thread-other live in B
    assert f'<ref thread="{OTHER}" ' in own_block and f'worktree="{b.repo}"' in own_block
    assert "step written in worktree B, not committed" in own_block
    other_block = blocks_of(openai, OTHER)[-1]  # Codex's, reading thread-own live in A
    assert f'<ref thread="{OWN}" ' in other_block and f'worktree="{a.repo}"' in other_block
    assert "step written in worktree A, not committed" in other_block

    before = b_plan.read_bytes()  # Claude, in A, tries to write thread-other's plan in B
    anthropic.script.push(Reply(tool_calls=(ToolCall("Bash", {"command": f"echo overwritten >> {b_plan}",
                                                               "description": "append"}),)),
                          Reply(text="done"))
    claude.prompt("append to the other thread's plan")
    assert_unchanged(b_plan, before)
    assert [c["payload"]["tool_name"] for c in denials(world)] == ["Bash"]
    assert tool_results_mention(anthropic.main_requests()[-1], f"belongs to thread {OTHER}")

    rows = json.loads(world.leslie("who", "--json").stdout)
    assert {(r["agent"], r["thread"], r["worktree"], r["claimed"]) for r in rows} == {
        ("claude-code", OWN, str(a.repo), True), ("codex", OTHER, str(b.repo), True)}
