"""The messages: a line read as JSON-RPC (or left unread), written back, and what leslie reads in ACP messages.

A line is read only when it is safe to: `parse` gives None for a line that is not JSON, not UTF-8, nested
deeper than the parser goes or holding more than `MAX_BRACKETS` brackets, and the relay then forwards it as it
came (docs/security.md, "The ACP proxy"). The rest are pure readers of ACP messages: a prompt's text, the slash
commands, the block leslie put in front of a prompt, the figures an agent reports about its context.
"""

from __future__ import annotations

import json
import re
from typing import Any, TypeGuard

# The most `[` and `{` a line may hold to be read: a line of 16 MiB of `{}` would take 0.4 GB and 4 s to parse
# (measured); at this bound, about 70 MB and under a second. Real messages are text and base64, far below it;
# one above it (10 MB of minified JSON pasted into a prompt) is forwarded unread, and goes without its block.
MAX_BRACKETS = 1 << 20
SESSION_OPENERS = frozenset({"session/new", "session/load", "session/resume", "session/fork"})
# A prompt the agent runs as a command, not as chat: `/compact`, `/clear`, `/status` (Claude Code, Codex and
# Gemini CLI adapters), `$skill` (Gemini CLI). A block in front of it would turn it into chat: the adapters
# only see a command when the prompt's text *starts* with it.
SLASH_COMMAND = re.compile(r"\s*(?:/[A-Za-z][\w:.-]*|\$[A-Za-z][\w:.-]*)(?:\s|$)")
CLEAR_COMMANDS = frozenset({"/clear", "/new", "/reset"})
INJECTED_START = "<thread_context"
INJECTED_END = "</thread_context>"
# Gemini CLI reports usage only in the `session/prompt` result (`_meta.quota.token_count.input_tokens`, the sum
# of the prompt sizes of every model call of the turn), never the window; it compresses its history at half of
# its models' 1,048,576-token window, so that is the window the policy is given for it (docs/integrations.md).
GEMINI_COMPRESSION_POINT = 1_048_576 // 2
# Codex's compaction keeps the most recent user messages, up to 20,000 tokens of them (codex-rs
# `COMPACT_USER_MESSAGE_MAX_TOKENS`), and leslie's block is part of a user message behind the proxy: when that
# message is among them, the block survived (a little margin for the two token estimates).
CODEX_KEPT_USER_TOKENS = 18_000


def parse(line: bytes) -> Any:
    """The JSON value of a line, or None when leslie does not read it (it is then forwarded as is): not JSON,
    not UTF-8, nested deeper than the parser goes, or with more brackets than `MAX_BRACKETS`."""
    if line.count(b"[") + line.count(b"{") > MAX_BRACKETS:
        return None
    try:
        return json.loads(line)
    except (ValueError, RecursionError):  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        return None


def serialise(message: Any) -> bytes:
    """A message as one line of compact JSON, without its line ending."""
    try:
        return json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate escaped in the input: keep it escaped
        return json.dumps(message, separators=(",", ":")).encode("ascii")


def line_ending(line: bytes) -> bytes:
    """The line ending a line came with (`\\r\\n`, `\\n` or none), to give it back the same."""
    if line.endswith(b"\r\n"):
        return b"\r\n"
    return b"\n" if line.endswith(b"\n") else b""


def id_key(request_id: Any) -> str:
    """A request id as a dictionary key: ids are any JSON value, `1` and `"1"` two different ones."""
    return json.dumps(request_id, sort_keys=True)


def prompt_text(prompt: list[Any]) -> str:
    """The user's words in a prompt: its text blocks, one after the other."""
    return "\n".join(block["text"] for block in prompt
                     if isinstance(block, dict) and block.get("type") == "text" and isinstance(block.get("text"), str))


def is_count(value: Any) -> TypeGuard[int]:
    """A token count as an agent reports it: an integer, not a boolean, not negative."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def without_injected_block(line: bytes) -> bytes:
    """A replayed user message (`session/load`) without the block leslie put in front of it.

    The editor shows the history the agent replays as the user's own words: the block leslie added to a
    prompt must not appear there. A chunk that is only the block is dropped; one that starts with it
    keeps the user's text after it. Every other line passes unchanged.
    """
    if b"user_message_chunk" not in line or INJECTED_START.encode() not in line:
        return line
    message = parse(line)
    params = message.get("params") if isinstance(message, dict) else None
    update = params.get("update") if isinstance(params, dict) else None
    content = update.get("content") if isinstance(update, dict) else None
    if (not isinstance(update, dict) or update.get("sessionUpdate") != "user_message_chunk"
            or not isinstance(content, dict) or content.get("type") != "text"
            or not isinstance(content.get("text"), str)):
        return line
    text: str = content["text"]
    stripped = text.lstrip()
    end = stripped.find(INJECTED_END)
    if not stripped.startswith(INJECTED_START + " ") or end < 0:
        return line
    rest = stripped[end + len(INJECTED_END):].lstrip("\r\n")
    if not rest:
        return b""
    content["text"] = rest
    return serialise(message) + line_ending(line)


def kept_user_tokens(result: Any) -> int:
    """From the agent's `initialize` answer: the tokens of recent user messages it keeps through a compaction."""
    info = result.get("agentInfo") if isinstance(result, dict) else None
    names = " ".join(str(info.get(key, "")) for key in ("name", "title")) if isinstance(info, dict) else ""
    return CODEX_KEPT_USER_TOKENS if "codex" in names.lower() else 0


def gemini_context_tokens(result: Any, tool_calls: int) -> int | None:
    """The context size a Gemini CLI prompt result reports, estimated; None when it reports none.

    `input_tokens` adds up the prompt of every model call of the turn, and each tool call the agent started
    means one more model call at most: the average over the calls is the estimate (it lies between the
    context's size at the start and at the end of the turn). Zero is what a handled command reports: no figure.
    """
    meta = result.get("_meta") if isinstance(result, dict) else None
    quota = meta.get("quota") if isinstance(meta, dict) else None
    count = quota.get("token_count") if isinstance(quota, dict) else None
    total = count.get("input_tokens") if isinstance(count, dict) else None
    if not is_count(total) or total == 0:
        return None
    return total // (1 + tool_calls)
