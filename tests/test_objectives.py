"""objectives.py: create, change status, find (resolution for spawn is in test_threads.py)."""

from __future__ import annotations

import json

import pytest

from conftest import run_leslie, tree_digest
from leslie.errors import NotFoundError, UsageError
from leslie.ops.objectives import create_objective, find_objective, set_objective_status
from leslie.store.model import OBJECTIVE_ID_RE
from leslie.store.repository import Repository


def test_create_random_id_and_file_shape(repo: Repository) -> None:
    index_before = repo.layout.index_path.read_bytes()
    objective = create_objective(repo, "Ship\nthe login")
    assert OBJECTIVE_ID_RE.match(objective.id) and len(objective.id) == len("obj-") + 6
    data = json.loads(repo.layout.objective_file(objective.id).read_text(encoding="utf-8"))
    assert data == {"created_at": objective.created_at, "id": objective.id, "status": "active",
                    "title": "Ship the login", "version": 1}
    assert repo.layout.index_path.read_bytes() == index_before  # objectives are not in the index


def test_create_with_id_and_description(repo: Repository) -> None:
    objective = create_objective(repo, "T", objective_id="obj-q4", description="line 1\r\nline 2")
    assert objective.description == "line 1\nline 2"
    data = json.loads(repo.layout.objective_file("obj-q4").read_text(encoding="utf-8"))
    assert data["description"] == "line 1\nline 2"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"title": ""}, "title is empty"),
        ({"title": "x" * 513}, "limit is 512"),
        ({"title": "a\x00"}, "U\\+0000"),
        ({"title": "T", "objective_id": "OBJ-1"}, "invalid objective ID 'OBJ-1'"),
        ({"title": "T", "objective_id": "obj-dup"}, "objective obj-dup already exists"),
        ({"title": "T", "description": "\uffff"}, "description contains U\\+FFFF"),
        ({"title": "T", "description": "x" * 65537}, "description is 65537 bytes long"),
    ],
)
def test_create_rejections_change_nothing(repo: Repository, kwargs: dict[str, str], message: str) -> None:
    create_objective(repo, "Existing", objective_id="obj-dup")
    before = tree_digest(repo.layout.leslie_dir)
    with pytest.raises(UsageError, match=message):
        create_objective(repo, **kwargs)  # type: ignore[arg-type]
    assert tree_digest(repo.layout.leslie_dir) == before


@pytest.mark.parametrize("status", ["done", "archived", "active"])
def test_set_status(repo: Repository, status: str) -> None:
    create_objective(repo, "T", objective_id="obj-a")
    assert set_objective_status(repo, "obj-a", status).status == status
    assert json.loads(repo.layout.objective_file("obj-a").read_text())["status"] == status


def test_set_status_unchanged_does_not_rewrite(repo: Repository) -> None:
    create_objective(repo, "T", objective_id="obj-a")
    path = repo.layout.objective_file("obj-a")
    inode = path.stat().st_ino
    set_objective_status(repo, "obj-a", "active")
    assert path.stat().st_ino == inode


def test_set_status_rejections(repo: Repository) -> None:
    create_objective(repo, "T", objective_id="obj-a")
    with pytest.raises(UsageError, match="unknown status 'paused': expected one of active, done, archived"):
        set_objective_status(repo, "obj-a", "paused")
    with pytest.raises(NotFoundError, match="no such objective: obj-zzz"):
        set_objective_status(repo, "obj-zzz", "done")
    with pytest.raises(UsageError, match="invalid objective ID"):
        set_objective_status(repo, "zzz", "done")


def test_unknown_fields_survive_a_status_change(repo: Repository) -> None:
    create_objective(repo, "T", objective_id="obj-a")
    path = repo.layout.objective_file("obj-a")
    data = json.loads(path.read_text())
    data["owner"] = {"team": "auth"}
    path.write_text(json.dumps(data))
    set_objective_status(repo, "obj-a", "done")
    assert json.loads(path.read_text())["owner"] == {"team": "auth"}


def test_find_objective(repo: Repository) -> None:
    create_objective(repo, "T", objective_id="obj-a")
    assert find_objective(repo, "obj-a").title == "T"
    with pytest.raises(NotFoundError):
        find_objective(repo, "obj-b")
    with pytest.raises(UsageError):
        find_objective(repo, "b")


def test_every_command_that_takes_an_objective_takes_its_title(repo: Repository) -> None:
    """One way to name an objective everywhere: `spawn`, `edit`, `objective show` as `list --objective` does."""
    create_objective(repo, "Ship the payments migration", objective_id="obj-pay")
    create_objective(repo, "Audit", objective_id="obj-audit")
    out = run_leslie("spawn", "--intent", "Suite", "--objective", "Ship the payments migration", "--id",
                     "thread-suite", cwd=repo.root)
    assert out.code == 0, out.stderr
    assert repo.read_thread("thread-suite").objective == "obj-pay"
    assert run_leslie("edit", "thread-suite", "--objective", " audit ", cwd=repo.root).code == 0  # case, blanks
    assert repo.read_thread("thread-suite").objective == "obj-audit"
    shown = run_leslie("objective", "show", "Ship the payments migration", cwd=repo.root)
    assert shown.code == 0 and "obj-pay" in shown.stdout
    assert run_leslie("objective", "set-status", "Audit", "done", cwd=repo.root).code == 0
    assert repo.read_objective("obj-audit").status == "done"
    # IDs and prefixes as before; a text that names nothing says what there is, and changes nothing.
    assert run_leslie("edit", "thread-suite", "--objective", "pa", cwd=repo.root).code == 0
    assert repo.read_thread("thread-suite").objective == "obj-pay"
    before = tree_digest(repo.root / ".leslie")
    missing = run_leslie("spawn", "--intent", "x", "--objective", "No such plan", cwd=repo.root)
    assert missing.code == 2
    assert missing.stderr.strip() == ("leslie: error: no objective has the ID, ID prefix or title 'No such plan' "
                                      "(the objectives: obj-audit “Audit”, obj-pay “Ship the payments migration”)")
    assert run_leslie("spawn", "--intent", "x", "--objective", "obj-nope", cwd=repo.root).code == 3
    assert tree_digest(repo.root / ".leslie") == before


def test_a_title_shared_by_two_objectives_must_be_named_by_id(repo: Repository) -> None:
    create_objective(repo, "Twin", objective_id="obj-t1")
    create_objective(repo, "twin", objective_id="obj-t2")
    assert run_leslie("spawn", "--intent", "x", "--objective", "Twin", "--id", "thread-a", cwd=repo.root).code == 0
    assert repo.read_thread("thread-a").objective == "obj-t1"  # the exact title wins over a case-blind one
    both = run_leslie("spawn", "--intent", "x", "--objective", "TWIN", cwd=repo.root)
    assert both.code == 2 and "several objectives are titled 'TWIN'" in both.stderr
