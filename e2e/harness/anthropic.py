"""Anthropic Messages API (`POST /v1/messages`, streamed as SSE), enough for Claude Code and its Agent SDK."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from typing import Any

from e2e.harness.server import ModelHandler, Reply, count_in

_ids = itertools.count(1)

# What Claude Code asks when it compacts a conversation (manual /compact and automatic): the last user message
# asks for a summary of the conversation so far.
COMPACT_MARKERS = ("create a detailed summary of the conversation", "summary of the conversation so far")


def classify(body: Any) -> str:
    """main, compact, or side (a request of Claude Code's own: title, topic, quota probe...)."""
    if not isinstance(body, dict):
        return "side"
    messages = body.get("messages") or []
    last = messages[-1] if messages else {}
    last_text = " ".join(_texts(last.get("content"))).lower() if isinstance(last, dict) else ""
    if any(marker in last_text for marker in COMPACT_MARKERS):
        return "compact"
    if not body.get("tools"):
        return "side"
    return "main"


def _texts(content: Any) -> list[str]:
    if isinstance(content, str):
        return [content]
    if isinstance(content, list):
        return [b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text"]
    return []


class AnthropicHandler(ModelHandler):
    """`/v1/messages` (stream or not) and `/v1/messages/count_tokens`."""

    def do_POST(self) -> None:
        """Route a POST by path."""
        body = self.read_body()
        path = self.path.split("?")[0]
        if path.endswith("/v1/messages/count_tokens"):
            self.mock.log(self.path, "count_tokens", body)
            self.send_json({"input_tokens": max(1, len(json.dumps(body)) // 4)})
            return
        if not path.endswith("/v1/messages"):
            self.not_found(body)
            return
        kind = classify(body)
        self.mock.log(self.path, kind, body)
        script = self.mock.script
        reply = script.reply_for(kind)
        usage = reply.input_tokens or script.usage or max(1, len(json.dumps(body)) // 4)
        if kind != "main" and reply.input_tokens:
            usage = reply.input_tokens
        if isinstance(body, dict) and body.get("stream"):
            self.send_sse(_events(body, reply, usage))
        else:
            self.send_json(_message(body, reply, usage))


def _blocks(reply: Reply) -> list[dict[str, Any]]:
    if reply.tool_calls:
        return [{"type": "tool_use", "id": f"toolu_mock{next(_ids):06d}", "name": c.name, "input": c.arguments}
                for c in reply.tool_calls]
    return [{"type": "text", "text": reply.text}]


def _usage(input_tokens: int, output_tokens: int) -> dict[str, Any]:
    return {"input_tokens": input_tokens, "output_tokens": output_tokens, "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0}


def _message(body: Any, reply: Reply, usage: int) -> dict[str, Any]:
    model = body.get("model", "claude-mock") if isinstance(body, dict) else "claude-mock"
    return {"id": f"msg_mock{next(_ids):06d}", "type": "message", "role": "assistant", "model": model,
            "content": _blocks(reply), "stop_reason": "tool_use" if reply.tool_calls else "end_turn",
            "stop_sequence": None, "usage": _usage(usage, 5)}


def _events(body: Any, reply: Reply, usage: int) -> Iterator[tuple[str | None, Any]]:
    message = _message(body, reply, usage)
    blocks = message.pop("content")
    yield "message_start", {"type": "message_start", "message": {**message, "content": [], "stop_reason": None,
                                                                  "usage": _usage(usage, 1)}}
    for index, block in enumerate(blocks):
        if block["type"] == "text":
            yield "content_block_start", {"type": "content_block_start", "index": index,
                                          "content_block": {"type": "text", "text": ""}}
            yield "content_block_delta", {"type": "content_block_delta", "index": index,
                                          "delta": {"type": "text_delta", "text": block["text"]}}
        else:
            yield "content_block_start", {"type": "content_block_start", "index": index,
                                          "content_block": {**block, "input": {}}}
            yield "content_block_delta", {"type": "content_block_delta", "index": index,
                                          "delta": {"type": "input_json_delta",
                                                    "partial_json": json.dumps(block["input"])}}
        yield "content_block_stop", {"type": "content_block_stop", "index": index}
    yield "message_delta", {"type": "message_delta",
                            "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
                            "usage": {"output_tokens": 5}}
    yield "message_stop", {"type": "message_stop"}


def blocks_in(body: Any, needle: str) -> int:
    """How often `needle` occurs in the conversation of a request (system prompt excluded)."""
    return count_in(body.get("messages", []) if isinstance(body, dict) else body, needle)
