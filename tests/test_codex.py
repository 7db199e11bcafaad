"""`leslie hook codex` through the real executable, with Codex's hook payloads.

Shapes from openai/codex `codex-rs/hooks/schema/generated/*.command.{input,output}.schema.json`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from conftest import Result, run_leslie
from leslie.ops.threads import spawn
from leslie.store import sessions
from leslie.store.repository import Repository
from test_context import parse_valid

THREAD = "thread-cx"
OTHER = "thread-cy"
SESSION = "019d036d-c7fa-72d2-b6fd-78878bfe34e4"


@pytest.fixture
def root(repo: Repository) -> Path:
    spawn(repo, "Codex's thread", thread_id=THREAD)
    spawn(repo, "Another thread", thread_id=OTHER)
    return repo.root


def base(root: Path, event: str) -> dict[str, Any]:
    return {"session_id": SESSION, "transcript_path": str(root / "rollout.jsonl"), "cwd": str(root),
            "hook_event_name": event, "model": "gpt-5-codex"}


def session_start(root: Path, source: str) -> dict[str, Any]:
    return {**base(root, "SessionStart"), "permission_mode": "default", "source": source}


def prompt(root: Path, text: str = "refactor the parser") -> dict[str, Any]:
    return {**base(root, "UserPromptSubmit"), "permission_mode": "default", "prompt": text,
            "turn_id": "019d036e-3164-72c3-a170-98925564c4fc"}


def post_compact(root: Path, trigger: str = "auto") -> dict[str, Any]:
    return {**base(root, "PostCompact"), "trigger": trigger, "turn_id": "019d036e-0000-7000-8000-000000000001"}


def pre_tool_use(root: Path, tool_name: str, tool_input: dict[str, Any]) -> dict[str, Any]:
    return {**base(root, "PreToolUse"), "permission_mode": "default", "tool_name": tool_name,
            "tool_input": tool_input, "tool_use_id": "call_1", "turn_id": "t1"}


def hook(root: Path, payload: dict[str, Any], env: dict[str, str] | None = None) -> Result:
    result = run_leslie("hook", "codex", cwd=root, input=json.dumps(payload),
                        env={"LESLIE_THREAD": THREAD} if env is None else env)
    assert result.code == 0, result.stderr
    return result


def additional_context(result: Result, event: str) -> str:
    answer = json.loads(result.stdout)
    assert answer == {"hookSpecificOutput": {"hookEventName": event,
                                             "additionalContext": answer["hookSpecificOutput"]["additionalContext"]}}
    text = answer["hookSpecificOutput"]["additionalContext"]
    assert text.startswith(f'<thread_context thread="{THREAD}"')
    return str(text)


def test_post_compact_marks_and_the_next_prompt_reinjects(root: Path) -> None:
    additional_context(hook(root, prompt(root)), "UserPromptSubmit")
    assert hook(root, prompt(root)).stdout == ""
    compacted = hook(root, post_compact(root))
    assert (compacted.stdout, compacted.stderr) == ("", "")  # PostCompact output cannot carry context
    additional_context(hook(root, prompt(root, "continue")), "UserPromptSubmit")
    assert hook(root, prompt(root)).stdout == ""
    log = sessions.read_log(sessions.SessionFiles(str(root), "codex", SESSION).log)
    assert [(e["kind"], e["reason"] if "reason" in e else e.get("source")) for e in log] == [
        ("input", "start"), ("input", None), ("compaction", "PostCompact"), ("input", "compacted"),
        ("input", None)]


def test_session_start_sources(root: Path) -> None:
    additional_context(hook(root, session_start(root, "startup")), "SessionStart")
    assert hook(root, prompt(root)).stdout == ""
    additional_context(hook(root, session_start(root, "compact")), "SessionStart")
    assert hook(root, post_compact(root)).stdout == ""  # the same compaction, reported twice
    assert hook(root, prompt(root)).stdout == ""  # ... re-injects once, not twice
    additional_context(hook(root, session_start(root, "clear")), "SessionStart")


def deny_reason(result: Result) -> str | None:
    if not result.stdout:
        return None
    answer = json.loads(result.stdout)["hookSpecificOutput"]
    assert answer["hookEventName"] == "PreToolUse" and answer["permissionDecision"] == "deny"
    return str(answer["permissionDecisionReason"])


def test_bash_writes_into_another_thread_are_denied(root: Path) -> None:
    other = f".leslie/threads/{OTHER}/progress.md"
    reason = deny_reason(hook(root, pre_tool_use(root, "Bash", {"command": f"printf done >> {other}"})))
    assert reason is not None and OTHER in reason
    assert deny_reason(hook(root, pre_tool_use(root, "Bash", {"command": f"cat {other}"}))) is None


@pytest.mark.parametrize("field", ["command", "input", "patch"])
def test_apply_patch_into_another_thread_is_denied(root: Path, field: str) -> None:
    patch = (f"*** Begin Patch\n*** Update File: .leslie/threads/{OTHER}/plan.md\n@@\n-old\n+new\n"
             "*** End Patch\n")
    assert deny_reason(hook(root, pre_tool_use(root, "apply_patch", {field: patch}))) is not None
    own = patch.replace(OTHER, THREAD)
    assert hook(root, pre_tool_use(root, "apply_patch", {field: own})).stdout == ""  # no bare "allow" in Codex


def test_a_shell_apply_patch_heredoc_is_checked(root: Path) -> None:
    command = (f"apply_patch <<'EOF'\n*** Begin Patch\n*** Add File: .leslie/threads/{OTHER}/design/x.md\n+x\n"
               "*** End Patch\nEOF\n")
    assert deny_reason(hook(root, pre_tool_use(root, "Bash", {"command": command}))) is not None


def test_silent_without_thread_or_repository(root: Path, tmp_path: Path) -> None:
    assert hook(root, prompt(root), env={}).stdout == ""
    assert hook(root, post_compact(root), env={}).stdout == ""
    elsewhere = {**prompt(root), "cwd": str(tmp_path)}
    result = run_leslie("hook", "codex", cwd=tmp_path, input=json.dumps(elsewhere), env={"LESLIE_THREAD": THREAD})
    assert (result.code, result.stdout, result.stderr) == (0, "", "")


def test_garbage_is_one_warning(root: Path) -> None:
    result = run_leslie("hook", "codex", cwd=root, input="{]")
    assert (result.code, result.stdout) == (0, "") and result.stderr.count("\n") == 1


def test_a_compaction_before_a_resumed_turn_reinjects_once(root: Path) -> None:
    # `codex exec resume` that compacts before its first turn: PostCompact, SessionStart resume, SessionStart
    # compact (observed with Codex 0.169.0), then the turn's prompt.
    additional_context(hook(root, prompt(root)), "UserPromptSubmit")
    assert hook(root, post_compact(root)).stdout == ""
    additional_context(hook(root, session_start(root, "resume")), "SessionStart")
    assert hook(root, session_start(root, "compact")).stdout == ""
    assert hook(root, prompt(root, "continue")).stdout == ""
    state = sessions.load_state(sessions.SessionFiles(str(root), "codex", SESSION))
    assert state is not None and state["counts"]["injections"] == {"start": 1, "compacted": 1}
    assert state["counts"]["compactions"] == 1


def test_a_thread_without_a_rollout_is_codex_s_own_and_gets_nothing(root: Path) -> None:
    # App-server clients (codex-acp, IDE, desktop) run a title-generation thread with `transcript_path: null`:
    # no block for it, and no phantom session in leslie's records. The write guard still applies.
    internal = {**session_start(root, "startup"), "transcript_path": None, "session_id": "title-thread"}
    assert hook(root, internal).stdout == ""
    assert hook(root, {**prompt(root), "transcript_path": None, "session_id": "title-thread"}).stdout == ""
    assert sessions.list_sessions(str(root)) == []
    denied = hook(root, {**pre_tool_use(root, "Bash", {"command": f"echo x > .leslie/threads/{OTHER}/plan.md"}),
                         "transcript_path": None})
    assert deny_reason(denied) is not None


def test_the_largest_block_at_the_largest_budget_reaches_codex_whole(repo: Repository) -> None:
    """Issue 33: `additionalContext` is never cut and never missing: at `MAX_BUDGET_TOKENS`, with more content
    than a render may hold (12 files at the inline cap, heavy with `&`, `<` and `]]>`, which escaping makes
    longer), the answer carries the whole block, the one `leslie context` prints, valid, its last inlined
    file cut at a line with its marker (the sandbox's caps on a render are never hit)."""
    from leslie.context.files import MAX_INLINE_BYTES
    from leslie.ops.threads import RefSpec
    from leslie.store.config import MAX_BUDGET_TOKENS

    line = 'a "quoted" line with <tags> & ampersands ]]> and more text to fill it up to the cap\n'
    body = line * ((MAX_INLINE_BYTES - 1024) // len(line))
    spawn(repo, "Referenced", thread_id=OTHER)
    design = repo.layout.thread_dir(OTHER) / "design"
    design.mkdir(exist_ok=True)
    for i in range(10):
        (design / f"part{i:02d}.md").write_text(f"# Part {i}\n" + body, encoding="utf-8")
    spawn(repo, "Codex's thread", thread_id=THREAD, refs=[RefSpec(OTHER)])
    for name in ("plan.md", "progress.md"):
        (repo.layout.thread_dir(THREAD) / name).write_text(f"# {name}\n" + body, encoding="utf-8")
    (repo.root / ".leslie" / "config.toml").write_text(f"[context]\nbudget_tokens = {MAX_BUDGET_TOKENS}\n",
                                                       encoding="utf-8")
    text = additional_context(hook(repo.root, session_start(repo.root, "startup")), "SessionStart")
    assert text == run_leslie("context", "--thread", THREAD, cwd=repo.root).stdout
    assert text.endswith("</thread_context>\n") and len(text) > 2 << 20
    root = parse_valid(text)
    inlined = [e for e in root.iter("asset", "file") if e.get("tokens") is not None]
    assert len(inlined) > 4 and sum(e.get("omitted") is not None for e in inlined) == 1
    assert inlined[0].text == "# plan.md\n" + body
