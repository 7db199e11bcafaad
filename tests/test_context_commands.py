"""context_commands.py: parallel runs, timeouts, caps; then through the hook, behind the `leslie trust` gate."""

from __future__ import annotations

import json
import time
from pathlib import Path

from lxml import etree

from conftest import run_leslie
from leslie.context import commands as cc
from leslie.ops.threads import spawn
from leslie.store.repository import Repository


def spec(name: str, command: str, *, dynamic: bool = False, timeout: float = 5.0) -> dict[str, object]:
    return {"name": name, "command": command, "dynamic": dynamic, "timeout": timeout}


# -- running ----------------------------------------------------------------------------------------------
def test_commands_run_in_parallel_and_keep_their_order(tmp_path: Path) -> None:
    began = time.monotonic()
    outputs = cc.run_commands(str(tmp_path), [spec(f"c{i}", f"sleep 0.6; echo {i}") for i in range(4)])
    assert time.monotonic() - began < 2.0  # 4 x 0.6 s one after the other would take 2.4 s
    assert [(o.name, o.exit_code, o.output, o.error) for o in outputs] == [
        (f"c{i}", 0, f"{i}\n", None) for i in range(4)]


def test_exit_status_stderr_and_working_directory(tmp_path: Path) -> None:
    (tmp_path / "marker").write_text("here")
    [out] = cc.run_commands(str(tmp_path), [spec("x", "cat marker; echo oops >&2; exit 3")])
    assert out.exit_code == 3 and out.error is None
    assert out.output == "hereoops\n"


def test_a_timeout_kills_the_whole_group_and_reports_it(tmp_path: Path) -> None:
    began = time.monotonic()
    [out] = cc.run_commands(str(tmp_path), [spec("slow", "echo early; sleep 30 & sleep 30; echo late",
                                                 timeout=0.5)])
    assert time.monotonic() - began < 5
    assert out.exit_code is None and out.error == "timed out after 0.5 s"
    assert out.output == "early\n"


def test_output_is_capped_with_a_note(tmp_path: Path) -> None:
    [out] = cc.run_commands(str(tmp_path), [spec("big", "head -c 100000 /dev/zero | tr '\\0' a")], cap=1000)
    assert out.output.startswith("a" * 1000)
    assert out.output.endswith("\n[output truncated: 99000 more bytes]")


def test_undecodable_output_is_replaced(tmp_path: Path) -> None:
    [out] = cc.run_commands(str(tmp_path), [spec("bin", "printf 'ok\\377\\n'")])
    assert out.output == "ok\ufffd\n"


def test_a_command_that_cannot_start(tmp_path: Path) -> None:
    [out] = cc.run_commands(str(tmp_path / "missing-folder"), [spec("x", "echo hi")])
    assert out.exit_code is None and out.error is not None and "could not start" in out.error


def test_outputs_round_trip_through_json(tmp_path: Path) -> None:
    outputs = cc.run_commands(str(tmp_path), [spec("a", "echo a"), spec("b", "exit 1")])
    assert cc.outputs_from_json(json.loads(json.dumps(cc.outputs_to_json(outputs)))) == outputs
    assert cc.outputs_from_json("garbage") == []


# -- through the CLI and the hook -----------------------------------------------------------------------------
CONFIG = """
[[context.commands]]
name = "Static <one>"
command = "echo run >> static-runs.txt; printf 'static & <b>'"

[[context.commands]]
name = "Dynamic"
command = "echo run >> dynamic-runs.txt; wc -l < dynamic-runs.txt"
dynamic = true

[[context.commands]]
name = "Broken"
command = "exit 7"
timeout = 2
"""


def prompt(root: Path, session: str, thread: str) -> tuple[str | None, str]:
    payload = {"session_id": session, "transcript_path": None, "cwd": str(root),
               "hook_event_name": "UserPromptSubmit", "prompt": "go"}
    result = run_leslie("hook", "claude-code", cwd=root, input=json.dumps(payload), env={"LESLIE_THREAD": thread})
    assert result.code == 0
    if not result.stdout:
        return None, result.stderr
    return json.loads(result.stdout)["hookSpecificOutput"]["additionalContext"], result.stderr


def commands_of(xml: str) -> list[tuple[str | None, str | None, str]]:
    root = etree.fromstring(xml.encode())
    return [(c.get("name"), c.get("exit"), c.text or "") for c in root.iter("command")]


def test_commands_need_trust_then_run_static_once_and_dynamic_each_time(repo: Repository) -> None:
    thread = spawn(repo, "Commands", thread_id="thread-cmd").thread.id
    root = repo.root
    (root / ".leslie" / "config.toml").write_text(CONFIG)

    untrusted, warning = prompt(root, "s1", thread)
    assert untrusted is not None and "<command" not in untrusted
    assert warning.count("\n") == 1 and "leslie trust" in warning
    assert not (root / "static-runs.txt").exists()

    check = run_leslie("trust", "--check", cwd=root)
    assert check.code == 1 and "NOT approved" in check.stdout
    approved = run_leslie("trust", "--yes", cwd=root)
    assert approved.code == 0 and "Dynamic" in approved.stdout
    assert run_leslie("trust", "--check", cwd=root).code == 0

    first, warning = prompt(root, "s2", thread)
    assert first is not None and warning == ""
    assert commands_of(first) == [("Static <one>", "0", "static & <b>"), ("Dynamic", "0", "1\n"),
                                  ("Broken", "7", "")]
    run_leslie("reference", "--thread", thread, "--target", spawn(repo, "Other").thread.id, cwd=root)
    second, _ = prompt(root, "s2", thread)  # the context changed: injected again
    assert second is not None
    assert commands_of(second)[:2] == [("Static <one>", "0", "static & <b>"), ("Dynamic", "0", "2\n")]
    assert (root / "static-runs.txt").read_text() == "run\n"  # frozen for the session
    assert (root / "dynamic-runs.txt").read_text() == "run\nrun\n"

    third, _ = prompt(root, "s3", thread)  # a new session runs the static commands again
    assert third is not None and (root / "static-runs.txt").read_text() == "run\nrun\n"

    assert run_leslie("trust", "--revoke", cwd=root).code == 0
    fourth, warning = prompt(root, "s4", thread)
    assert fourth is not None and "<command" not in fourth and "leslie trust" in warning


def test_a_slow_command_never_blocks_the_injection(repo: Repository) -> None:
    thread = spawn(repo, "Slow", thread_id="thread-slow").thread.id
    (repo.root / ".leslie" / "config.toml").write_text(
        "[[context.commands]]\nname = 'slow'\ncommand = 'sleep 20'\ntimeout = 0.5\n")
    assert run_leslie("trust", "--yes", cwd=repo.root).code == 0
    began = time.monotonic()
    block, _ = prompt(repo.root, "s1", thread)
    assert time.monotonic() - began < 10
    assert block is not None and commands_of(block) == [("slow", None, "")]
    assert 'error="timed out after 0.5 s"' in block


def test_trust_without_commands(repo_root: Path) -> None:
    result = run_leslie("trust", cwd=repo_root)
    assert result.code == 0 and "nothing to approve" in result.stdout
    assert run_leslie("trust", "--check", cwd=repo_root).code == 0
    assert json.loads(run_leslie("trust", "--check", "--json", cwd=repo_root).stdout)["approved"] is True
