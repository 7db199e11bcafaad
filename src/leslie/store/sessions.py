"""Agent sessions (SPEC §7.2): runtime state in the machine state folder's `sessions/` (`store.machine`:
`<git dir>/leslie/sessions/`; outside git, `.leslie/state/sessions/`).

Per agent session, three files named after the agent and the session ID (`<agent>.<session>`):

- `<name>.json`: the state, a small JSON document (sorted keys, one line) rewritten with `store.atomic_write`
  at every event: the round count, the last injection (round, reason, fingerprint, usage and transcript size then),
  the last known usage, the pending-compaction marker, cached settings and fingerprints, and counters.
- `<name>.jsonl`: the append-only log, one JSON object a line, one line per event: `input` (a user message:
  round, time, size in bytes and tokens, the injection reason or null), `assistant` (a reply, where the
  integration sees it), `session_start`, `compaction`. The first injected context of a session is stored
  verbatim (`context`); a later injection stores the full text only when it differs from the last stored
  one, otherwise its `fingerprint`. Message texts only with `record_messages = true`. A line is appended
  with one `O_APPEND` write (not rewritten), so a crash can at most tear the last line, which readers skip.
- `<name>.seen`: the signatures of the referenced files the last injection showed (for `changed` markers),
  read and written only at injections.
- `<name>.lock`: the per-session `fcntl.flock` that serialises two hooks of the same session running at
  once (see `leslie.store.fsio.FileLock` for why not `filelock`).

Session IDs come from agents: one that is not a plain file-name-safe word is replaced by a hash of it.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import re
import stat
import time
from typing import Any

from leslie.errors import CorruptStateError, UsageError
from leslie.store.fsio import LINKED, FileLock, atomic_write, read_regular, refuse_links, storage_error
from leslie.store.jsonio import StrictJSONError, loads_strict
from leslie.store.machine import state_dir

STATE_VERSION = 1
LOCK_TIMEOUT = 5.0  # seconds a hook waits for another hook of the same session before giving up
# `read_log` reads at most the last 16 MiB of a log (about 80,000 events): a longer one is read from its tail,
# starting at its first whole line there (docs/security.md).
LOG_READ_CAP = 16 * 1024 * 1024
LISTED_SESSIONS = 10_000  # session states `list_states` reads at most, the most recent first
LISTED_BYTES = 256 * 1024 * 1024  # and the bytes it reads at most (a real state is a few KB)

_AGENT_NAME = re.compile(r"[a-z0-9][a-z0-9-]{0,31}")
_SAFE_SESSION_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,95}")


def utc_now() -> str:
    """The current UTC time, ISO 8601 to the second."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def validate_agent(agent: str) -> str:
    """An agent name (`claude-code`, `codex`, `acp`, `inject`, ...): lowercase letters, digits, dashes."""
    if not _AGENT_NAME.fullmatch(agent):
        raise UsageError(f"invalid agent name {agent!r}: use lowercase letters, digits and dashes")
    return agent


def safe_session_name(session_id: str) -> str:
    """`session_id` itself when it is a safe file name, else `h-` and a hash of it."""
    if _SAFE_SESSION_NAME.fullmatch(session_id) and not session_id.endswith((".json", ".jsonl", ".lock")):
        return session_id
    return "h-" + hashlib.sha256(session_id.encode("utf-8", "surrogatepass")).hexdigest()[:32]


class SessionFiles:
    """Where one agent session's state, log and lock live."""

    __slots__ = ("lock", "log", "name", "seen", "state")

    def __init__(self, root: str, agent: str, session_id: str) -> None:
        self.name = f"{validate_agent(agent)}.{safe_session_name(session_id)}"
        folder = sessions_dir(root)
        self.state = os.path.join(folder, self.name + ".json")
        self.log = os.path.join(folder, self.name + ".jsonl")
        self.lock = os.path.join(folder, self.name + ".lock")
        self.seen = os.path.join(folder, self.name + ".seen")  # not `.json`: `list_states` must not take it


def sessions_dir(root: str) -> str:
    """The folder of agent sessions, in this work tree's machine state (`store.machine`)."""
    return os.path.join(state_dir(root), "sessions")


def new_state(agent: str, session_id: str, thread_id: str) -> dict[str, Any]:
    """The state of a session that has seen nothing yet."""
    now = utc_now()
    return {
        "version": STATE_VERSION,
        "agent": agent,
        "session_id": session_id,
        "thread": thread_id,
        "created_at": now,
        "updated_at": now,
        "rounds": 0,
        "assistant_messages": 0,
        "injected": None,
        "compaction_pending": False,
        "usage": None,
        "counts": new_counts(),
    }


def new_counts() -> dict[str, Any]:
    """Zeroed counters for `leslie stats`."""
    return {"injections": {}, "tokens_injected": 0, "always_tokens": 0, "input_tokens": 0, "compactions": 0}


_COUNTERS = ("tokens_injected", "always_tokens", "input_tokens", "compactions")


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _check_shape(path: str, data: Any) -> dict[str, Any]:
    """`data` when it has the shape every reader of a state relies on, else CorruptStateError: the hook then
    sets the file aside and starts afresh, `sessions` and `stats` skip it (a hand edit, a damaged disk)."""
    if not isinstance(data, dict):
        raise CorruptStateError(path, "is not a JSON object")
    if data.get("version") != STATE_VERSION:
        raise CorruptStateError(path, f"has an unknown version {data.get('version')!r}")
    for key in ("rounds", "assistant_messages"):
        if not isinstance(data.get(key), int) or isinstance(data.get(key), bool):
            raise CorruptStateError(path, f"{key} is not an integer")
    for key in ("agent", "session_id", "thread"):
        if not isinstance(data.get(key), str):
            raise CorruptStateError(path, f"{key} is not a string")
    counts = data.get("counts")
    if (not isinstance(counts, dict) or not isinstance(counts.get("injections"), dict)
            or not all(_is_int(n) for n in counts["injections"].values())
            or not all(_is_int(counts.get(key, 0)) for key in _COUNTERS)):
        raise CorruptStateError(path, "counts is malformed")
    for key in ("context_bytes", "user_tokens_since_injection"):  # counted on with `int()` at every event
        if data.get(key) is not None and not _is_int(data[key]):
            raise CorruptStateError(path, f"{key} is not an integer")
    injected = data.get("injected")
    if injected is not None and not (isinstance(injected, dict) and isinstance(injected.get("round"), int)):
        raise CorruptStateError(path, "injected is malformed")
    return data


def read_state_file(path: str) -> dict[str, Any] | None:
    """A session state document, None when there is none; CorruptStateError naming the file if malformed,
    a symbolic link or not a regular file."""
    try:
        data = read_regular(path)
    except FileNotFoundError:
        return None
    try:
        return _check_shape(path, loads_strict(data))
    except StrictJSONError as exc:
        raise CorruptStateError(path, str(exc)) from None


def load_state(files: SessionFiles) -> dict[str, Any] | None:
    """The session's state, None for a new session; CorruptStateError if the file is malformed, or if it
    or the session's log is a link (checked here, before the event changes anything)."""
    refuse_links(files.log)
    return read_state_file(files.state)


def set_aside(files: SessionFiles) -> str | None:
    """Rename a corrupt state file out of the way (kept for inspection); the next event starts afresh.

    A link is left where it is (renaming it would only hide it; a linked folder would move a file outside):
    every event reports it until someone removes it.
    """
    target = f"{files.state}.corrupt-{int(time.time())}"
    try:
        refuse_links(files.state)
        os.replace(files.state, target)
    except (OSError, CorruptStateError):
        return None
    return target


def save_state(files: SessionFiles, state: dict[str, Any]) -> None:
    """Atomically rewrite the session's state: JSON with sorted keys on one line.

    Not the indented canonical form of the committed files: that encoder runs in Python, and the hook
    rewrites this file at every prompt (with 50 references, its signatures were a fifth of the hook's own
    work). The state is local and disposable; `leslie sessions` and `stats` are how people read it.
    """
    state["updated_at"] = utc_now()
    text = json.dumps(state, ensure_ascii=False, sort_keys=True, allow_nan=False, separators=(",", ":")) + "\n"
    atomic_write(files.state, text.encode("utf-8", "surrogatepass"), durable=False, recycle=True)  # under its lock


def load_seen(files: SessionFiles, token: object) -> dict[str, Any] | None:
    """The referenced files' signatures the session saw at its last injection (`save_seen`), None when there
    is none, it is unreadable, or it is not the one `token` (the state's) names: a disposable record."""
    if not isinstance(token, str):
        return None
    try:
        doc = loads_strict(read_regular(files.seen))
    except (OSError, CorruptStateError, StrictJSONError):
        return None
    return doc if isinstance(doc, dict) and doc.get("token") == token else None


def save_seen(files: SessionFiles, token: str, record: dict[str, Any]) -> None:
    """Keep `record` (what an injection showed) beside the state, under `token`.

    Beside it, not in it: with 50 references it is ~20 KB, which every prompt would otherwise parse and
    rewrite, while only an injection reads it. Written before the state that names its token (under the
    session lock): a crash between the two leaves a token that matches nothing, and costs only the
    `changed` markers of the next injection.
    """
    text = json.dumps({"token": token, **record}, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    atomic_write(files.seen, (text + "\n").encode("utf-8", "surrogatepass"), durable=False)


def append_log(files: SessionFiles, entry: dict[str, Any]) -> None:
    """Append one entry to the session's log with a single O_APPEND write."""
    # Lone surrogates (possible in agent-supplied text) become JSON \\u escapes, so the line stays UTF-8.
    line = json.dumps(entry, ensure_ascii=False, sort_keys=True, separators=(",", ":")) + "\n"
    data = line.encode("utf-8", "backslashreplace")
    refuse_links(files.log)  # a committed log linked to .git/hooks/post-checkout must never grow a line
    os.makedirs(os.path.dirname(files.log), exist_ok=True)
    flags = os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        fd = os.open(files.log, flags, 0o644)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise CorruptStateError(files.log, LINKED) from None
        raise storage_error("write", files.log, exc) from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise CorruptStateError(files.log, "is not a regular file (a device, FIFO or socket)")
        size = info.st_size
        if size and os.pread(fd, 1, size - 1) != b"\n":
            data = b"\n" + data  # after a torn last line (a crash mid-write), start a fresh line
        os.write(fd, data)
    finally:
        os.close(fd)


def read_log(path: str, limit: int = LOG_READ_CAP) -> list[dict[str, Any]]:
    """Every entry of a session log, skipping a torn or malformed line; of a log over `limit` bytes, the
    entries of its last `limit` bytes (a link or special file raises CorruptStateError naming it)."""
    try:
        data = read_regular(path, limit, tail=True)
    except FileNotFoundError:
        return []
    if len(data) >= limit:  # read from the tail: its first line is (most likely) a piece of one
        data = data[data.find(b"\n") + 1:]
    entries = []
    for raw in data.split(b"\n"):
        try:
            entry = json.loads(raw)
        except (ValueError, RecursionError):
            continue
        if isinstance(entry, dict):
            entries.append(entry)
    return entries


class _NoLock:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


def session_lock(files: SessionFiles, timeout: float = LOCK_TIMEOUT) -> FileLock | _NoLock:
    """The lock that serialises events of one session (hold it around load → change → save → log).

    `LESLIE_TEST_DISABLE_LOCK=1` disables it, like the index lock: only for the negative control that
    proves the concurrency test can fail.
    """
    if os.environ.get("LESLIE_TEST_DISABLE_LOCK") == "1":
        return _NoLock()
    return FileLock(files.lock, timeout)


def list_states(root: str) -> list[tuple[str, dict[str, Any]]]:
    """Every readable session state of the repository, as (file name stem, state), oldest activity first.

    Corrupt files are skipped: this feeds `leslie sessions`, `leslie stats` and `leslie status`, which report
    what they can. Bounded whatever the folder holds (outside git it can come with a copied folder): the
    LISTED_SESSIONS most recently written files, and no more than LISTED_BYTES read in all.
    """
    folder = sessions_dir(root)
    try:
        names = [n for n in os.listdir(folder) if n.endswith(".json")]
    except (FileNotFoundError, NotADirectoryError):
        return []
    stamped = []
    for name in names:
        try:
            info = os.lstat(os.path.join(folder, name))
        except OSError:
            continue
        stamped.append((info.st_mtime_ns, info.st_size, name))
    stamped.sort(reverse=True)
    budget = LISTED_BYTES
    found = []
    for _mtime, size, name in stamped[:LISTED_SESSIONS]:
        budget -= size
        if budget < 0:
            break
        try:
            state = read_state_file(os.path.join(folder, name))
        except CorruptStateError:
            continue
        if state is not None:
            found.append((name[: -len(".json")], state))
    found.sort(key=lambda item: (str(item[1].get("updated_at", "")), item[0]))
    return found


def summary(name: str, state: dict[str, Any]) -> dict[str, Any]:
    """One session as `leslie sessions` shows it."""
    raw_counts = state.get("counts")
    counts: dict[str, Any] = raw_counts if isinstance(raw_counts, dict) else new_counts()
    injected = state.get("injected") if isinstance(state.get("injected"), dict) else None
    return {
        "name": name,
        "agent": state.get("agent"),
        "session_id": state.get("session_id"),
        "thread": state.get("thread"),
        "rounds": state.get("rounds", 0),
        "assistant_messages": state.get("assistant_messages", 0),
        "injections": dict(counts.get("injections", {})),
        "tokens_injected": counts.get("tokens_injected", 0),
        "always_tokens": counts.get("always_tokens", 0),
        "tokens_by_level": _levels(counts.get("tokens_by_level")),
        "compactions": counts.get("compactions", 0),
        "usage": state.get("usage"),
        # Where the usage figure came from: "reported" by the agent (ACP, `inject --usage`), read from its
        # "transcript", or None: the policy then estimates from the transcript's size or the rounds.
        "usage_source": state.get("usage_source"),
        "last_injection": None if injected is None else {"round": injected.get("round"),
                                                         "reason": injected.get("reason")},
        "created_at": state.get("created_at"),
        "updated_at": state.get("updated_at"),
    }


LEVELS = ("paths", "own", "refs")  # as `leslie.context_files.tokens_by_level`


def _levels(raw: object) -> dict[str, int]:
    """Tokens injected per level of progressive loading: `paths` (the block without inlined text), `own`
    (the own plan and progress), `refs` (referenced files)."""
    values = raw if isinstance(raw, dict) else {}
    return {level: int(values.get(level, 0)) if isinstance(values.get(level, 0), int) else 0 for level in LEVELS}


def list_sessions(root: str, thread_id: str | None = None) -> list[dict[str, Any]]:
    """Summaries of the repository's agent sessions (of one thread, if given), oldest activity first."""
    return [summary(name, state) for name, state in list_states(root)
            if thread_id is None or state.get("thread") == thread_id]


def stats(root: str, thread_id: str | None = None) -> dict[str, Any]:
    """Totals over the sessions: rounds, injections by reason, tokens injected (bytes/4; per level: paths,
    own plan/progress, referenced files), and the tokens
    that mode `always` (the context on every user message) would have spent in the same rounds."""
    rows = list_sessions(root, thread_id)
    by_reason: dict[str, int] = {}
    for row in rows:
        for reason, count in row["injections"].items():
            by_reason[reason] = by_reason.get(reason, 0) + int(count)
    injected = sum(int(r["tokens_injected"]) for r in rows)
    levels = {level: sum(r["tokens_by_level"][level] for r in rows) for level in LEVELS}
    always = sum(int(r["always_tokens"]) for r in rows)
    return {
        "thread": thread_id,
        "sessions": len(rows),
        "rounds": sum(int(r["rounds"]) for r in rows),
        "assistant_messages": sum(int(r["assistant_messages"]) for r in rows),
        "compactions": sum(int(r["compactions"]) for r in rows),
        "injections": dict(sorted(by_reason.items())),
        "injections_total": sum(by_reason.values()),
        "tokens_injected": injected,
        "tokens_by_level": levels,
        "always_tokens": always,
        "tokens_saved": always - injected,
        "saved_percent": round(100.0 * (always - injected) / always, 1) if always else 0.0,
        "per_session": [{key: row[key] for key in ("agent", "session_id", "thread", "rounds", "injections",
                                                   "tokens_injected", "tokens_by_level", "always_tokens",
                                                   "compactions", "usage", "usage_source")}
                        for row in rows],
    }
