"""OpenAI Chat Completions (`POST /v1/chat/completions`, streamed as SSE or not), enough for opencode and pi.

Both clients compact by asking the model for a summary with a system prompt of their own ("You are a context
summarization agent" in opencode 1.18, "... assistant" in pi 0.73); requests without tools are their side
calls (a session title).
"""

from __future__ import annotations

import itertools
import json
import time
from typing import Any

from e2e.harness.server import ModelHandler, Reply, strings_in

_ids = itertools.count(1)
COMPACT_MARKERS = ("context summarization",)


def classify(body: Any) -> str:
    """main, compact, or side."""
    if not isinstance(body, dict):
        return "side"
    messages = body.get("messages") or []
    first = " ".join(strings_in(messages[0])).lower() if isinstance(messages, list) and messages else ""
    if any(marker in first for marker in COMPACT_MARKERS):
        return "compact"
    if not body.get("tools"):
        return "side"
    return "main"


def _message(reply: Reply) -> dict[str, Any]:
    if reply.tool_calls:
        return {"role": "assistant", "content": None, "tool_calls": [
            {"id": f"call_mock{next(_ids):06d}", "type": "function",
             "function": {"name": call.name, "arguments": json.dumps(call.arguments)}} for call in reply.tool_calls]}
    return {"role": "assistant", "content": reply.text}


class ChatHandler(ModelHandler):
    """`/v1/chat/completions`, and `/v1/models` (one model)."""

    def do_GET(self) -> None:
        """`/v1/models`: the mock's one model."""
        if self.path.split("?")[0].endswith("/models"):
            self.mock.log(self.path, "models", None)
            self.send_json({"object": "list", "data": [{"id": "mock-model", "object": "model", "owned_by": "e2e"}]})
            return
        self.not_found(None)

    def do_POST(self) -> None:
        """Route a POST by path."""
        body = self.read_body()
        if not self.path.split("?")[0].endswith("/chat/completions"):
            self.not_found(body)
            return
        kind = classify(body)
        self.mock.log(self.path, kind, body)
        script = self.mock.script
        reply = script.reply_for(kind)
        usage = reply.input_tokens or script.usage or max(1, len(json.dumps(body)) // 4)
        message = _message(reply)
        finish = "tool_calls" if reply.tool_calls else "stop"
        base = {"id": f"chatcmpl-mock{next(_ids):06d}", "created": int(time.time()),
                "model": body.get("model", "mock-model") if isinstance(body, dict) else "mock-model"}
        counts = {"prompt_tokens": usage, "completion_tokens": 5, "total_tokens": usage + 5}
        if not (isinstance(body, dict) and body.get("stream")):
            self.send_json({**base, "object": "chat.completion", "usage": counts,
                            "choices": [{"index": 0, "message": message, "finish_reason": finish}]})
            return
        delta: dict[str, Any] = {"role": "assistant"}
        if reply.tool_calls:
            delta["tool_calls"] = [{"index": i, **call} for i, call in enumerate(message["tool_calls"])]
        else:
            delta["content"] = reply.text
        chunks = [
            {**base, "object": "chat.completion.chunk",
             "choices": [{"index": 0, "delta": delta, "finish_reason": None}]},
            {**base, "object": "chat.completion.chunk",
             "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]},
            {**base, "object": "chat.completion.chunk", "choices": [], "usage": counts},
        ]
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        for chunk in chunks:
            self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()
        self.close_connection = True
