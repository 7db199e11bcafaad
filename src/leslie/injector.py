"""Context injection, orchestrated for every integration: hooks, `leslie inject`, the ACP proxy.

Each event of an agent session (a user message, a session start, a compaction, a usage report, a reply)
runs under the session's lock: load its state, gather the facts, ask the pure policy
(`leslie.injection.decide`), render the `<thread_context>` block when it says so, save the state, append
to the log (`leslie.sessions`).

The common case, a message that injects nothing, must cost less than a second interpreter start (SPEC §10),
so this module never imports the repository model, Jinja2 or lxml on that path. Derived caches under
`.leslie/state/` (disposable: delete them at any time) make that possible:

- the *inputs key*: the stat signatures (mtime, size, inode) of every file the context's fingerprint reads
  (`leslie.context.context_fingerprint`): the thread's `thread.json`, its referenced threads' `thread.json`
  and scoped paths, `config.toml`, `.leslie/templates/` (and, when it holds files, the trust file: approving
  or revoking an override changes the block), the packaged template, and the leslie version. It
  is computed *before* anything is read, so a change racing with a computation can only make the key
  stale, never wrong. While it is unchanged the fingerprint is reused without being recomputed;
- `state/contexts/<thread>.json`: the last fingerprint and rendered block of a thread, shared by its
  sessions (see `leslie.context_cache`);
- `state/config-cache.json`: the `[injection]` and `[[context.commands]]` settings keyed by the stat of
  `config.toml`, so TOML is parsed only when it changes.
"""

from __future__ import annotations

import json
import os

from leslie import __version__, sessions
from leslie._fsio import atomic_write, read_regular
from leslie._json import StrictJSONError, dumps_canonical, loads_strict
from leslie.errors import CorruptStateError, NotFoundError, UsageError
from leslie.injection import Facts, Settings, decide, tokens_of

TYPE_CHECKING = False  # not `typing.TYPE_CHECKING`: importing typing costs milliseconds on the hook path
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import Any

    from leslie.repository import Repository

    Doc = dict[str, Any]

LESLIE_DIR = ".leslie"
CONTEXTS_DIR = os.path.join(LESLIE_DIR, "state", "contexts")
CONFIG_CACHE = os.path.join(LESLIE_DIR, "state", "config-cache.json")
CURRENT_THREAD = os.path.join(LESLIE_DIR, "state", "current_thread")  # as `Repository.current_thread_file()`
_ID_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789")
PACKAGED_TEMPLATE = os.path.join(os.path.dirname(__file__), "templates", "thread_context.xml.j2")
SHARP_DROP = 0.5  # reported usage falling to half (or less) of the previous report means a compaction


def is_thread_id(value: str) -> bool:
    """`value` matches `thread-[a-z0-9][a-z0-9-]{0,47}` (as `leslie.model.validate_thread_id`).

    Checked without a regular expression: compiling one costs more than this on the hook's hot path.
    """
    rest = value[7:]
    return (value.startswith("thread-") and 1 <= len(rest) <= 48 and rest[0] in _ID_CHARS
            and all(c in _ID_CHARS or c == "-" for c in rest))


class Injection:
    """What to add to the agent's conversation now: `reason` None means nothing (then `text` is None).

    `warnings` are one-line notes for the user (e.g. unapproved context commands) that the integration
    prints on stderr. Immutable. A plain class, not a dataclass: importing `dataclasses` costs about half a
    bare interpreter start on the hook's hot path.
    """

    __slots__ = ("reason", "text", "warnings")
    reason: str | None
    text: str | None
    warnings: tuple[str, ...]

    def __init__(self, reason: str | None, text: str | None, warnings: tuple[str, ...] = ()) -> None:
        object.__setattr__(self, "reason", reason)
        object.__setattr__(self, "text", text)
        object.__setattr__(self, "warnings", tuple(warnings))

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"Injection is immutable (cannot set {name})")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Injection):
            return NotImplemented
        return (self.reason, self.text, self.warnings) == (other.reason, other.text, other.warnings)

    def __hash__(self) -> int:
        return hash((self.reason, self.text, self.warnings))

    def __repr__(self) -> str:
        return f"Injection(reason={self.reason!r}, text={self.text!r}, warnings={self.warnings!r})"


class RepoHandle:
    """A repository root, with its `Repository` opened only when really needed (importing it costs ~35 ms).

    `served`: contexts are fingerprinted and rendered by the repository's render server
    (`leslie.render_server`) when one answers; for short-lived processes (hooks, `leslie inject`), which
    would otherwise import Jinja2 and lxml for a single render.
    """

    __slots__ = ("_repo", "root", "served")

    def __init__(self, root: str, repo: Repository | None = None, *, served: bool = False) -> None:
        self.root = root
        self._repo = repo
        self.served = served

    def repo(self) -> Repository:
        """The `Repository` at this root (imported and opened on first use)."""
        if self._repo is None:
            from pathlib import Path

            from leslie.repository import Repository

            self._repo = Repository(Path(self.root))
        return self._repo


# -- which repository and thread a session works on ---------------------------------------------------

def discover_root(start: str | None = None, explicit: str | None = None) -> str | None:
    """The repo root as `store.find_root` finds it (`explicit`, else `LESLIE_ROOT`, else the nearest folder
    above `start` holding `.leslie/`), or None; os-only, for the hook's hot path."""
    chosen = explicit or os.environ.get("LESLIE_ROOT") or None
    if chosen is not None:
        root = os.path.abspath(chosen)
        return root if os.path.isdir(os.path.join(root, LESLIE_DIR)) else None
    here = os.path.abspath(start or os.getcwd())
    while True:
        if os.path.isdir(os.path.join(here, LESLIE_DIR)):
            return here
        parent = os.path.dirname(here)
        if parent == here:
            return None
        here = parent


def recorded_current_thread(root: str) -> str | None:
    """The thread recorded by `leslie switch` (same file and rules as `Repository.recorded_current_thread`)."""
    try:
        value = read_regular(os.path.join(root, CURRENT_THREAD)).decode("utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return None
    return value or None


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
        chosen = state["thread"] if state is not None else recorded_current_thread(root)
    if chosen is None:
        return None
    if not is_thread_id(chosen):
        raise UsageError(f"invalid thread ID {chosen!r} (expected thread-xxxxxx)")
    return chosen


# -- the derived caches ---------------------------------------------------------------------------------

def _signature(path: str) -> list[int] | None:
    try:
        st = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    return [st.st_mtime_ns, st.st_size, st.st_ino]


def read_cache(path: str) -> Doc | None:
    """A derived cache document, None when it is missing or unreadable (caches are disposable; a link in its
    place is reported by `write_cache`, which the miss leads to)."""
    try:
        data = loads_strict(read_regular(path))
    except (OSError, StrictJSONError, CorruptStateError):
        return None
    return data if isinstance(data, dict) else None


def write_cache(path: str, doc: Doc) -> None:
    """Write a derived cache document; a failure only makes the next call slower, but a symbolic link in its
    place (or in its folders) is corrupt state: CorruptStateError, never a write through it."""
    try:  # noqa: SIM105 (contextlib is not loaded on the hook path)
        atomic_write(path, dumps_canonical(doc), durable=False)
    except OSError:  # a cache that cannot be written is only a slower next time
        pass


def inputs_key(root: str, thread_id: str) -> str:
    """Stat signatures of everything `context_fingerprint` reads; NotFoundError for a missing/deleted thread."""
    thread_dir = os.path.join(root, LESLIE_DIR, "threads", thread_id)
    thread_file = os.path.join(thread_dir, "thread.json")
    own = _signature(thread_file)
    if own is None:
        raise NotFoundError(f"no such thread: {thread_id}")
    try:  # a regular file of bounded size, strict JSON, its own id: as the repository reads it
        data = loads_strict(read_regular(thread_file))
    except FileNotFoundError:
        data = None
    except StrictJSONError as exc:
        raise CorruptStateError(thread_file, str(exc)) from None
    if isinstance(data, dict) and data.get("id") != thread_id:
        raise CorruptStateError(thread_file, f"its id {data.get('id')!r} does not match its folder")
    if isinstance(data, dict) and data.get("status") == "deleted":
        raise NotFoundError(f"thread {thread_id} is deleted")
    references = data.get("references") if isinstance(data, dict) else None
    refs: list[object] = []
    if isinstance(references, dict):
        for target, scope in sorted(references.items()):
            if not isinstance(target, str) or not is_thread_id(target):
                continue
            target_dir = os.path.join(root, LESLIE_DIR, "threads", target)
            folders = [os.path.isdir(os.path.join(target_dir, p)) for p in scope if isinstance(p, str)] \
                if isinstance(scope, list) else []
            refs.append([target, _signature(os.path.join(target_dir, "thread.json")), folders])
    templates_dir = os.path.join(root, LESLIE_DIR, "templates")
    try:
        templates: list[object] = [[n, _signature(os.path.join(templates_dir, n))]
                                   for n in sorted(os.listdir(templates_dir))]
    except (FileNotFoundError, NotADirectoryError):
        templates = []
    if templates:  # whether an override is used depends on its approval: the trust file's signature too
        from leslie.trust import trust_file

        templates.append(["trust", _signature(trust_file())])
    parts = [__version__, _signature(PACKAGED_TEMPLATE), own, data is not None,
             _signature(os.path.join(root, LESLIE_DIR, "config.toml")), templates, refs]
    return json.dumps(parts, separators=(",", ":"))


def settings_doc(handle: RepoHandle, state: Doc | None = None) -> Doc:
    """`{"injection": {...}, "commands": [...]}` from `config.toml`, parsed only when the file changed."""
    config_path = os.path.join(handle.root, LESLIE_DIR, "config.toml")
    key = json.dumps(_signature(config_path))
    if state is not None and state.get("config_key") == key and isinstance(state.get("config"), dict):
        cached: Doc = state["config"]
        return cached
    cache_path = os.path.join(handle.root, CONFIG_CACHE)
    cache = read_cache(cache_path)
    if cache is not None and cache.get("key") == key and isinstance(cache.get("config"), dict):
        doc: Doc = cache["config"]
    else:
        served = _served_settings(handle, key)
        doc = served if served is not None else parse_settings(handle.root, key)
    if state is not None:
        state["config_key"] = key
        state["config"] = doc
    return doc


def parse_settings(root: str, key: str) -> Doc:
    """Parse `config.toml` in this process and cache the settings under `key` (its stat, taken before)."""
    from dataclasses import asdict
    from pathlib import Path

    from leslie.config import load_config

    config = load_config(Path(root, LESLIE_DIR, "config.toml"))  # not `repo.config`: a proxy must see edits
    doc = {"injection": asdict(config.injection), "commands": [asdict(c) for c in config.commands]}
    write_cache(os.path.join(root, CONFIG_CACHE), {"key": key, "config": doc})
    return doc


def _served_settings(handle: RepoHandle, key: str) -> Doc | None:
    """The settings parsed (and cached) by the render server, or None."""
    if not handle.served:
        return None
    from leslie import render_server

    return render_server.request_settings(handle.root, key)


def current_fingerprint(handle: RepoHandle, thread_id: str, state: Doc | None = None) -> str:
    """The context's fingerprint, recomputed only when the inputs key changed."""
    key = inputs_key(handle.root, thread_id)
    if state is not None and state.get("inputs_key") == key and isinstance(state.get("fingerprint"), str):
        known: str = state["fingerprint"]
        return known
    cache_path = os.path.join(handle.root, CONTEXTS_DIR, thread_id + ".json")
    cache = read_cache(cache_path)
    if cache is not None and cache.get("key") == key and isinstance(cache.get("fingerprint"), str):
        fingerprint: str = cache["fingerprint"]
    elif (served := served_block(handle, thread_id, key)) is not None:
        fingerprint = served[1]  # the server cached the block and its fingerprint under `key`
    else:
        from leslie.context import context_fingerprint

        fingerprint = context_fingerprint(handle.repo(), thread_id)
        fresh: Doc = {"key": key, "fingerprint": fingerprint}
        if cache is not None and cache.get("fingerprint") == fingerprint and isinstance(cache.get("xml"), str):
            fresh["xml"] = cache["xml"]  # same context: the rendered block is still good
        write_cache(cache_path, fresh)
    if state is not None:
        state["inputs_key"] = key
        state["fingerprint"] = fingerprint
    return fingerprint


def served_block(handle: RepoHandle, thread_id: str, key: str) -> tuple[str, str, list[str]] | None:
    """`(xml, fingerprint, warnings)` rendered and cached under `key` by the render server, for a handle that
    is `served`; None when it is not, or no server answered (then render in this process)."""
    if not handle.served:
        return None
    from leslie import render_server

    return render_server.request(handle.root, thread_id, key)


def refresh_context_cache(repo: Repository, thread_id: str) -> str:
    """Render the thread's block (without commands) into the cache now; returns it (e.g. for `leslie watch`)."""
    from leslie.context_cache import refresh

    return refresh(repo, thread_id)


# -- session events -------------------------------------------------------------------------------------

def _count(state: Doc, name: str, amount: int) -> None:
    counts = state.setdefault("counts", sessions.new_counts())
    counts[name] = int(counts.get(name, 0)) + amount


def _bind(state: Doc, thread_id: str) -> None:
    """A session moved to another thread starts over there (its context is another thread's)."""
    if state.get("thread") != thread_id:
        state["thread"] = thread_id
        for key in ("injected", "inputs_key", "fingerprint", "static_commands", "logged_context"):
            state[key] = None
        state["compaction_pending"] = False


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
    return result


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


def _inject(handle: RepoHandle, thread_id: str, state: Doc, doc: Doc, reason: str, fingerprint: str, *,
            via: str, transcript_bytes: int | None, entry: Doc) -> Injection:
    from leslie.context_cache import block_to_inject  # here: only injections need it

    warnings: list[str] = []
    text, fingerprint = block_to_inject(handle, thread_id, fingerprint, state, doc, warnings)
    size = len(text.encode("utf-8"))
    state["injected"] = {"round": state["rounds"], "reason": reason, "fingerprint": fingerprint, "via": via,
                         "at": sessions.utc_now(), "usage": state.get("usage"), "transcript_bytes": transcript_bytes}
    state["fingerprint"] = fingerprint
    state["compaction_pending"] = False
    state["context_bytes"] = size
    counts = state.setdefault("counts", sessions.new_counts())
    counts["injections"][reason] = int(counts["injections"].get(reason, 0)) + 1
    _count(state, "tokens_injected", tokens_of(size))
    entry["fingerprint"] = fingerprint
    import zlib  # here, not at the top: only injections need it

    text_id = f"{fingerprint}:{size}:{zlib.crc32(text.encode('utf-8')):08x}"
    if state.get("logged_context") != text_id:  # the first, and every one that differs: verbatim
        entry["context"] = text
        state["logged_context"] = text_id
    return Injection(reason, text, tuple(warnings))


def handle_user_message(handle: RepoHandle, *, agent: str, session_id: str, thread_id: str,
                        message: str | None = None, message_size: int | None = None,
                        usage: tuple[int, int] | None = None, transcript_path: str | None = None,
                        compacted: bool = False) -> Injection:
    """`on_user_message` for a repository given by its root (the hooks' entry point)."""

    def change(state: Doc, entries: list[Doc]) -> Injection:
        doc = settings_doc(handle, state)
        settings = Settings.from_mapping(doc["injection"])
        state["rounds"] = int(state["rounds"]) + 1
        if usage is not None:
            _note_usage(state, usage[0], usage[1], entries)
            state["usage_source"] = "reported"
        elif transcript_path is not None:
            from leslie import transcripts

            recorded = transcripts.read_usage(agent, transcript_path)
            if recorded is not None:
                # Prediction only: these agents announce their compactions themselves (SessionStart compact,
                # PostCompact), and the transcript still shows the size before one until the next reply.
                _note_usage(state, recorded[0], recorded[1], entries, detect_drop=False)
                state["usage_source"] = "transcript"
                settings.usage_threshold = transcripts.threshold(agent, recorded[0], recorded[1],
                                                                 settings.usage_threshold)
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
                             transcript_bytes=transcript_bytes, entry=entry)
            state["user_tokens_since_injection"] = tokens_of(size or 0) + tokens_of(int(state["context_bytes"]))
        _count(state, "always_tokens", tokens_of(int(state.get("context_bytes") or 0)))
        return result

    result = _session(handle, agent, session_id, thread_id, change)
    return result if result is not None else Injection(None, None)


def handle_session_start(handle: RepoHandle, *, agent: str, session_id: str, thread_id: str,
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
                       transcript_bytes=transcript_bytes, entry=entry)

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
                detect_drop: bool = True) -> None:
    previous = _usage(state.get("usage"))
    state["usage"] = [used, size]
    if not detect_drop or previous is None or previous[0] <= 0 or used > previous[0] * SHARP_DROP:
        return
    since = state.get("user_tokens_since_injection")
    injected = state.get("injected")
    if (keeps_user_tokens and isinstance(injected, dict) and injected.get("via") == "message"
            and isinstance(since, int) and since <= keeps_user_tokens):
        # The agent keeps its most recent user messages through a compaction (Codex: 20,000 tokens of them),
        # and the one that carried the block is among them: the context survived, nothing to re-inject.
        _count(state, "compactions", 1)
        entries.append({"kind": "compaction", "source": "usage", "round": state["rounds"],
                        "at": sessions.utc_now(), "covered": True, "kept": "recent user messages"})
        return
    _note_compaction(state, "usage", entries)


def handle_compaction(handle: RepoHandle, *, agent: str, session_id: str, thread_id: str,
                      source: str = "signal") -> None:
    """A compaction was observed: mark it, so the next user message re-injects (reason `compacted`)."""

    def change(state: Doc, entries: list[Doc]) -> None:
        _note_compaction(state, source, entries)

    _session(handle, agent, session_id, thread_id, change)


def handle_conversation_cleared(handle: RepoHandle, *, agent: str, session_id: str, thread_id: str,
                                source: str = "clear") -> None:
    """The agent's conversation was wiped (`/clear`) without a session start: the next user message
    injects as at the start of a session (reason `start`)."""

    def change(state: Doc, entries: list[Doc]) -> None:
        state["injected"] = None
        state["compaction_pending"] = False
        entries.append({"kind": "cleared", "source": source, "round": state["rounds"], "at": sessions.utc_now()})

    _session(handle, agent, session_id, thread_id, change)


def handle_usage(handle: RepoHandle, *, agent: str, session_id: str, thread_id: str, used: int,
                 size: int, keeps_user_tokens: int = 0) -> None:
    """Record the agent's real usage (see `on_usage`)."""

    def change(state: Doc, entries: list[Doc]) -> None:
        _note_usage(state, used, size, entries, keeps_user_tokens)
        state["usage_source"] = "reported"

    _session(handle, agent, session_id, thread_id, change)


def handle_assistant_message(handle: RepoHandle, *, agent: str, session_id: str, thread_id: str,
                             size: int) -> None:
    """Log the agent's reply (its size; the text is never passed here)."""

    def change(state: Doc, entries: list[Doc]) -> None:
        state["assistant_messages"] = int(state["assistant_messages"]) + 1
        entries.append({"kind": "assistant", "round": state["rounds"], "at": sessions.utc_now(), "size": size,
                        "tokens": tokens_of(size)})

    _session(handle, agent, session_id, thread_id, change)


# -- the public API -------------------------------------------------------------------------------------

def _handle(repo: Repository) -> RepoHandle:
    return RepoHandle(str(repo.root), repo)


def on_user_message(repo: Repository, *, agent: str, session_id: str, thread_id: str, message: str | None = None,
                    message_size: int | None = None, usage: tuple[int, int] | None = None,
                    transcript_path: str | None = None, compacted: bool = False) -> Injection:
    """Record a round of the session; the `<thread_context>` block when the policy injects.

    `usage` is the agent's real `(used, size)` if it reports one; `transcript_path` lets the policy
    estimate context use from the transcript's size; `compacted` says a compaction just happened.
    NotFoundError when the thread is missing or deleted; CorruptStateError for a malformed state file
    (which is then set aside, so the next event starts afresh).
    """
    return handle_user_message(_handle(repo), agent=agent, session_id=session_id, thread_id=thread_id,
                               message=message, message_size=message_size, usage=usage,
                               transcript_path=transcript_path, compacted=compacted)


def on_session_start(repo: Repository, *, agent: str, session_id: str, thread_id: str, source: str = "startup",
                     transcript_path: str | None = None) -> Injection:
    """A session started (`startup`, `resume`, `clear`, `compact`); the block when the policy injects now."""
    return handle_session_start(_handle(repo), agent=agent, session_id=session_id, thread_id=thread_id,
                                source=source, transcript_path=transcript_path)


def on_compaction(repo: Repository, *, agent: str, session_id: str, thread_id: str) -> None:
    """A compaction was observed: the next user message re-injects (reason `compacted`)."""
    handle_compaction(_handle(repo), agent=agent, session_id=session_id, thread_id=thread_id)


def on_conversation_cleared(repo: Repository, *, agent: str, session_id: str, thread_id: str) -> None:
    """The conversation was wiped without a new session (an ACP `/clear`): the next message injects afresh."""
    handle_conversation_cleared(_handle(repo), agent=agent, session_id=session_id, thread_id=thread_id)


def on_usage(repo: Repository, *, agent: str, session_id: str, thread_id: str, used: int, size: int,
             keeps_user_tokens: int = 0) -> None:
    """Record real usage: at or above `usage_threshold` of `size`, the next message re-injects (`predicted`);
    a sharp drop (to half or less of the previous report, `used` 0 included) is an observed compaction,
    unless the agent keeps its last `keeps_user_tokens` tokens of user messages through a compaction and the
    message that carried the block is among them."""
    handle_usage(_handle(repo), agent=agent, session_id=session_id, thread_id=thread_id, used=used, size=size,
                 keeps_user_tokens=keeps_user_tokens)


def on_assistant_message(repo: Repository, *, agent: str, session_id: str, thread_id: str, size: int) -> None:
    """Log an assistant reply of `size` bytes in the session's log."""
    handle_assistant_message(_handle(repo), agent=agent, session_id=session_id, thread_id=thread_id, size=size)
