"""Objectives: create, read, change status, and choose the objective of a new thread."""

from __future__ import annotations

from dataclasses import replace

from leslie.errors import NotFoundError, UsageError
from leslie.store.files import IndexLock, acquire_index_lock
from leslie.store.model import (
    OBJECTIVE_STATUSES,
    Objective,
    clean_text,
    clean_title,
    new_id,
    utc_now,
    validate_objective_id,
)
from leslie.store.names import is_id_text, resolve_objective_id, shown_title
from leslie.store.repository import Repository

DEFAULT_OBJECTIVE_ID = "obj-default"
DEFAULT_OBJECTIVE_TITLE = "Default objective"


def create_objective(
    repo: Repository, title: str, *, objective_id: str | None = None, description: str | None = None
) -> Objective:
    """Create an active objective and return it."""
    title = clean_title(title)
    if description is not None:
        description = clean_text(description, "description", required=False)
    if objective_id is not None:
        validate_objective_id(objective_id)
    with acquire_index_lock(repo.layout) as lock:
        if objective_id is None:
            objective_id = new_id("obj")
            while repo.objective_exists(objective_id):
                objective_id = new_id("obj")
        elif repo.objective_exists(objective_id):
            raise UsageError(f"objective {objective_id} already exists")
        objective = Objective(objective_id, title, description=description, created_at=utc_now())
        repo.write_objective(lock, objective)
    return objective


def set_objective_status(repo: Repository, objective_id: str, status: str) -> Objective:
    """Set an objective's status (active, done or archived)."""
    validate_objective_id(objective_id)
    if status not in OBJECTIVE_STATUSES:
        raise UsageError(f"unknown status {status!r}: expected one of {', '.join(OBJECTIVE_STATUSES)}")
    with acquire_index_lock(repo.layout) as lock:
        objective = repo.read_objective(objective_id)
        if objective.status != status:
            objective = replace(objective, status=status)
            repo.write_objective(lock, objective)
    return objective


def retitle_objective(repo: Repository, objective_id: str, title: str) -> tuple[Objective, bool]:
    """Change an objective's title; (the objective as stored, whether it changed)."""
    validate_objective_id(objective_id)
    title = clean_title(title)
    with acquire_index_lock(repo.layout) as lock:
        objective = repo.read_objective(objective_id)
        if objective.title == title:
            return objective, False
        objective = replace(objective, title=title)
        repo.write_objective(lock, objective)
    return objective, True


def resolve_objective(
    repo: Repository, lock: IndexLock, requested: str | None, parent_objective: str | None
) -> tuple[str, bool]:
    """The objective of a new thread, and whether it had to be created.

    `--objective` if given (it must exist); else the parent thread's; else the only active objective;
    else `obj-default`, created on first use. Several active objectives and no choice is an error, so a
    thread never lands under an objective the user did not mean.
    """
    if requested is not None:
        find_objective(repo, requested)
        return requested, False
    if parent_objective is not None and repo.objective_exists(parent_objective):
        return parent_objective, False
    active = [o for o in repo.objectives() if o.status == "active"]
    if len(active) == 1:
        return active[0].id, False
    if len(active) > 1:
        raise UsageError(f"several active objectives ({describe_objectives(active)}): choose one with "
                         "--objective ID")
    if repo.objective_exists(DEFAULT_OBJECTIVE_ID):
        return DEFAULT_OBJECTIVE_ID, False
    repo.write_objective(lock, Objective(DEFAULT_OBJECTIVE_ID, DEFAULT_OBJECTIVE_TITLE, created_at=utc_now()))
    return DEFAULT_OBJECTIVE_ID, True


def find_objective(repo: Repository, objective_id: str) -> Objective:
    """The objective with this ID (validated), or NotFoundError."""
    validate_objective_id(objective_id)
    if not repo.objective_exists(objective_id):
        known = repo.objectives()
        raise NotFoundError(f"no such objective: {objective_id}" + (
            f" (the objectives: {describe_objectives(known)})" if known else " (there are no objectives yet)"))
    return repo.read_objective(objective_id)


SHOWN_OBJECTIVES = 10  # objectives listed in an error message before "... and N more"


def describe_objectives(objectives: list[Objective]) -> str:
    """Objectives for a one-line message: `obj-a “Title”, obj-b “Title”` (at most SHOWN_OBJECTIVES of them)."""
    shown = sorted(objectives, key=lambda o: o.id)[:SHOWN_OBJECTIVES]
    text = ", ".join(f"{o.id} “{shown_title(o.title)}”" for o in shown)
    return text + (f" and {len(objectives) - SHOWN_OBJECTIVES} more" if len(objectives) > SHOWN_OBJECTIVES else "")


def thread_counts(repo: Repository) -> dict[str, int]:
    """How many live threads each objective has (from the derived store: no decode while the index is the same)."""
    from leslie.store.derived import with_index_table

    return with_index_table(repo, lambda db: dict(db.execute(
        "SELECT objective, count(*) FROM threads WHERE objective IS NOT NULL GROUP BY objective")))


def titled(objectives: list[Objective], text: str) -> list[Objective]:
    """The objectives titled `text`: exactly, else ignoring case and surrounding blanks."""
    return [o for o in objectives if o.title == text] or [
        o for o in objectives if o.title.casefold() == text.strip().casefold()]


def named_objective(repo: Repository, text: str) -> str:
    """The ID of the objective a person named: its ID, a unique prefix of it, or its title (one name for every
    command that takes an objective: `spawn --objective "Ship the API"` as `list --objective` does).

    Text that can be an ID or a prefix resolves as one (`store.names`: its errors and exit codes) unless an
    objective is titled exactly that; any other text must be a title.
    """
    if is_id_text(text, "objective") and repo.objective_exists(text if text.startswith("obj-") else "obj-" + text):
        return text if text.startswith("obj-") else "obj-" + text
    known = repo.objectives()
    matches = titled(known, text)
    if len(matches) == 1:
        return matches[0].id
    if matches:
        raise UsageError(f"several objectives are titled {text!r} ({describe_objectives(matches)}): name one by "
                         "its ID")
    if is_id_text(text, "objective") or text.startswith("obj-"):
        return resolve_objective_id(repo.root, text)
    listed = f"the objectives: {describe_objectives(known)}" if known else "there are none yet"
    raise UsageError(f"no objective has the ID, ID prefix or title {text!r} ({listed})")
