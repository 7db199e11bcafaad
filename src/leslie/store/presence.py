"""Presence (SPEC §13): which agent session works on which thread, in which work tree, and when it was last seen.

Every context event of an agent session (`inject.injector`, under the session's lock) rewrites one small record,
`presence/<agent>.<session>.json` in the clone's shared machine folder (`store.machine.shared_dir`: the git
common folder's `leslie/shared/`, seen by every work tree of the clone and never committed):

    {"agent": ..., "session": ..., "thread": ..., "worktree": ..., "branch": ..., "since": ..., "last_seen": ...}

A tool call's hook (`PreToolUse`) refreshes it too (`refresh`), at most every `REFRESH_SECONDS`, so an agent
busy with one long turn stays live.

`since` is when the session came to its thread; `last_seen` its latest event (UTC, ISO 8601, to the second). A
session is live while it was seen within the claims' ttl (`[claims] ttl_seconds`). Records are read as every
state file is: no link followed, size-capped, strict JSON; one that is not a record is skipped.
"""

from __future__ import annotations

import json
import os
import time
from datetime import datetime
from typing import Any, NamedTuple

from leslie.errors import CorruptStateError, UsageError
from leslie.store.fsio import atomic_write, read_regular
from leslie.store.jsonio import StrictJSONError, loads_strict
from leslie.store.machine import head_branch, shared_dir
from leslie.store.sessions import safe_session_name, utc_now, validate_agent

PRESENCE = "presence"
RECORD_CAP = 64 * 1024  # bytes a record may have (a real one has ~300)
LISTED = 10_000  # records `seen` reads at most, the most recent first
REFRESH_SECONDS = 30  # a tool call rewrites a session's record only when it is at least this old


class Presence(NamedTuple):
    """One agent session's latest whereabouts (a named tuple, as `ops.claims.Claim`)."""

    agent: str
    session: str
    thread: str
    worktree: str
    branch: str | None
    since: str
    last_seen: str

    def to_json(self) -> dict[str, Any]:
        return self._asdict()

    def live(self, ttl: float, now: float | None = None) -> bool:
        """Whether it was seen within `ttl` seconds of `now`."""
        return seconds_since(self.last_seen, now) <= ttl


def parse_time(text: str) -> float:
    """Seconds since the epoch of a UTC time as `utc_now` writes it; 0 for anything else (long ago)."""
    try:
        moment = datetime.fromisoformat(text)
    except (TypeError, ValueError):
        return 0.0
    return moment.timestamp() if moment.tzinfo is not None else 0.0


def seconds_since(text: str, now: float | None = None) -> float:
    return (time.time() if now is None else now) - parse_time(text)


def presence_dir(root: str) -> str:
    return os.path.join(shared_dir(root), PRESENCE)


def _path(root: str, agent: str, session: str) -> str:
    return os.path.join(presence_dir(root), f"{validate_agent(agent)}.{safe_session_name(session)}.json")


def _from_json(data: object) -> Presence | None:
    if not isinstance(data, dict):
        return None
    fields = ("agent", "session", "thread", "worktree", "since", "last_seen")
    if not all(isinstance(data.get(name), str) for name in fields):
        return None
    branch = data.get("branch")
    return Presence(data["agent"], data["session"], data["thread"], data["worktree"],
                    branch if isinstance(branch, str) else None, data["since"], data["last_seen"])


def read_record(path: str) -> Presence | None:
    """The record at `path`; None when there is none or it is not one (a damaged or hostile file)."""
    try:
        return _from_json(loads_strict(read_regular(path, RECORD_CAP)))
    except (OSError, CorruptStateError, StrictJSONError):
        return None


def record(root: str, agent: str, session: str, thread: str) -> Presence:
    """Note that `session` of `agent` was seen now, working on `thread` in the work tree at `root`. Called
    under the session's lock, so one session's records never race."""
    path = _path(root, agent, session)
    now = utc_now()
    old = read_record(path)
    since = old.since if old is not None and old.thread == thread and old.worktree == root else now
    seen = Presence(agent, session, thread, root, head_branch(root), since, now)
    text = json.dumps(seen.to_json(), ensure_ascii=False, sort_keys=True, separators=(",", ":")) + "\n"
    atomic_write(path, text.encode("utf-8", "surrogatepass"), durable=False)
    return seen


def refresh(root: str, agent: str, session: str, thread: str) -> None:
    """Note a tool call of `session`: `record`, unless its record already says this thread and work tree and was
    written less than `REFRESH_SECONDS` ago (an agent makes several tool calls a second, and their hooks must stay
    cheap: one small read). Not under the session's lock: a race with its prompt's `record` writes the same."""
    old = lookup(root, agent, session)
    if old is None or old.thread != thread or old.worktree != root or seconds_since(old.last_seen) >= REFRESH_SECONDS:
        record(root, agent, session, thread)


def lookup(root: str, agent: str, session: str) -> Presence | None:
    """The record of one session, if any."""
    try:
        path = _path(root, agent, session)
    except UsageError:  # not an agent name leslie writes
        return None
    found = read_record(path)
    return found if found is not None and found.session == session else None


def seen(root: str) -> list[Presence]:
    """Every record of the clone (live or not), the most recently written first, at most `LISTED`."""
    folder = presence_dir(root)
    try:
        with os.scandir(folder) as listing:
            found = [(entry.stat(follow_symlinks=False).st_mtime_ns, entry.path) for entry in listing
                     if entry.name.endswith(".json") and entry.is_file(follow_symlinks=False)]
    except OSError:
        return []
    found.sort(reverse=True)
    records = (read_record(path) for _mtime, path in found[:LISTED])
    return [r for r in records if r is not None]
