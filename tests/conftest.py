"""Shared fixtures: an isolated environment, a fresh leslie repository in a real git repo, the real CLI."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import settings

from leslie.ops.bootstrap import init_repository
from leslie.ops.threads import reference, spawn
from leslie.store import machine
from leslie.store.repository import Repository

# No per-example deadline: on a loaded 2-core CI machine an example that takes 250 ms instead of 200 fails a test
# for its speed, and speed is the benchmarks' to judge (docs/benchmarks.md), never a unit test's.
settings.register_profile("leslie", deadline=None)
settings.load_profile("leslie")

LESLIE_EXE = str(Path(sys.executable).with_name("leslie"))


@pytest.fixture(autouse=True)
def isolated_env(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No test sees the developer's LESLIE_* variables, home folder or git identity."""
    for name in list(os.environ):
        # Nor the session of an agent running the suite (`ops.claims.calling_session` reads it).
        if name.startswith("LESLIE_") or name in ("CLAUDECODE", "CLAUDE_CODE_SESSION_ID"):
            monkeypatch.delenv(name)
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.setenv("XDG_STATE_HOME", str(home / ".local" / "state"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(home / ".cache"))  # the derived store (`store.derived`)
    monkeypatch.setenv("GIT_AUTHOR_NAME", "Test")
    monkeypatch.setenv("GIT_AUTHOR_EMAIL", "test@example.invalid")
    monkeypatch.setenv("GIT_COMMITTER_NAME", "Test")
    monkeypatch.setenv("GIT_COMMITTER_EMAIL", "test@example.invalid")
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.setenv("LESLIE_LOCK_TIMEOUT", "30")
    # Every command runs in its own process unless a test starts the warm process on purpose (`warm_runtime`).
    monkeypatch.setenv("LESLIE_WARM", "0")
    yield


@dataclass
class Result:
    """A finished `leslie` process."""

    code: int
    stdout: str
    stderr: str


def run_leslie(*args: str, cwd: Path, input: str | None = None, env: dict[str, str] | None = None,
               timeout: float = 60) -> Result:
    """Run the real `leslie` executable installed beside this interpreter."""
    full_env = dict(os.environ)
    if env:
        full_env.update(env)
    proc = subprocess.run([LESLIE_EXE, *args], cwd=cwd, input=input, capture_output=True, text=True,
                          env=full_env, timeout=timeout, check=False)
    return Result(proc.returncode, proc.stdout, proc.stderr)


def git(*args: str, cwd: Path) -> str:
    """Run git and return its stdout; a failure fails the test with git's message."""
    proc = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, f"git {' '.join(args)} failed: {proc.stderr}"
    return proc.stdout


def tree_digest(folder: Path) -> dict[str, str]:
    """Every file under `folder` (relative path → sha256 of its bytes, or 'dir' for folders)."""
    digest: dict[str, str] = {}
    for path in sorted(folder.rglob("*")):
        rel = path.relative_to(folder).as_posix()
        if path.is_symlink():
            digest[rel] = "link:" + os.readlink(path)
        elif path.is_dir():
            digest[rel] = "dir"
        else:
            digest[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
    return digest


def database_bytes(path: Path) -> bytes:
    """The derived store's database file, every write in it: its WAL written back first (this process, and
    a command run in it, may keep a connection open, whose last writes are in the WAL)."""
    import sqlite3

    with closing(sqlite3.connect(path)) as db:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return path.read_bytes()


def damage_database(path: Path, damage: str, elsewhere: Path) -> None:
    """Damage the derived store's database file at `path` (`store.derived`) the way `damage` names: garbage,
    truncated, zeroed pages, empty, a folder or a link (to a copy at `elsewhere`) in its place, or a database of
    another schema, another repository, with foreign tables, or without its threads table."""
    import sqlite3

    from leslie.store import derived

    good = database_bytes(path)
    if damage in ("another schema", "another repository", "foreign tables", "no threads table"):
        with sqlite3.connect(path) as db:
            if damage == "another schema":
                db.execute("PRAGMA user_version = 999")
            elif damage == "another repository":
                db.execute("UPDATE meta SET value = '/somewhere/else' WHERE key = 'root'")
            elif damage == "foreign tables":
                db.execute("CREATE TABLE planted (x)")
                db.execute("CREATE VIEW spy AS SELECT * FROM folders")
                db.execute(f"PRAGMA user_version = {derived.SCHEMA_VERSION + 1}")  # a version yet to come
            else:
                db.execute("DROP TABLE threads")
        return
    derived.discard(str(path))
    if damage == "folder":
        path.mkdir()
        (path / "inside").write_text("kept out\n")
    elif damage == "link":
        elsewhere.write_bytes(good)
        path.symlink_to(elsewhere)
    else:
        path.write_bytes({"garbage": os.urandom(8192), "truncated": good[:len(good) // 3], "empty": b"",
                          "zeroed pages": good[:8192] + bytes(len(good) - 8192)}[damage])


def approve_templates(root: Path) -> None:
    """Approve every template override now in `root/.leslie/templates/` (what `leslie trust --yes` records)."""
    from leslie.context import trust

    trust.grant(root, [], trust.template_overrides(root / ".leslie" / "templates"))


@pytest.fixture
def repo_root(tmp_path: Path) -> Path:
    """A git repository with `leslie init` done (through the library, to keep tests fast)."""
    root = tmp_path / "repo"
    root.mkdir()
    git("init", "-q", "-b", "main", cwd=root)
    init_repository(root)
    return root


@pytest.fixture
def repo(repo_root: Path) -> Repository:
    """The `Repository` at `repo_root`."""
    return Repository(repo_root)


@pytest.fixture
def two_threads(repo: Repository) -> Path:
    """`thread-own` referencing all of `thread-other`, committed: the repository of the hook and guard tests."""
    spawn(repo, "Own work", thread_id="thread-own")
    spawn(repo, "Other work", thread_id="thread-other")
    reference(repo, "thread-own", "thread-other", [])
    git("add", "-A", cwd=repo.root)
    git("commit", "-qm", "threads", cwd=repo.root)
    return repo.root


@pytest.fixture
def three_threads(repo: Repository) -> Repository:
    """thread-a references thread-b (scoped to plan.md); thread-c stands alone."""
    spawn(repo, "thread a", thread_id="thread-a")
    spawn(repo, "thread b", thread_id="thread-b")
    spawn(repo, "thread c", thread_id="thread-c")
    reference(repo, "thread-a", "thread-b", ["plan.md"])
    return repo


def retitle_in_place(repo: Repository, thread_id: str, title: str) -> None:
    """A hand edit of a `thread.json` in place: the index and the thread's folder untouched."""
    path = repo.layout.thread_file(thread_id)
    data = json.loads(path.read_text(encoding="utf-8"))
    data["title"] = title
    with open(path, "r+", encoding="utf-8") as handle:
        handle.write(json.dumps(data))
        handle.truncate()


def state_dir(root: Path) -> Path:
    """The machine state folder of the work tree at `root`: `.git/leslie/` in git, else `.leslie/state/`."""
    return Path(machine.state_dir(root))


@contextmanager
def held_lock(root: Path) -> Iterator[None]:
    """Hold the index lock's file from a separate process for the duration of the block."""
    state_dir(root).mkdir(parents=True, exist_ok=True)
    code = ("import fcntl, os, sys, time\n"
            "fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT); fcntl.flock(fd, fcntl.LOCK_EX)\n"
            "print('locked', flush=True); time.sleep(120)\n")
    proc = subprocess.Popen([sys.executable, "-c", code, machine.index_lock_path(root)],
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "locked"
        yield
    finally:
        proc.kill()
        proc.wait()


EXAMPLE_TREE = Path(__file__).parents[1] / ".leslie.example"


@pytest.fixture
def example_repo(tmp_path: Path) -> Repository:
    """The example tree (what `leslie demo` shows) as `.leslie/` of a fresh git repository, after `leslie init`."""
    import shutil

    root = tmp_path / "example"
    root.mkdir()
    git("init", "-q", cwd=root)
    shutil.copytree(EXAMPLE_TREE, root / ".leslie")
    init_repository(root)
    return Repository(root)


@pytest.fixture
def example_root(example_repo: Repository) -> Path:
    """The root of `example_repo`."""
    return example_repo.root


@pytest.fixture
def watcher() -> Iterator[None]:
    """The write guard's watcher in this process (`leslie.guard.watcher`), every watch stopped at the end."""
    yield
    from leslie.guard import watcher as guard_watcher

    guard_watcher.stop_all()


def watcher_ask(root: str, since: object) -> dict[str, object] | None:
    """The watcher of this process, asked as the server asks it (`leslie.server.watcher`)."""
    from leslie.guard import watcher as guard_watcher

    return guard_watcher.answer({"guard": "check", "root": root, "since": since})
