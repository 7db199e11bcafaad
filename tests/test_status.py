"""`leslie status`: the current thread, what its agent was last told, what needs attention; it writes nothing."""

from __future__ import annotations

import json
import os
import random
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from conftest import retitle_in_place, run_leslie, tree_digest
from leslie.ops import doctor
from leslie.ops.doctor import quick_problems, run_doctor
from leslie.ops.objectives import create_objective
from leslie.ops.threads import reference, remove, set_status, spawn
from leslie.store import derived
from leslie.store.repository import Repository


def status(root: Path, *args: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    result = run_leslie("status", *args, cwd=root, env=env)
    assert result.stderr == ""
    return result.code, result.stdout


def test_without_a_current_thread(repo: Repository) -> None:
    code, out = status(repo.root)
    assert code == 0 and out.startswith("thread: none (no current thread")
    assert "hooks: none installed" in out
    data = json.loads(status(repo.root, "--json")[1])
    assert data["thread"] is None and data["last_told"] is None and "no current thread" in data["thread_problem"]


def test_the_current_thread_and_what_its_agent_was_told(repo: Repository) -> None:
    create_objective(repo, "Ship the parser", objective_id="obj-ship")
    spawn(repo, "Fix the parser\nall of it", thread_id="thread-8lgk2m", objective="obj-ship")
    run_leslie("switch", "8lg", cwd=repo.root)
    code, out = status(repo.root)
    assert code == 0
    assert out.splitlines()[:4] == ["thread: thread-8lgk2m  Fix the parser  [active]",
                                    "objective: Ship the parser (obj-ship)",
                                    "held by: nobody (`leslie claim` takes it)",
                                    "last told: nothing yet (no agent session has had this thread's context)"]
    told = run_leslie("inject", "--session", "s1", "--message", "hi", cwd=repo.root)
    assert told.stdout.startswith("<thread_context")
    data = json.loads(status(repo.root, "--json")[1])
    held = data["thread"].pop("held_by")  # the session claimed its thread at its first prompt (SPEC §13)
    assert (held["agent"], held["session"], held["thread"]) == ("inject", "s1", "thread-8lgk2m")
    assert data["thread"] == {"id": "thread-8lgk2m", "title": "Fix the parser", "status": "active",
                              "objective": "obj-ship", "objective_title": "Ship the parser",
                              "chosen_by": "leslie switch"}
    last = data["last_told"]
    assert (last["agent"], last["session"], last["reason"], last["round"]) == ("inject", "s1", "start", 1)
    assert last["tokens"] > 50 and last["at"].endswith("Z")
    assert status(repo.root)[1].splitlines()[2].startswith("held by: inject session s1 (")
    line = status(repo.root)[1].splitlines()[3]
    assert line.startswith(f"last told: {last['at']} to inject session s1 (start, at round 1;")
    other = status(repo.root, env={"LESLIE_THREAD": "thread-8lgk2m"})[1]
    assert other.startswith("thread: thread-8lgk2m")


def test_what_needs_attention(repo: Repository) -> None:
    spawn(repo, "a", thread_id="thread-a")
    spawn(repo, "b", thread_id="thread-b")
    reference(repo, "thread-a", "thread-b")
    assert status(repo.root)[1].count("needs attention:") == 1
    # a hand edit the index does not know, and an unapproved context command
    path = repo.layout.thread_file("thread-b")
    data = json.loads(path.read_text())
    data["title"] = "renamed by hand"
    path.write_text(json.dumps(data))
    (repo.layout.leslie_dir / "config.toml").write_text('[[context.commands]]\nname = "branch"\n'
                                                         'command = "git branch --show-current"\n')
    assert run_leslie("hooks", "install", "claude-code", cwd=repo.root).code == 0
    code, out = status(repo.root)
    assert code == 0
    assert "doctor: 1 problem(s) (run `leslie doctor`):" in out
    assert "thread_relations.json differs from thread-b's thread.json" in out
    assert "trust: not approved: command branch (review with `leslie trust`)" in out
    assert "hooks:" not in out  # installed and working
    settings = repo.root / ".claude" / "settings.local.json"  # where the personal form goes
    settings.write_text(settings.read_text().replace(run_leslie_path(settings), "/nonexistent/leslie"))
    out = status(repo.root)[1]
    assert "hooks: claude-code: the hook command `/nonexistent/leslie hook claude-code` is broken" in out
    data = json.loads(status(repo.root, "--json")[1])["attention"]
    assert data["doctor"]["count"] == 1 and data["trust"]["commands"] == ["branch"]
    assert data["hooks"]["installed"] == [] and data["hooks"]["problems"]


def run_leslie_path(settings: Path) -> str:
    """The executable the installed hooks run (an absolute path to this test's leslie)."""
    command: str = json.loads(settings.read_text())["hooks"]["UserPromptSubmit"][0]["hooks"][0]["command"]
    return command.rsplit(" hook ", 1)[0]


def test_status_changes_nothing(repo: Repository) -> None:
    spawn(repo, "a", thread_id="thread-a")
    run_leslie("switch", "thread-a", cwd=repo.root)
    run_leslie("inject", "--message", "hi", cwd=repo.root)
    before = tree_digest(repo.root)
    status(repo.root)
    # Nothing in the repository: the index's rows go to the derived store, in the user's cache folder.
    assert tree_digest(repo.root) == before
    status(repo.root, "--json")
    assert tree_digest(repo.root) == before


def test_the_quick_check_agrees_with_doctor(repo: Repository) -> None:
    create_objective(repo, "O", objective_id="obj-o")
    spawn(repo, "a", thread_id="thread-a", objective="obj-o")
    spawn(repo, "b", thread_id="thread-b", objective="obj-o")
    reference(repo, "thread-a", "thread-b")
    assert quick_problems(repo) == [] and run_doctor(repo).problems == []
    (repo.layout.objectives_dir / "obj-o" / "objective.json").unlink()
    (repo.layout.objectives_dir / "obj-o").rmdir()
    quick = quick_problems(repo)
    assert quick == ["thread-a: its objective obj-o does not exist", "thread-b: its objective obj-o does not exist"]
    assert set(quick) <= set(run_doctor(repo).problems)
    repo.layout.index_path.unlink()
    assert ".leslie/thread_relations.json is missing" in quick_problems(repo)


def test_the_quick_check_is_the_same_with_the_derived_store_or_without(repo: Repository, tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """The index's fields come from the derived store (`store.derived`): the same problems when it is made by
    this call, read by the next, removed, or cannot be used at all (an in-memory one then)."""
    from leslie.store import derived

    for name in "abcdef":
        spawn(repo, name, thread_id=f"thread-{name}")
    time.sleep(0.01)
    edited = repo.layout.thread_file("thread-b")
    data = json.loads(edited.read_text())
    data["title"] = "renamed by hand"
    edited.write_text(json.dumps(data))
    repo.layout.thread_file("thread-e").unlink()  # listed, no thread.json
    stray = repo.layout.threads_dir / "thread-zz"
    stray.mkdir()
    (stray / "thread.json").write_text(repo.layout.thread_file("thread-a").read_text())
    (repo.layout.threads_dir / "not-a-thread").mkdir()
    made = quick_problems(repo)
    stored = derived.database_path(repo.root)
    assert stored is not None and os.path.exists(stored)
    assert quick_problems(repo) == made
    derived.discard(stored)
    assert quick_problems(repo) == made
    blocked = tmp_path / "not-a-folder"
    blocked.write_text("")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocked))  # no cache folder can be made there
    assert quick_problems(repo) == made
    assert len(made) >= 3 and any("thread-b" in p for p in made) and any("thread-e" in p for p in made)


def read_threads(monkeypatch: pytest.MonkeyPatch, repo: Repository) -> list[str]:
    """The IDs whose thread.json is read, as they come: by `repo.read_thread`, or parsed from the bytes a
    `ThreadsFolder` read (it calls one of the two for each)."""
    read: list[str] = []
    for name in ("read_thread", "parse_thread"):
        real = getattr(repo, name)

        def counted(thread_id: str, *rest: object, real: Callable[..., object] = real) -> object:
            read.append(thread_id)
            return real(thread_id, *rest)

        monkeypatch.setattr(repo, name, counted)
    return read


def aged(path: Path, seconds: float) -> None:
    """Give `path` the time it would have had `seconds` ago."""
    then = time.time() - seconds
    os.utime(path, (then, then))


def test_the_quick_check_reads_a_clones_threads_once(repo: Repository, monkeypatch: pytest.MonkeyPatch) -> None:
    """git writes a clone's thread.json files after its index: all newer than it. The first look compares every
    one; what agreed is not read again while neither changes. An edit after the look is newer, and found."""
    for name in "abcd":
        spawn(repo, name, thread_id=f"thread-{name}")
    aged(repo.layout.index_path, 120)  # the clone, a minute ago: the index first, then the threads
    for name in "abcd":
        aged(repo.layout.thread_file(f"thread-{name}"), 60 - "abcd".index(name))
    read = read_threads(monkeypatch, repo)
    assert quick_problems(repo) == [] and read == ["thread-a", "thread-b", "thread-c", "thread-d"]
    read.clear()
    assert quick_problems(repo) == [] and read == []
    edited = repo.layout.thread_file("thread-b")
    data = json.loads(edited.read_text())
    data["title"] = "renamed by hand"
    edited.write_text(json.dumps(data))
    differs = [".leslie/thread_relations.json differs from thread-b's thread.json"]
    assert quick_problems(repo) == differs and read == ["thread-b"]
    read.clear()
    assert quick_problems(repo) == differs and read == ["thread-b"]  # still wrong: still read, and only it
    # Another index file, however old its time (a copy put back): what was kept is for the other one.
    older = repo.layout.index_path.read_bytes().replace(b'"title": "c"', b'"title": "c, as it was"')
    repo.layout.index_path.unlink()
    repo.layout.index_path.write_bytes(older)
    aged(repo.layout.index_path, 120)
    read.clear()
    assert quick_problems(repo) == [*differs, ".leslie/thread_relations.json differs from thread-c's thread.json"]
    assert read == ["thread-a", "thread-b", "thread-c", "thread-d"]


def test_the_quick_check_stops_trusting_at_the_first_wrong_thread(repo: Repository,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """What agreed is kept only up to the oldest thread.json found wrong, and not for one changed just before
    the look (RACY_NS: a write in flight, a coarse clock): those, and every newer one, are compared again."""
    for name in "abcde":
        spawn(repo, name, thread_id=f"thread-{name}")
    aged(repo.layout.index_path, 120)
    edited = repo.layout.thread_file("thread-c")
    data = json.loads(edited.read_text())
    data["status"] = "done"
    edited.write_text(json.dumps(data))
    for age, name in zip([90, 80, 75, 70], "abcd", strict=True):
        aged(repo.layout.thread_file(f"thread-{name}"), age)  # thread-e keeps its time: now
    read = read_threads(monkeypatch, repo)
    differs = [".leslie/thread_relations.json differs from thread-c's thread.json"]
    assert quick_problems(repo) == differs and len(read) == 5
    for _ in range(2):
        read.clear()
        assert quick_problems(repo) == differs and read == ["thread-c", "thread-d", "thread-e"]
    edited.write_text(json.dumps({**data, "status": "active"}))  # mended by hand: agrees again
    aged(repo.layout.thread_file("thread-e"), 50)
    read.clear()
    assert quick_problems(repo) == [] and read == ["thread-c", "thread-d", "thread-e"]
    read.clear()
    assert quick_problems(repo) == [] and read == ["thread-c"]  # the mended one was changed just now


def test_what_the_quick_check_keeps_stays_exact_through_random_changes(repo: Repository,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """After every change (hand edits and mends in place, newer times, mutations, removals, a thread.json gone,
    a stray folder), the look that keeps what agreed finds what a look comparing every changed thread.json
    finds. Each look and change is a clock tick apart, so RACY_NS may be 0 and the kept time moves every time.
    (A thread.json given an older time by hand is outside what a time can vouch for, as for the index's own.)"""
    monkeypatch.setattr(doctor, "RACY_NS", 0)
    threads = [spawn(repo, f"Thread {n}", thread_id=f"thread-{n}").thread.id for n in range(8)]
    aged(repo.layout.index_path, 100)
    for n, tid in enumerate(threads):
        aged(repo.layout.thread_file(tid), 50 - n)

    def every_one() -> list[str]:
        with monkeypatch.context() as plain:
            plain.setattr(doctor, "_agreed_upto", lambda db, index: -1)
            plain.setattr(doctor, "_keep_agreed", lambda *args: None)
            return quick_problems(repo)

    rng = random.Random(26)
    seen: list[int] = []
    kept: set[str] = set()
    removed: set[str] = set()
    for step in range(80):
        live = [t for t in threads if t not in removed and repo.layout.thread_file(t).exists()]
        target = rng.choice(live or threads)
        path = repo.layout.thread_file(target)
        action = rng.choice(["edit", "edit", "edit", "mend", "mend", "mend", "look", "newer", "spawn", "status",
                             "remove", "unlink", "stray"])  # hand edits most: the index's writes reset the time
        if action == "edit" and path.exists():
            retitle_in_place(repo, target, f"Edited {step}")
        elif action == "mend" and path.exists():
            title = json.loads(path.read_text(encoding="utf-8"))["title"]
            retitle_in_place(repo, target, title.replace("Edited", "Thread"))
        elif action == "newer" and path.exists():
            stamp = time.time() + 3600
            os.utime(path, (stamp, stamp))
        elif action == "spawn":
            threads.append(spawn(repo, f"New {step}", thread_id=f"thread-new-{step}").thread.id)
        elif action == "status" and path.exists():
            set_status(repo, target, rng.choice(["paused", "active"]))
        elif action == "remove" and len(live) > 2 and target in live:
            remove(repo, target, force=True)
            removed.add(target)
        elif action == "unlink":
            path.unlink(missing_ok=True)
        elif action == "stray":
            (repo.layout.threads_dir / f"thread-stray-{step}").mkdir()
        time.sleep(0.02)
        found = quick_problems(repo)
        assert found == every_one(), f"step {step} ({action} {target})"
        seen.append(len(found))
        time.sleep(0.02)

        kept.add(str(derived.with_store(repo.root, lambda db, _persistent: db.execute(
            "SELECT value FROM meta WHERE key = ?", (doctor.AGREED,)).fetchone())))
    assert max(seen) >= 3 and len(kept) >= 10  # problems were made to find, and the kept time moved often
