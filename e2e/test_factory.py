"""Factory's droid 0.225.2 with leslie's hooks (`leslie hooks install factory`), against the Chat Completions mock.

What `droid exec` does here (one process per prompt, a custom model, no Factory login):
- `SessionStart` (`source: "startup"`) fires and its context reaches the model as written (not escaped);
- `UserPromptSubmit` never fires in `exec`, not even for the second prompt of a multi-turn `exec
  --input-format stream-json` (so a change after the start does not reach that conversation), and `exec -s
  <session>` (continue a session) exits 1 with no output without a Factory login: "once more after a change"
  and a compaction cannot be shown with the real client here;
- `PreToolUse` fires for `Create`, `Edit` and `Execute`, and leslie's denial stops the call.
droid calls api.factory.ai and telemetry.factory.ai on every run (refused by the proxy; the suite runs in a
network namespace with only loopback): those requests are the only ones this file allows the proxy to see.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import pytest

from e2e.harness.checks import answer_of, assert_unchanged, denials, tool_results_mention
from e2e.harness.droid import DROID, MODEL, DroidSession
from e2e.harness.server import MockModelServer, Reply, ToolCall, count_in
from e2e.harness.world import NEEDLE, OTHER, OWN, World

pytestmark = [pytest.mark.factory,
              pytest.mark.skipif(not __import__("os").path.exists(DROID), reason="droid is not installed")]

HOME_CALLS = ("api.factory.ai:443", "telemetry.factory.ai:443")  # droid's own calls home, refused


@pytest.fixture
def droid(world: World, chat: MockModelServer) -> Iterator[DroidSession]:
    """A droid session in the repository, leslie's hooks installed through the logging wrapper."""
    world.leslie("hooks", "install", "factory", "--executable", str(world.wrapper))
    world.commit("factory hooks")
    yield DroidSession(world, chat)
    # droid's calls home were refused; anything else that reached the proxy still fails the test.
    world.proxy.seen[:] = [entry for entry in world.proxy.seen if entry.get("host") not in HOME_CALLS]


def context_calls(world: World) -> list[dict[str, Any]]:
    return [call for call in world.hook_calls()
            if "<thread_context" in str(answer_of(call).get("hookSpecificOutput", {}).get("additionalContext", ""))]


def test_block_reaches_the_model_once_at_start(droid: DroidSession, world: World) -> None:
    droid.prompt("hello")
    assert droid.turn_blocks() == [1]
    assert [(call["payload"]["hook_event_name"], call["payload"]["source"])
            for call in context_calls(world)] == [("SessionStart", "startup")]
    assert not [call for call in world.hook_calls() if call["payload"]["hook_event_name"] == "UserPromptSubmit"]


def test_continuing_a_session_needs_a_factory_login(droid: DroidSession, world: World) -> None:
    """Why no check runs a second prompt in one conversation: `exec -s` fails here. Fails (and should be
    replaced by the checks after a change and after compaction) the day droid continues a session offline."""
    droid.prompt("hello")
    assert droid.session_id
    droid.check = False
    run = droid.prompt("again")
    assert run.code == 1 and not run.stdout.strip()


def test_a_change_misses_a_multi_turn_exec(droid: DroidSession, world: World) -> None:
    """Two prompts in one `droid exec --input-format stream-json` process: `UserPromptSubmit` does not fire for
    either, so the reference added between them never reaches the conversation (its start block stays). Fails
    (and should become the "once more after a change" check) the day droid fires it there."""
    env = {**world.env, **droid.env}
    proc = subprocess.Popen([DROID, "exec", "--auto", "high", "-m", f"custom:{MODEL}", "--input-format",
                             "stream-json", "--output-format", "stream-json"], cwd=world.repo, env=env,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdin is not None
    proc.stdin.write(json.dumps({"role": "user", "content": "hello"}) + "\n")
    proc.stdin.flush()
    deadline = time.time() + 60
    while len(droid.mock.main_requests()) < 1 and time.time() < deadline:
        time.sleep(0.2)
    time.sleep(2)  # the first turn's Stop
    world.leslie("spawn", "--id", "thread-third", "--intent", "A third thread")
    world.leslie("reference", "--target", "thread-third")
    proc.stdin.write(json.dumps({"role": "user", "content": "again"}) + "\n")
    proc.communicate(timeout=120)
    requests = droid.mock.main_requests()
    assert len(requests) == 2 and [droid.blocks(r) for r in requests] == [1, 1]
    assert '<ref thread="thread-third" ' not in str(requests[-1].body)
    assert [call["payload"]["hook_event_name"] for call in world.hook_calls()] == ["SessionStart", "Stop", "Stop"]


def test_create_into_the_referenced_thread_is_denied(droid: DroidSession, world: World) -> None:
    target = world.thread_file(OTHER, "plan.md")
    before = target.read_bytes()
    droid.mock.script.push(Reply(tool_calls=(ToolCall("Create", {"file_path": str(target), "content": "x"}),)),
                           Reply(text="done"))
    droid.prompt("overwrite the other thread's plan")
    assert_unchanged(target, before)
    assert [call["payload"]["tool_name"] for call in denials(world)] == ["Create"]
    assert tool_results_mention(droid.mock.main_requests()[-1], f"belongs to thread {OTHER}")


def test_edit_into_the_referenced_thread_is_denied(droid: DroidSession, world: World) -> None:
    target = world.thread_file(OTHER, "plan.md")
    before = target.read_bytes()
    droid.mock.script.push(Reply(tool_calls=(ToolCall("Edit", {"file_path": str(target), "old_str": "# Plan",
                                                               "new_str": "# Mine"}),)),
                           Reply(text="done"))
    droid.prompt("edit the other thread's plan")
    assert_unchanged(target, before)
    assert [call["payload"]["tool_name"] for call in denials(world)] == ["Edit"]


def test_execute_into_the_referenced_thread_is_denied(droid: DroidSession, world: World) -> None:
    target = world.thread_file(OTHER, "plan.md")
    before = target.read_bytes()
    droid.mock.script.push(Reply(tool_calls=(ToolCall("Execute", {
        "command": f"echo overwritten >> {target}", "riskLevelReason": "appends to a file", "riskLevel": "low"}),)),
                           Reply(text="done"))
    droid.prompt("append to the other thread's plan")
    assert_unchanged(target, before)
    assert [call["payload"]["tool_name"] for call in denials(world)] == ["Execute"]


def test_a_new_file_in_the_own_thread_is_allowed(droid: DroidSession, world: World) -> None:
    target = world.thread_file(OWN, "design/notes.md")
    droid.mock.script.push(Reply(tool_calls=(ToolCall("Create", {"file_path": str(target),
                                                                 "content": "# Notes\n"}),)),
                           Reply(text="done"))
    droid.prompt("write my notes")
    assert target.read_text() == "# Notes\n"
    assert not denials(world)
    assert count_in(droid.mock.main_requests()[0].body, NEEDLE) == 1
