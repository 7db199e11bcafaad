"""OpenAI Responses API (`POST /v1/responses`, streamed as SSE), enough for Codex (exec, app-server, codex-acp)."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from typing import Any

from e2e.harness.server import ModelHandler, Reply, count_in

_ids = itertools.count(1)

# Codex compacts locally (its own provider is not OpenAI's) by asking the model for a handoff summary.
COMPACT_MARKERS = ("context checkpoint compaction", "handoff summary", "summarize the conversation")


def _input_texts(item: Any) -> list[str]:
    if not isinstance(item, dict):
        return []
    content = item.get("content")
    if isinstance(content, str):
        return [content]
    if isinstance(content, list):
        return [c.get("text", "") for c in content if isinstance(c, dict)]
    return []


def classify(body: Any) -> str:
    """main, compact, or side (Codex's own requests: a thread title, a memory summary...)."""
    if not isinstance(body, dict):
        return "side"
    items = body.get("input") or []
    last = items[-1] if isinstance(items, list) and items else {}
    text = " ".join(_input_texts(last)).lower()
    if any(marker in text for marker in COMPACT_MARKERS):
        return "compact"
    if not body.get("tools"):
        return "side"
    return "main"


class ResponsesHandler(ModelHandler):
    """`/v1/responses` (streamed), `/v1/responses/compact`, and `/v1/models` (an empty list)."""

    def do_GET(self) -> None:
        """`/v1/models`: no remote model list (Codex then uses its built-in model metadata)."""
        if self.path.split("?")[0].endswith("/models"):
            self.mock.log(self.path, "models", None)
            self.send_json({"models": [], "data": []})
            return
        self.not_found(None)

    def do_POST(self) -> None:
        """Route a POST by path."""
        body = self.read_body()
        path = self.path.split("?")[0]
        if not path.endswith("/responses"):
            self.not_found(body)
            return
        kind = classify(body)
        self.mock.log(self.path, kind, body)
        script = self.mock.script
        reply = script.reply_for(kind)
        usage = reply.input_tokens or script.usage or max(1, len(json.dumps(body)) // 4)
        self.send_sse(_events(body, reply, usage))


def _items(reply: Reply) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    for call in reply.tool_calls:
        call_id = f"call_mock{next(_ids):06d}"
        if call.kind == "custom":
            items.append({"type": "custom_tool_call", "id": f"ctc_{call_id}", "status": "completed",
                          "call_id": call_id, "name": call.name, "input": call.text_input or ""})
        else:
            items.append({"type": "function_call", "id": f"fc_{call_id}", "status": "completed",
                          "call_id": call_id, "name": call.name, "arguments": json.dumps(call.arguments)})
    if not reply.tool_calls:
        items.append({"type": "message", "id": f"msg_mock{next(_ids):06d}", "role": "assistant",
                      "status": "completed",
                      "content": [{"type": "output_text", "text": reply.text, "annotations": []}]})
    return items


def _events(body: Any, reply: Reply, usage: int) -> Iterator[tuple[str | None, Any]]:
    response_id = f"resp_mock{next(_ids):06d}"
    model = body.get("model", "gpt-mock") if isinstance(body, dict) else "gpt-mock"
    base: dict[str, Any] = {"id": response_id, "object": "response", "model": model, "status": "in_progress",
                            "output": []}
    yield "response.created", {"type": "response.created", "response": base}
    items = _items(reply)
    for index, item in enumerate(items):
        yield "response.output_item.added", {"type": "response.output_item.added", "output_index": index,
                                             "item": {**item, "status": "in_progress"}}
        if item["type"] == "message":
            text = item["content"][0]["text"]
            yield "response.output_text.delta", {"type": "response.output_text.delta", "item_id": item["id"],
                                                 "output_index": index, "content_index": 0, "delta": text}
        yield "response.output_item.done", {"type": "response.output_item.done", "output_index": index,
                                            "item": item}
    yield "response.completed", {"type": "response.completed", "response": {
        **base, "status": "completed", "output": items,
        "usage": {"input_tokens": usage, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 5,
                  "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": usage + 5}}}


def blocks_in(body: Any, needle: str) -> int:
    """How often `needle` occurs in the conversation of a request (instructions excluded)."""
    return count_in(body.get("input", []) if isinstance(body, dict) else body, needle)
