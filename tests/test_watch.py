"""`leslie watch`: the real observer in a subprocess, driven by hand edits, git checkouts and signals."""

from __future__ import annotations

import json
import os
import queue
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import LESLIE_EXE, git, run_leslie
from leslie.ops import threads
from leslie.store.files import acquire_index_lock
from leslie.store.jsonio import dumps_canonical
from leslie.store.repository import Repository

TIMEOUT = 20.0  # generous: the machine is shared, and a late event is not a wrong one
Event = dict[str, Any]


class Watch:
    """A running `leslie watch`, its stdout read line by line on a thread."""

    def __init__(self, root: Path, *args: str, env: dict[str, str] | None = None, as_json: bool = True) -> None:
        command = [LESLIE_EXE, "watch", *(["--json"] if as_json else []), "--debounce", "0.1", *args]
        self.proc = subprocess.Popen(command, cwd=root, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True, env={**os.environ, **(env or {})})
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.seen: list[Any] = []
        self.as_json = as_json
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def next(self, timeout: float = TIMEOUT) -> Any:
        line = self.lines.get(timeout=timeout)
        if line is None:
            raise AssertionError(f"watch ended early: {self.proc.wait()} {self.stderr()}")
        item = json.loads(line) if self.as_json else line.rstrip("\n")
        self.seen.append(item)
        return item

    def wait_for(self, match: Callable[[Any], bool], timeout: float = TIMEOUT) -> Any:
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"no matching event within {timeout} s; seen: {self.seen}")
            try:
                item = self.next(timeout=left)
            except queue.Empty:
                continue
            if match(item):
                return item

    def quiet_for(self, seconds: float) -> list[Any]:
        """Events arriving within `seconds` (to assert that nothing happens)."""
        got = []
        deadline = time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0:
            try:
                got.append(self.next(timeout=left))
            except queue.Empty:
                break
        return got

    def stop(self, sig: int = signal.SIGTERM) -> tuple[int, list[Any]]:
        self.proc.send_signal(sig)
        code = self.proc.wait(timeout=TIMEOUT)
        rest = []
        while (line := self.lines.get(timeout=TIMEOUT)) is not None:
            rest.append(json.loads(line) if self.as_json else line.rstrip("\n"))
        return code, rest

    def stderr(self) -> str:
        assert self.proc.stderr is not None
        return self.proc.stderr.read() if self.proc.poll() is not None else ""

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture
def start_watch(repo_root: Path) -> Iterator[Callable[..., Watch]]:
    started: list[Watch] = []

    def start(*args: str, root: Path = repo_root, **kwargs: Any) -> Watch:
        watch = Watch(root, *args, **kwargs)
        started.append(watch)
        # `started` comes once the observer runs and the startup sync is done (its events come first).
        watch.wait_for(lambda e: e["event"] == "started" if watch.as_json else e.startswith("watching"))
        return watch

    yield start
    for watch in started:
        watch.kill()


def event(name: str, **fields: Any) -> Callable[[Event], bool]:
    return lambda e: e["event"] == name and all(e.get(k) == v for k, v in fields.items())


def index_is_exact(repo: Repository) -> bool:
    return repo.layout.index_path.read_bytes() == dumps_canonical(repo.rebuild_index().to_json())


def edit_thread(repo: Repository, tid: str, **changes: Any) -> None:
    path = repo.layout.thread_file(tid)
    data = json.loads(path.read_text())
    data.update(changes)
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")


def test_hand_edits_and_folders_arriving_and_leaving(repo: Repository, start_watch: Callable[..., Watch]) -> None:
    threads.spawn(repo, "a", thread_id="thread-a")
    threads.spawn(repo, "b", thread_id="thread-b")
    watch = start_watch()

    edit_thread(repo, "thread-a", title="edited by hand", references={"thread-b": []})
    update = watch.wait_for(event("index_updated"))
    assert update["changed"] == ["thread-a", "thread-b"] and update["reason"] == "events"
    assert index_is_exact(repo)
    assert json.loads(repo.layout.index_path.read_text())["threads"]["thread-a"]["title"] == "edited by hand"

    # An editor's atomic save: write a temp file, rename it over thread.json (arrives as a move).
    data = json.loads(repo.layout.thread_file("thread-b").read_text())
    data["status"] = "paused"
    temp = repo.layout.thread_dir("thread-b") / ".thread.json.swp"
    temp.write_text(json.dumps(data))
    os.replace(temp, repo.layout.thread_file("thread-b"))
    assert watch.wait_for(event("index_updated"))["changed"] == ["thread-b"]
    assert index_is_exact(repo)

    shutil.copytree(repo.layout.thread_dir("thread-b"), repo.layout.thread_dir("thread-c"))
    edit_thread(repo, "thread-c", id="thread-c")
    watch.wait_for(lambda e: e["event"] == "index_updated" and "thread-c" in e["added"])
    assert index_is_exact(repo)
    shutil.rmtree(repo.layout.thread_dir("thread-a"))
    assert watch.wait_for(event("index_updated"))["removed"] == ["thread-a"]
    assert index_is_exact(repo)

    assert not [e for e in watch.quiet_for(1.0) if e["event"] == "index_updated"]  # its own writes: ignored
    code, rest = watch.stop(signal.SIGINT)
    assert code == 0 and rest[-1]["event"] == "stopped"


def test_git_checkout_brings_threads_in_and_out(repo: Repository, start_watch: Callable[..., Watch]) -> None:
    root = repo.root
    threads.spawn(repo, "a", thread_id="thread-a")
    git("add", "-A", cwd=root)
    git("commit", "-q", "-m", "base", cwd=root)
    git("checkout", "-q", "-b", "other", cwd=root)
    threads.spawn(repo, "o", thread_id="thread-o", refs=[threads.RefSpec("thread-a")])
    git("add", ".leslie/threads", cwd=root)  # a commit whose index is stale: only the watcher can fix it
    git("commit", "-q", "-m", "thread o without its index entry", cwd=root)
    git("checkout", "-q", "--", ".leslie/thread_relations.json", cwd=root)
    git("checkout", "-q", "main", cwd=root)
    assert not repo.layout.thread_dir("thread-o").exists()

    watch = start_watch()
    git("checkout", "-q", "other", cwd=root)
    update = watch.wait_for(lambda e: e["event"] == "index_updated" and e["added"] == ["thread-o"])
    assert update["changed"] == ["thread-a"]
    assert index_is_exact(repo)
    git("checkout", "-q", "main", cwd=root)
    watch.wait_for(lambda e: e["event"] == "index_updated" and e["removed"] == ["thread-o"])
    assert index_is_exact(repo)
    assert git("status", "--porcelain", cwd=root) == ""
    assert watch.stop()[0] == 0


def test_corrupt_thread_json_is_reported_and_never_indexed(repo: Repository,
                                                           start_watch: Callable[..., Watch]) -> None:
    threads.spawn(repo, "a", thread_id="thread-a")
    watch = start_watch()
    before = repo.layout.index_path.read_bytes()
    path = repo.layout.thread_file("thread-a")
    good = path.read_text()
    path.write_text('{\n<<<<<<< HEAD\n  "title": "x"\n=======\n')
    report = watch.wait_for(event("corrupt_file"))
    assert report["path"] == ".leslie/threads/thread-a/thread.json" and "conflict markers" in report["error"]
    assert [e for e in watch.quiet_for(0.8) if e["event"] == "index_updated"] == []
    assert repo.layout.index_path.read_bytes() == before
    assert watch.proc.poll() is None
    path.write_text(good.replace('"title": "a"', '"title": "repaired"'))
    watch.wait_for(event("index_updated", changed=["thread-a"]))
    assert index_is_exact(repo)
    assert watch.stop()[0] == 0


def test_writes_into_closed_threads_are_reported(repo: Repository, start_watch: Callable[..., Watch]) -> None:
    for tid in ("thread-live", "thread-done", "thread-arch", "thread-gone"):
        threads.spawn(repo, tid, thread_id=tid)
    threads.set_status(repo, "thread-done", "done")
    threads.set_status(repo, "thread-arch", "archived")
    threads.remove(repo, "thread-gone")
    watch = start_watch()
    (repo.layout.thread_dir("thread-live") / "plan.md").write_text("fine\n")
    (repo.layout.thread_dir("thread-done") / "progress.md").write_text("late note\n")
    found = watch.wait_for(event("write_to_closed_thread"))
    assert found == {**found, "thread": "thread-done", "status": "done",
                     "path": ".leslie/threads/thread-done/progress.md"}
    design = repo.layout.thread_dir("thread-arch") / "design"
    design.mkdir()
    (design / "api.md").write_text("x\n")
    assert watch.wait_for(event("write_to_closed_thread"))["path"] == ".leslie/threads/thread-arch/design/api.md"
    (repo.layout.thread_dir("thread-gone") / "plan.md").write_text("zombie\n")
    assert watch.wait_for(event("write_to_closed_thread"))["status"] == "deleted"
    code, rest = watch.stop()
    reported = [e for e in watch.seen + rest if e["event"] == "write_to_closed_thread"]
    assert {e["thread"] for e in reported} == {"thread-done", "thread-arch", "thread-gone"}
    assert code == 0


def test_polling_observer_and_fallback(repo: Repository, start_watch: Callable[..., Watch]) -> None:
    threads.spawn(repo, "a", thread_id="thread-a")
    polling = start_watch("--polling")
    assert polling.seen[-1]["mode"] == "polling"
    edit_thread(repo, "thread-a", title="seen by polling")
    polling.wait_for(event("index_updated", changed=["thread-a"]))
    assert index_is_exact(repo)
    assert polling.stop()[0] == 0

    # Simulated inotify limit: the native observer fails to start the way ENOSPC makes it fail.
    fallback = start_watch(env={"LESLIE_TEST_INOTIFY_ERROR": "ENOSPC"})
    assert fallback.seen[0]["event"] == "observer_fallback" and "No space left" in fallback.seen[0]["reason"]
    assert fallback.seen[1]["mode"] == "polling"
    edit_thread(repo, "thread-a", title="seen after the fallback")
    fallback.wait_for(event("index_updated", changed=["thread-a"]))
    assert index_is_exact(repo)
    assert fallback.stop(signal.SIGINT)[0] == 0


def test_never_writes_without_the_lock(repo: Repository, start_watch: Callable[..., Watch]) -> None:
    threads.spawn(repo, "a", thread_id="thread-a")
    watch = start_watch()
    before = repo.layout.index_path.read_bytes()
    with acquire_index_lock(repo.layout):
        edit_thread(repo, "thread-a", title="while locked")
        time.sleep(1.0)
        assert repo.layout.index_path.read_bytes() == before
    watch.wait_for(event("index_updated", changed=["thread-a"]))
    assert index_is_exact(repo)
    assert watch.stop()[0] == 0


def test_startup_repairs_a_stale_index_and_state_is_ignored(repo: Repository,
                                                           start_watch: Callable[..., Watch]) -> None:
    threads.spawn(repo, "a", thread_id="thread-a")
    repo.layout.index_path.write_text("<<<<<<< ours\n")
    watch = start_watch("--rescan", "0.3")
    update = watch.seen[0]
    assert update["event"] == "index_updated" and update["reason"] == "startup"
    assert update["added"] == ["thread-a"] and update["replaced_unreadable_index"] is True
    assert index_is_exact(repo)
    assert list((repo.layout.state_dir / "backups").iterdir())  # the unreadable copy is kept
    for n in range(20):
        (repo.layout.state_dir / f"noise-{n}").write_text("x")
    assert watch.quiet_for(1.0) == []  # state/ writes and idle rescans produce nothing
    assert watch.stop()[0] == 0


def test_human_output(repo: Repository, start_watch: Callable[..., Watch]) -> None:
    threads.spawn(repo, "a", thread_id="thread-a")
    watch = start_watch(as_json=False)
    assert watch.seen == [watch.seen[0]] and watch.seen[0].startswith(f"watching {repo.root}")
    edit_thread(repo, "thread-a", title="t2")
    assert watch.wait_for(lambda line: line.startswith("index updated")) == "index updated (events): ~thread-a"
    code, rest = watch.stop()
    assert code == 0 and rest == ["stopped"]


def test_watch_needs_a_root_and_valid_options(tmp_path: Path) -> None:
    assert run_leslie("watch", cwd=tmp_path).code == 3
    (tmp_path / ".leslie").mkdir()
    assert run_leslie("watch", "--debounce", "-1", cwd=tmp_path).code == 2


def test_cached_contexts_are_refreshed_and_dropped(repo: Repository, start_watch: Callable[..., Watch]) -> None:
    from leslie.inject.blocks import contexts_dir, refresh

    threads.spawn(repo, "b", thread_id="thread-b")
    threads.spawn(repo, "a", thread_id="thread-a", refs=[threads.RefSpec("thread-b")])
    threads.spawn(repo, "c", thread_id="thread-c")
    for tid in ("thread-a", "thread-c"):
        refresh(repo, tid)  # what the hook leaves behind after an injection
    cache = Path(contexts_dir(str(repo.root))) / "thread-a.json"
    assert ".leslie/threads/thread-b/progress.md" in json.loads(cache.read_text())["xml"]
    watch = start_watch()
    edit_thread(repo, "thread-a", references={"thread-b": ["plan.md"]})  # the index does not change...
    refreshed = watch.wait_for(event("contexts_refreshed"))
    assert refreshed["threads"] == ["thread-a"] and refreshed["dropped"] == []
    xml = json.loads(cache.read_text())["xml"]  # ...but the context does, and the cache follows
    assert ".leslie/threads/thread-b/plan.md" in xml and "thread-b/progress.md" not in xml
    shutil.rmtree(repo.layout.thread_dir("thread-c"))
    assert watch.wait_for(event("contexts_refreshed"))["dropped"] == ["thread-c"]
    assert not (Path(contexts_dir(str(repo.root))) / "thread-c.json").exists()
    assert watch.stop()[0] == 0


def test_refreshing_contexts_never_deletes_through_a_linked_cache_folder(repo: Repository, tmp_path: Path) -> None:
    # A committed `state/contexts -> ~/notes` once made the refresh delete every `<name>.json` there whose
    # name was not a thread (the "thread" is gone, so its cache goes).
    from leslie.inject.blocks import contexts_dir
    from leslie.inject.watch import Watcher

    outside = tmp_path / "notes"
    outside.mkdir()
    (outside / "thread-gone.json").write_text("{}")
    (outside / "notes.json").write_text("{}")
    folder = Path(contexts_dir(str(repo.root)))
    shutil.rmtree(folder, ignore_errors=True)
    folder.symlink_to(outside)
    events: list[dict[str, object]] = []
    Watcher(repo, events.append).refresh_contexts()
    assert sorted(os.listdir(outside)) == ["notes.json", "thread-gone.json"]
    assert not any(e["event"] == "contexts_refreshed" for e in events)


def test_leslie_folder_vanishing_and_coming_back(repo: Repository, start_watch: Callable[..., Watch],
                                                 tmp_path: Path) -> None:
    """A checkout of a branch without .leslie/, and back: the watcher waits, then watches again."""
    threads.spawn(repo, "a", thread_id="thread-a")
    saved = tmp_path / "saved"
    shutil.copytree(repo.layout.leslie_dir, saved)
    watch = start_watch()
    shutil.rmtree(repo.layout.leslie_dir)
    assert "is gone" in watch.wait_for(event("error"))["message"]
    shutil.copytree(saved, repo.layout.leslie_dir)
    watch.wait_for(event("observer_restarted"))
    edit_thread(repo, "thread-a", title="after the return")
    watch.wait_for(lambda e: e["event"] == "index_updated" and e["changed"] == ["thread-a"])
    assert index_is_exact(repo)
    assert watch.stop()[0] == 0
