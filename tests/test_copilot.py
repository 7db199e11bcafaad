"""`leslie hook copilot EVENT` and `leslie hooks install copilot` through the real executable.

The payloads are the ones GitHub Copilot CLI 1.0.102 sent to a logging hook (captured against a mock model
server on 127.0.0.1, `copilot -p ... --allow-all-tools`): camelCase, without the event's name.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
from pathlib import Path
from typing import Any

import pytest

from conftest import LESLIE_EXE, run_leslie
from leslie.integrations import hooks_status
from leslie.integrations import install as hooks_install
from leslie.ops.threads import reference, spawn
from leslie.store import sessions
from leslie.store.repository import Repository

OWN = "thread-own"
OTHER = "thread-other"
SESSION = "8d2cc258-b3e6-474a-8fcd-e19f915b9c90"


@pytest.fixture
def root(two_threads: Path) -> Path:
    return two_threads


def payload(root: Path, event: str, **extra: Any) -> dict[str, Any]:
    """What Copilot 1.0.102 sends for `event` (captured), with `extra` fields."""
    doc: dict[str, Any] = {"sessionId": SESSION, "timestamp": 1795463168404, "cwd": str(root)}
    if event == "sessionStart":
        doc.update({"source": "new", "initialPrompt": "write x"})
    elif event == "userPromptSubmitted":
        doc["prompt"] = "write x"
    elif event == "preCompact":
        doc.update({"transcriptPath": f"/home/u/.copilot/session-state/{SESSION}/events.jsonl",
                    "trigger": "auto", "customInstructions": ""})
    elif event == "agentStop":
        doc.update({"transcriptPath": f"/home/u/.copilot/session-state/{SESSION}/events.jsonl",
                    "stopReason": "end_turn", "stop_hook_active": False})
    doc.update(extra)
    return doc


def tool(root: Path, event: str, name: str, args: dict[str, Any]) -> dict[str, Any]:
    doc = payload(root, event, toolName=name, toolArgs=args)
    if event == "postToolUse":
        doc["toolResult"] = {"resultType": "success", "textResultForLlm": "done"}
    return doc


def hook(root: Path, event: str, doc: dict[str, Any], thread: str = OWN) -> dict[str, Any] | None:
    result = run_leslie("hook", "copilot", event, cwd=root, input=json.dumps(doc), env={"LESLIE_THREAD": thread})
    assert result.code == 0, result.stderr
    assert "Traceback" not in result.stderr
    return json.loads(result.stdout) if result.stdout.strip() else None


def log(root: Path) -> list[dict[str, Any]]:
    return sessions.read_log(sessions.SessionFiles(str(root), "copilot", SESSION).log)


# -- context ------------------------------------------------------------------------------------------------

def test_the_first_prompt_gets_the_block_at_the_top_level(root: Path) -> None:
    assert hook(root, "sessionStart", payload(root, "sessionStart")) is None
    answer = hook(root, "userPromptSubmitted", payload(root, "userPromptSubmitted"))
    assert answer is not None and set(answer) == {"additionalContext"}  # Copilot ignores hookSpecificOutput
    assert answer["additionalContext"].startswith(f'<thread_context thread="{OWN}"')
    assert f'<ref thread="{OTHER}" ' in answer["additionalContext"]
    assert hook(root, "userPromptSubmitted", payload(root, "userPromptSubmitted", prompt="again")) is None


def test_session_start_and_the_first_prompt_at_once_inject_once(root: Path) -> None:
    """Copilot runs sessionStart and userPromptSubmitted concurrently: whatever the order, one block."""
    for attempt in range(4):
        session = f"race-{attempt}"
        procs = []
        for event in ("sessionStart", "userPromptSubmitted"):
            doc = payload(root, event, sessionId=session)
            proc = subprocess.Popen([LESLIE_EXE, "hook", "copilot", event], cwd=root, stdin=subprocess.PIPE,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                    env={**os.environ, "LESLIE_THREAD": OWN})
            procs.append((proc, json.dumps(doc)))
        outputs = [proc.communicate(text, timeout=60) for proc, text in procs]
        assert all(proc.returncode == 0 for proc, _ in procs), outputs
        blocks = sum(out.count("<thread_context") for out, _err in outputs)
        assert blocks == 1, outputs


def test_a_compaction_re_injects_at_the_next_prompt(root: Path) -> None:
    assert hook(root, "userPromptSubmitted", payload(root, "userPromptSubmitted")) is not None
    assert hook(root, "userPromptSubmitted", payload(root, "userPromptSubmitted")) is None
    assert hook(root, "preCompact", payload(root, "preCompact")) is None  # Copilot ignores its output
    answer = hook(root, "userPromptSubmitted", payload(root, "userPromptSubmitted"))
    assert answer is not None and "<thread_context" in answer["additionalContext"]
    assert hook(root, "userPromptSubmitted", payload(root, "userPromptSubmitted")) is None
    reasons = [e["reason"] for e in log(root) if e["kind"] == "input"]
    assert reasons == ["start", None, "compacted", None]


def test_a_change_re_injects(root: Path, repo: Repository) -> None:
    assert hook(root, "userPromptSubmitted", payload(root, "userPromptSubmitted")) is not None
    spawn(repo, "Third", thread_id="thread-third")
    reference(repo, OWN, "thread-third", [])
    answer = hook(root, "userPromptSubmitted", payload(root, "userPromptSubmitted"))
    assert answer is not None and '<ref thread="thread-third" ' in answer["additionalContext"]


# -- the write guard ----------------------------------------------------------------------------------------

def test_create_and_edit_in_the_referenced_thread_are_denied(root: Path) -> None:
    target = str(root / ".leslie" / "threads" / OTHER / "plan.md")
    for name, args in (("create", {"path": target, "file_text": "hijacked"}),
                       ("edit", {"path": target, "old_str": "#", "new_str": "# hijacked"})):
        answer = hook(root, "preToolUse", tool(root, "preToolUse", name, args))
        assert answer is not None and answer["permissionDecision"] == "deny", answer
        assert "hookSpecificOutput" not in answer
        assert answer["permissionDecisionReason"].startswith(f"leslie: .leslie/threads/{OTHER}/plan.md belongs")


def test_a_shell_write_into_the_referenced_thread_is_denied(root: Path) -> None:
    command = f"echo hijacked >> .leslie/threads/{OTHER}/plan.md"
    answer = hook(root, "preToolUse", tool(root, "preToolUse", "bash", {"command": command,
                                                                         "description": "append"}))
    assert answer is not None and answer["permissionDecision"] == "deny"


def test_own_writes_get_no_opinion(root: Path) -> None:
    """Copilot's own permissions decide (leslie never answers allow, which would skip them)."""
    target = str(root / ".leslie" / "threads" / OWN / "plan.md")
    assert hook(root, "preToolUse", tool(root, "preToolUse", "create", {"path": target, "file_text": "x"})) is None
    assert hook(root, "preToolUse", tool(root, "preToolUse", "view", {"path": target})) is None


def test_a_hidden_shell_write_is_put_back_after_the_call(root: Path) -> None:
    """The second line: a write the first line cannot read is undone at postToolUse, and the model told."""
    target = root / ".leslie" / "threads" / OTHER / "plan.md"
    before = target.read_bytes()
    assert hook(root, "userPromptSubmitted", payload(root, "userPromptSubmitted")) is not None
    code = f"open('.leslie/threads/{OTHER}/plan.md', 'a').write('hijacked\\n')"
    args = {"command": f"python3 -c {shlex.quote(code)}", "description": "run"}
    assert hook(root, "preToolUse", tool(root, "preToolUse", "bash", args)) is None
    subprocess.run(["bash", "-c", args["command"]], cwd=root, check=True)
    answer = hook(root, "postToolUse", tool(root, "postToolUse", "bash", args))
    assert target.read_bytes() == before
    assert answer is not None and set(answer) == {"additionalContext"}
    assert f".leslie/threads/{OTHER}/plan.md" in answer["additionalContext"]


# -- the command line ---------------------------------------------------------------------------------------

def test_the_event_is_required(root: Path) -> None:
    result = run_leslie("hook", "copilot", cwd=root, input="{}")
    assert result.code == 2 and "leslie hook copilot EVENT" in result.stderr
    assert run_leslie("hook", "copilot", "somethingNew", cwd=root, input="{}").stdout == ""


# -- leslie hooks install copilot ---------------------------------------------------------------------------

def test_install_writes_one_command_per_event(root: Path) -> None:
    result = run_leslie("hooks", "install", "copilot", "--executable", "/opt/leslie", cwd=root)
    assert result.code == 0, result.stderr
    assert "trust" in result.stdout
    data = json.loads((root / ".github/hooks/leslie.json").read_text())
    assert data["version"] == 1
    assert {event: [(h["type"], h["bash"], h["timeoutSec"]) for h in hooks] for event, hooks in data["hooks"].items()} \
        == {event: [("command", f"/opt/leslie hook copilot {event}", 15 if kind == "context" else 10)]
            for event, kind in (("sessionStart", "context"), ("userPromptSubmitted", "context"),
                                ("preCompact", "context"), ("preToolUse", "guard"), ("postToolUse", "guard"),
                                ("agentStop", "guard"))}
    again = run_leslie("hooks", "install", "copilot", "--executable", "/opt/leslie", cwd=root)
    assert "already up to date" in again.stdout


def test_install_keeps_other_hooks_of_the_file(root: Path) -> None:
    path = root / ".github/hooks/leslie.json"
    path.parent.mkdir(parents=True)
    mine = {"type": "command", "bash": "./scripts/audit.sh", "timeoutSec": 5}
    path.write_text(json.dumps({"version": 1, "hooks": {"preToolUse": [mine]}}))
    hooks_install.install(root, "copilot", executable="leslie")
    assert json.loads(path.read_text())["hooks"]["preToolUse"][0] == mine
    hooks_install.uninstall(root, "copilot")
    assert json.loads(path.read_text())["hooks"] == {"preToolUse": [mine]}


@pytest.mark.parametrize("content", ["{not json", "[]", '{"hooks": {"preToolUse": {}}}'])
def test_install_refuses_an_invalid_file(root: Path, content: str) -> None:
    path = root / ".github/hooks/leslie.json"
    path.parent.mkdir(parents=True)
    path.write_text(content)
    result = run_leslie("hooks", "install", "copilot", cwd=root)
    assert result.code == 4 and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert path.read_text() == content


def test_install_refuses_a_link_out_of_the_repository(root: Path, tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere.json"
    outside.write_text("{}")
    (root / ".github/hooks").mkdir(parents=True)
    (root / ".github/hooks/leslie.json").symlink_to(outside)
    result = run_leslie("hooks", "install", "copilot", cwd=root)
    assert result.code != 0 and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert outside.read_text() == "{}"


def trust(folder: Path) -> None:
    """What Copilot writes when you trust a folder (`~/.copilot/config.json`, comment lines included)."""
    config = Path(os.environ["HOME"]) / ".copilot" / "config.json"
    config.parent.mkdir(exist_ok=True)
    config.write_text("// User settings belong in settings.json.\n// This file is managed automatically.\n"
                      + json.dumps({"trustedFolders": [str(folder)], "firstLaunchAt": "2026-03-11T00:00:00.000Z"}))


def test_status_says_whether_copilot_trusts_the_folder(root: Path) -> None:
    hooks_install.install(root, "copilot", executable=LESLIE_EXE)
    result = run_leslie("hooks", "status", "copilot", cwd=root)
    assert result.code == 1 and "is not a trusted folder of Copilot CLI" in result.stdout, result.stdout
    trust(root.parent)  # a trusted folder above the repository counts (checked with Copilot 1.0.102)
    result = run_leslie("hooks", "status", "copilot", cwd=root)
    assert result.code == 0 and result.stdout.startswith("copilot: ok: 6 hooks"), result.stdout


def test_status_sees_a_hook_answering_the_wrong_event(root: Path) -> None:
    hooks_install.install(root, "copilot", executable=LESLIE_EXE)
    trust(root)
    assert hooks_status.check(root, "copilot").ok
    path = root / ".github/hooks/leslie.json"
    data = json.loads(path.read_text())
    data["hooks"]["preToolUse"][0]["bash"] = f"{LESLIE_EXE} hook copilot postToolUse"
    path.write_text(json.dumps(data))
    status = hooks_status.check(root, "copilot")
    assert status.outdated == ("preToolUse",) and not status.ok
