"""Gemini API (`models/{model}:streamGenerateContent?alt=sse`, `:generateContent`, `:countTokens`) for Gemini CLI."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from e2e.harness.server import ModelHandler, Reply, count_in

# Gemini CLI compresses its history by asking for a <state_snapshot> of the conversation (system instruction).
COMPACT_MARKER = "distilling chat history into a structured xml <state_snapshot>"


def _texts(content: Any) -> list[str]:
    if not isinstance(content, dict):
        return []
    return [p.get("text", "") for p in content.get("parts") or [] if isinstance(p, dict)]


def classify(body: Any, method: str) -> str:
    """main, compact, or side (Gemini CLI's own calls: next-speaker checks, routing, titles...)."""
    if not isinstance(body, dict):
        return "side"
    contents = body.get("contents") or []
    last = contents[-1] if contents else {}
    text = " ".join(_texts(last)).lower()
    system = " ".join(_texts(body.get("systemInstruction") or body.get("system_instruction"))).lower()
    if COMPACT_MARKER in system or COMPACT_MARKER in text:
        return "compact"
    if not body.get("tools") or method != "streamGenerateContent":
        return "side"
    return "main"


class GeminiHandler(ModelHandler):
    """`/v1beta/models/<model>:<method>`."""

    def do_POST(self) -> None:
        """Route a POST by its `:method` suffix."""
        body = self.read_body()
        path = self.path.split("?")[0]
        method = path.rsplit(":", 1)[-1] if ":" in path else ""
        if method == "countTokens":
            self.mock.log(self.path, "count_tokens", body)
            self.send_json({"totalTokens": max(1, len(json.dumps(body)) // 4)})
            return
        if method not in ("streamGenerateContent", "generateContent"):
            self.not_found(body)
            return
        kind = classify(body, method)
        self.mock.log(self.path, kind, body)
        script = self.mock.script
        if kind == "main":
            reply = script.next()
        elif kind == "compact":
            reply = Reply(text="<state_snapshot>" + script.summary + "</state_snapshot>", input_tokens=1000)
        else:
            reply = Reply(text=_side_answer(body), input_tokens=100)
        usage = reply.input_tokens or script.usage or max(1, len(json.dumps(body)) // 4)
        chunk = _chunk(reply, usage)
        if method == "streamGenerateContent":
            self.send_sse(iter([(None, chunk)]))
        else:
            self.send_json(chunk)


def _side_answer(body: Any) -> str:
    """Side calls that ask for JSON (a next-speaker check, a routing decision) get a JSON answer."""
    config = (body.get("generationConfig") or {}) if isinstance(body, dict) else {}
    if config.get("responseMimeType") == "application/json":
        # Answer every field any of its JSON side calls requires (routing, next speaker, loop checks).
        schema = config.get("responseJsonSchema") or config.get("responseSchema") or {}
        answer: dict[str, Any] = {"reasoning": "mock", "next_speaker": "user", "model_choice": "flash",
                                  "complexity_reasoning": "mock", "complexity_score": 10}
        for name, spec in (schema.get("properties") or {}).items():
            if name not in answer:
                kind = str(spec.get("type", "string")).lower()
                answer[name] = 0 if kind in ("integer", "number") else False if kind == "boolean" else "mock"
        return json.dumps(answer)
    return "Short title"


def _chunk(reply: Reply, usage: int) -> dict[str, Any]:
    if reply.tool_calls:
        parts: list[dict[str, Any]] = [{"functionCall": {"name": c.name, "args": c.arguments}}
                                       for c in reply.tool_calls]
    else:
        parts = [{"text": reply.text}]
    return {"candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}],
            "usageMetadata": {"promptTokenCount": usage, "candidatesTokenCount": 5, "totalTokenCount": usage + 5},
            "modelVersion": "gemini-mock"}


def blocks_in(body: Any, needle: str) -> int:
    """How often `needle` occurs in the conversation of a request (system instruction excluded)."""
    return count_in(body.get("contents", []) if isinstance(body, dict) else body, needle)


def events_of(chunks: list[dict[str, Any]]) -> Iterator[tuple[str | None, Any]]:
    """SSE events for a list of response chunks (for tests that stream more than one)."""
    for chunk in chunks:
        yield None, chunk
