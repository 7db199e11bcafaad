"""`leslie hook gemini` and `leslie hooks install gemini` through the real executable, with Gemini CLI 0.61.0's
real hook payloads (captured from the real CLI by the end-to-end suite) and transcript lines.
"""

from __future__ import annotations

import html
import json
import os
from pathlib import Path
from typing import Any

import pytest
from lxml import etree

from conftest import LESLIE_EXE, Result, run_leslie
from leslie.ops.threads import reference, spawn
from leslie.store import sessions
from leslie.store.repository import Repository

THREAD = "thread-gm"
OTHER = "thread-ref"
SESSION = "7f4ed334-39d7-448b-b086-08b181551801"


@pytest.fixture
def root(repo: Repository) -> Path:
    spawn(repo, "Gemini's thread", thread_id=THREAD)
    spawn(repo, "Referenced thread", thread_id=OTHER)
    reference(repo, THREAD, OTHER, ["plan.md"])
    # Text in the block that holds `&` and `<` (escaped by leslie as `&amp;`, `&lt;`): a context command's output.
    (repo.root / ".leslie" / "config.toml").write_text(
        "[[context.commands]]\nname = \"Status\"\ncommand = \"printf 'A & B <fast>'\"\n")
    assert run_leslie("trust", "--yes", cwd=repo.root).code == 0
    return repo.root


def base(root: Path, event: str, session: str = SESSION) -> dict[str, Any]:
    return {"session_id": session, "transcript_path": str(root / "session-2026-11-23T19-48-7f4ed334.jsonl"),
            "cwd": str(root), "hook_event_name": event, "timestamp": "2026-11-23T19:48:13.666Z"}


def session_start(root: Path, source: str, **kw: Any) -> dict[str, Any]:
    return {**base(root, "SessionStart", **kw), "source": source}


def prompt(root: Path, text: str = "Fix the login bug", **kw: Any) -> dict[str, Any]:
    return {**base(root, "BeforeAgent", **kw), "prompt": text}


def pre_compress(root: Path, **kw: Any) -> dict[str, Any]:
    return {**base(root, "PreCompress", **kw), "trigger": "auto"}


def tool(root: Path, name: str, tool_input: dict[str, Any], event: str = "BeforeTool") -> dict[str, Any]:
    return {**base(root, event), "tool_name": name, "tool_input": tool_input}


def hook(root: Path, payload: dict[str, Any] | str, env: dict[str, str] | None = None) -> Result:
    text = payload if isinstance(payload, str) else json.dumps(payload)
    result = run_leslie("hook", "gemini", cwd=root, input=text, env={"LESLIE_THREAD": THREAD} if env is None else env)
    assert result.code == 0, result.stderr
    return result


def answer(result: Result) -> dict[str, Any]:
    document = json.loads(result.stdout)  # always one JSON object: Gemini reads stderr when stdout is empty
    assert isinstance(document, dict)
    return document


def as_the_model_reads_it(result: Result) -> str:
    """The block, as Gemini hands it to the model: `<` and `>` replaced, wrapped in `<hook_context>`."""
    document = answer(result)
    assert list(document) == ["hookSpecificOutput"]
    assert document["hookSpecificOutput"]["hookEventName"] == "BeforeAgent"
    text = document["hookSpecificOutput"]["additionalContext"]
    return "<hook_context>" + text.replace("<", "&lt;").replace(">", "&gt;") + "</hook_context>"


def block_of(result: Result) -> etree._Element:
    """The block the model decodes from what it reads: the XML leslie rendered, unambiguously."""
    seen = as_the_model_reads_it(result)
    inner = seen.removeprefix("<hook_context>").removesuffix("</hook_context>")
    assert "<" not in inner
    element = etree.fromstring(html.unescape(inner).encode())
    assert element.tag == "thread_context" and element.get("thread") == THREAD
    return element


def transcript(root: Path, *input_tokens: int) -> None:
    """Gemini's chat record: a header, the user's message, one `gemini` line per model reply."""
    lines = [{"sessionId": SESSION, "projectHash": "8182", "startTime": "2026-11-23T19:48:13.662Z", "kind": "main"},
             {"id": "u1", "timestamp": "2026-11-23T19:48:13.880Z", "type": "user", "content": [{"text": "hello"}]}]
    lines += [{"id": f"g{i}", "timestamp": "2026-11-23T19:48:13.934Z", "type": "gemini", "content": "ok",
               "thoughts": [], "tokens": {"input": used, "output": 5, "cached": 0, "thoughts": 0, "tool": 0,
                                          "total": used + 5}, "model": "gemini-3.8-flash"}
              for i, used in enumerate(input_tokens)]
    lines.append({"$set": {"lastUpdated": "2026-11-23T19:48:13.934Z"}})
    (root / "session-2026-11-23T19-48-7f4ed334.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))


def reasons(root: Path) -> list[object]:
    log = sessions.read_log(sessions.SessionFiles(str(root), "gemini", SESSION).log)
    return [(e["kind"], e.get("reason"), e.get("covered")) for e in log if e["kind"] in ("input", "compaction")]


# -- context ---------------------------------------------------------------------------------------------------

def test_the_first_prompt_gets_the_block_escaped_once_so_the_model_reads_it_whole(root: Path) -> None:
    assert answer(hook(root, session_start(root, "startup"))) == {}
    first = hook(root, prompt(root))
    element = block_of(first)
    assert element.findtext("command[@name='Status']") == "A & B <fast>"
    assert "A &amp;amp; B &amp;lt;fast&gt;" in as_the_model_reads_it(first)  # text, not a tag
    assert answer(hook(root, prompt(root, "next"))) == {}
    assert reasons(root) == [("input", "start", None), ("input", None, None)]


def test_resume_keeps_the_block_and_clear_starts_over(root: Path) -> None:
    hook(root, session_start(root, "startup"))
    block_of(hook(root, prompt(root)))
    # A resumed Gemini conversation keeps the prompt that carried the block (it drops only messages that start
    # with <hook_context>): nothing to repeat.
    assert answer(hook(root, session_start(root, "resume"))) == {}
    assert answer(hook(root, prompt(root, "again"))) == {}
    assert answer(hook(root, session_start(root, "clear"))) == {}
    block_of(hook(root, prompt(root, "after the clear")))


def test_a_changed_context_comes_with_the_next_prompt(root: Path) -> None:
    hook(root, prompt(root))
    third = spawn(Repository(root), "Third", thread_id="thread-third").thread.id
    assert run_leslie("reference", "--thread", THREAD, "--target", third, cwd=root).code == 0
    assert block_of(hook(root, prompt(root))).find(f"ref[@thread='{third}']") is not None


def test_usage_at_gemini_s_threshold_sends_the_block_with_the_prompt_it_compresses_for(root: Path) -> None:
    transcript(root, 10_000)
    block_of(hook(root, prompt(root)))
    transcript(root, 10_000, 530_000)  # past half of 1,048,576: Gemini compresses after this prompt's hook
    block_of(hook(root, prompt(root, "next")))
    assert answer(hook(root, pre_compress(root))) == {}
    transcript(root, 10_000, 530_000, 40_000)  # the drop: that compression, which the block survived
    assert answer(hook(root, pre_compress(root))) == {}
    assert answer(hook(root, prompt(root, "after"))) == {}
    assert reasons(root) == [("input", "start", None), ("input", "predicted", None), ("compaction", None, True),
                             ("input", None, None)]
    stats = json.loads(run_leslie("sessions", "--json", cwd=root).stdout)
    assert stats[0]["usage"] == [40_000, 1_048_576] and stats[0]["usage_source"] == "transcript"
    transcript(root, 10_000, 530_000, 40_000, 600_000)  # the compressed conversation grew past half again
    block_of(hook(root, prompt(root, "much later")))
    assert reasons(root)[-1] == ("input", "predicted", None)


def test_a_compression_between_two_requests_of_a_turn_re_injects_with_the_next_prompt(root: Path) -> None:
    transcript(root, 10_000)
    block_of(hook(root, prompt(root)))
    transcript(root, 10_000, 600_000)  # a tool call's request grew past the threshold mid-turn
    hook(root, pre_compress(root))
    transcript(root, 10_000, 600_000, 30_000)
    hook(root, pre_compress(root))
    block_of(hook(root, prompt(root, "next")))
    assert reasons(root) == [("input", "start", None), ("compaction", None, False), ("input", "compacted", None)]


def test_a_transcript_without_figures_falls_back_to_the_estimate(root: Path) -> None:
    (root / "session-2026-11-23T19-48-7f4ed334.jsonl").write_text('{"type": "gemini", "tokens": "many"}\nnot json\n')
    block_of(hook(root, prompt(root)))
    assert answer(hook(root, pre_compress(root))) == {}
    assert answer(hook(root, prompt(root))) == {}


# -- the write guard ---------------------------------------------------------------------------------------------

def test_file_tools_into_another_thread_are_denied_in_gemini_s_shape(root: Path) -> None:
    target = str(root / ".leslie" / "threads" / OTHER / "plan.md")
    for name, tool_input in (("write_file", {"file_path": target, "content": "over\n"}),
                             ("replace", {"file_path": target, "old_string": "#", "new_string": "X",
                                          "instruction": "x"})):
        document = answer(hook(root, tool(root, name, tool_input)))
        assert set(document) == {"decision", "reason"} and document["decision"] == "deny"
        assert f"belongs to thread {OTHER}" in document["reason"] and document["reason"].startswith("leslie: ")
    own = str(root / ".leslie" / "threads" / THREAD / "plan.md")
    assert answer(hook(root, tool(root, "write_file", {"file_path": own, "content": "x"}))) == {}
    assert answer(hook(root, tool(root, "read_file", {"file_path": target}))) == {}


def test_a_shell_command_runs_in_dir_path(root: Path) -> None:
    inside = {"command": "echo hi >> plan.md", "dir_path": f".leslie/threads/{OTHER}", "description": "d"}
    assert answer(hook(root, tool(root, "run_shell_command", inside)))["decision"] == "deny"
    absolute = {**inside, "dir_path": str(root / ".leslie" / "threads" / OTHER)}
    assert answer(hook(root, tool(root, "run_shell_command", absolute)))["decision"] == "deny"
    assert answer(hook(root, tool(root, "run_shell_command", {"command": "echo hi >> plan.md"}))) == {}


def test_the_second_line_puts_back_a_shell_command_s_change(root: Path) -> None:
    target = root / ".leslie" / "threads" / OTHER / "plan.md"
    before = target.read_bytes()
    hook(root, prompt(root))
    command = {"command": f"python3 -c \"open('{target}', 'a').write('x')\"", "description": "d"}
    assert answer(hook(root, tool(root, "run_shell_command", command))) == {}
    target.write_bytes(before + b"sneaked\n")  # what the command did
    after = answer(hook(root, {**tool(root, "run_shell_command", command, "AfterTool"),
                               "tool_response": {"llmContent": "", "returnDisplay": ""}}))
    assert after["decision"] == "block" and OTHER in after["reason"]
    assert target.read_bytes() == before
    assert answer(hook(root, {**base(root, "AfterAgent"), "prompt": "p", "prompt_response": "r",
                              "stop_hook_active": False})) == {}


# -- always JSON -------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("stdin", ["", "not json", "[1, 2]", "\xff"])
def test_garbage_is_a_warning_and_an_empty_object(root: Path, stdin: str) -> None:
    result = hook(root, stdin)
    assert result.stdout == "{}\n" and result.stderr.count("\n") == 1 and "leslie: warning:" in result.stderr


def test_without_a_thread_or_outside_a_repository_the_answer_is_an_empty_object(root: Path, tmp_path: Path) -> None:
    assert hook(root, prompt(root), env={}).stdout == "{}\n"
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    assert hook(root, {**prompt(root), "cwd": str(outside)}).stdout == "{}\n"
    assert hook(root, {**base(root, "Notification"), "message": "m"}).stdout == "{}\n"


def test_behind_leslie_acp_the_hooks_leave_the_context_to_the_proxy(root: Path) -> None:
    result = hook(root, prompt(root), env={"LESLIE_THREAD": THREAD, "LESLIE_INJECTED_BY": "acp"})
    assert answer(result) == {}


# -- leslie hooks install gemini ---------------------------------------------------------------------------------

def gemini_settings(root: Path) -> dict[str, Any]:
    return json.loads((root / ".gemini" / "settings.json").read_text())


def test_install_merges_into_the_project_settings_with_timeouts_in_milliseconds(repo_root: Path) -> None:
    path = repo_root / ".gemini" / "settings.json"
    path.parent.mkdir()
    mine = {"type": "command", "command": "./audit.sh", "timeout": 500}
    path.write_text(json.dumps({"model": {"name": "gemini-2.5-pro"}, "general": {"vimMode": True},
                                "hooks": {"enabled": True, "disabled": ["x"], "BeforeTool": [
                                    {"matcher": "read_file", "hooks": [mine]}]}}))
    result = run_leslie("hooks", "install", "gemini", cwd=repo_root)
    assert result.code == 0, result.stderr
    assert "trusted folder" in result.stdout
    data = gemini_settings(repo_root)
    assert data["model"] == {"name": "gemini-2.5-pro"} and data["general"] == {"vimMode": True}
    assert data["hooks"]["enabled"] is True and data["hooks"]["disabled"] == ["x"]
    command = f"{LESLIE_EXE} hook gemini"
    assert data["hooks"]["BeforeTool"] == [
        {"matcher": "read_file", "hooks": [mine]},
        {"matcher": "write_file|replace|run_shell_command",
         "hooks": [{"type": "command", "command": command, "timeout": 10_000}]}]
    assert data["hooks"]["BeforeAgent"] == [{"hooks": [{"type": "command", "command": command, "timeout": 15_000}]}]
    assert set(data["hooks"]) == {"enabled", "disabled", "SessionStart", "BeforeAgent", "PreCompress", "BeforeTool",
                                  "AfterTool", "AfterAgent"}
    before = path.read_bytes()
    assert "already up to date" in run_leslie("hooks", "install", "gemini", cwd=repo_root).stdout
    assert path.read_bytes() == before
    assert run_leslie("hooks", "uninstall", "gemini", cwd=repo_root).code == 0
    assert gemini_settings(repo_root)["hooks"] == {"enabled": True, "disabled": ["x"], "BeforeTool": [
        {"matcher": "read_file", "hooks": [mine]}]}


@pytest.mark.parametrize("content", ["{not json", "// a comment\n{}", "[]", '{"hooks": {"BeforeTool": {}}}'])
def test_a_settings_file_leslie_cannot_read_is_left_alone(repo_root: Path, content: str) -> None:
    path = repo_root / ".gemini" / "settings.json"
    path.parent.mkdir()
    path.write_text(content)
    result = run_leslie("hooks", "install", "gemini", cwd=repo_root)
    assert result.code == 4 and result.stderr.count("\n") == 1 and "settings.json" in result.stderr
    assert path.read_text() == content


def test_a_linked_or_oversized_settings_file_is_refused(repo_root: Path, tmp_path: Path) -> None:
    folder = repo_root / ".gemini"
    folder.mkdir()
    outside = tmp_path / "elsewhere.json"
    outside.write_text("{}")
    (folder / "settings.json").symlink_to(outside)
    linked = run_leslie("hooks", "install", "gemini", cwd=repo_root)
    assert linked.code != 0 and linked.stderr.count("\n") == 1 and outside.read_text() == "{}"
    (folder / "settings.json").unlink()
    (folder / "settings.json").write_text(json.dumps({"x": "y" * (9 << 20)}))
    big = run_leslie("hooks", "install", "gemini", cwd=repo_root)
    assert big.code != 0 and big.stderr.count("\n") == 1


def test_status_says_whether_gemini_trusts_the_folder(repo_root: Path) -> None:
    run_leslie("hooks", "install", "gemini", cwd=repo_root)
    untrusted = run_leslie("hooks", "status", "gemini", cwd=repo_root)
    assert untrusted.code == 1 and "not trusted" in untrusted.stdout and "/permissions" in untrusted.stdout
    trust_file = Path(os.environ["HOME"]) / ".gemini" / "trustedFolders.json"
    trust_file.parent.mkdir()
    trust_file.write_text(json.dumps({str(repo_root.parent): "TRUST_FOLDER"}))
    trusted = run_leslie("hooks", "status", "gemini", cwd=repo_root)
    assert trusted.code == 0, trusted.stdout
    assert trusted.stdout.startswith("gemini: ok: 6 hooks in .gemini/settings.json")
    trust_file.write_text(json.dumps({str(repo_root.parent): "TRUST_FOLDER", str(repo_root): "DO_NOT_TRUST"}))
    assert "DO_NOT_TRUST" in run_leslie("hooks", "status", "gemini", cwd=repo_root).stdout
    trust_file.write_text(json.dumps({str(repo_root / "sub"): "TRUST_PARENT"}))
    assert run_leslie("hooks", "status", "gemini", cwd=repo_root).code == 0
    no_trust = run_leslie("hooks", "status", "gemini", cwd=repo_root, env={"GEMINI_CLI_TRUST_WORKSPACE": "false"})
    assert no_trust.code == 1


def test_gemini_settings_with_comments_and_no_leslie_hooks_are_no_problem(repo_root: Path) -> None:
    # Gemini reads its settings with comments; leslie cannot, but without a leslie hook in them there is
    # nothing to report: neither `hooks status` nor `doctor` fails for another agent's installation.
    path = repo_root / ".gemini" / "settings.json"
    path.parent.mkdir()
    path.write_text('{\n  // my model\n  "model": {"name": "gemini-2.5-pro"}\n}\n')
    assert run_leslie("hooks", "install", "claude-code", cwd=repo_root).code == 0
    assert run_leslie("hooks", "status", cwd=repo_root).code == 0
    assert run_leslie("doctor", cwd=repo_root).code == 0
    named = run_leslie("hooks", "status", "gemini", cwd=repo_root)
    assert named.code == 1 and "not installed" in named.stdout
    path.write_text(path.read_text().replace("// my model", f"// {LESLIE_EXE} hook gemini"))
    assert "not valid JSON" in run_leslie("hooks", "status", cwd=repo_root).stdout
