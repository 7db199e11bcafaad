"""`leslie status`: where this working tree stands, in a few lines.

The current thread (ID, title, status, objective); what its agents were last told (the latest injection
recorded in the machine state's `sessions/`: reason, when, tokens); and what needs attention: problems a quick
doctor finds (`ops.doctor.quick_problems`, not the full walk), context commands or templates `leslie trust`
has not approved, what the write guard moved to its quarantine (`guard.quarantine`), and agent hooks missing
or broken (`hooks_status.check`, which never starts a process a repository names).

It lives in the integrations layer because the hooks' check does; everything else it reads from below.
Nothing here writes but the derived store, a local cache every reader keeps (`store.derived`, outside the
repository): `status` is a read, and it must stay cheap (docs/benchmarks.md).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from leslie.errors import LeslieError
from leslie.store.repository import Repository

if TYPE_CHECKING:
    from leslie.ops.watched import Ask

SHOWN_PROBLEMS = 3


def gather(repo: Repository, ask: Ask | None = None) -> dict[str, Any]:
    """Everything `leslie status` shows, as plain JSON values; `ask` is the resident watcher's
    (`ops/watched.py`), which spares the doctor's look a `stat` of every thread.json it saw no change in."""
    thread, thread_problem = _current(repo)
    return {
        "root": str(repo.root),
        "thread": thread,
        "thread_problem": thread_problem,
        "last_told": _last_told(repo, thread["id"]) if thread is not None else None,
        "attention": {"doctor": _doctor(repo, ask), "trust": _trust(repo), "hooks": _hooks(repo),
                      "quarantine": _quarantine(repo)},
        "warm": _warm(),
    }


def _warm() -> dict[str, Any]:
    """Whether the warm process runs (SPEC §12): `running`, `off` (LESLIE_WARM=0 or no Unix sockets),
    `failing` (no private folder for its socket, or a socket nobody answers on) or `stopped` (the next
    command starts it)."""
    from leslie.server import ENV_SWITCH, child, client

    if child.in_warm_child():
        return {"state": "running", "why": None}
    if not client.enabled():
        return {"state": "off", "why": f"{ENV_SWITCH}=0" if os.environ.get(ENV_SWITCH) else
                "no Unix sockets here"}
    path = client.socket_path()
    if path is None:
        return {"state": "failing", "why": "no private folder for its socket (XDG_RUNTIME_DIR, TMPDIR, /tmp)"}
    if client.control(b"status") is not None:
        return {"state": "running", "why": None}
    if os.path.exists(path):
        return {"state": "failing", "why": f"nothing answers on {path}"}
    return {"state": "stopped", "why": None}


def _current(repo: Repository) -> tuple[dict[str, Any] | None, str | None]:
    """(the current thread as shown, None) or (None, why there is none)."""
    from leslie.ops.threads import current_thread_id

    try:
        thread_id = current_thread_id(repo)
        source = "LESLIE_THREAD" if os.environ.get("LESLIE_THREAD") else "leslie switch"
        thread = repo.read_thread(thread_id)
    except LeslieError as exc:
        return None, exc.message
    from leslie.ops.claims import holder

    objective_title = repo.objective_title(thread.objective)
    held = holder(repo, thread.id)
    return {"id": thread.id, "title": thread.title, "status": thread.status, "objective": thread.objective,
            "objective_title": objective_title, "chosen_by": source,
            "held_by": None if held is None else held.to_json()}, None


def _last_told(repo: Repository, thread_id: str) -> dict[str, Any] | None:
    """The latest injection into any agent session of `thread_id`, or None when none was recorded."""
    from leslie.context.files import tokens_of
    from leslie.store import sessions

    latest: dict[str, Any] | None = None
    for _name, state in sessions.list_states(str(repo.root)):
        injected = state.get("injected")
        if state.get("thread") != thread_id or not isinstance(injected, dict):
            continue
        at = str(injected.get("at") or "")
        if latest is None or at >= latest["at"]:
            size = state.get("context_bytes")
            latest = {"agent": state.get("agent"), "session": state.get("session_id"), "at": at,
                      "reason": injected.get("reason"), "round": injected.get("round"),
                      "rounds": state.get("rounds"), "via": injected.get("via"),
                      "tokens": tokens_of(size) if isinstance(size, int) else None}
    return latest


def _doctor(repo: Repository, ask: Ask | None) -> dict[str, Any]:
    from leslie.ops.doctor import quick_problems

    problems = quick_problems(repo, ask)
    return {"count": len(problems), "first": problems[:SHOWN_PROBLEMS]}


def _trust(repo: Repository) -> dict[str, Any]:
    """What `leslie trust` would ask to approve: context commands and template overrides not approved."""
    from leslie.context import trust
    from leslie.terminal import visible

    try:
        review = trust.review(repo.root)
    except LeslieError as exc:  # a config.toml that cannot be approved as it is
        return {"approved": False, "commands": [], "templates": [], "problem": exc.message}
    return {
        "approved": review.approved,
        "commands": [] if review.commands_approved else [visible(str(c["name"])) for c in review.commands],
        "templates": [] if review.templates_approved else [visible(t.name) for t in review.usable],
        "problem": None,
    }


def _quarantine(repo: Repository) -> list[dict[str, str]]:
    """What the write guard moved to its quarantine (`guard/quarantine.py`), newest first."""
    from leslie.guard import quarantine

    return [entry.to_json() for entry in quarantine.listed(str(repo.root))]


def _hooks(repo: Repository) -> dict[str, Any]:
    """Agents with leslie's hooks installed and working, and the findings for the others that have some."""
    from leslie.integrations import hooks_status, install

    ok: list[str] = []
    problems: list[str] = []
    for agent in install.AGENTS:
        status = hooks_status.check(repo.root, agent)
        if not status.installed and status.problem is None:
            continue
        if status.ok:
            ok.append(agent)
        else:
            problems += hooks_status.status_lines(status)
    return {"installed": ok, "problems": problems}


def lines(data: dict[str, Any]) -> list[str]:
    """`data` (from `gather`) in a few lines for a person."""
    out = []
    thread = data["thread"]
    if thread is None:
        out.append(f"thread: none ({data['thread_problem']})")
    else:
        objective = thread["objective"] or "-"
        if thread["objective_title"]:
            objective = f"{thread['objective_title']} ({objective})"
        out.append(f"thread: {thread['id']}  {thread['title']}  [{thread['status']}]")
        out.append(f"objective: {objective}")
        held = thread["held_by"]
        out.append("held by: nobody (`leslie claim` takes it)" if held is None else
                   f"held by: {held['agent']} session {held['session']} ({held['worktree']}, since {held['since']}, "
                   f"last seen {held['last_seen']})")
        told = data["last_told"]
        if told is None:
            out.append("last told: nothing yet (no agent session has had this thread's context)")
        else:
            tokens = f", ~{told['tokens']} tokens" if told["tokens"] is not None else ""
            out.append(f"last told: {told['at']} to {told['agent']} session {told['session']} "
                       f"({told['reason']}, at round {told['round']}; {told['rounds']} rounds so far{tokens})")
    attention = _attention(data["attention"])
    out.append("needs attention: nothing" if not attention else "needs attention:")
    out += [f"  {line}" for line in attention]
    warm = data["warm"]
    if warm["state"] == "off":
        out.append(f"warm process: off ({warm['why']}): every command starts a new interpreter")
    elif warm["state"] == "failing":
        out.append(f"warm process: failing ({warm['why']}): commands start cold; see `leslie warm`")
    elif warm["state"] == "stopped":
        out.append("warm process: not running (this command started it for the next ones)")
    return out


def _attention(found: dict[str, Any]) -> list[str]:
    out = []
    doctor = found["doctor"]
    if doctor["count"]:
        out.append(f"doctor: {doctor['count']} problem(s) (run `leslie doctor`):")
        out += [f"  {problem}" for problem in doctor["first"]]
    trust = found["trust"]
    if trust["problem"]:
        out.append(f"trust: {trust['problem']}")
    elif not trust["approved"]:
        waiting = [f"command {name}" for name in trust["commands"]] + [f"template {n}" for n in trust["templates"]]
        out.append(f"trust: not approved: {', '.join(waiting)} (review with `leslie trust`)")
    kept = found["quarantine"]
    if kept:
        out.append(f"quarantine: {len(kept)} entr{'y' if len(kept) == 1 else 'ies'} the write guard moved out of "
                   "the way (bring one back with `leslie quarantine restore PATH`):")
        out += [f"  {entry['path']} ({entry['when']}, kept in {entry['kept']})" for entry in kept[:SHOWN_PROBLEMS]]
        if len(kept) > SHOWN_PROBLEMS:
            out.append(f"  and {len(kept) - SHOWN_PROBLEMS} more (`leslie quarantine list`)")
    hooks = found["hooks"]
    out += [f"hooks: {line}" for line in hooks["problems"]]
    if not hooks["installed"] and not hooks["problems"]:
        out.append("hooks: none installed (run `leslie hooks install AGENT`; `leslie hooks status` lists agents)")
    return out
