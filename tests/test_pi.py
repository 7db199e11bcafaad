"""`leslie hook pi` through the real executable, with the payloads leslie's pi extension sends.

The payloads are those the extension (`leslie/integrations/plugins/pi.ts`) built in real pi 0.73.1 runs
(e2e/test_pi.py): the event name, pi's session ID, `ctx.cwd`, and per event the prompt and
`ctx.getContextUsage()`, whether the compaction kept leslie's message, or the tool's own name and input.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from conftest import run_leslie
from leslie.ops.threads import spawn
from leslie.store.repository import Repository

THREAD = "thread-pi"
OTHER = "thread-pj"
SESSION = "01a209f7-7e5a-76fa-aecd-787e0b443490"


@pytest.fixture
def root(repo: Repository) -> Path:
    spawn(repo, "pi's thread", thread_id=THREAD)
    spawn(repo, "Another thread", thread_id=OTHER)
    return repo.root


def hook(root: Path, payload: dict[str, Any]) -> dict[str, Any]:
    """leslie's answer (always one JSON object)."""
    result = run_leslie("hook", "pi", cwd=root, input=json.dumps(payload), env={"LESLIE_THREAD": THREAD})
    assert result.code == 0, result.stderr
    answer = json.loads(result.stdout)
    assert isinstance(answer, dict)
    return answer


def prompt(root: Path, text: str = "go on", tokens: int | None = 2983, window: int = 100_000) -> dict[str, Any]:
    usage = None if tokens is None else {"tokens": tokens, "contextWindow": window}
    return {"event": "before_agent_start", "session_id": SESSION, "cwd": str(root), "prompt": text, "usage": usage}


def compacted(root: Path, kept: bool | None) -> dict[str, Any]:
    return {"event": "session_compact", "session_id": SESSION, "cwd": str(root), "context_kept": kept}


def test_first_prompt_gets_the_block_then_nothing(root: Path) -> None:
    assert hook(root, prompt(root, tokens=0))["context"].startswith(f'<thread_context thread="{THREAD}"')
    assert hook(root, prompt(root)) == {}


def test_real_usage_predicts_a_compaction_once(root: Path) -> None:
    hook(root, prompt(root, tokens=0))
    assert hook(root, prompt(root, tokens=50_000)) == {}
    assert "context" in hook(root, prompt(root, tokens=95_000))  # past usage_threshold (0.9) of the window
    assert hook(root, prompt(root, tokens=96_000)) == {}


def test_compaction_that_summarized_the_block_reinjects_once(root: Path) -> None:
    hook(root, prompt(root, tokens=0))
    hook(root, prompt(root, tokens=30_000, window=40_000))
    assert hook(root, compacted(root, False)) == {}
    assert "context" in hook(root, prompt(root, tokens=None))  # right after a compaction pi knows no usage
    # The usage after the compaction is far below the one before it: no second compaction, no second block.
    assert hook(root, prompt(root, tokens=3_000, window=40_000)) == {}


def test_compaction_that_kept_the_block_does_not_reinject(root: Path) -> None:
    hook(root, prompt(root, tokens=0))
    hook(root, prompt(root, tokens=30_000, window=40_000))
    assert hook(root, compacted(root, True)) == {}
    assert hook(root, prompt(root, tokens=None)) == {}
    assert hook(root, prompt(root, tokens=3_000, window=40_000)) == {}


@pytest.mark.parametrize("usage", [{"tokens": None, "contextWindow": 1000}, {"tokens": True, "contextWindow": 9},
                                   {"tokens": 5, "contextWindow": 0}, "95/100", None])
def test_unusable_usage_is_ignored(root: Path, usage: Any) -> None:
    assert "context" in hook(root, {**prompt(root), "usage": usage})


@pytest.mark.parametrize(("name", "args"), [
    ("write", {"path": "{other}/plan.md", "content": "x"}),
    ("edit", {"path": "{other}/plan.md", "edits": [{"oldText": "a", "newText": "b"}]}),
    ("bash", {"command": "echo x > {other}/plan.md"}),
    ("write", {"path": ".leslie/index.json", "content": "{}"}),
])
def test_writes_into_another_thread_or_leslie_s_state_are_blocked(root: Path, name: str, args: dict[str, Any]) -> None:
    other = str(root / ".leslie" / "threads" / OTHER)
    filled = {k: v.replace("{other}", other) if isinstance(v, str) else v for k, v in args.items()}
    answer = hook(root, {"event": "tool_call", "session_id": SESSION, "cwd": str(root), "tool": name,
                         "args": filled})
    assert answer["block"].startswith("leslie: ")


@pytest.mark.parametrize(("name", "args"), [
    ("write", {"path": "{own}/plan.md", "content": "x"}),
    ("read", {"path": "{other}/plan.md"}),
    ("bash", {"command": "ls {other}"}),
])
def test_other_calls_pass(root: Path, name: str, args: dict[str, Any]) -> None:
    own, other = (str(root / ".leslie" / "threads" / t) for t in (THREAD, OTHER))
    filled = {k: v.replace("{own}", own).replace("{other}", other) for k, v in args.items()}
    assert hook(root, {"event": "tool_call", "session_id": SESSION, "cwd": str(root), "tool": name,
                       "args": filled}) == {}
