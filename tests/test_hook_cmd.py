"""cli/hook_cmd.py: what an agent runs (hook, inject, check-write) as Typer commands; `leslie inject` end to end."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import run_leslie
from leslie.ops.threads import spawn
from leslie.store.repository import Repository

THREAD = "thread-fast"


@pytest.fixture
def root(repo: Repository) -> Path:
    spawn(repo, "Fast path", thread_id=THREAD)
    return repo.root


def prompt_payload(root: Path, session: str = "s1") -> str:
    return json.dumps({"session_id": session, "transcript_path": None, "cwd": str(root),
                       "hook_event_name": "UserPromptSubmit", "prompt": "hi"})


@pytest.mark.parametrize("command", ["hook", "inject", "check-write"])
def test_help(root: Path, command: str) -> None:
    result = run_leslie(command, "--help", cwd=root)
    assert result.code == 0 and f"Usage: leslie {command}" in result.stdout


# -- leslie inject ----------------------------------------------------------------------------------------
def test_inject_prints_the_context_then_the_message(root: Path) -> None:
    first = run_leslie("inject", "--thread", THREAD, "--message", "Fix the bug", cwd=root)
    assert first.code == 0 and first.stderr == ""
    block, _, rest = first.stdout.partition("</thread_context>\n")
    assert block.startswith(f'<thread_context thread="{THREAD}"') and rest == "\nFix the bug\n"
    second = run_leslie("inject", "--thread", THREAD, "--message", "Now the tests", cwd=root)
    assert (second.code, second.stdout) == (0, "Now the tests\n")
    silent = run_leslie("inject", "--thread", THREAD, cwd=root)
    assert (silent.code, silent.stdout) == (0, "")


def test_inject_message_from_stdin_sessions_and_compaction(root: Path) -> None:
    run_leslie("inject", "--thread", THREAD, "--session", "w1", cwd=root)
    piped = run_leslie("inject", "--thread", THREAD, "--session", "w1", "--message", "-", cwd=root,
                       input="line one\nline two\n")
    assert piped.stdout == "line one\nline two\n"
    compacted = run_leslie("inject", "--thread", THREAD, "--session", "w1", "--compacted", "--message", "m",
                           cwd=root)
    assert compacted.stdout.startswith("<thread_context") and compacted.stdout.endswith("\n\nm\n")
    other_session = run_leslie("inject", "--session=w2", "--message=x", cwd=root, env={"LESLIE_THREAD": THREAD})
    assert other_session.stdout.startswith("<thread_context")
    env_session = run_leslie("inject", "--message", "x", cwd=root,
                             env={"LESLIE_THREAD": THREAD, "LESLIE_SESSION": "w2"})
    assert env_session.stdout == "x\n"


def test_inject_usage(root: Path) -> None:
    run_leslie("inject", "--thread", THREAD, "--usage", "10000/200000", cwd=root)
    assert run_leslie("inject", "--thread", THREAD, "--usage", "100000/200000", cwd=root).stdout == ""
    full = run_leslie("inject", "--thread", THREAD, "--usage", "185000/200000", cwd=root)
    assert full.stdout.startswith("<thread_context")
    dropped = run_leslie("inject", "--thread", THREAD, "--usage", "0/200000", cwd=root)
    assert dropped.stdout.startswith("<thread_context")


@pytest.mark.parametrize(("args", "said"), [
    (["--usage", "lots"], "leslie: error: --usage must be USED/SIZE"), (["--usage", "5/0"], "leslie: error:"),
    (["--usage", "-1/9"], "leslie: error:"), (["--thread", "nope"], "leslie: error: invalid thread ID"),
    (["--agent", "Bad Agent"], "leslie: error:"),
    # what does not parse is Typer's usage error
    (["--bogus"], "No such option: --bogus"), (["stray"], "unexpected extra argument"),
    (["--message"], "requires an argument"),
])
def test_inject_usage_errors(root: Path, args: list[str], said: str) -> None:
    result = run_leslie("inject", *args, cwd=root)
    assert result.code == 2 and result.stdout == "" and said in result.stderr


def test_hook_arguments(root: Path) -> None:
    """`leslie hook AGENT`, `leslie hook copilot EVENT`: other forms are usage errors (exit 2, nothing on
    stdout); an agent leslie does not know is a warning (exit 0), as any other failure of a hook."""
    for args in (["claude-code", "userPromptSubmitted"], [], ["--bogus", "claude-code"], ["copilot"]):
        result = run_leslie("hook", *args, cwd=root, input=prompt_payload(root))
        assert (result.code, result.stdout) == (2, ""), args
    unknown = run_leslie("hook", "cursor", cwd=root, input=prompt_payload(root))
    assert (unknown.code, unknown.stdout) == (0, "") and "leslie: warning: unknown agent 'cursor'" in unknown.stderr
    garbage = run_leslie("hook", "gemini", cwd=root, input="not json")
    assert (garbage.code, garbage.stdout) == (0, "{}\n") and "not JSON" in garbage.stderr


def test_inject_keeps_the_message_when_leslie_cannot_help(root: Path, tmp_path: Path) -> None:
    outside = run_leslie("inject", "--message", "hello", cwd=tmp_path, env={"LESLIE_THREAD": THREAD})
    assert (outside.code, outside.stdout) == (0, "hello\n") and "no .leslie" in outside.stderr
    no_thread = run_leslie("inject", "--message", "hello", cwd=root)
    assert (no_thread.code, no_thread.stdout) == (0, "hello\n") and "no current thread" in no_thread.stderr
    missing = run_leslie("inject", "--thread", "thread-gone", "--message", "hello", cwd=root)
    assert (missing.code, missing.stdout) == (0, "hello\n") and "thread-gone" in missing.stderr


def test_global_options_before_the_command(root: Path, tmp_path: Path) -> None:
    result = run_leslie("--root", str(root), "inject", "--thread", THREAD, "--message", "hi", cwd=tmp_path)
    assert result.code == 0 and result.stdout.startswith("<thread_context") and result.stdout.endswith("\nhi\n")
    check = run_leslie("--root", str(root), "check-write", f"{root}/.leslie/threads/thread-x/a", "--thread",
                       THREAD, cwd=tmp_path)
    assert check.code == 1
    hooked = run_leslie("--root", str(root), "hook", "claude-code", cwd=tmp_path,
                        input=json.dumps({"session_id": "g", "cwd": str(tmp_path),
                                          "hook_event_name": "UserPromptSubmit", "prompt": "p"}),
                        env={"LESLIE_THREAD": THREAD})
    assert hooked.code == 0 and "additionalContext" in hooked.stdout


def test_sessions_and_stats_commands(root: Path) -> None:
    for text in ("a", "b", "c"):
        run_leslie("inject", "--thread", THREAD, "--session", "cli", "--message", text, cwd=root)
    listed = run_leslie("sessions", "--json", cwd=root)
    assert listed.code == 0
    [row] = json.loads(listed.stdout)
    assert (row["agent"], row["session_id"], row["thread"], row["rounds"]) == ("inject", "cli", THREAD, 3)
    assert json.loads(run_leslie("sessions", "--thread", "thread-other", "--json", cwd=root).stdout) == []
    human = run_leslie("sessions", cwd=root)
    assert human.code == 0 and "cli" in human.stdout
    stats = json.loads(run_leslie("stats", "--json", cwd=root).stdout)
    assert stats["rounds"] == 3 and stats["injections"] == {"start": 1}
    assert stats["always_tokens"] == 3 * stats["tokens_injected"] > 0
    text = run_leslie("stats", "--thread", THREAD, cwd=root)
    assert text.code == 0 and "injections: 1 (start 1)" in text.stdout


def test_a_reader_that_goes_away_is_no_error(root: Path) -> None:
    """`leslie inject ... | head -1`: a broken pipe ends quietly, without a traceback."""
    proc = subprocess.Popen(["sh", "-c", f"leslie inject --thread {THREAD} --message - | head -1 >/dev/null; "
                             "echo ${PIPESTATUS:-}"], cwd=root, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env={**os.environ, "PATH": f"{Path(sys.executable).parent}:"
                                                         f"{os.environ['PATH']}"})
    _out, err = proc.communicate(("x" * 100 + "\n").encode() * 20_000, timeout=60)
    assert proc.returncode == 0
    assert b"Traceback" not in err and b"BrokenPipe" not in err, err
