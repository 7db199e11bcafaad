"""What the proxy follows of the ACP sessions, and the one change it makes: the block in front of a prompt.

The relay hands `SessionTracker` every whole line it reads and forwards what comes back. From the client's
lines it learns the `initialize` request, each prompt and its sessionId, and (with no repository around the
proxy) a session's cwd to look for one from; a prompt gets the block the policy gives, unless it is a slash
command. From the agent's lines: usage reports, the size of a reply and its tool calls, the end of a prompt
turn, and the replay of a loaded session, which loses the block again. What it learns goes to the policy
through the worker, in order (`policy.PolicyWorker`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from leslie.integrations.acp.messages import (
    CLEAR_COMMANDS,
    GEMINI_COMPRESSION_POINT,
    SESSION_OPENERS,
    SLASH_COMMAND,
    gemini_context_tokens,
    id_key,
    is_count,
    kept_user_tokens,
    line_ending,
    parse,
    prompt_text,
    serialise,
    without_injected_block,
)
from leslie.integrations.acp.policy import ContextPolicy, PolicyWorker
from leslie.integrations.acp.stderr import describe, warn

PROMPT_DECISION_TIMEOUT = 20.0  # seconds a prompt waits for the policy before it is forwarded unchanged


class SessionTracker:
    """The sessions of one run of the proxy: the prompts awaiting their answer, their replies, the policy's worker.

    The two relay threads call it at once, `client_line` from one and `agent_line` from the other: the prompts'
    bookkeeping, which both touch, is kept under one lock.
    """

    def __init__(self, policy: ContextPolicy | None,
                 late_policy: Callable[[str], ContextPolicy | None] | None = None) -> None:
        """`late_policy`, when there is no `policy`, is asked once with the cwd of the first session."""
        self.policy = policy
        self._late_policy = late_policy if policy is None else None
        self._worker: PolicyWorker | None = None
        self._awaiting: dict[str, str] = {}  # prompt request id → its sessionId, until the agent answers
        self._reply_bytes: dict[str, int] = {}  # sessionId → bytes of agent text since its last reply ended
        self._tool_calls: dict[str, int] = {}  # sessionId → tool calls the agent started in the current prompt
        self._commands: set[str] = set()  # request ids of prompts forwarded as slash commands
        self._initialize_id: str | None = None  # the client's `initialize` request, whose answer names the agent
        self._kept_user_tokens = 0  # what the agent keeps of its user messages through a compaction
        self._lock = threading.Lock()

    @property
    def injecting(self) -> bool:
        """There is a policy and its worker runs: the relay reads whole lines both ways."""
        return self._worker is not None

    @property
    def awaits_policy(self) -> bool:
        """There is no policy yet, and the first session's cwd may give one: the client's lines are read."""
        return self._late_policy is not None

    def start(self) -> None:
        """Start the policy's worker, once the agent runs (a late policy starts its own when it is found)."""
        if self.policy is not None:
            self._worker = PolicyWorker()

    def close(self, timeout: float) -> None:
        """Let the queued policy calls finish (bounded), then stop the worker."""
        if self._worker is not None:
            self._worker.close(timeout)

    def client_line(self, line: bytes) -> bytes:
        """The line to send to the agent: the same bytes, or a prompt with the context block in front."""
        if self._late_policy is not None and b"cwd" in line:
            self._policy_from_session_cwd(line)
        if self._initialize_id is None and b"initialize" in line:
            opened = parse(line)
            if isinstance(opened, dict) and opened.get("method") == "initialize" and "id" in opened:
                self._initialize_id = id_key(opened["id"])
        if self._worker is None or b"prompt" not in line:
            return line
        message = parse(line)
        if not isinstance(message, dict) or message.get("method") != "session/prompt" or "id" not in message:
            return line
        params = message.get("params")
        if not isinstance(params, dict):
            return line
        session_id, prompt = params.get("sessionId"), params.get("prompt")
        if not isinstance(session_id, str) or not isinstance(prompt, list):
            return line
        text = prompt_text(prompt)
        policy = self.policy
        assert policy is not None
        command = SLASH_COMMAND.match(text)
        with self._lock:
            self._awaiting[id_key(message["id"])] = session_id
            self._tool_calls[session_id] = 0
            if command is not None:
                self._commands.add(id_key(message["id"]))
        if command is not None:
            # Forwarded as is: a pending injection waits for the next ordinary prompt (no round is recorded).
            if command.group(0).split()[0] in CLEAR_COMMANDS:
                self._worker.submit("clear", lambda: policy.conversation_cleared(session_id))
            return line
        context = self._worker.ask(
            "injection", lambda: policy.context_for_prompt(session_id, text, len(text.encode("utf-8", "replace"))),
            PROMPT_DECISION_TIMEOUT)
        if not context:
            return line
        params["prompt"] = [{"type": "text", "text": context}, *prompt]
        return serialise(message) + line_ending(line)

    def _policy_from_session_cwd(self, line: bytes) -> None:
        """No repository around the proxy: look from the folder of the client's first session instead."""
        message = parse(line)
        if not isinstance(message, dict) or message.get("method") not in SESSION_OPENERS:
            return
        params = message.get("params")
        cwd = params.get("cwd") if isinstance(params, dict) else None
        if not isinstance(cwd, str) or self._late_policy is None:
            return
        late_policy, self._late_policy = self._late_policy, None
        try:
            policy = late_policy(cwd)
        except Exception as exc:
            warn(f"warning: {describe(exc)}; relaying without thread context")
            return
        if policy is not None:
            self.policy = policy
            self._worker = PolicyWorker()

    def agent_line(self, line: bytes) -> bytes:
        """The line to forward to the client, once what it reports is queued for the policy (see `PolicyWorker`)."""
        self._note_agent_line(line)
        return without_injected_block(line)

    def _note_agent_line(self, line: bytes) -> None:
        """Report a usage update, count the agent's reply text, and notice the end of a prompt turn."""
        with self._lock:
            awaiting = bool(self._awaiting)
        if (b"usage_update" not in line and b"agent_message_chunk" not in line and b'"tool_call"' not in line
                and b"agentInfo" not in line and not (awaiting and (b'"result"' in line or b'"error"' in line))):
            return
        message = parse(line)
        if not isinstance(message, dict):
            return
        if self._initialize_id is not None and "id" in message and id_key(message["id"]) == self._initialize_id:
            self._kept_user_tokens = kept_user_tokens(message.get("result"))
            return
        if message.get("method") == "session/update":
            self._session_update(message.get("params"))
        elif "method" not in message and "id" in message:
            self._response(message)

    def _session_update(self, params: Any) -> None:
        if not isinstance(params, dict) or not isinstance(params.get("sessionId"), str):
            return
        session_id: str = params["sessionId"]
        update = params.get("update")
        if not isinstance(update, dict):
            return
        kind = update.get("sessionUpdate")
        if kind == "usage_update":
            used, size = update.get("used"), update.get("size")
            if is_count(used) and is_count(size) and self._worker is not None and self.policy is not None:
                policy = self.policy
                kept = self._kept_user_tokens
                self._worker.submit("usage report", lambda: policy.usage(session_id, used, size, kept))
        elif kind == "tool_call":
            with self._lock:
                if session_id in self._tool_calls:
                    self._tool_calls[session_id] += 1
        elif kind == "agent_message_chunk":
            content = update.get("content")
            if isinstance(content, dict) and content.get("type") == "text" and isinstance(content.get("text"), str):
                with self._lock:
                    if session_id in self._awaiting.values():  # a reply, not the replay of a loaded session
                        self._reply_bytes[session_id] = (self._reply_bytes.get(session_id, 0)
                                                         + len(content["text"].encode("utf-8", "replace")))

    def _response(self, message: dict[str, Any]) -> None:
        key = id_key(message["id"])
        with self._lock:
            session_id = self._awaiting.pop(key, None)
            if session_id is None:
                return
            size = self._reply_bytes.pop(session_id, 0)
            tool_calls = self._tool_calls.pop(session_id, 0)
            was_command = key in self._commands
            self._commands.discard(key)
        if self._worker is None or self.policy is None:
            return
        policy = self.policy
        if size or "result" in message:
            self._worker.submit("reply log", lambda: policy.assistant_message(session_id, size))
        used = None if was_command else gemini_context_tokens(message.get("result"), tool_calls)
        if used is not None:
            self._worker.submit("usage report", lambda: policy.usage(session_id, used, GEMINI_COMPRESSION_POINT))

