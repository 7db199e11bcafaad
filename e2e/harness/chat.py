"""OpenAI Chat Completions (`POST /v1/chat/completions`, streamed as SSE or not), enough for GitHub Copilot CLI
and Qwen Code with an OpenAI-compatible provider, opencode, Kilo Code and pi.

opencode and pi compact by asking the model for a summary with a system prompt of their own ("You are a
context summarization agent" in opencode 1.18, "... assistant" in pi 0.73); requests without tools are the
clients' side calls (a session title).
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from typing import Any

from e2e.harness.server import ModelHandler, Reply, count_in, strings_in

_ids = itertools.count(1)

# What the clients ask when they compact: Copilot "summarize the conversation" / "checkpoint"; Qwen asks for a
# `<state_snapshot>` of the history.
COMPACT_MARKERS = ("state_snapshot", "summarize the conversation", "summary of the conversation",
                   "conversation summary", "checkpoint summary", "compact")
FIRST_MESSAGE_MARKERS = ("context summarization",)  # opencode, Kilo, pi: their summarizer's system prompt


def _texts(content: Any) -> list[str]:
    if isinstance(content, str):
        return [content]
    if isinstance(content, list):
        return [c.get("text", "") for c in content if isinstance(c, dict) and isinstance(c.get("text"), str)]
    return []


def classify(body: Any) -> str:
    """main, compact, or side (a title, a summary the client asks for on its own)."""
    if not isinstance(body, dict):
        return "side"
    messages = body.get("messages") or []
    last = messages[-1] if isinstance(messages, list) and messages else {}
    text = " ".join(_texts(last.get("content"))).lower() if isinstance(last, dict) else ""
    system = " ".join(" ".join(_texts(m.get("content"))) for m in messages
                      if isinstance(m, dict) and m.get("role") == "system").lower()
    first = " ".join(strings_in(messages[0])).lower() if isinstance(messages, list) and messages else ""
    if (any(marker in text for marker in COMPACT_MARKERS[:5]) or "state_snapshot" in system[:4000]
            or any(marker in first for marker in FIRST_MESSAGE_MARKERS)):
        return "compact"
    if not body.get("tools"):
        return "side"
    return "main"


class ChatHandler(ModelHandler):
    """`/chat/completions` (with or without `/v1`), and `/models` (a one-model list)."""

    def do_GET(self) -> None:
        """`/models`: one model, the one the clients are told to use."""
        if self.path.split("?")[0].endswith("/models"):
            self.mock.log(self.path, "models", None)
            self.send_json({"object": "list", "data": [{"id": "mock-model", "object": "model", "created": 0,
                                                        "owned_by": "mock"}]})
            return
        self.not_found(None)

    def do_POST(self) -> None:
        """Route a POST by path."""
        body = self.read_body()
        path = self.path.split("?")[0]
        if not path.endswith("/chat/completions"):
            self.not_found(body)
            return
        kind = classify(body)
        self.mock.log(self.path, kind, body)
        script = self.mock.script
        reply = script.reply_for(kind)
        usage = reply.input_tokens or script.usage or max(1, len(json.dumps(body)) // 4)
        if kind == "compact":  # Qwen measures what a compaction saved by the summary request's input tokens
            usage = max(1, len(json.dumps(body)) // 4)
        if isinstance(body, dict) and body.get("stream"):
            self.send_sse(_chunks(body, reply, usage))
            self.wfile.write(b"data: [DONE]\n\n")
        else:
            self.send_json(_completion(body, reply, usage))


def _tool_calls(reply: Reply) -> list[dict[str, Any]]:
    return [{"index": n, "id": f"call_mock{next(_ids):06d}", "type": "function",
             "function": {"name": call.name, "arguments": json.dumps(call.arguments)}}
            for n, call in enumerate(reply.tool_calls)]


def _usage(usage: int) -> dict[str, Any]:
    return {"prompt_tokens": usage, "completion_tokens": 5, "total_tokens": usage + 5}


def _completion(body: Any, reply: Reply, usage: int) -> dict[str, Any]:
    model = body.get("model", "mock-model") if isinstance(body, dict) else "mock-model"
    message: dict[str, Any] = {"role": "assistant", "content": None if reply.tool_calls else reply.text}
    if reply.tool_calls:
        message["tool_calls"] = _tool_calls(reply)
    return {"id": f"chatcmpl-mock{next(_ids):06d}", "object": "chat.completion", "created": 0, "model": model,
            "choices": [{"index": 0, "message": message,
                         "finish_reason": "tool_calls" if reply.tool_calls else "stop"}],
            "usage": _usage(usage)}


def _chunks(body: Any, reply: Reply, usage: int) -> Iterator[tuple[str | None, Any]]:
    model = body.get("model", "mock-model") if isinstance(body, dict) else "mock-model"
    base = {"id": f"chatcmpl-mock{next(_ids):06d}", "object": "chat.completion.chunk", "created": 0,
            "model": model}
    yield None, {**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""},
                                      "finish_reason": None}]}
    if reply.tool_calls:
        yield None, {**base, "choices": [{"index": 0, "delta": {"tool_calls": _tool_calls(reply)},
                                          "finish_reason": None}]}
    else:
        yield None, {**base, "choices": [{"index": 0, "delta": {"content": reply.text}, "finish_reason": None}]}
    yield None, {**base, "choices": [{"index": 0, "delta": {},
                                      "finish_reason": "tool_calls" if reply.tool_calls else "stop"}]}
    yield None, {**base, "choices": [], "usage": _usage(usage)}


def blocks_in(body: Any, needle: str) -> int:
    """How often `needle` occurs in the messages of a request."""
    return count_in(body.get("messages", []) if isinstance(body, dict) else body, needle)
