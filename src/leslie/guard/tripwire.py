"""The write guard's second line: what a shell tool call changed in other threads' folders, found after
the call, put back where that is safe, and told to the agent and the user.

The first line (`leslie.guard.rules`) reads a command before it runs; a command can write through means it does
not show (`python -c`, `eval`, globs, `find -delete`, a script). So every shell tool call is also watched:

- its *window*, from its `PreToolUse` to its `PostToolUse`, is recorded per agent session in the guard's
  `sessions/` (`store.mutations.guard_dir`, with the session's thread), and so is each *prompt* a session
  answers (`UserPromptSubmit` to `Stop`);
- a *sweep* (`sweep`), at both ends of every shell call, compares the protected files (`leslie.guard.snapshots`)
  with their last known state, and classifies each change by when it happened (the file's ctime, which no
  one can set by hand): inside a leslie mutation → leslie's own; outside every shell window of a session
  of another thread → nobody's business (a person, an editor, the thread's own agent); inside one, while an
  agent bound to the changed thread was also at work → "changed while another agent was active": reported,
  left alone; after a git HEAD move that explains it → reported, left alone; otherwise → restored from the
  copy taken before (a created entry is moved to the quarantine, a replaced version too: nothing is lost);
- the sessions whose shell windows cover a change get a *notice*; each session's next `PostToolUse` (or
  `Stop`) hands its notices to the agent. Every incident is also a line of the guard's
  `incidents.jsonl` (shown by `leslie doctor`) and of the session's log.

Sweeps, restores and notices happen under the index lock (`.leslie/state/index.lock`), as every leslie
mutation does, so a sweep never sees half of a `leslie spawn`.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from typing import TYPE_CHECKING, Any, NoReturn

from leslie.errors import CorruptStateError
from leslie.guard import quarantine, snapshots
from leslie.store import mutations, sessions
from leslie.store.fsio import TEMP_SUFFIX, FileLock, atomic_write
from leslie.store.lockqueue import QueuedLock
from leslie.store.machine import index_lock_path

if TYPE_CHECKING:
    from leslie.ops.watched import Ask

Doc = dict[str, Any]

# File times come from a coarse kernel clock, which lags the real clock by up to a tick and never runs ahead of
# it: an agent's window is widened by this much at its start only. Its end is the real time its PostToolUse
# closed it, after the command ended, so a person's edit after it is never taken for the command's.
SLACK_NS = 50_000_000
# A file's ctime lags the real clock by at most one kernel tick (1-10 ms): leslie's own windows are widened by
# that much, at their start only, so that a write just before a leslie command is not taken for leslie's.
LESLIE_SLACK_NS = 10_000_000
STALE_NS = 3600 * 10**9  # windows older than an hour are forgotten; so is an open prompt (a crashed agent)
# A shell call that never got its PostToolUse (the person pressed Esc, the agent crashed, Codex skipped it for a
# failed command) counts as running for at most this long: Claude Code's longest Bash timeout. After it, an
# edit is a person's again, not blamed on a call that is long gone.
OPEN_CALL_NS = 600 * 10**9
MAX_ACTIVE = 256  # session files read per sweep at most: far more agents than one repository runs at once
COPY_BUDGET_NS = 2 * 10**9  # copies made per sweep at most this long: the first sweep of a big repository
LOCK_WAIT = 4.0  # seconds a hook waits for the index lock (its own timeout is 10 s)
PRUNE_AFTER = 500  # copies written since the last prune of unreferenced copies


def _folder(root: str, name: str) -> str:
    return snapshots.real_folder(os.path.join(snapshots.guard_dir(root), name))


def index_lock(root: str, timeout: float = LOCK_WAIT) -> QueuedLock:
    """The index lock as `store.acquire_index_lock` takes it, in the same arrival-order queue (so a sweep
    waits its turn behind the commands that asked first), waited for `timeout` seconds."""
    return QueuedLock(index_lock_path(root), timeout)


# -- activity windows ------------------------------------------------------------------------------------

def _session_name(agent: str, session_id: str) -> str:
    return f"{sessions.validate_agent(agent)}.{sessions.safe_session_name(session_id)}"


def _read_json(path: str) -> Doc | None:
    """A session's windows; None when missing or damaged (that session starts afresh)."""
    try:
        doc = snapshots.load_json(path, 1 << 20)
    except CorruptStateError:
        return None
    return doc if isinstance(doc, dict) else None


def _update_activity(root: str, agent: str, session_id: str, thread_id: str, change: str,
                     call_id: str | None = None, now: int | None = None) -> bool:
    """Apply one event to a session's windows; True when it closed calls left open (no PostToolUse came)."""
    now = time.time_ns() if now is None else now
    name = _session_name(agent, session_id)
    folder = _folder(root, "sessions")
    path = os.path.join(folder, name + ".json")
    with FileLock(os.path.join(folder, name + ".lock"), LOCK_WAIT):
        doc = _read_json(path) or {}
        raw_calls = doc.get("calls")
        calls: dict[str, Any] = raw_calls if isinstance(raw_calls, dict) else {}
        shell = [w for w in _windows(doc.get("shell")) if now - w[1] < STALE_NS]
        busy = [w for w in _windows(doc.get("busy")) if now - w[1] < STALE_NS]
        prompt = doc.get("prompt") if _is_time(doc.get("prompt")) else None
        dangling = False
        if change == "open":
            calls[call_id or "?"] = now
        elif change == "close" and _is_time(calls.get(call_id or "?")):
            shell.append([calls.pop(call_id or "?"), now])
        if change in ("prompt", "stop"):
            dangling = bool(calls)
            shell += [[start, min(now, start + OPEN_CALL_NS)] for start in calls.values() if _is_time(start)]
            calls = {}
            if prompt is not None:
                busy.append([prompt, now])
            prompt = now if change == "prompt" else None
        doc = {"agent": agent, "session_id": session_id, "thread": thread_id, "calls": calls,
               "shell": shell[-64:], "busy": busy[-64:], "prompt": prompt}
        # Recycled, not freed: on the prompt's path, and freeing a block costs milliseconds on some disks.
        atomic_write(path, json.dumps(doc, sort_keys=True).encode(), durable=False, recycle=True)
    return dangling


class Activity:
    """One session's windows as a sweep sees them: shell calls, and everything it was busy with."""

    __slots__ = ("agent", "busy", "name", "session_id", "shell", "thread")

    def __init__(self, name: str, doc: Doc, now: int) -> None:
        self.name = name
        self.agent = str(doc.get("agent", ""))
        self.session_id = str(doc.get("session_id", ""))
        self.thread = doc.get("thread")
        raw_calls = doc.get("calls")
        calls: dict[str, Any] = raw_calls if isinstance(raw_calls, dict) else {}
        open_calls = [[s, min(now, s + OPEN_CALL_NS)] for s in calls.values() if _is_time(s)]
        self.shell = _windows(doc.get("shell")) + open_calls
        prompt = doc.get("prompt")
        self.busy = self.shell + _windows(doc.get("busy"))
        if isinstance(prompt, int) and _is_time(prompt):
            self.busy.append([prompt, min(now, prompt + STALE_NS)])

    def shell_at(self, moment: int) -> bool:
        return any(s - SLACK_NS <= moment <= e for s, e in self.shell)

    def busy_at(self, moment: int) -> bool:
        return any(s - SLACK_NS <= moment <= e for s, e in self.busy)


def _is_time(value: object) -> bool:
    return type(value) is int  # not a bool, not a float: the file may have been edited by anyone


def _windows(value: object) -> list[list[int]]:
    """The well-formed `[start, end]` windows of a session file's list (anything else is ignored)."""
    if not isinstance(value, list):
        return []
    return [w for w in value if isinstance(w, list) and len(w) == 2 and _is_time(w[0]) and _is_time(w[1])]


def activities(root: str, now: int) -> list[Activity]:
    """The sessions active within the last hour: the MAX_ACTIVE most recently active of them, so that a
    folder full of planted files (outside git, `.leslie/state/` can come in a copied folder) costs every shell
    call a bounded number of reads."""
    folder = os.path.join(mutations.guard_dir(root), "sessions")
    recent = []
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    for name in names:
        if not name.endswith(".json"):
            continue
        try:
            mtime = os.lstat(os.path.join(folder, name)).st_mtime_ns
        except OSError:
            continue
        if now - mtime <= STALE_NS:
            recent.append((mtime, name))
    found = []
    for _mtime, name in sorted(recent, reverse=True)[:MAX_ACTIVE]:
        path = os.path.join(folder, name)
        doc = _read_json(path)
        if doc is not None:
            found.append(Activity(name[:-5], doc, now))
    return found


# -- the sweep -------------------------------------------------------------------------------------------

class _Sweep:
    """One sweep's bookkeeping: the manifest being updated, and what it found."""

    def __init__(self, root: str, manifest: Doc, now: int) -> None:
        self.root = root
        self.manifest = manifest
        self.files: dict[str, list[Any]] = manifest["files"]
        self.digests: dict[str, str] = manifest["digests"]
        self.now = now
        self.batch = time.strftime("%Y%m%dT%H%M%S", time.gmtime(now / 1e9)) + f"-{os.getpid()}"
        self.incidents: list[Doc] = []
        self.gone: list[str] = []  # created folders moved to the quarantine: their content went with them
        self.tombstones: dict[str, bool] = {}

    def absorb(self, rel: str, entry: list[Any] | None, digest: str = snapshots.NOT_COPIED) -> None:
        """`entry` (None: nothing) is the new normal at `rel`; a file's content is copied later if needed."""
        if entry is None:
            self.files.pop(rel, None)
        else:
            self.files[rel] = entry
        if entry is not None and entry[0] == snapshots.FILE:
            self.digests[rel] = digest
            if digest == snapshots.NOT_COPIED:
                self.manifest["pending"] = True
        else:
            self.digests.pop(rel, None)

    def leslie_deletes(self, rel: str) -> bool:
        """Could leslie itself have deleted `rel`? Only a temp file, or a file of a deleted thread (`leslie
        rm` empties a tombstone's folder, `leslie gc` removes it). A deletion is dated by its folder's last
        change, which may be later than the deletion: this keeps a leslie mutation next to it from
        covering it."""
        owner = snapshots.owner_of(rel)
        if rel.endswith(TEMP_SUFFIX) or owner is None:
            return rel.endswith(TEMP_SUFFIX)
        if owner not in self.tombstones:
            meta = f"threads/{owner}/thread.json"
            path = snapshots.protected_path(self.root, meta)
            data = snapshots.read_regular(path) or snapshots.load_copy(self.root, self.digests.get(meta, ""))
            try:
                doc = snapshots.parse_json(path, data) if data is not None else None
            except CorruptStateError:
                doc = None
            self.tombstones[owner] = isinstance(doc, dict) and doc.get("status") == "deleted"
        return self.tombstones[owner]

    def incident(self, rel: str, action: str, suspects: list[Activity], detail: str, kept: str | None = None) \
            -> None:
        self.incidents.append({"path": ".leslie/" + rel, "action": action, "thread": snapshots.owner_of(rel),
                               "detail": detail, "kept": kept, "sessions": [a.name for a in suspects],
                               "threads": sorted({str(a.thread) for a in suspects}), "time": sessions.utc_now(),
                               "_who": suspects})

    def put_back(self, rel: str, old: list[Any] | None, new: list[Any] | None, suspects: list[Activity]) -> None:
        """Undo one change: quarantine what is there now, restore what was there before (when possible)."""
        data = None
        digest = self.digests.get(rel, snapshots.NOT_COPIED)
        if old is not None and old[0] == snapshots.FILE:
            data = snapshots.load_copy(self.root, digest)
            if data is None:
                why = "bigger than 1 MiB" if digest == snapshots.NOT_RESTORABLE else "no copy was taken yet"
                self.incident(rel, "not-restored", suspects, f"could not be restored ({why})")
                self.absorb(rel, new)
                return
        elif old is not None and old[0] != snapshots.DIR:
            self.incident(rel, "not-restored", suspects, "a link or special file was changed; not restored")
            self.absorb(rel, new)
            return
        kept = quarantine.put_aside(self.root, rel, self.batch) if new is not None else None
        if new is not None and new[0] == snapshots.DIR:
            self.gone.append(rel + "/")
        if old is None:
            self.absorb(rel, None)
            self.incident(rel, "quarantined", suspects, "created where it may not be written; moved", kept)
            return
        if data is not None:
            entry = snapshots.restore_file(self.root, rel, data)
        else:
            entry = [snapshots.DIR] if snapshots.restore_folder(self.root, rel) else None
        if entry is None:
            self.incident(rel, "not-restored", suspects, "a folder on its way is not a real folder", kept)
            self.absorb(rel, None)
            return
        self.absorb(rel, entry, digest)
        self.incident(rel, "restored", suspects, "deleted; restored" if new is None else "changed; restored",
                      kept)


def sweep(root: str, now: int | None = None) -> list[Doc]:
    """Compare the protected files with the manifest, deal with every change, update the manifest; the
    incidents found. The caller holds the index lock."""
    return _sweep(root, now)[0]


def _sweep(root: str, now: int | None = None) -> tuple[list[Doc], Doc | None]:
    """`sweep`, and the manifest after it when it is settled (every file copied: nothing left to do)."""
    now = time.time_ns() if now is None else now
    snapshots.guard_dir(root)
    current = snapshots.scan(root)
    try:
        manifest = snapshots.load_manifest(root, current)
    except CorruptStateError as exc:  # written by something else than leslie, or unreadable
        _start_again(root, exc.problem, current)
    head = snapshots.git_head(root)
    if manifest is None:  # the first sweep: everything as it is now is the baseline
        _baseline(root, current, head)
        return [], None
    files = manifest["files"]
    head_moved = head != manifest.get("head")
    if files == current and not head_moved:  # the common case: one comparison, made in C
        _copy_and_save(root, manifest, False)
        return [], None if manifest.get("pending") else manifest
    changed = [rel for rel, entry in current.items() if files.get(rel) != entry]
    changed += list(files.keys() - current.keys())
    # Only the entries a sweep uses are checked: checking all 40,000 would cost 10 ms every call. (Their
    # paths were checked by `load_manifest`; a digest names the copy a restore reads.)
    digests = manifest["digests"]
    bad = next((rel for rel in changed if (rel in files and not snapshots.valid_entry(files[rel]))
                or not snapshots.valid_digest(digests.get(rel, snapshots.NOT_COPIED))), None)
    if bad is not None:
        _start_again(root, f"has a malformed entry for {bad}", current)
    state = _Sweep(root, manifest, now)
    manifest["head"] = head
    if changed:
        changed.sort(key=lambda rel: (rel.count("/"), rel))
        _classify(state, changed, current, head_moved)
    _copy_and_save(root, manifest, True)
    mutations.forget_leslie_writes(root)
    _record_incidents(root, state.incidents)
    return state.incidents, None if manifest.get("pending") else manifest


def _baseline(root: str, current: dict[str, list[Any]], head: str | None) -> None:
    """Everything as it is now is the new normal (the first sweep of a repository)."""
    manifest = {"version": snapshots.MANIFEST_VERSION, "head": head, "copies": 0, "pending": True,
                "files": current, "digests": {rel: snapshots.NOT_COPIED for rel, entry in current.items()
                                              if entry[0] == snapshots.FILE}}
    _copy_and_save(root, manifest, True)
    mutations.forget_leslie_writes(root)


def _start_again(root: str, problem: str, current: dict[str, list[Any]]) -> NoReturn:
    """The manifest was not written by leslie (something wrote into the guard's folder), or cannot be read:
    set it aside, take the snapshot again (`current`, what `scan` just found), and fail, since what changed
    meanwhile cannot be checked. The next call is checked as usual."""
    snapshots.set_manifest_aside(root)
    _baseline(root, current, snapshots.git_head(root))
    raise CorruptStateError(snapshots.manifest_path(root), f"{problem}; it was set aside and the snapshot taken "
                            "again, so what changed since the last check could not be checked")


def _classify(state: _Sweep, changed: list[str], current: dict[str, list[Any]], head_moved: bool) -> None:
    root = state.root
    leslie_windows = mutations.leslie_writes(root)
    active = activities(root, state.now)
    clean: set[str] | None = None
    # When each change happened, read before anything is put back (a restore updates its folders' times).
    moments = {rel: snapshots.change_time(root, rel, current.get(rel)) for rel in changed}
    for rel in changed:
        old, new = state.files.get(rel), current.get(rel)
        if old is None and any(rel.startswith(prefix) for prefix in state.gone):
            continue  # inside a created folder already moved to the quarantine
        digest = state.digests.get(rel, "")
        if old is not None and new is not None and old[0] == new[0] == snapshots.FILE and old[1] == new[1] \
                and len(digest) > 1:
            data = snapshots.read_regular(snapshots.protected_path(root, rel))
            if data is not None and snapshots.digest_of(data) == digest:
                state.absorb(rel, new, digest)  # touched or rewritten with the same bytes
                continue
        moment = moments[rel]
        if any(s - LESLIE_SLACK_NS <= moment <= e for s, e in leslie_windows) and (
                new is not None or state.leslie_deletes(rel)):
            state.absorb(rel, new)  # a leslie command's own write
            continue
        owner, own_state = snapshots.owner_of(rel), snapshots.is_state_file(rel)
        suspects = [a for a in active if (own_state or a.thread != owner) and a.shell_at(moment)]
        if not suspects:
            state.absorb(rel, new)  # no shell call of another thread was running: a person, an editor, ...
            continue
        if head_moved:
            if clean is None:
                clean = snapshots.git_clean_paths(root, changed)
            if rel in clean:
                state.absorb(rel, new)
                state.incident(rel, "git", suspects, "changed with a git operation that moved HEAD (checkout, "
                               "pull, merge, commit, rebase...); not restored")
                continue
        if not own_state and any(a.thread == owner and a.busy_at(moment) for a in active):
            state.absorb(rel, new)
            state.incident(rel, "concurrent", suspects, f"changed while the agent of {owner} was also working; "
                           "not restored (if your command did it, undo it)")
            continue
        state.put_back(rel, old, new, suspects)


def _copy_and_save(root: str, manifest: Doc, changed: bool) -> None:
    """Copy files not copied yet (for at most `COPY_BUDGET_NS`), then save the manifest if anything changed."""
    if manifest.get("pending"):
        deadline = time.monotonic_ns() + COPY_BUDGET_NS
        digests: dict[str, str] = manifest["digests"]
        done = True
        for rel, digest in digests.items():
            if digest == snapshots.NOT_COPIED:
                if time.monotonic_ns() > deadline:
                    done = False
                    break
                digests[rel] = snapshots.copy_content(root, rel)
                manifest["copies"] = int(manifest.get("copies", 0)) + 1
        manifest["pending"] = not done
        changed = True
    if int(manifest.get("copies", 0)) > PRUNE_AFTER:
        snapshots.prune_objects(root, manifest)
        manifest["copies"] = 0
    if changed:
        snapshots.save_manifest(root, manifest)


# -- incidents and notices -------------------------------------------------------------------------------

def _append(path: str, lines: list[Doc]) -> None:
    data = "".join(json.dumps(line, ensure_ascii=False, sort_keys=True) + "\n" for line in lines)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o644)
    try:
        os.write(fd, data.encode("utf-8", "backslashreplace"))
    finally:
        os.close(fd)


def _record_incidents(root: str, incidents: list[Doc]) -> None:
    if not incidents:
        return
    public = [{k: v for k, v in item.items() if k != "_who"} for item in incidents]
    _append(os.path.join(snapshots.guard_dir(root), "incidents.jsonl"), public)
    notices = _folder(root, "notices")
    by_session: dict[str, tuple[Activity, list[Doc]]] = {}
    for item, line in zip(incidents, public, strict=True):
        for who in item["_who"]:
            by_session.setdefault(who.name, (who, []))[1].append(line)
    for name, (who, lines) in by_session.items():
        _append(os.path.join(notices, name + ".jsonl"), lines)
        try:
            files = sessions.SessionFiles(root, who.agent, who.session_id)
            for line in lines:
                sessions.append_log(files, {"kind": "guard", "reason": None, **line})
        except Exception:  # the session log is a record; the incident log above has it
            pass


def take_notices(root: str, agent: str, session_id: str) -> list[Doc]:
    """The notices waiting for this session, removed as they are read. Under the index lock."""
    path = os.path.join(mutations.guard_dir(root), "notices", _session_name(agent, session_id) + ".jsonl")
    try:
        lines, _unreadable = snapshots.load_json_lines(path, 1 << 22)
    except CorruptStateError:  # a link, a FIFO, too big: not leslie's notices, gone with the file
        lines = []
    with contextlib.suppress(OSError):  # none, or a folder in its place: nothing to hand over either way
        os.unlink(path)
    return [item for item in lines if isinstance(item, dict)]


def incidents_file(root: str) -> str:
    """The guard's record of incidents, `incidents.jsonl` in its folder (`store.mutations.guard_dir`)."""
    return os.path.join(mutations.guard_dir(root), "incidents.jsonl")


def incidents_summary(root: str) -> tuple[int, str | None, int]:
    """What `incidents.jsonl` records: how many incidents, the last one in words, and how
    many of its lines could not be read (skipped: a hand edit, a line nested too deeply). A record that
    cannot be read at all (a link, a FIFO, over 64 MiB) is counted as one unreadable line."""
    try:
        lines, unreadable = snapshots.load_json_lines(incidents_file(root), 1 << 26)
    except CorruptStateError:
        return 0, None, 1
    incidents = [item for item in lines if isinstance(item, dict)]
    unreadable += len(lines) - len(incidents)
    words = None
    if incidents:
        last = incidents[-1]
        words = f"{last.get('time')}: {last.get('path')} {last.get('action')}"
    return len(incidents), words, unreadable


# -- asking the watcher first (`leslie.guard.watcher`, in the resident process) ---------------------------

def _mark_of(reply: dict[str, object] | None) -> list[Any] | None:
    mark = reply.get("mark") if reply is not None else None
    ok = isinstance(mark, list) and len(mark) == 2 and isinstance(mark[0], str) and _is_time(mark[1])
    return mark if ok else None  # type: ignore[return-value]


def watched_sweep(root: str, ask: Ask | None) -> list[Doc]:
    """`sweep`, unless the watcher says that nothing protected changed since the manifest was last known to
    match the files (`snapshots.load_mark`). `ask(root, since)` is the watcher's answer (None: no server).
    Any doubt sweeps."""
    if ask is None:
        return sweep(root)
    since = snapshots.load_mark(root)
    reply = ask(root, since)
    mark = _mark_of(reply)
    if mark is None:
        return sweep(root)  # no server, a watch being set up, an overflow...: as without a watcher
    if since is not None and reply is not None and reply.get("changed") == []:
        return []
    # The mark was taken before this sweep looks: whatever changes while it runs is asked about next time.
    incidents, manifest = _sweep(root)
    if manifest is None:
        snapshots.forget_mark(root)  # copies still to make: the next call sweeps on
        return incidents
    if incidents:
        # What the sweep put back changed files after the mark: unless the files it changed are still
        # exactly as the manifest now says, the next call sweeps again.
        again = ask(root, mark)
        later = again.get("changed") if again is not None else None
        if isinstance(later, list) and snapshots.unchanged(root, manifest["files"], [str(r) for r in later]):
            mark = _mark_of(again) or mark
    snapshots.save_mark(root, mark)
    return incidents


# -- what the hooks call ---------------------------------------------------------------------------------

def before_shell_call(root: str, agent: str, session_id: str, thread_id: str, call_id: str,
                      ask: Ask | None = None) -> None:
    """A shell tool call is about to run: bring the snapshot up to date, then open its window."""
    try:
        with index_lock(root):
            watched_sweep(root, ask)
    finally:  # even when the sweep failed, the call is watched: its PostToolUse checks again
        _update_activity(root, agent, session_id, thread_id, "open", call_id)


def after_shell_call(root: str, agent: str, session_id: str, thread_id: str, call_id: str,
                     ask: Ask | None = None) -> list[Doc]:
    """A shell tool call ended: find what changed during it, deal with it, close the window; the notices
    for this session."""
    with index_lock(root):
        watched_sweep(root, ask)
        notices = take_notices(root, agent, session_id)
    _update_activity(root, agent, session_id, thread_id, "close", call_id)
    return notices


def prompt_started(root: str, agent: str, session_id: str, thread_id: str) -> None:
    """The session answers a new prompt (its agent may write its own thread's files from now on)."""
    _update_activity(root, agent, session_id, thread_id, "prompt")


def turn_ended(root: str, agent: str, session_id: str, thread_id: str, ask: Ask | None = None) -> list[Doc]:
    """The session's turn ended (`Stop`): close its windows; calls that never got their PostToolUse (Codex
    skips it for a failed command) are checked now. The notices for this session."""
    dangling = _update_activity(root, agent, session_id, thread_id, "stop")
    notices_file = os.path.join(mutations.guard_dir(root), "notices",
                                _session_name(agent, session_id) + ".jsonl")
    if not dangling and not os.path.exists(notices_file):
        return []
    with index_lock(root):
        if dangling:
            watched_sweep(root, ask)
        return take_notices(root, agent, session_id)


def describe(notices: list[Doc], thread_id: str) -> tuple[str, str, bool]:
    """(what the agent is told, what the user is told (without the `leslie: ` prefix), and whether the agent
    must read it as a failure: something was put back or could not be)."""
    acted = [n for n in notices if n.get("action") in ("restored", "quarantined", "not-restored")]
    lines = []
    for item in notices[:20]:
        kept = item.get("kept")
        if item.get("action") == "quarantined":
            lines.append(f"- {item.get('path')}: {item.get('detail')} to {kept}")
        else:
            lines.append(f"- {item.get('path')}: {item.get('detail')}"
                         + (f" (the version found there is kept in {kept})" if kept else ""))
    if len(notices) > 20:
        lines.append(f"- and {len(notices) - 20} more (`leslie doctor` says where the guard records them)")
    head = ("leslie: a shell command of this session changed files it may not write: other threads' folders "
            "and leslie's own state are read-only to you (references are read-only; change leslie state "
            "with leslie commands)." if acted else
            "leslie: a shell command of this session ran while files in other threads' folders changed:")
    tail = (f"\nWrite only inside .leslie/threads/{thread_id}/ (plan.md, progress.md, design/, artifacts/)."
            if acted else "")
    model = head + "\n" + "\n".join(lines) + tail
    counts: dict[str, int] = {}
    for item in notices:
        counts[str(item.get("action"))] = counts.get(str(item.get("action")), 0) + 1
    summary = ", ".join(f"{count} {action}" for action, count in sorted(counts.items()))
    user = (f"the write guard found changes by a shell command of thread {thread_id} in files it may not "
            f"write ({summary}); `leslie doctor` says where they are recorded")
    return model, user, bool(acted)
