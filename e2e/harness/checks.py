"""Assertions shared by the clients' tests: what reached the model, what the guard did to the files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from e2e.harness.server import Logged, strings_in
from e2e.harness.world import NEEDLE, World


def last_block(request: Logged) -> str:
    """The newest `<thread_context>` of the session's thread in a request (the text from its start)."""
    texts = [text for text in strings_in(request.body) if NEEDLE in text]
    assert texts, "no block of the session's thread in this request"
    last = texts[-1]
    return last[last.rindex(NEEDLE):]


def answer_of(call: dict[str, Any]) -> dict[str, Any]:
    """A hook call's answer (leslie's stdout) as JSON; {} when it said nothing."""
    try:
        answer = json.loads(call["stdout"]) if call["stdout"].strip() else {}
    except ValueError:
        return {}
    return answer if isinstance(answer, dict) else {}


def context_answers(world: World) -> list[dict[str, Any]]:
    """The hook calls whose answer carried the session's block."""
    return [call for call in world.hook_calls()
            if NEEDLE in str(answer_of(call).get("hookSpecificOutput", {}).get("additionalContext", ""))]


def assert_unchanged(path: Path, before: bytes) -> None:
    """The guarded file still holds its bytes."""
    assert path.read_bytes() == before, f"{path} was changed: {path.read_bytes()[:200]!r}"


def denials(world: World) -> list[dict[str, Any]]:
    """The hook calls leslie answered with a denial."""
    return [call for call in world.hook_calls()
            if answer_of(call).get("hookSpecificOutput", {}).get("permissionDecision") == "deny"]


def tool_results_mention(request: Logged, text: str) -> bool:
    """Whether the request (the model's next call after a tool call) reports `text` back to the model."""
    return any(text in s for s in strings_in(request.body))
