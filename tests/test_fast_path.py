"""The fast commands (hook, inject, check-write): what they import, and `leslie inject` end to end."""

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
FORBIDDEN = ("typer", "rich", "jinja2", "lxml", "watchdog", "filelock")
# Not required by the SPEC, but what keeps the no-injection hook within two interpreter starts (SPEC §10).
ALSO_AVOIDED = ("typing", "dataclasses", "pathlib", "argparse", "subprocess", "socket", "tomllib", "hashlib",
                "leslie.store.repository", "leslie.context.block")
# A prompt that injects nothing does not even import `json` or `re` (`leslie.store.cjson`; the `leslie` command
# is a script of our own, scripts/leslie): together about three quarters of a bare start.
PROMPT_PATH_AVOIDS = ("re", "json", "enum")


@pytest.fixture
def root(repo: Repository) -> Path:
    spawn(repo, "Fast path", thread_id=THREAD)
    return repo.root


def modules_after(root: Path, args: list[str], stdin: str = "", env: dict[str, str] | None = None) -> list[str]:
    """Run `leslie ARGS` in a child interpreter; the modules imported by the end of it."""
    code = ("import sys\nfrom leslie.__main__ import main\ncode = main(sys.argv[1:])\n"
            "sys.stdout.flush()\nprint('\\nMODULES', sorted(sys.modules), code)\n")
    proc = subprocess.run([sys.executable, "-c", code, *args], cwd=root, input=stdin, capture_output=True,
                          text=True, env={**os.environ, "LESLIE_THREAD": THREAD, **(env or {})}, check=True)
    marker = proc.stdout.rindex("\nMODULES ")
    names, _, _code = proc.stdout[marker + len("\nMODULES "):].strip().rpartition(" ")
    return [m.strip("'") for m in names.strip("[]").split(", ")]


def prompt_payload(root: Path, session: str = "s1") -> str:
    return json.dumps({"session_id": session, "transcript_path": None, "cwd": str(root),
                       "hook_event_name": "UserPromptSubmit", "prompt": "hi"})


def test_the_no_injection_hook_imports_nothing_heavy(root: Path) -> None:
    run_leslie("hook", "claude-code", cwd=root, input=prompt_payload(root), env={"LESLIE_THREAD": THREAD})
    loaded = modules_after(root, ["hook", "claude-code"], prompt_payload(root))
    assert "leslie.inject.injector" in loaded  # it really ran the policy
    assert [m for m in (*FORBIDDEN, *ALSO_AVOIDED, *PROMPT_PATH_AVOIDS) if m in loaded] == []


def test_the_installed_command_imports_no_re_for_a_quiet_prompt(root: Path) -> None:
    """The real `leslie` executable, as an agent runs it: pip's generated console script imported `re`."""
    run_leslie("hook", "claude-code", cwd=root, input=prompt_payload(root), env={"LESLIE_THREAD": THREAD})
    proc = subprocess.run([str(Path(sys.executable).with_name("leslie")), "hook", "claude-code"], cwd=root,
                          input=prompt_payload(root), capture_output=True, text=True, check=True,
                          env={**os.environ, "LESLIE_THREAD": THREAD, "PYTHONPROFILEIMPORTTIME": "1"})
    imported = {line.rpartition("|")[2].strip() for line in proc.stderr.splitlines() if line.startswith("import time")}
    assert "leslie.inject.injector" in imported and proc.stdout == ""
    assert [m for m in PROMPT_PATH_AVOIDS if m in imported] == []


def test_the_guard_imports_nothing_heavy(root: Path) -> None:
    payload = json.dumps({"session_id": "s1", "cwd": str(root), "hook_event_name": "PreToolUse",
                          "tool_name": "Write", "tool_input": {"file_path": str(root / "x.py")}})
    loaded = modules_after(root, ["hook", "claude-code"], payload)
    assert [m for m in (*FORBIDDEN, *ALSO_AVOIDED) if m in loaded] == []
    loaded = modules_after(root, ["check-write", "src/x.py", "--thread", THREAD])
    assert [m for m in (*FORBIDDEN, *ALSO_AVOIDED) if m in loaded] == []


def test_gemini_s_hook_imports_nothing_heavy(root: Path) -> None:
    transcript = root / "session.jsonl"
    transcript.write_text(json.dumps({"type": "gemini", "tokens": {"input": 1000}}) + "\n")
    base = {"session_id": "g1", "transcript_path": str(transcript), "cwd": str(root)}
    before_agent = json.dumps({**base, "hook_event_name": "BeforeAgent", "prompt": "hi"})
    run_leslie("hook", "gemini", cwd=root, input=before_agent, env={"LESLIE_THREAD": THREAD})
    for payload in (before_agent, json.dumps({**base, "hook_event_name": "PreCompress", "trigger": "auto"}),
                    json.dumps({**base, "hook_event_name": "BeforeTool", "tool_name": "write_file",
                                "tool_input": {"file_path": str(root / "x.py"), "content": "x"}})):
        loaded = modules_after(root, ["hook", "gemini"], payload)
        assert "leslie.integrations.gemini" in loaded
        assert [m for m in (*FORBIDDEN, *ALSO_AVOIDED) if m in loaded] == []
        if "BeforeAgent" in payload:
            assert [m for m in PROMPT_PATH_AVOIDS if m in loaded] == []
def test_copilot_and_qwen_hooks_import_nothing_heavy(root: Path) -> None:
    copilot_prompt = json.dumps({"sessionId": "c1", "timestamp": 1, "cwd": str(root), "prompt": "hi"})
    qwen_prompt = json.dumps({"session_id": "q1", "cwd": str(root), "hook_event_name": "UserPromptSubmit",
                              "prompt": "hi", "submitted_prompt": "hi"})
    run_leslie("hook", "copilot", "userPromptSubmitted", cwd=root, input=copilot_prompt,
               env={"LESLIE_THREAD": THREAD})
    run_leslie("hook", "qwen", cwd=root, input=qwen_prompt, env={"LESLIE_THREAD": THREAD})
    copilot_write = json.dumps({"sessionId": "c1", "timestamp": 1, "cwd": str(root), "toolName": "create",
                                "toolArgs": {"path": str(root / "x.py"), "file_text": "x"}})
    qwen_write = json.dumps({"session_id": "q1", "cwd": str(root), "hook_event_name": "PreToolUse",
                             "tool_name": "write_file", "tool_input": {"file_path": str(root / "x.py")}})
    for args, payload in ((["hook", "copilot", "userPromptSubmitted"], copilot_prompt),
                          (["hook", "qwen"], qwen_prompt), (["hook", "copilot", "preToolUse"], copilot_write),
                          (["hook", "qwen"], qwen_write)):
        loaded = modules_after(root, args, payload)
        assert [m for m in (*FORBIDDEN, *ALSO_AVOIDED) if m in loaded] == [], args


def test_a_cached_injection_imports_neither_jinja2_nor_lxml(root: Path) -> None:
    run_leslie("hook", "claude-code", cwd=root, input=prompt_payload(root, "warm"), env={"LESLIE_THREAD": THREAD})
    loaded = modules_after(root, ["hook", "claude-code"], prompt_payload(root, "new-session"))
    assert [m for m in FORBIDDEN if m in loaded] == []


def test_inject_without_injection_imports_nothing_heavy(root: Path) -> None:
    run_leslie("inject", "--thread", THREAD, cwd=root)
    loaded = modules_after(root, ["inject", "--thread", THREAD, "--message", "hi"])
    assert [m for m in (*FORBIDDEN, *ALSO_AVOIDED) if m in loaded] == []


@pytest.mark.parametrize("command", ["hook", "inject", "check-write"])
def test_help_goes_to_typer(root: Path, command: str) -> None:
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


@pytest.mark.parametrize("args", [["--usage", "lots"], ["--usage", "5/0"], ["--usage", "-1/9"],
                                  ["--thread", "nope"], ["--bogus"], ["stray"], ["--message"],
                                  ["--agent", "Bad Agent"]])
def test_inject_usage_errors(root: Path, args: list[str]) -> None:
    result = run_leslie("inject", *args, cwd=root)
    assert result.code == 2 and result.stdout == "" and "leslie: error:" in result.stderr


def test_inject_keeps_the_message_when_leslie_cannot_help(root: Path, tmp_path: Path) -> None:
    outside = run_leslie("inject", "--message", "hello", cwd=tmp_path, env={"LESLIE_THREAD": THREAD})
    assert (outside.code, outside.stdout) == (0, "hello\n") and "no .leslie" in outside.stderr
    no_thread = run_leslie("inject", "--message", "hello", cwd=root)
    assert (no_thread.code, no_thread.stdout) == (0, "hello\n") and "no current thread" in no_thread.stderr
    missing = run_leslie("inject", "--thread", "thread-gone", "--message", "hello", cwd=root)
    assert (missing.code, missing.stdout) == (0, "hello\n") and "thread-gone" in missing.stderr


def test_global_options_before_a_fast_command_go_through_typer(root: Path, tmp_path: Path) -> None:
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
