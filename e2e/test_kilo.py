"""Kilo Code 7.7.9 (opencode's fork) with leslie's plugin (`leslie hooks install kilo`), against the Chat
Completions mock. The plugin and the events are opencode's (e2e/test_opencode.py checks them one by one);
Kilo takes some 20 s per run, so its checks share sessions."""

from __future__ import annotations

import os

import pytest

from e2e.harness.checks import answer_of, assert_unchanged, tool_results_mention
from e2e.harness.plugin_clients import KILO, OpencodeSession
from e2e.harness.server import MockModelServer, Reply, ToolCall
from e2e.harness.world import NEEDLE, OTHER, World

pytestmark = [pytest.mark.opencode,
              pytest.mark.skipif(not os.path.exists(KILO), reason="Kilo (linux-x64 only) is not installed")]


def install(world: World) -> None:
    """leslie's plugin for Kilo, through the logging wrapper, committed."""
    world.leslie("hooks", "install", "kilo", "--executable", str(world.wrapper))
    world.commit("kilo plugin")


def test_start_unchanged_and_the_write_guard(world: World, chat: MockModelServer) -> None:
    install(world)
    kilo = OpencodeSession(world, chat, kilo=True)
    kilo.prompt("hello")
    assert kilo.turn_blocks() == [1]
    target = world.thread_file(OTHER, "plan.md")
    before = target.read_bytes()
    chat.script.push(Reply(tool_calls=(ToolCall("write", {"filePath": str(target), "content": "overwritten"}),)),
                     Reply(text="done"))
    kilo.prompt("overwrite the other thread's plan")
    assert kilo.turn_blocks() == [1, 1]  # the first block, kept by --continue; no second one
    assert_unchanged(target, before)
    assert [c["payload"]["tool"] for c in world.hook_calls() if "block" in answer_of(c)] == ["write"]
    assert tool_results_mention(chat.main_requests()[-1], f"belongs to thread {OTHER}")
    assert {c["argv"][-1] for c in world.hook_calls()} == {"kilo"}


def test_once_after_compaction(world: World, chat: MockModelServer) -> None:
    install(world)
    kilo = OpencodeSession(world, chat, context=20_000, kilo=True)
    chat.script.push(Reply(text="ok", input_tokens=19_500))
    kilo.prompt("hello")
    # Unlike opencode 1.18, Kilo 7.7.9 compacts at the start of the next run, after `chat.message` fired for
    # its prompt: that prompt goes to the model without the block (the summary of the conversation holds it),
    # and the block comes back with the prompt after.
    kilo.prompt("second")
    assert [r.turn for r in chat.of_kind("compact")] == [2]
    assert kilo.turn_blocks() == [0]
    kilo.prompt("third")
    assert kilo.turn_blocks() == [1]
    injected = [c for c in world.hook_calls() if NEEDLE in str(answer_of(c).get("context", ""))]
    assert len(injected) == 2
