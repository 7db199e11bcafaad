"""Claims (SPEC §13): a thread taken by one agent session, so that two agents do not work on it unaware.

A claim is `claims/<thread-id>.json` in the clone's shared machine folder (`store.machine.shared_dir`, beside
the presence records of `store.presence`: every work tree of the clone sees it, git never does):

    {"thread", "agent", "session", "worktree", "branch", "since", "renewed", "ttl"}

Every change of a claim is made under one lock, `claims.lock` there (`store.fsio.FileLock`, a `flock`):
whoever takes it reads the claim, decides and writes, so of any number of concurrent claims of a free thread
exactly one wins, and the others see its claim. A claim is *live* while its session was seen within its ttl:
the later of its own `renewed` time and its session's presence record (`last_seen`, rewritten by every
event of a hook session) while that record is on the claimed thread. It ends when it is released, when its
session goes unseen for the ttl, or when its thread is done or deleted (ended then, and checked by every
reader: a merge can bring a thread's end).

A session is named by its ID alone (the agent is shown, not compared). From the command line it is
`--session`, else `LESLIE_SESSION`, else the agent session whose shell runs the command (`calling_session`),
else `cli-<login name>`: a person at a shell.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple

from leslie.errors import CorruptStateError, HeldError, LeslieError, UsageError
from leslie.store import presence
from leslie.store.config import MAX_TTL
from leslie.store.fsio import FileLock, atomic_write, read_regular, storage_error
from leslie.store.jsonio import StrictJSONError, loads_strict
from leslie.store.machine import head_branch, shared_dir, shared_records
from leslie.store.model import TOMBSTONE, validate_thread_id
from leslie.store.sessions import utc_now, validate_agent

if TYPE_CHECKING:
    from leslie.store.repository import Repository

CLAIMS = "claims"
LOCK = "claims.lock"
LOCK_TIMEOUT = 10.0  # seconds a claim waits for another one being made (each takes a millisecond or two)
CLAIM_CAP = 64 * 1024
ENDED = ("done", TOMBSTONE)  # a thread with one of these statuses has no claim


class Claim(NamedTuple):
    """One thread's claim, as stored (a named tuple: built on a hook's path, where a frozen dataclass's
    generated methods cost a cold process milliseconds to compile)."""

    thread: str
    agent: str
    session: str
    worktree: str
    branch: str | None
    since: str
    renewed: str
    ttl: int

    def to_json(self) -> dict[str, Any]:
        return self._asdict()


class Holder(NamedTuple):
    """A live claim and when its session was last seen."""

    claim: Claim
    last_seen: str

    def to_json(self) -> dict[str, Any]:
        return {**self.claim.to_json(), "last_seen": self.last_seen}

    def describe(self) -> str:
        """One line naming the holder, for messages."""
        claim = self.claim
        return (f"{claim.thread} is held by {claim.agent} session {claim.session} (worktree {claim.worktree}, "
                f"since {claim.since}, last seen {self.last_seen})")


# Agents that tell the commands their shell tool runs which session runs them (read in their bundles: Claude
# Code 2.1.330 sets CLAUDECODE=1 and CLAUDE_CODE_SESSION_ID for every Bash command). A `leslie claim` or `leslie
# next` an agent runs is then its own session's, the one its hooks know.
AGENT_SESSION_ENV = (("CLAUDE_CODE_SESSION_ID", "claude-code"),)


def calling_session(session: str | None = None, agent: str | None = None) -> tuple[str, str]:
    """(agent, session) of a command line: `session` (of `agent`, else `cli`), else `LESLIE_SESSION`, else the
    agent session whose shell tool runs the command (`AGENT_SESSION_ENV`), else `cli-<login name>`."""
    chosen = session or os.environ.get("LESLIE_SESSION", "").strip()
    if chosen:
        return agent or "cli", chosen
    for variable, name in AGENT_SESSION_ENV:
        value = os.environ.get(variable, "").strip()
        if value:
            return agent or name, value
    import getpass  # here: only a command line without a session needs it

    try:
        return agent or "cli", "cli-" + getpass.getuser()
    except (OSError, KeyError):
        return agent or "cli", "cli"


def claims_dir(root: str | os.PathLike[str]) -> str:
    return os.path.join(shared_dir(root), CLAIMS)


def _path(root: str | os.PathLike[str], thread_id: str) -> str:
    return os.path.join(claims_dir(root), validate_thread_id(thread_id) + ".json")


def _lock(root: str | os.PathLike[str]) -> FileLock:
    return FileLock(os.path.join(shared_dir(root), LOCK), LOCK_TIMEOUT)


def _from_json(data: object) -> Claim | None:
    if not isinstance(data, dict):
        return None
    texts = ("thread", "agent", "session", "worktree", "since", "renewed")
    ttl, branch = data.get("ttl"), data.get("branch")
    if not all(isinstance(data.get(name), str) for name in texts) or type(ttl) is not int or ttl < 1:
        return None
    return Claim(data["thread"], data["agent"], data["session"], data["worktree"],
                 branch if isinstance(branch, str) else None, data["since"], data["renewed"], ttl)


def read_claim(root: str | os.PathLike[str], thread_id: str) -> Claim | None:
    """The stored claim of `thread_id`, live or not; None when there is none or the file is not one."""
    try:
        claim = _from_json(loads_strict(read_regular(_path(root, thread_id), CLAIM_CAP)))
    except (OSError, CorruptStateError, StrictJSONError, UsageError):  # UsageError: not a thread's name
        return None
    return claim if claim is not None and claim.thread == thread_id else None


def _status(repo: Repository, thread_id: str) -> str | None:
    """The thread's status, None when it cannot be read (gone, or a file a reader refuses)."""
    try:
        return repo.read_thread(thread_id).status
    except LeslieError:
        return None


def _seen_within_ttl(root: str | os.PathLike[str], claim: Claim, now: float | None = None) -> Holder | None:
    """`claim` as a holder when its session was seen within its ttl (the thread's status aside)."""
    seen = presence.lookup(os.fspath(root), claim.agent, claim.session)
    last = claim.renewed
    if seen is not None and seen.thread == claim.thread and \
            presence.parse_time(seen.last_seen) > presence.parse_time(last):
        last = seen.last_seen  # a session that moved to another thread no longer keeps this one
    return None if presence.seconds_since(last, now) > claim.ttl else Holder(claim, last)


def _live(repo: Repository, claim: Claim, now: float | None = None) -> Holder | None:
    """`claim` as a holder when it is live (see the module), else None."""
    held = _seen_within_ttl(repo.root, claim, now)
    if held is None:
        return None
    status = _status(repo, claim.thread)
    return None if status is None or status in ENDED else held


def holder(repo: Repository, thread_id: str, now: float | None = None) -> Holder | None:
    """The live claim of `thread_id`, if any."""
    claim = read_claim(repo.root, thread_id)
    return None if claim is None else _live(repo, claim, now)


def claim(repo: Repository, thread_id: str, *, session: str, agent: str = "cli", ttl: int | None = None,
          worktree: str | None = None) -> tuple[Holder, bool]:
    """Take `thread_id` for `session` (or renew its own claim): (the claim, whether it is new). HeldError (exit
    7, nothing changed) when another live session holds it; UsageError for a thread that is done or deleted."""
    session, agent = _checked_session(session), validate_agent(agent)
    status = repo.read_thread(thread_id).status  # NotFoundError, CorruptStateError as any read
    if status in ENDED:
        raise UsageError(f"{thread_id} is {status}: a claim ends when its thread is done or deleted")
    ttl = repo.config.claims.ttl_seconds if ttl is None else ttl
    if not 1 <= ttl <= MAX_TTL:
        raise UsageError(f"invalid ttl {ttl}: a whole number of seconds from 1 to {MAX_TTL} (a year)")
    return take(repo.root, thread_id, session=session, agent=agent, ttl=ttl, worktree=worktree,
                live=lambda stored: _live(repo, stored))


def take(root: str | os.PathLike[str], thread_id: str, *, session: str, agent: str, ttl: int,
         worktree: str | None = None, live: Callable[[Claim], Holder | None] | None = None) -> tuple[Holder, bool]:
    """Under the claims lock: take `thread_id` for `session` unless another session's claim is `live` (by
    default: its session seen within its ttl). What `claim` does once it checked its arguments and the thread,
    and what a hook session's first prompt does (its thread is its own: its status is not read, and readers
    ignore a claim whose thread ended)."""
    with _lock(root):
        stored = read_claim(root, thread_id)
        current = None if stored is None else (live or (lambda c: _seen_within_ttl(root, c)))(stored)
        if current is not None and current.claim.session != session:
            raise HeldError(current.describe() + "; nothing changed")
        now = utc_now()
        where = os.fspath(root) if worktree is None else worktree
        made = Claim(thread_id, agent, session, where, head_branch(where), current.claim.since if current else now,
                     now, ttl)
        _write(root, made)
    return Holder(made, now), current is None


def take_first(repo: Repository, candidates: Callable[[], list[str]], *, session: str, agent: str,
               ttl: int | None = None) -> Holder | None:
    """Under the claims lock: take the first thread of `candidates()` that no live session holds for `session`
    (`leslie next`, SPEC §14); None when every one is held. `candidates` is called under the lock, so of any
    number of concurrent calls no two take the same thread: each sees the claims the others wrote."""
    session, agent = _checked_session(session), validate_agent(agent)
    ttl = repo.config.claims.ttl_seconds if ttl is None else ttl
    with _lock(repo.root):
        for thread_id in candidates():
            stored = read_claim(repo.root, thread_id)
            if stored is not None and _live(repo, stored) is not None:
                continue
            now = utc_now()
            made = Claim(thread_id, agent, session, os.fspath(repo.root), head_branch(os.fspath(repo.root)), now,
                         now, ttl)
            _write(repo.root, made)
            return Holder(made, now)
    return None


def release(repo: Repository, thread_id: str, *, session: str) -> Claim | None:
    """Give `thread_id` back: the claim ended, or None when it had none. HeldError (exit 7, nothing changed) when
    another live session holds it; a claim no longer live is ended by whoever releases it."""
    session = _checked_session(session)
    validate_thread_id(thread_id)
    with _lock(repo.root):
        stored = read_claim(repo.root, thread_id)
        if stored is None:
            return None
        live = _live(repo, stored)
        if live is not None and stored.session != session:
            raise HeldError(live.describe() + "; nothing changed")
        _remove(repo.root, thread_id)
    return stored


def end_claim(repo: Repository, thread_id: str) -> None:
    """End the claim of a thread that is done or deleted (best effort: every reader ignores it anyway)."""
    if not os.path.lexists(_path(repo.root, thread_id)):
        return
    with contextlib.suppress(LeslieError, OSError), _lock(repo.root):
        _remove(repo.root, thread_id)


def live_claims(repo: Repository) -> list[Holder]:
    """Every live claim of the clone, by thread ID."""
    return [live for name in shared_records(repo.root, CLAIMS) if (live := holder(repo, name)) is not None]


def who(repo: Repository) -> list[dict[str, Any]]:
    """Every live session and every live claim of the clone (SPEC §13, `leslie who`): one row per session and
    thread, with whether that session holds that thread; by thread, then last seen (latest first)."""
    ttl = repo.config.claims.ttl_seconds
    claims = {h.claim.thread: h for h in live_claims(repo)}
    rows: dict[tuple[str, str], dict[str, Any]] = {}
    for seen in presence.seen(str(repo.root)):
        if seen.live(ttl) and (seen.session, seen.thread) not in rows:
            held = claims.get(seen.thread)
            rows[(seen.session, seen.thread)] = {
                **seen.to_json(), "claimed": held is not None and held.claim.session == seen.session}
    for held in claims.values():
        key = (held.claim.session, held.claim.thread)
        if key not in rows:
            c = held.claim
            rows[key] = {"agent": c.agent, "session": c.session, "thread": c.thread, "worktree": c.worktree,
                         "branch": c.branch, "since": c.since, "last_seen": held.last_seen, "claimed": True}
    ordered = sorted(rows.values(), key=lambda row: row["last_seen"], reverse=True)
    return sorted(ordered, key=lambda row: row["thread"])


def _checked_session(session: str) -> str:
    if not session.strip() or len(session) > 256 or not session.isprintable():
        raise UsageError(f"invalid session {session!r}: up to 256 printable characters")
    return session


def _write(root: str | os.PathLike[str], made: Claim) -> None:
    text = json.dumps(made.to_json(), ensure_ascii=False, sort_keys=True, indent=2) + "\n"
    # Not fsynced: like sessions, a claim is this clone's runtime state (a power cut may lose the last one; the
    # next claim takes the thread again), and a hook session takes one at its first prompt.
    atomic_write(_path(root, made.thread), text.encode("utf-8"), durable=False)


def _remove(root: str | os.PathLike[str], thread_id: str) -> None:
    path = _path(root, thread_id)
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    except OSError as exc:
        raise storage_error("remove", path, exc) from None
