"""The injection policy as the relay sees it: what it asks (`ContextPolicy`), leslie's own (`LesliePolicy`), and
the worker that makes the calls.

What to inject and when is decided in `leslie.inject.injector`; this module only carries an ACP session's
events there, keyed by the session's `sessionId` under the agent name `acp`. The calls run on one worker
thread, in order: a failing call is a warning, and only a prompt waits for one (at most
`sessions.PROMPT_DECISION_TIMEOUT`, with the client's lines behind it); the agent's lines never wait.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol, TypeVar

from leslie.inject.blocks import RepoHandle
from leslie.integrations.acp.stderr import describe, warn

if TYPE_CHECKING:
    from leslie.store.repository import Repository

AGENT_NAME = "acp"  # every ACP session is a leslie agent session of this agent, keyed by its sessionId

T = TypeVar("T")


class ContextPolicy(Protocol):
    """What the relay asks of the injection policy; `LesliePolicy` is the real one."""

    def context_for_prompt(self, session_id: str, message: str, message_size: int) -> str | None:
        """The `<thread_context>` text to put in front of this prompt, or None."""

    def usage(self, session_id: str, used: int, size: int, keeps_user_tokens: int = 0) -> None:
        """The agent reported its real context usage (tokens used of the window size); `keeps_user_tokens`:
        how many tokens of its most recent user messages the agent keeps through a compaction."""

    def assistant_message(self, session_id: str, size: int) -> None:
        """The agent finished a reply of `size` bytes of text."""

    def conversation_cleared(self, session_id: str) -> None:
        """The user cleared the conversation (`/clear`): the next ordinary prompt starts afresh."""


class LesliePolicy:
    """The injection policy of a leslie repository for the proxy's ACP sessions.

    With `follows_switch`, the thread was not named (no `--thread`, no `LESLIE_THREAD`): each session then
    takes its recorded binding, else the thread `leslie switch` records when the session first shows up
    (SPEC §7.4), so a long-running editor follows the user's switches in new sessions. Otherwise every
    session works on `thread_id`.
    """

    def __init__(self, repo: Repository, thread_id: str, *, follows_switch: bool = False) -> None:
        self.repo = repo
        self.handle = RepoHandle.of(repo)
        self.thread_id = thread_id
        self.follows_switch = follows_switch
        self._threads: dict[str, str] = {}
        self._warned: set[str] = set()

    def thread_of(self, session_id: str) -> str:
        """The thread of an ACP session, chosen once per session."""
        if not self.follows_switch:
            return self.thread_id
        if session_id not in self._threads:
            from leslie.inject import injector

            chosen = injector.session_thread(str(self.repo.root), agent=AGENT_NAME, session_id=session_id)
            self._threads[session_id] = chosen or self.thread_id
        return self._threads[session_id]

    def context_for_prompt(self, session_id: str, message: str, message_size: int) -> str | None:
        """Record a round of the session; the context block when the policy injects."""
        from leslie.inject import injector

        decision = injector.on_user_message(self.handle, agent=AGENT_NAME, session_id=session_id,
                                            thread_id=self.thread_of(session_id), message=message,
                                            message_size=message_size)
        for note in decision.warnings:
            if note not in self._warned:  # e.g. untrusted context commands: once per run, not at every prompt
                self._warned.add(note)
                warn(f"warning: {note}")
        return decision.text if decision.reason is not None else None

    def usage(self, session_id: str, used: int, size: int, keeps_user_tokens: int = 0) -> None:
        """Record real usage: a full window re-injects at the next prompt, a sharp drop means compaction."""
        from leslie.inject import injector

        injector.on_usage(self.handle, agent=AGENT_NAME, session_id=session_id,
                          thread_id=self.thread_of(session_id), used=used, size=size,
                          keeps_user_tokens=keeps_user_tokens)

    def assistant_message(self, session_id: str, size: int) -> None:
        """Log the agent's reply in the session's log."""
        from leslie.inject import injector

        injector.on_assistant_message(self.handle, agent=AGENT_NAME, session_id=session_id,
                                      thread_id=self.thread_of(session_id), size=size)

    def conversation_cleared(self, session_id: str) -> None:
        """Forget what the session was told: its next ordinary prompt gets the whole block (reason `start`)."""
        from leslie.inject import injector

        injector.on_conversation_cleared(self.handle, agent=AGENT_NAME, session_id=session_id,
                                         thread_id=self.thread_of(session_id))


class PolicyWorker:
    """Runs the policy calls one at a time, in the order they were queued, off the relay threads.

    A usage report is queued before the line that carries it is forwarded to the client, and a prompt waits for
    its own call: so the call for a prompt always runs after those for every report the client saw before it.
    A failing call is a warning, never a broken relay.
    """

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="leslie-acp-policy", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while (job := self._jobs.get()) is not None:
            job()

    def submit(self, what: str, call: Callable[[], object]) -> None:
        """Queue `call`; a failure is reported on stderr."""

        def job() -> None:
            try:
                call()
            except Exception as exc:
                warn(f"warning: {what} failed: {describe(exc)}")

        self._jobs.put(job)

    def ask(self, what: str, call: Callable[[], T], timeout: float) -> T | None:
        """Queue `call` and wait for its result; None (with a warning) when it fails or takes too long."""
        done = threading.Event()
        result: list[T] = []

        def job() -> None:
            try:
                result.append(call())
            except Exception as exc:
                warn(f"warning: {what} failed: {describe(exc)}; the prompt is forwarded unchanged")
            finally:
                done.set()

        self._jobs.put(job)
        if not done.wait(timeout):
            warn(f"warning: {what} took over {timeout:g} s; the prompt is forwarded unchanged")
            return None
        return result[0] if result else None

    def close(self, timeout: float) -> None:
        """Let the queued calls finish (bounded), then stop."""
        self._jobs.put(None)
        self._thread.join(timeout)
