"""Context injection, orchestrated for every integration: hooks, `leslie inject`, the ACP proxy.

Each event of an agent session (a user message, a session start, a compaction, a usage report, a reply)
runs under the session's lock: load its state, gather the facts, ask the pure policy
(`leslie.inject.policy.decide`), render the `<thread_context>` block when it says so, save the state, append
to the log (`leslie.store.sessions`).

The block itself (its fingerprint, cache and rendering) comes from `leslie.inject.blocks`; the session state
and log from `leslie.store.sessions`. A message that injects nothing never opens the repository model.

Every event function takes a `RepoHandle` (`RepoHandle.of(repo)` for an opened repository; hooks pass
`RepoHandle(root)`).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, NamedTuple

from leslie.errors import THREAD_ID_RULE, CorruptStateError, LeslieError, NotFoundError, UsageError
from leslie.inject.blocks import (
    RepoHandle,
    block_to_inject,
    current_fingerprint,
    referenced_now,
    settings_doc,
)
from leslie.inject.policy import Facts, Settings, decide, tokens_of
from leslie.store import presence, sessions
from leslie.store.files import find_root, recorded_current_thread
from leslie.store.model import is_thread_id

Doc = dict[str, Any]

SHARP_DROP = 0.5  # reported usage falling to half (or less) of the previous report means a compaction


class Injection(NamedTuple):
    """What to add to the agent's conversation now: `reason` None means nothing (then `text` is None).

    `warnings` are one-line notes for the user (e.g. unapproved context commands) that the integration
    prints on stderr.
    """

    reason: str | None
    text: str | None
    warnings: tuple[str, ...] = ()


# -- which repository and thread a session works on ---------------------------------------------------

def discover_root(start: str | None = None, explicit: str | None = None) -> str | None:
    """The repo root as `store.files.find_root` finds it (`explicit`, else `LESLIE_ROOT`, else the nearest
    folder above `start` holding `.leslie/`), each path made absolute and normalized; None when there is none
    (a hook outside any repository stays silent)."""
    chosen = explicit or os.environ.get("LESLIE_ROOT") or None
    try:
        found = find_root(Path(os.path.abspath(start or os.getcwd())),
                          os.path.abspath(chosen) if chosen is not None else None)
    except (NotFoundError, OSError):  # OSError: a folder on the way that cannot be looked at (EACCES, a long name)
        return None
    return str(found)


def session_thread(root: str, *, agent: str, session_id: str, explicit: str | None = None,
                   environ: Mapping[str, str] | None = None) -> str | None:
    """The thread of an agent session: `explicit`, else `LESLIE_THREAD`, else the session's recorded
    binding, else the working tree's current thread (`leslie switch`); None when there is none.

    UsageError for a value that is not a thread ID.
    """
    env = os.environ if environ is None else environ
    chosen = explicit or env.get("LESLIE_THREAD") or None
    if chosen is None:
        try:
            state = sessions.load_state(sessions.SessionFiles(root, agent, session_id))
        except CorruptStateError:
            state = None
        chosen = state["thread"] if state is not None else recorded_current_thread(Path(root))
    if chosen is None:
        return None
    if not is_thread_id(chosen):
        raise UsageError(f"invalid thread ID {chosen!r}: " + THREAD_ID_RULE)
    return chosen


# -- session events -------------------------------------------------------------------------------------

def _count(state: Doc, name: str, amount: int) -> None:
    counts = state.setdefault("counts", sessions.new_counts())
    counts[name] = int(counts.get(name, 0)) + amount


def _bind(state: Doc, thread_id: str) -> None:
    """A session moved to another thread starts over there (its context is another thread's)."""
    if state.get("thread") != thread_id:
        state["thread"] = thread_id
        for key in ("injected", "inputs_key", "fingerprint", "static_commands", "logged_context", "seen"):
            state[key] = None
        state["compaction_pending"] = False


def move_session(root: str, agent: str, session_id: str, thread_id: str) -> str | None:
    """Bind a hook session leslie knows to `thread_id` (`leslie next` run from its agent's shell): its next prompt
    gets that thread's block as a start, the write guard lets it write there, `leslie who` shows it there. The
    thread it was on; None when no session of that agent and ID is recorded here."""
    try:
        files = sessions.SessionFiles(root, agent, session_id)
    except UsageError:  # not an agent name leslie records sessions of
        return None
    if not os.path.lexists(files.state):  # a person's `cli-<login>` session: nothing to move
        return None
    with sessions.session_lock(files):
        state = sessions.load_state(files)
        if state is None:
            return None
        left = str(state.get("thread") or "") or None
        _bind(state, thread_id)
        sessions.save_state(files, state)
        with contextlib.suppress(LeslieError, OSError):
            presence.record(root, agent, session_id, thread_id)
    return left


def _session(handle: RepoHandle, agent: str, session_id: str, thread_id: str,
             change: Callable[[Doc, list[Doc]], Injection | None]) -> Injection | None:
    """Run `change(state, log_entries)` under the session's lock, then save the state and append the log."""
    files = sessions.SessionFiles(handle.root, agent, session_id)
    with sessions.session_lock(files):
        try:
            state = sessions.load_state(files)
        except CorruptStateError:
            sessions.set_aside(files)  # reported once; the next event starts a fresh session
            raise
        if state is None:
            state = sessions.new_state(agent, session_id, thread_id)
        _bind(state, thread_id)
        entries: list[Doc] = []
        result = change(state, entries)
        sessions.save_state(files, state)
        for entry in entries:
            sessions.append_log(files, entry)
        # SPEC §13: who works where, seen when. A failure never costs the agent its context: `leslie who` misses
        # this event, and the next one writes it.
        with contextlib.suppress(LeslieError, OSError):
            presence.record(handle.root, agent, session_id, thread_id)
    return result


# -- claims (SPEC §13) ------------------------------------------------------------------------------------------

def _claim_at_first_prompt(handle: RepoHandle, agent: str, session_id: str, thread_id: str, state: Doc,
                           doc: Doc) -> None:
    """At a session's first prompt on its thread, claim the thread for it unless `[claims] auto = false`. A
    thread another live session holds is not taken, and the session is not blocked: its block says who holds
    it (`<held_by>`). Tried once per thread, so `leslie release` is not undone by the next prompt."""
    if state.get("claim_tried") == thread_id:
        return
    state["claim_tried"] = thread_id
    settings = doc["claims"]
    if not settings["auto"]:
        return
    from leslie.ops.claims import take

    # Held by another session (the block shows it), or not claimable now: the agent works on either way.
    with contextlib.suppress(LeslieError, OSError):
        take(handle.root, thread_id, session=session_id, agent=agent, ttl=settings["ttl_seconds"])


def held_by(handle: RepoHandle, session_id: str, thread_id: str) -> str | None:
    """The `<held_by .../>` element when another live session holds the thread, else None."""
    from markupsafe import escape

    from leslie.ops.claims import holder, read_claim
    from leslie.store.model import NOT_XML_CHAR

    stored = read_claim(handle.root, thread_id)
    if stored is None or stored.session == session_id:  # most blocks: no claim, or this session's
        return None
    try:
        held = holder(handle.repo(), thread_id)
    except (LeslieError, OSError):
        return None
    if held is None or held.claim.session == session_id:
        return None
    claim = held.claim
    values = {"agent": claim.agent, "session": claim.session, "since": claim.since, "last_seen": held.last_seen,
              "worktree": claim.worktree}
    # Escaped as the template escapes its attributes (`markupsafe`, Jinja's own); `xml.sax.saxutils` would
    # import `urllib.request` and its HTTP stack: ~20 ms of a cold hook.
    return "<held_by " + " ".join(f'{name}="{escape(NOT_XML_CHAR.sub("", value))}"'
                                  for name, value in values.items()) + "/>"


def _with_holder(text: str, element: str | None) -> str:
    """The block with `element` as the last child of `<thread_context>`."""
    end = text.rfind("</thread_context>")
    return text if element is None or end < 0 else f"{text[:end]}  {element}\n{text[end:]}"


def _file_size(path: str | None) -> int | None:
    if not path:
        return None
    try:
        return os.stat(path).st_size
    except OSError:
        return None


def _usage(value: object) -> tuple[int, int] | None:
    if isinstance(value, list) and len(value) == 2 and all(isinstance(v, int) for v in value):
        return value[0], value[1]
    return None


def _facts(state: Doc, fingerprint: str, *, compacted: bool, message: bool,
           transcript_bytes: int | None) -> Facts:
    injected = state.get("injected")
    if not isinstance(injected, dict):
        return Facts(first=True, message=message, usage=_usage(state.get("usage")),
                     transcript_bytes=transcript_bytes)
    previous = injected.get("transcript_bytes")
    return Facts(
        first=False,
        changed=injected.get("fingerprint") != fingerprint,
        compacted=compacted or bool(state.get("compaction_pending")),
        message=message,
        rounds_since=max(0, int(state["rounds"]) - int(injected["round"])),
        usage=_usage(state.get("usage")),
        usage_at_injection=_usage(injected.get("usage")),
        transcript_bytes=transcript_bytes,
        transcript_bytes_at_injection=previous if isinstance(previous, int) else None,
    )


MAX_SEEN_FILES = 2000  # referenced files whose signature a session remembers (its state file stays small)


def seen_record(referenced: dict[str, list[list[object]]]) -> Doc:
    """What a session saw at an injection: the referenced assets shown and each in-scope file's signature."""
    files = {str(f[0]): f"{f[1]}:{f[2]}" for listed in referenced.values() for f in listed}
    if len(files) > MAX_SEEN_FILES:
        files = dict(sorted(files.items())[:MAX_SEEN_FILES])
    return {"assets": sorted(referenced), "files": files}


def changed_assets(seen: object, referenced: dict[str, list[list[object]]]) -> list[str]:
    """Paths of the referenced assets (and files below them) whose content changed since the session last saw
    them (`seen_record`): a file whose size or modification time differs, appeared or disappeared. An asset
    the session never saw (a new reference) is not marked. Stat-based: no referenced file is ever hashed."""
    if not isinstance(seen, dict) or not isinstance(seen.get("files"), dict) or not isinstance(
            seen.get("assets"), list):
        return []
    before: dict[str, object] = seen["files"]
    known = set(seen["assets"])
    changed = set()
    for asset, listed in referenced.items():
        if asset not in known:
            continue
        now = {str(f[0]): f"{f[1]}:{f[2]}" for f in listed}
        then = {p for p in before if p == asset or (asset.endswith("/") and p.startswith(asset))}
        moved = [p for p in now if p in before and before[p] != now[p]]
        if set(now) != then or moved:
            changed.add(asset)
        changed.update(p for p in moved if p != asset)
    return sorted(changed)


def _inject(handle: RepoHandle, thread_id: str, state: Doc, doc: Doc, reason: str, fingerprint: str, *,
            via: str, transcript_bytes: int | None, entry: Doc, files: sessions.SessionFiles) -> Injection:
    from leslie.context.files import tokens_by_level

    warnings: list[str] = []
    referenced = referenced_now(handle.root, thread_id, doc)
    seen = state.get("seen")  # a token naming the `.seen` file; a dict in states written before it existed
    changed = [] if reason == "start" else changed_assets(
        seen if isinstance(seen, dict) else sessions.load_seen(files, seen), referenced)
    text, fingerprint = block_to_inject(handle, thread_id, fingerprint, state, doc, warnings, changed)
    text = _with_holder(text, held_by(handle, str(state.get("session_id")), thread_id))
    token = f"{state['rounds']}:{fingerprint}"
    sessions.save_seen(files, token, seen_record(referenced))
    state["seen"] = token
    size = len(text.encode("utf-8"))
    state["injected"] = {"round": state["rounds"], "reason": reason, "fingerprint": fingerprint, "via": via,
                         "at": sessions.utc_now(), "usage": state.get("usage"), "transcript_bytes": transcript_bytes}
    state["fingerprint"] = fingerprint
    state["compaction_pending"] = False
    state["context_bytes"] = size
    counts = state.setdefault("counts", sessions.new_counts())
    counts["injections"][reason] = int(counts["injections"].get(reason, 0)) + 1
    _count(state, "tokens_injected", tokens_of(size))
    levels = counts.setdefault("tokens_by_level", {})
    for level, tokens in tokens_by_level(text).items():
        levels[level] = int(levels.get(level, 0)) + tokens
    if changed:
        entry["changed"] = changed
    entry["fingerprint"] = fingerprint
    import zlib  # here, not at the top: only injections need it

    text_id = f"{fingerprint}:{size}:{zlib.crc32(text.encode('utf-8')):08x}"
    if state.get("logged_context") != text_id:  # the first, and every one that differs: verbatim
        entry["context"] = text
        state["logged_context"] = text_id
    return Injection(reason, text, tuple(warnings))


def on_user_message(handle: RepoHandle, *, agent: str, session_id: str, thread_id: str,
                        message: str | None = None, message_size: int | None = None,
                        usage: tuple[int, int] | None = None, transcript_path: str | None = None,
                        compacted: bool = False) -> Injection:
    """Record a round of the session; the `<thread_context>` block when the policy injects.

    `usage` is the agent's real `(used, size)` if it reports one; `transcript_path` lets the policy
    estimate context use from the transcript (its size, or the usage the agent recorded there);
    `compacted` says a compaction just happened. NotFoundError when the thread is missing or deleted;
    CorruptStateError for a malformed state file (which is then set aside, so the next event starts afresh).
    """

    def change(state: Doc, entries: list[Doc]) -> Injection:
        doc = settings_doc(handle, state)
        settings = Settings.from_mapping(doc["injection"])
        state["rounds"] = int(state["rounds"]) + 1
        if usage is not None:
            _note_usage(state, usage[0], usage[1], entries)
            state["usage_source"] = "reported"
        elif transcript_path is not None:
            from leslie.inject import transcripts

            recorded = _note_transcript_usage(state, agent, transcript_path, entries)
            if recorded is not None:
                settings.usage_threshold = transcripts.threshold(agent, recorded[0], recorded[1],
                                                                 settings.usage_threshold)
        _claim_at_first_prompt(handle, agent, session_id, thread_id, state, doc)
        transcript_bytes = _file_size(transcript_path)
        fingerprint = current_fingerprint(handle, thread_id, state)
        reason = decide(settings, _facts(state, fingerprint, compacted=compacted, message=True,
                                         transcript_bytes=transcript_bytes))
        size = message_size if message_size is not None else (
            len(message.encode("utf-8", "surrogatepass")) if message is not None else None)
        entry: Doc = {"kind": "input", "round": state["rounds"], "at": sessions.utc_now(), "thread": thread_id,
                      "size": size, "tokens": tokens_of(size) if size is not None else None, "reason": reason}
        if message is not None and doc["injection"].get("record_messages"):
            entry["message"] = message
        entries.append(entry)
        _count(state, "input_tokens", tokens_of(size or 0))
        result = Injection(None, None)
        state["user_tokens_since_injection"] = int(state.get("user_tokens_since_injection") or 0) + tokens_of(
            size or 0)
        if reason is not None:
            result = _inject(handle, thread_id, state, doc, reason, fingerprint, via="message",
                             transcript_bytes=transcript_bytes, entry=entry,
                             files=sessions.SessionFiles(handle.root, agent, session_id))
            state["user_tokens_since_injection"] = tokens_of(size or 0) + tokens_of(int(state["context_bytes"]))
        _count(state, "always_tokens", tokens_of(int(state.get("context_bytes") or 0)))
        return result

    result = _session(handle, agent, session_id, thread_id, change)
    return result if result is not None else Injection(None, None)


def on_session_start(handle: RepoHandle, *, agent: str, session_id: str, thread_id: str,
                         source: str = "startup", transcript_path: str | None = None) -> Injection:
    """A session (re)started: `startup`/`resume` inject if nothing (or an outdated context) was injected;
    `clear` starts the conversation over (reason `start`); `compact` is an observed compaction."""

    def change(state: Doc, entries: list[Doc]) -> Injection:
        doc = settings_doc(handle, state)
        settings = Settings.from_mapping(doc["injection"])
        if source == "clear":
            state["injected"] = None  # the conversation was wiped, and the context with it
        compacted = source == "compact" and not _reinjected_since_last_message(state)
        if compacted:
            _count(state, "compactions", 1)
        transcript_bytes = _file_size(transcript_path)
        fingerprint = current_fingerprint(handle, thread_id, state)
        reason = decide(settings, _facts(state, fingerprint, compacted=compacted, message=False,
                                         transcript_bytes=transcript_bytes))
        entry: Doc = {"kind": "session_start", "source": source, "round": state["rounds"],
                      "at": sessions.utc_now(), "thread": thread_id, "reason": reason}
        entries.append(entry)
        if reason is None:
            if compacted:
                state["compaction_pending"] = True
            return Injection(None, None)
        return _inject(handle, thread_id, state, doc, reason, fingerprint, via="session_start",
                       transcript_bytes=transcript_bytes, entry=entry,
                       files=sessions.SessionFiles(handle.root, agent, session_id))

    result = _session(handle, agent, session_id, thread_id, change)
    return result if result is not None else Injection(None, None)


def _reinjected_since_last_message(state: Doc) -> bool:
    """True when a session start re-injected after a compaction and no user message came since.

    Codex reports one compaction several times: `SessionStart` "compact" and `PostCompact` in either order,
    and an `exec resume` that compacts before its first turn sends `PostCompact`, `SessionStart` "resume"
    (which re-injects, the compaction pending) and then `SessionStart` "compact". The first re-injection covers
    them all.
    """
    injected = state.get("injected")
    return (isinstance(injected, dict) and injected.get("reason") == "compacted"
            and injected.get("via") == "session_start" and injected.get("round") == state["rounds"])


def _note_compaction(state: Doc, source: str, entries: list[Doc]) -> None:
    covered = _reinjected_since_last_message(state)
    if not covered:
        state["compaction_pending"] = True
        _count(state, "compactions", 1)
    entries.append({"kind": "compaction", "source": source, "round": state["rounds"], "at": sessions.utc_now(),
                    "covered": covered})


def _note_usage(state: Doc, used: int, size: int, entries: list[Doc], keeps_user_tokens: int = 0, *,
                detect_drop: bool = True, compacts_at: float | None = None) -> None:
    previous = _usage(state.get("usage"))
    state["usage"] = [used, size]
    if not detect_drop or previous is None or previous[0] <= 0 or used > previous[0] * SHARP_DROP:
        return
    since = state.get("user_tokens_since_injection")
    injected = state.get("injected")
    if (compacts_at is not None and isinstance(injected, dict) and injected.get("via") == "message"
            and _usage(injected.get("usage")) == previous and previous[0] >= compacts_at * previous[1]):
        # The block went with the prompt the agent compacted for (it compresses after the prompt's hook, at
        # `compacts_at` of the window, and no usage came in between): it follows the summary, nothing is lost.
        # It now sits at the start of the compacted conversation: the next crossing predicts again.
        injected["usage"] = [used, size]
        _count(state, "compactions", 1)
        entries.append({"kind": "compaction", "source": "usage", "round": state["rounds"],
                        "at": sessions.utc_now(), "covered": True, "kept": "the prompt that carried the block"})
        return
    if (keeps_user_tokens and isinstance(injected, dict) and injected.get("via") == "message"
            and isinstance(since, int) and since <= keeps_user_tokens):
        # The agent keeps its most recent user messages through a compaction (Codex: 20,000 tokens of them),
        # and the one that carried the block is among them: the context survived, nothing to re-inject.
        _count(state, "compactions", 1)
        entries.append({"kind": "compaction", "source": "usage", "round": state["rounds"],
                        "at": sessions.utc_now(), "covered": True, "kept": "recent user messages"})
        return
    _note_compaction(state, "usage", entries)


def _note_transcript_usage(state: Doc, agent: str, transcript_path: str,
                           entries: list[Doc]) -> tuple[int, int] | None:
    """Record the usage the agent's transcript shows; None when it shows none."""
    from leslie.inject import transcripts

    recorded = transcripts.read_usage(agent, transcript_path)
    if recorded is None:
        return None
    # Agents that announce their compactions (SessionStart compact, PostCompact): prediction only, the
    # transcript still shows the size before one until the next reply. Agents that compact unannounced
    # (transcripts.COMPACTS_BEFORE_MESSAGE): a sharp drop is the compaction.
    share = transcripts.COMPACTS_BEFORE_MESSAGE.get(agent)
    _note_usage(state, recorded[0], recorded[1], entries, detect_drop=share is not None, compacts_at=share)
    state["usage_source"] = "transcript"
    return recorded


def on_transcript_usage(handle: RepoHandle, *, agent: str, session_id: str, thread_id: str,
                        transcript_path: str) -> None:
    """Record the usage the agent's transcript shows now, between prompts (Gemini CLI's `PreCompress`, fired
    before every request): a sharp drop is a compaction, and the next user message re-injects."""

    def change(state: Doc, entries: list[Doc]) -> None:
        _note_transcript_usage(state, agent, transcript_path, entries)

    _session(handle, agent, session_id, thread_id, change)


def on_compaction(handle: RepoHandle, *, agent: str, session_id: str, thread_id: str,
                  source: str = "signal", forget_usage: bool = False, context_kept: bool = False) -> None:
    """A compaction was observed: mark it, so the next user message re-injects (reason `compacted`).

    `context_kept`: the agent kept the message that carried the block verbatim (pi keeps the most recent
    messages): recorded, nothing to re-inject. `forget_usage`: drop the usage recorded before it, for an agent
    that reports both its compactions and its usage (pi): the smaller usage after the compaction must not be
    read as a second one."""

    def change(state: Doc, entries: list[Doc]) -> None:
        if context_kept:
            _count(state, "compactions", 1)
            entries.append({"kind": "compaction", "source": source, "round": state["rounds"],
                            "at": sessions.utc_now(), "covered": True, "kept": "recent messages"})
        else:
            _note_compaction(state, source, entries)
        if forget_usage:
            state["usage"] = None

    _session(handle, agent, session_id, thread_id, change)


def on_conversation_cleared(handle: RepoHandle, *, agent: str, session_id: str, thread_id: str,
                                source: str = "clear") -> None:
    """The agent's conversation was wiped (`/clear`) without a session start: the next user message
    injects as at the start of a session (reason `start`)."""

    def change(state: Doc, entries: list[Doc]) -> None:
        state["injected"] = None
        state["compaction_pending"] = False
        entries.append({"kind": "cleared", "source": source, "round": state["rounds"], "at": sessions.utc_now()})

    _session(handle, agent, session_id, thread_id, change)


def on_usage(handle: RepoHandle, *, agent: str, session_id: str, thread_id: str, used: int,
                 size: int, keeps_user_tokens: int = 0, detect_drop: bool = True) -> None:
    """Record real usage: at or above `usage_threshold` of `size`, the next message re-injects (`predicted`);
    a sharp drop (to half or less of the previous report, `used` 0 included) is an observed compaction,
    unless the agent keeps its last `keeps_user_tokens` tokens of user messages through a compaction and the
    message that carried the block is among them, or `detect_drop` is False (an agent that announces its
    compactions itself: a drop is then no second compaction)."""

    def change(state: Doc, entries: list[Doc]) -> None:
        _note_usage(state, used, size, entries, keeps_user_tokens, detect_drop=detect_drop)
        state["usage_source"] = "reported"

    _session(handle, agent, session_id, thread_id, change)


def on_assistant_message(handle: RepoHandle, *, agent: str, session_id: str, thread_id: str,
                             size: int) -> None:
    """Log the agent's reply (its size; the text is never passed here)."""

    def change(state: Doc, entries: list[Doc]) -> None:
        state["assistant_messages"] = int(state["assistant_messages"]) + 1
        entries.append({"kind": "assistant", "round": state["rounds"], "at": sessions.utc_now(), "size": size,
                        "tokens": tokens_of(size)})

    _session(handle, agent, session_id, thread_id, change)
