"""The real context usage an agent recorded in its own transcript, read from the transcript's tail.

A hook is given the path of the agent's transcript (`transcript_path`); the agents write the real figures
there, so leslie reads them instead of guessing from the file's size:

- Claude Code (JSON lines): every assistant reply carries the API's `message.usage`; the context the next
  request sends is its `input_tokens + cache_creation_input_tokens + cache_read_input_tokens +
  output_tokens`. The window is not recorded: `DEFAULT_WINDOWS` holds what Claude Code's default model has.
- Codex (the rollout, JSON lines): `event_msg` lines of type `token_count` carry
  `info.last_token_usage.total_tokens` (the last request's whole context) and `info.model_context_window`.
- Gemini CLI (JSON lines, `~/.gemini/tmp/<project>/chats/session-*.jsonl`): every model reply is a line with
  `"type": "gemini"` and `tokens.input`, the prompt tokens of that request (what Gemini compares with its
  compression threshold). The window is not recorded: 1,048,576 tokens for its models.

Only the last `TAIL_BYTES` of the file are read (the hook's budget: a long session's transcript runs to many
megabytes), never through a link, never a special file. Anything unexpected is "no figure" (None): the
policy then falls back to the transcript's growth, then to rounds.
"""

from __future__ import annotations

import json
import os
import stat
from typing import Any

TAIL_BYTES = 1 << 20  # how far back from the end a reply's usage is looked for
CHUNK = 64 * 1024
# The window of each agent's default model (observed: Claude Code 2.1.330 and its default model report
# 1,000,000 tokens; Codex 0.169.0's default model 258,400), used when the transcript does not record it.
DEFAULT_WINDOWS = {"claude-code": 1_000_000, "codex": 258_400, "gemini": 1_048_576}
# Where leslie predicts each agent's compaction (SPEC §7.1's `usage_threshold` for agents whose real usage it
# reads): a little before the agent's own trigger.
DEFAULT_THRESHOLDS = {"claude-code": 0.9, "codex": 0.85}
# Agents that compress unannounced, when a prompt is sent and after its hook ran, at this share of the window
# (Gemini CLI 0.61: `DEFAULT_COMPRESSION_TOKEN_THRESHOLD` 0.5, checked against the last request's prompt tokens
# before each request). A block given with that prompt lands after the summary and survives; the compression
# itself shows only as a drop of the usage in the transcript, which is how leslie detects it.
COMPACTS_BEFORE_MESSAGE = {"gemini": 0.5}
# The agents' own triggers: Claude Code compacts at its window less 20,000 tokens kept for the reply and a
# 13,000-token buffer; Codex at 90 % of the window (its default `model_auto_compact_token_limit`).
_RESERVED = {"claude-code": 33_000}
_MARKERS = {"claude-code": b'"usage"', "codex": b'"token_count"', "gemini": b'"tokens"'}
_TRIGGER_SHARE = {"codex": 0.9}


def threshold(agent: str, used: int, window: int, configured: float) -> float:
    """The `usage_threshold` to decide with, given the agent's real usage `used` of `window`.

    The lower of the configured one and the agent's default; but past the agent's own compaction trigger
    there is nothing to predict: the agent compacts before this prompt reaches the model and announces it
    (SessionStart `compact`, PostCompact), and that event re-injects. A prediction there would only add a
    second block to the compacted conversation.
    """
    if agent in COMPACTS_BEFORE_MESSAGE:
        # The agent compresses after this prompt's hook, and a block given now survives: predict at its trigger.
        return min(configured, COMPACTS_BEFORE_MESSAGE[agent])
    trigger = window * _TRIGGER_SHARE[agent] if agent in _TRIGGER_SHARE else window - _RESERVED.get(agent, 0)
    if used >= trigger:
        return float("inf")
    return min(configured, DEFAULT_THRESHOLDS.get(agent, configured))


def _usage_of(agent: str, entry: Any) -> tuple[int, int | None] | None:
    if not isinstance(entry, dict):
        return None
    if agent == "claude-code":
        message = entry.get("message")
        usage = message.get("usage") if isinstance(message, dict) else None
        if entry.get("type") != "assistant" or entry.get("isSidechain") or not isinstance(usage, dict):
            return None
        parts = [usage.get(k) for k in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens",
                                        "output_tokens")]
        counts = [p for p in parts if isinstance(p, int) and not isinstance(p, bool) and p >= 0]
        return (sum(counts), None) if counts else None
    if agent == "codex":
        payload = entry.get("payload")
        info = payload.get("info") if isinstance(payload, dict) and payload.get("type") == "token_count" else None
        last = info.get("last_token_usage") if isinstance(info, dict) else None
        total = last.get("total_tokens") if isinstance(last, dict) else None
        if not isinstance(total, int) or isinstance(total, bool) or total < 0:
            return None
        window = info.get("model_context_window") if isinstance(info, dict) else None
        return total, window if isinstance(window, int) and not isinstance(window, bool) and window > 0 else None
    if agent == "gemini":
        tokens = entry.get("tokens") if entry.get("type") == "gemini" else None
        used = tokens.get("input") if isinstance(tokens, dict) else None
        if not isinstance(used, int) or isinstance(used, bool) or used < 0:
            return None
        return used, None
    return None


def _lines_from_the_end(fd: int, size: int) -> Any:
    """Complete lines of the file's last `TAIL_BYTES`, newest first."""
    position = size
    carry = b""
    floor = max(0, size - TAIL_BYTES)
    while position > floor:
        start = max(floor, position - CHUNK)
        block = os.pread(fd, position - start, start) + carry
        position = start
        lines = block.split(b"\n")
        # The first piece continues in the bytes before `start`; at the floor it is a whole line only when the
        # floor is the file's beginning (else it was cut by the tail's limit, and is skipped).
        carry = lines[0]
        complete = lines[1:] if position > 0 else lines
        for line in reversed(complete):
            if line.strip():
                yield line


def read_usage(agent: str, path: str | None) -> tuple[int, int] | None:
    """`(tokens in context, window)` from the agent's transcript at `path`, or None when it records none."""
    if not path or agent not in DEFAULT_WINDOWS:
        return None
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return None
        marker = _MARKERS[agent]
        for line in _lines_from_the_end(fd, info.st_size):
            if marker not in line:
                continue
            try:
                found = _usage_of(agent, json.loads(line))
            except ValueError:
                continue
            if found is not None:
                used, window = found
                return used, window or DEFAULT_WINDOWS[agent]
    except OSError:
        return None
    finally:
        os.close(fd)
    return None
