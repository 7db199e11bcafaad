"""Codex CLI 0.169.0 with leslie's hooks (`leslie hooks install codex`), against the OpenAI Responses mock.

Codex runs a project's hooks only once each is trusted by hash; the fixture trusts them the way `/hooks` does
(the hashes `codex app-server` reports, written into $CODEX_HOME/config.toml's hook state).
"""

from __future__ import annotations

import pytest

from e2e.harness.checks import assert_unchanged, context_answers, denials, last_block, tool_results_mention
from e2e.harness.clients import CodexSession, codex_config, codex_env, codex_hooks
from e2e.harness.server import MockModelServer, Reply, ToolCall
from e2e.harness.world import OTHER, OWN, World

pytestmark = pytest.mark.codex


@pytest.fixture
def codex(world: World, openai: MockModelServer) -> CodexSession:
    """A Codex session in the repository, leslie's hooks installed (through the logging wrapper) and trusted."""
    world.leslie("hooks", "install", "codex", "--executable", str(world.wrapper))
    world.commit("codex hooks")
    session = CodexSession(world, openai)
    hooks = session.trust_hooks()
    assert {h["eventName"] for h in hooks} == {"sessionStart", "userPromptSubmit", "postCompact", "preToolUse",
                                               "postToolUse", "stop"}
    return session


def test_block_reaches_the_model_once_at_start(codex: CodexSession, world: World) -> None:
    codex.prompt("hello")
    assert codex.turn_blocks() == [1]
    events = [(c["payload"].get("hook_event_name"), c["payload"].get("source")) for c in context_answers(world)]
    assert events == [("SessionStart", "startup")]


def test_nothing_more_on_an_unchanged_turn(codex: CodexSession, world: World) -> None:
    codex.prompt("hello")
    codex.prompt("again")
    assert codex.turn_blocks() == [1]
    assert len(context_answers(world)) == 1


def test_once_more_after_a_change(codex: CodexSession, world: World) -> None:
    codex.prompt("hello")
    world.leslie("spawn", "--id", "thread-third", "--intent", "A third thread")
    world.leslie("reference", "--target", "thread-third")
    codex.prompt("again")
    assert codex.turn_blocks() == [2]
    assert '<ref thread="thread-third" ' in last_block(codex.mock.main_requests(codex.mock.turn)[-1])
    codex.prompt("and again")
    assert codex.turn_blocks() == [2]


@pytest.mark.skip(reason="codex exec has no /compact (it is a TUI command); automatic compaction is checked")
def test_once_after_manual_compaction() -> None:
    """Placeholder so the report lists the check."""


def test_once_after_automatic_compaction(codex: CodexSession, openai: MockModelServer, world: World) -> None:
    openai.script.usage = 250_000  # of gpt-5.5's 272k window: Codex compacts before the next turn
    codex.prompt("hello")
    openai.script.usage = None
    codex.prompt("after the compaction")
    assert [r.turn for r in openai.of_kind("compact")] == [2]
    assert codex.turn_blocks() == [1]


@pytest.mark.skip(reason="codex exec has no /clear (it is a TUI command)")
def test_once_after_clear() -> None:
    """Placeholder so the report lists the check."""


def test_patch_into_the_referenced_thread_is_denied(codex: CodexSession, world: World) -> None:
    target = world.thread_file(OTHER, "plan.md")
    before = target.read_bytes()
    first_line = before.decode().splitlines()[0]
    patch = (f"*** Begin Patch\n*** Update File: {target}\n@@\n-{first_line}\n+# overwritten\n*** End Patch\n")
    codex.mock.script.push(Reply(tool_calls=(ToolCall("apply_patch", {}, kind="custom", text_input=patch),)),
                           Reply(text="done"))
    codex.prompt("patch the other thread's plan")
    assert_unchanged(target, before)
    assert [c["payload"]["tool_name"] for c in denials(world)] == ["apply_patch"]
    assert tool_results_mention(codex.mock.main_requests()[-1], f"belongs to thread {OTHER}")


def test_shell_write_into_the_referenced_thread_is_denied(codex: CodexSession, world: World) -> None:
    target = world.thread_file(OTHER, "plan.md")
    before = target.read_bytes()
    codex.mock.script.push(Reply(tool_calls=(ToolCall("exec_command", {"cmd": f"echo overwritten >> {target}"}),)),
                           Reply(text="done"))
    codex.prompt("append to the other thread's plan")
    assert_unchanged(target, before)
    assert [c["payload"]["tool_name"] for c in denials(world)] == ["Bash"]
    assert tool_results_mention(codex.mock.main_requests()[-1], f"belongs to thread {OTHER}")


def test_write_into_the_own_plan_is_allowed(codex: CodexSession, world: World) -> None:
    target = world.thread_file(OWN, "plan.md")
    first_line = target.read_text().splitlines()[0]
    patch = f"*** Begin Patch\n*** Update File: {target}\n@@\n-{first_line}\n+# Plan: do it\n*** End Patch\n"
    codex.mock.script.push(Reply(tool_calls=(ToolCall("apply_patch", {}, kind="custom", text_input=patch),)),
                           Reply(text="done"))
    codex.prompt("write my plan")
    assert target.read_text().splitlines()[0] == "# Plan: do it"
    assert not denials(world)


def test_a_long_block_arrives_whole(world: World, openai: MockModelServer) -> None:
    for n in range(41):
        world.leslie("spawn", "--id", f"thread-ref{n:02d}", "--intent", f"Referenced thread {n}")
        world.leslie("reference", "--target", f"thread-ref{n:02d}")
    world.leslie("hooks", "install", "codex", "--executable", str(world.wrapper))
    world.commit("41 references, codex hooks")
    codex = CodexSession(world, openai)
    codex.trust_hooks()
    codex.prompt("hello")
    block = last_block(codex.mock.main_requests()[-1])
    missing = [n for n in range(41) if f'<ref thread="thread-ref{n:02d}" ' not in block]
    assert not missing, f"{len(missing)} of 41 references did not reach the model: {missing}"


def test_install_says_the_hooks_must_be_trusted(world: World, openai: MockModelServer) -> None:
    codex_config(world, openai)
    installed = world.leslie("hooks", "install", "codex", "--executable", str(world.wrapper))
    hooks = codex_hooks(world, codex_env(world))
    assert {h["trustStatus"] for h in hooks} == {"untrusted"}  # what Codex will do: skip them
    said = (installed.stdout + installed.stderr).lower()
    assert "trust" in said, f"install said nothing of the trust Codex needs: {said!r}"
