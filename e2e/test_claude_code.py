"""Claude Code 2.1.330 with leslie's hooks (`leslie hooks install claude-code`), against the Anthropic mock."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from e2e.harness.checks import assert_unchanged, context_answers, denials, last_block, tool_results_mention
from e2e.harness.clients import ClaudeSession
from e2e.harness.server import MockModelServer, Reply, ToolCall, strings_in
from e2e.harness.world import LESLIE, OTHER, OWN, World

pytestmark = pytest.mark.claude


@pytest.fixture
def claude(world: World, anthropic: MockModelServer) -> ClaudeSession:
    """A Claude Code session in the repository, leslie's hooks installed (through the logging wrapper)."""
    world.leslie("hooks", "install", "claude-code", "--executable", str(world.wrapper))
    world.commit("claude hooks")
    return ClaudeSession(world, anthropic)


def test_block_reaches_the_model_once_at_start(claude: ClaudeSession, world: World) -> None:
    claude.prompt("hello")
    assert claude.turn_blocks() == [1]
    events = [(c["payload"].get("hook_event_name"), c["payload"].get("source")) for c in context_answers(world)]
    assert events == [("SessionStart", "startup")]


def test_nothing_more_on_an_unchanged_turn(claude: ClaudeSession, world: World) -> None:
    claude.prompt("hello")
    claude.prompt("again")
    assert claude.turn_blocks() == [1]  # the first turn's block, in the history; no new one
    assert len(context_answers(world)) == 1


def test_once_more_after_a_change(claude: ClaudeSession, world: World) -> None:
    claude.prompt("hello")
    world.leslie("spawn", "--id", "thread-third", "--intent", "A third thread")
    world.leslie("reference", "--target", "thread-third")
    claude.prompt("again")
    assert claude.turn_blocks() == [2]
    assert '<ref thread="thread-third" ' in last_block(claude.mock.main_requests(claude.mock.turn)[-1])
    claude.prompt("and again")
    assert claude.turn_blocks() == [2]


def test_once_after_manual_compaction(claude: ClaudeSession, anthropic: MockModelServer) -> None:
    claude.prompt("hello")
    claude.prompt("again")
    claude.prompt("/compact")
    assert anthropic.of_kind("compact"), "Claude Code did not ask the model for a summary"
    claude.prompt("after the compaction")
    assert claude.turn_blocks() == [1]


def test_once_after_automatic_compaction(claude: ClaudeSession, anthropic: MockModelServer) -> None:
    anthropic.script.usage = 990_000  # of the default model's 1M window
    claude.prompt("hello")
    anthropic.script.usage = None
    claude.prompt("after the compaction")
    assert [r.turn for r in anthropic.of_kind("compact")] == [2]
    assert claude.turn_blocks() == [1]


def test_real_usage_near_the_window_reinjects_once(claude: ClaudeSession, anthropic: MockModelServer,
                                                    world: World) -> None:
    # Issue 12 item 9: the usage Claude Code records in its transcript (not the transcript's size): 93 % of the
    # 1M window, below Claude Code's own trigger, predicts a compaction on the next prompt, once.
    claude.prompt("hello")
    anthropic.script.usage = 930_000
    claude.prompt("a long answer")
    anthropic.script.usage = None
    claude.prompt("next")
    claude.prompt("and next")
    assert claude.turn_blocks() == [2]
    assert not anthropic.of_kind("compact")
    reasons = [c["payload"].get("hook_event_name") for c in context_answers(world)]
    assert reasons == ["SessionStart", "UserPromptSubmit"]
    stats = world.leslie("stats", "--json")
    assert '"usage_source": "transcript"' in stats.stdout


def test_once_after_clear(claude: ClaudeSession, world: World) -> None:
    claude.prompt("hello")
    first = claude.session_id
    claude.prompt("/clear")
    assert claude.session_id != first, "/clear did not start a new conversation"
    claude.prompt("after the clear")
    assert claude.turn_blocks() == [1]


def test_file_tool_write_into_the_referenced_thread_is_denied(claude: ClaudeSession, world: World) -> None:
    target = world.thread_file(OTHER, "plan.md")
    before = target.read_bytes()
    claude.mock.script.push(Reply(tool_calls=(ToolCall("Write", {"file_path": str(target),
                                                                  "content": "overwritten\n"}),)),
                            Reply(text="done"))
    claude.prompt("write the other thread's plan")
    assert_unchanged(target, before)
    assert [c["payload"]["tool_name"] for c in denials(world)] == ["Write"]
    assert tool_results_mention(claude.mock.main_requests()[-1], f"belongs to thread {OTHER}")


def test_shell_write_into_the_referenced_thread_is_denied(claude: ClaudeSession, world: World) -> None:
    target = world.thread_file(OTHER, "plan.md")
    before = target.read_bytes()
    claude.mock.script.push(Reply(tool_calls=(ToolCall("Bash", {"command": f"echo overwritten >> {target}",
                                                                 "description": "append"}),)),
                            Reply(text="done"))
    claude.prompt("append to the other thread's plan")
    assert_unchanged(target, before)
    assert [c["payload"]["tool_name"] for c in denials(world)] == ["Bash"]
    assert tool_results_mention(claude.mock.main_requests()[-1], f"belongs to thread {OTHER}")


def test_a_hidden_shell_write_is_put_back_listed_and_restored_by_a_person(claude: ClaudeSession,
                                                                          world: World) -> None:
    """The second line undoes a write the first could not read; `leslie status` lists what it kept, and a
    person's `leslie quarantine restore` brings it back and stays (SPEC §13, the guard and people)."""
    target = world.thread_file(OTHER, "plan.md")
    before = target.read_bytes()
    script = f"open('{target}', 'a').write('sneaked\\n')"
    claude.mock.script.push(Reply(tool_calls=(ToolCall("Bash", {"command": f'python3 -c "{script}"',
                                                                 "description": "python"}),)),
                            Reply(text="done"))
    claude.prompt("run it")
    assert_unchanged(target, before)
    kept = json.loads(world.leslie("quarantine", "list", "--json").stdout)
    assert [item["path"] for item in kept] == [f".leslie/threads/{OTHER}/plan.md"]
    assert "quarantine: 1 entry" in world.leslie("status").stdout
    world.leslie("quarantine", "restore", f".leslie/threads/{OTHER}/plan.md")
    assert target.read_bytes() == before + b"sneaked\n"
    claude.mock.script.push(Reply(tool_calls=(ToolCall("Bash", {"command": "python3 -c pass",
                                                                 "description": "nothing"}),)),
                            Reply(text="done"))
    claude.prompt("run another")  # the agent's next shell call: the person's restore is left alone
    assert target.read_bytes() == before + b"sneaked\n"


def test_next_from_the_bash_tool_moves_the_session(claude: ClaudeSession, world: World) -> None:
    """An agent told to take the next thing runs `leslie next`: Claude Code tells the command its session
    (CLAUDE_CODE_SESSION_ID), so the claim is that session's, and its next prompt brings the new thread."""
    for env in (world.env, claude.env):
        env.pop("LESLIE_THREAD", None)  # which pins a session to its thread: here `leslie switch` chooses it
    world.leslie("switch", OWN)
    world.leslie("spawn", "--id", "thread-next", "--intent", "The next piece of work")
    world.leslie("done", OTHER)
    world.commit("a ready thread")
    claude.prompt("hello")
    session = next(c["payload"]["session_id"] for c in world.hook_calls()
                   if c["payload"].get("hook_event_name") == "UserPromptSubmit")
    claude.mock.script.push(Reply(tool_calls=(ToolCall("Bash", {"command": f"{LESLIE} next",
                                                                 "description": "take the next thing"}),)),
                            Reply(text="taken"))
    claude.prompt("take the next thing")
    rows = json.loads(world.leslie("who", "--json").stdout)
    mine = [(r["thread"], r["claimed"]) for r in rows if r["session"] == session]
    assert mine == [("thread-next", True)], rows
    claude.prompt("go on")
    assert any('<thread_context thread="thread-next"' in text
               for text in strings_in(claude.mock.main_requests()[-1].body))


def test_write_into_the_own_plan_is_allowed(claude: ClaudeSession, world: World) -> None:
    target = world.thread_file(OWN, "plan.md")
    claude.mock.script.push(Reply(tool_calls=(ToolCall("Write", {"file_path": str(target),
                                                                  "content": "# Plan\n\n1. do it\n"}),)),
                            Reply(text="done"))
    claude.prompt("write my plan")
    assert target.read_text() == "# Plan\n\n1. do it\n"
    assert not denials(world)


# -- the shared form (`leslie hooks install claude-code --shared`), for a repository a team commits ------------

def shared_claude(world: World, anthropic: MockModelServer, path: str) -> ClaudeSession:
    """Claude Code with leslie's shared hooks committed in .claude/settings.json, and `path` as its PATH."""
    world.leslie("hooks", "install", "claude-code", "--shared")
    world.commit("claude hooks, for the team")
    session = ClaudeSession(world, anthropic)
    session.env = {**session.env, "PATH": path}
    return session


def test_shared_hooks_run_the_leslie_on_path(world: World, anthropic: MockModelServer) -> None:
    # The logging wrapper first on PATH: the shared form finds it as `leslie`.
    claude = shared_claude(world, anthropic, f"{world.bin}:{world.env['PATH']}")
    target = world.thread_file(OTHER, "plan.md")
    before = target.read_bytes()
    claude.mock.script.push(Reply(tool_calls=(ToolCall("Write", {"file_path": str(target),
                                                                  "content": "overwritten\n"}),)),
                            Reply(text="done"))
    claude.prompt("write the other thread's plan")
    assert set(claude.turn_blocks()) == {1}  # the start's block, in each request of the turn
    assert_unchanged(target, before)
    assert [c["payload"]["tool_name"] for c in denials(world)] == ["Write"]


def test_shared_hooks_without_leslie_block_no_tool(world: World, anthropic: MockModelServer) -> None:
    # A teammate who has no leslie: the hooks say so on stderr and exit 0; every tool call goes ahead.
    without = [p for p in world.env["PATH"].split(":") if not (Path(p) / "leslie").exists()]
    claude = shared_claude(world, anthropic, ":".join(without))
    target = world.thread_file(OWN, "plan.md")
    claude.mock.script.push(Reply(tool_calls=(ToolCall("Write", {"file_path": str(target),
                                                                  "content": "# Plan\n"}),
                                              ToolCall("Bash", {"command": "echo ran > bash-ran.txt",
                                                                "description": "write"}))),
                            Reply(text="done"))
    run = claude.prompt("write my plan")
    assert run.code == 0
    assert target.read_text() == "# Plan\n" and (world.repo / "bash-ran.txt").read_text() == "ran\n"
    assert set(claude.turn_blocks()) == {0} and not world.hook_calls()


def test_the_hooks_run_in_the_warm_process(claude: ClaudeSession, world: World) -> None:
    """As users have it: the first command started the warm process, and the hooks' commands ran in it."""
    # The first command started it in the background; its start (Typer, Jinja2, lxml) takes a moment.
    deadline = time.monotonic() + 30
    while not (before := json.loads(world.leslie("warm", "--json").stdout))["running"]:
        assert time.monotonic() < deadline, before
        time.sleep(0.2)
    claude.prompt("hello")
    claude.prompt("again")
    after = json.loads(world.leslie("warm", "--json").stdout)
    hooks = [line for line in world.hook_log.read_text().splitlines() if line.strip()]
    assert after["pid"] == before["pid"]
    assert after["served"] - before["served"] >= len(hooks) >= 2  # every hook call (and `warm` itself)
    assert claude.turn_blocks() == [1]
