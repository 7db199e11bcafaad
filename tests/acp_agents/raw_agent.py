"""A raw JSON-RPC ACP agent (no SDK), for the proxy's tests: it does exactly what the test asks, byte for byte.

- Every line it receives is appended, verbatim, to the file named by `RAW_AGENT_LOG` (when set).
- `initialize` and `session/new` answer as ACP says (`agentInfo.name` from `RAW_AGENT_NAME`, when set); other
  requests get JSON-RPC error -32601.
- `session/prompt`: the last text block is a command: `usage USED SIZE` reports a `usage_update`; `big N`
  sends an `agent_message_chunk` of N bytes; `gemini N K` reports K tool calls, then answers with Gemini
  CLI's `_meta.quota.token_count.input_tokens` = N; `exit N` exits at once with code N (a crash); anything
  else is echoed back as an `agent_message_chunk` holding the JSON of the prompt. Then it answers `end_turn`.
- `test/emit` (params `{"data": BASE64}`): writes those bytes to stdout exactly, then answers.
- End of stdin: exits with code `RAW_AGENT_EOF_EXIT` (default 0), saying so on stderr.
- SIGTERM: says so on stderr and exits with code 42 (so a test can tell a forwarded signal from a kill).
"""

from __future__ import annotations

import base64
import json
import os
import signal
import sys
from typing import Any

out = sys.stdout.buffer
SESSIONS = 0


def send(message: dict[str, Any]) -> None:
    out.write(json.dumps(message).encode() + b"\n")
    out.flush()


def update(session_id: str, body: dict[str, Any]) -> None:
    send({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": session_id, "update": body}})


def on_prompt(request_id: Any, params: dict[str, Any]) -> None:
    session_id = params["sessionId"]
    texts = [block["text"] for block in params["prompt"] if block.get("type") == "text"]
    words = texts[-1].split() if texts else []
    if len(words) == 3 and words[0] == "usage":
        update(session_id, {"sessionUpdate": "usage_update", "used": int(words[1]), "size": int(words[2])})
    elif len(words) == 2 and words[0] == "big":
        update(session_id, {"sessionUpdate": "agent_message_chunk",
                            "content": {"type": "text", "text": "x" * int(words[1])}})
    elif len(words) == 3 and words[0] == "gemini":  # Gemini CLI's way: usage only in the prompt's result
        for i in range(int(words[2])):
            update(session_id, {"sessionUpdate": "tool_call", "toolCallId": f"call-{i}", "title": "read",
                                "status": "pending"})
        send({"jsonrpc": "2.0", "id": request_id, "result": {"stopReason": "end_turn", "_meta": {"quota": {
            "token_count": {"input_tokens": int(words[1]), "output_tokens": 10}, "model_usage": []}}}})
        return
    elif len(words) == 2 and words[0] == "exit":
        sys.stderr.write(f"raw agent: crashing with code {words[1]}\n")
        sys.stderr.flush()
        os._exit(int(words[1]))
    else:
        update(session_id, {"sessionUpdate": "agent_message_chunk",
                            "content": {"type": "text", "text": json.dumps(params["prompt"])}})
    send({"jsonrpc": "2.0", "id": request_id, "result": {"stopReason": "end_turn"}})


def handle(line: bytes) -> None:
    global SESSIONS
    try:
        message = json.loads(line)
    except ValueError:
        return
    if not isinstance(message, dict) or "method" not in message:
        return
    method, params, request_id = message["method"], message.get("params") or {}, message.get("id")
    if method == "initialize":
        result: dict[str, Any] = {"protocolVersion": 1, "agentCapabilities": {}, "authMethods": []}
        if os.environ.get("RAW_AGENT_NAME"):
            result["agentInfo"] = {"name": os.environ["RAW_AGENT_NAME"], "version": "0.0.1"}
        send({"jsonrpc": "2.0", "id": request_id, "result": result})
    elif method == "session/new":
        SESSIONS += 1
        send({"jsonrpc": "2.0", "id": request_id, "result": {"sessionId": f"raw-{os.getpid()}-{SESSIONS}"}})
    elif method == "session/prompt":
        if isinstance(params, dict) and isinstance(params.get("prompt"), list) and request_id is not None:
            on_prompt(request_id, params)
        elif request_id is not None:
            send({"jsonrpc": "2.0", "id": request_id, "error": {"code": -32602, "message": "invalid params"}})
    elif method == "test/emit":
        out.write(base64.b64decode(params["data"]))
        out.flush()
        send({"jsonrpc": "2.0", "id": request_id, "result": {"emitted": True}})
    elif request_id is not None:
        send({"jsonrpc": "2.0", "id": request_id, "error": {"code": -32601, "message": f"no method {method}"}})


def on_sigterm(_signum: int, _frame: object) -> None:
    sys.stderr.write("raw agent: got SIGTERM\n")
    sys.stderr.flush()
    os._exit(42)


def main() -> None:
    signal.signal(signal.SIGTERM, on_sigterm)
    log_path = os.environ.get("RAW_AGENT_LOG")
    log = open(log_path, "ab", buffering=0) if log_path else None  # noqa: SIM115 - open for the whole run
    while line := sys.stdin.buffer.readline():
        if log is not None:
            log.write(line)
        handle(line)
    sys.stderr.write("raw agent: stdin closed\n")
    sys.stderr.flush()
    sys.exit(int(os.environ.get("RAW_AGENT_EOF_EXIT", "0")))


if __name__ == "__main__":
    main()
