"""The warm process (`leslie.server`, SPEC §12): the real `leslie` executable, a real warm process on a real
Unix socket, real pseudo-terminals and real signals.

Every test gets a runtime folder of its own (`XDG_RUNTIME_DIR`), so its warm process is its own, and stops
it at the end.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import json
import os
import pty
import re
import select
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import LESLIE_EXE, git, run_leslie, tree_digest
from leslie.ops.threads import spawn
from leslie.server import child, client
from leslie.server import warm as warm_process
from leslie.server.codewatch import CodeWatch
from leslie.store import derived
from leslie.store.repository import Repository
from leslie.version import PACKAGE
from test_listing import on_a_terminal

pytestmark = pytest.mark.skipif(not hasattr(socket, "AF_UNIX") or sys.platform == "win32",
                                reason="the warm process needs Unix sockets")


@pytest.fixture
def warm(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The warm process switched on, in a runtime folder of this test's own; stopped at the end."""
    folder = Path(tempfile.mkdtemp(prefix="lw-", dir="/tmp"))  # short: a socket path has ~100 bytes
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(folder))
    monkeypatch.delenv("LESLIE_WARM")
    yield folder
    pid = warm_pid()
    client.control(b"stop")
    if pid is not None:
        wait_gone(pid)
    shutil.rmtree(folder, ignore_errors=True)


def status() -> dict[str, object] | None:
    answer = client.control(b"status")
    return json.loads(answer) if answer else None


def warm_pid() -> int | None:
    doc = status()
    return doc["pid"] if doc else None  # type: ignore[return-value]


def started() -> dict[str, object]:
    """The warm process's status, once the first command has started it."""
    run_leslie("--version", cwd=Path("/"))
    deadline = time.monotonic() + 30
    while (doc := status()) is None:
        assert time.monotonic() < deadline, "no warm process started"
        time.sleep(0.05)
    return doc


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            return handle.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except (FileNotFoundError, ProcessLookupError):  # gone before the open, or between the open and the read
        return False


def wait_gone(pid: int, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while alive(pid):
        assert time.monotonic() < deadline, f"process {pid} still running"
        time.sleep(0.02)


def children_of(pid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_bytes()
            except OSError:
                continue
            fields = stat.rsplit(b")", 1)[1].split()
            if int(fields[1]) == pid and fields[0] != b"Z":
                found.append(int(entry))
    return found


# -- the same command, warm and cold ------------------------------------------------------------------------

CORPUS: list[tuple[list[str], str | None]] = [
    (["--version"], None),
    (["--help"], None),
    (["list", "--help"], None),
    (["hook", "--help"], None),
    (["no-such-command"], None),
    # Threads created in the same second are drawn in title order: the first one's title comes first, so the
    # graph below is the same whether the two spawns straddle a second or not.
    (["spawn", "--intent", "Parser: write it", "--id", "thread-parser"], None),
    (["spawn", "--intent", "Test the parser", "--id", "thread-tests", "--ref", "thread-parser:plan.md"], None),
    (["spawn", "--title", "no intent"], None),
    (["list"], None),
    (["list", "--plain"], None),
    (["--json", "list"], None),
    (["show", "thread-parser"], None),
    (["show", "thread-nope"], None),
    # (`status` differs on purpose: run cold, it says the warm process is off; see the test of status below.)
    (["find", "parser"], None),
    (["relations", "--format", "mermaid"], None),
    (["context", "--thread", "thread-tests"], None),
    (["switch", "thread-tests"], None),
    (["reference", "thread-tests", "thread-nope"], None),
    (["set-status", "thread-parser", "done"], None),
    (["objective", "list"], None),
    (["hook", "claude-code"], '{"hook_event_name": "UserPromptSubmit", "session_id": "s1", "prompt": "hi"}'),
    (["hook", "claude-code"], '{"hook_event_name": "UserPromptSubmit", "session_id": "s1", "prompt": "again"}'),
    (["hook", "codex"], "not json"),
    (["check-write", ".leslie/threads/thread-parser/plan.md"], None),
    (["inject", "--message", "hello", "--session", "s2"], None),
    (["rm", "thread-tests", "--dry-run"], None),
    (["rm", "thread-parser"], None),
    (["doctor"], None),
]
TIMES = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)?")


def run_corpus(root: Path) -> list[tuple[int, str, str]]:
    results = []
    for args, stdin in CORPUS:
        result = run_leslie(*args, cwd=root, input=stdin, env={"COLUMNS": "100"})
        results.append((result.code, TIMES.sub("T", result.stdout), TIMES.sub("T", result.stderr)))
    return results


DERIVED = re.compile(r"(^|/)(find|contexts|sessions)/|index-digest|cache|\.lock$|\.checked$")


def files_of(root: Path) -> dict[str, str]:
    """Every file of `.leslie/` and of the machine state, derived caches and times aside (the caches are keyed
    by inodes and times, and the two runs are seconds apart)."""
    found = {}
    for folder in (root / ".leslie", root / ".git" / "leslie"):
        for path in sorted(folder.rglob("*")):
            rel = path.relative_to(root).as_posix()
            if path.is_file() and not DERIVED.search(rel):
                found[rel] = TIMES.sub("T", path.read_text(errors="replace"))
    return found


def test_a_corpus_of_commands_gives_the_same_output_exit_code_and_files_warm_and_cold(
        warm: Path, tmp_path: Path) -> None:
    root = tmp_path / "repo"
    root.mkdir()
    git("init", "-q", "-b", "main", cwd=root)
    assert run_leslie("init", cwd=root, env={"LESLIE_WARM": "0"}).code == 0
    pristine = tmp_path / "pristine"
    shutil.copytree(root, pristine, symlinks=True)
    served_before = started()["served"]

    warm_results = run_corpus(root)
    warm_files = files_of(root)
    served = status()
    assert served is not None and served["served"] == served_before + len(CORPUS)

    shutil.rmtree(root)
    shutil.copytree(pristine, root, symlinks=True)
    os.environ["LESLIE_WARM"] = "0"
    try:
        cold_results = run_corpus(root)
    finally:
        del os.environ["LESLIE_WARM"]
    for (args, _), warm_result, cold_result in zip(CORPUS, warm_results, cold_results, strict=True):
        assert warm_result == cold_result, args
    assert files_of(root) == warm_files
    assert {code for code, _, _ in warm_results} >= {0, 2, 3}  # the corpus has errors as well as answers


def test_the_environment_and_folder_are_the_clients(warm: Path, tmp_path: Path) -> None:
    started()
    here = tmp_path / "a folder"
    here.mkdir()
    result = run_leslie("list", cwd=here, env={"LESLIE_ROOT": str(tmp_path / "nowhere")})
    cold = run_leslie("list", cwd=here, env={"LESLIE_ROOT": str(tmp_path / "nowhere"), "LESLIE_WARM": "0"})
    assert (result.code, result.stdout, result.stderr) == (cold.code, cold.stdout, cold.stderr)
    assert str(tmp_path / "nowhere") in result.stderr


def test_the_time_zone_is_the_clients(warm: Path, repo_root: Path) -> None:
    """The table on a terminal shows local times (`HH:MM` today): in the client's time zone warm as cold, whatever
    the warm process was started with."""
    started()
    assert run_leslie("spawn", "--intent", "Timed", "--id", "thread-timed", cwd=repo_root).code == 0
    shown = {}
    for zone in ("UTC", "Asia/Kolkata"):  # +05:30: no hour and minute is the same in both
        for env in ({}, {"LESLIE_WARM": "0"}):
            result = on_a_terminal(repo_root, "list", env={**env, "TZ": zone})
            assert result.code == 0, result.stderr
            shown[zone, bool(env)] = result.stdout
    assert shown["UTC", False] == shown["UTC", True] != shown["Asia/Kolkata", True] == shown["Asia/Kolkata", False]


def test_the_umask_is_the_clients(warm: Path, repo_root: Path) -> None:
    started()
    code = (f"import os, subprocess, sys; os.umask(0o077); "
            f"sys.exit(subprocess.run([{LESLIE_EXE!r}, 'spawn', '--intent', 'private', '--id', 'thread-umask'])"
            f".returncode)")
    assert subprocess.run([sys.executable, "-c", code], cwd=repo_root, check=False,
                          capture_output=True).returncode == 0
    plan = repo_root / ".leslie" / "threads" / "thread-umask" / "plan.md"
    assert plan.stat().st_mode & 0o077 == 0


# -- the process itself ------------------------------------------------------------------------------------

def test_the_first_command_starts_it_and_it_reports_itself(warm: Path) -> None:
    doc = started()
    assert doc["version"] and doc["location"] == PACKAGE
    pid = doc["pid"]
    assert isinstance(pid, int) and alive(pid)
    assert isinstance(doc["memory"], int) and doc["memory"] < 100 * (1 << 20)
    socket_file = Path(str(doc["socket"]))
    assert socket_file.parent.parent == warm and socket_file.is_socket()
    assert socket_file.parent.stat().st_mode & 0o777 == 0o700
    shown = run_leslie("warm", cwd=Path("/"))
    assert shown.code == 0 and f"pid {pid}" in shown.stdout
    assert ", 0 running" in shown.stdout  # the `leslie warm` asking, itself a child, is not counted
    served = json.loads(run_leslie("warm", "--json", cwd=Path("/")).stdout)
    assert served["pid"] == pid and served["commands_running"] == 0 and served["served"] >= 2
    assert run_leslie("warm", "stop", cwd=Path("/")).stdout == "warm process: stopped\n"
    wait_gone(pid)
    assert not socket_file.exists()
    assert run_leslie("warm", cwd=Path("/"), env={"LESLIE_WARM": "0"}).stdout == "warm process: off (LESLIE_WARM=0)\n"


def test_leslie_warm_0_runs_everything_in_the_clients_process(warm: Path) -> None:
    result = run_leslie("--version", cwd=Path("/"), env={"LESLIE_WARM": "0"})
    assert result.code == 0
    time.sleep(0.5)
    assert status() is None
    shown = run_leslie("warm", cwd=Path("/"), env={"LESLIE_WARM": "0"})
    assert "off (LESLIE_WARM=0)" in shown.stdout


def test_it_exits_when_idle(warm: Path) -> None:
    env = {**os.environ, "LESLIE_WARM": "0"}
    proc = subprocess.Popen([LESLIE_EXE, "warm", "serve", "--idle", "1"], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    assert proc.wait(timeout=60) == 0


def test_a_request_never_waits_for_a_spare_to_make_its_copies() -> None:
    """A spare serves a request only once it has said it made its copies of the parent's pages; without one,
    the request gets a child forked at once, and the spares are kept for the next ones; a spare that ended is
    dropped. A new spare is forked only while none is making its copies. The test plays the spares' end of
    their channels; the children forked are real, and end when their channels close."""
    state = warm_process.Warm("/nowhere", [], CodeWatch([]))
    forked: list[int] = []

    def take() -> warm_process.Spare:
        got = warm_process._take_spare(state, lambda argv: 0)
        if got is not spare:  # a child forked now: no request comes, it ends when its channel does
            forked.append(got.pid)
            got.channel.close()
        return got

    ours, theirs = socket.socketpair()
    spare = warm_process.Spare(-1, ours)
    state.spares = [spare]
    try:
        assert not state.wants_spare()  # one is making its copies: no other yet
        assert take() is not spare and state.spares == [spare]
        theirs.sendall(child.PRIMED)
        assert state.wants_spare()  # one primed, one more wanted
        assert take() is spare and state.spares == []
        ours, theirs = socket.socketpair()
        spare = warm_process.Spare(-1, ours)
        state.spares = [spare]
        theirs.close()  # it ended
        assert take() is not spare and state.spares == [] and ours.fileno() == -1
        ours, theirs = socket.socketpair()
        state.spares = [warm_process.Spare(-1, ours)]
        theirs.close()
        assert state.wants_spare() and state.spares == []  # one that ended is no spare
    finally:
        for pid in forked:
            assert os.waitpid(pid, 0)[1] == 0
        theirs.close()
        ours.close()
        state.code.close()
    assert len(forked) == 2


def test_a_stuck_warm_process_means_running_cold_within_the_timeout(warm: Path) -> None:
    path = client.socket_path()
    assert path is not None
    stuck = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stuck.bind(path)
    stuck.listen(8)  # accepts connections (the kernel does), never answers
    try:
        begun = time.monotonic()
        result = run_leslie("--version", cwd=Path("/"))
        assert result.code == 0 and result.stdout.startswith("leslie ")
        assert time.monotonic() - begun < client.TIMEOUT + 10
    finally:
        stuck.close()
        os.unlink(path)


def test_garbage_on_the_socket_is_refused_and_serving_goes_on(warm: Path) -> None:
    pid = started()["pid"]
    path = client.socket_path()
    assert path is not None
    for junk in (b"", b"\x00\x00\x00\x05hello", b"\xff\xff\xff\xff" + b"x" * 100, b"GET / HTTP/1.0\r\n\r\n"):
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        conn.settimeout(10)
        conn.connect(path)
        conn.sendall(junk)
        conn.shutdown(socket.SHUT_WR)
        with contextlib.suppress(ConnectionResetError):  # closed with our junk unread
            assert b"ready" not in conn.recv(100)
        conn.close()
    assert warm_pid() == pid


def test_a_request_from_another_leslie_is_refused(warm: Path) -> None:
    started()
    path = client.socket_path()
    assert path is not None
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.settimeout(10)
    conn.connect(path)
    other = ["9.9.9", *client.identity()[1:]]
    conn.sendall(client._request(b"run", other, ["leslie", "--version"]))
    assert conn.recv(100).startswith(b"refused")
    conn.close()


def test_a_folder_others_may_enter_is_never_used(warm: Path) -> None:
    folder = warm / f"leslie-{os.getuid()}"
    folder.mkdir(mode=0o755)
    folder.chmod(0o755)
    assert client.socket_path() is None or not client.socket_path().startswith(str(folder))  # type: ignore[union-attr]
    result = run_leslie("--version", cwd=Path("/"))
    assert result.code == 0 and result.stdout.startswith("leslie ")
    assert not any(folder.iterdir())


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to act as another user")
def test_another_user_can_neither_reach_nor_use_the_socket(warm: Path) -> None:
    pid = started()["pid"]
    path = client.socket_path()
    assert path is not None
    probe = ("import socket, sys\n"
             "s = socket.socket(socket.AF_UNIX)\n"
             "s.settimeout(5)\n"
             "try:\n"
             "    s.connect(sys.argv[1])\n"
             "except OSError as exc:\n"
             "    print('refused', exc.errno); sys.exit(0)\n"
             "try:\n"
             "    s.sendall(b'\\x00\\x00\\x00\\x01x')\n"
             "    print('answer', s.recv(100))\n"
             "except (ConnectionResetError, BrokenPipeError):\n"
             "    print('answer', b'')\n")
    nobody = 65534

    def as_nobody() -> None:
        os.setgid(nobody)
        os.setuid(nobody)

    python = shutil.which("python3", path="/usr/bin:/bin") or sys.executable  # one that user may run
    reach = subprocess.run([python, "-c", probe, path], preexec_fn=as_nobody, capture_output=True,
                           text=True, check=False, timeout=30)
    assert reach.stdout.startswith("refused"), reach
    # Even with the folder and the socket opened to everyone, the peer's uid is checked.
    folder = Path(path).parent
    folder.chmod(0o711)
    warm.chmod(0o711)
    os.chmod(path, 0o777)
    try:
        use = subprocess.run([python, "-c", probe, path], preexec_fn=as_nobody, capture_output=True,
                             text=True, check=False, timeout=30)
    finally:
        folder.chmod(0o700)
    assert use.stdout.strip() == "answer b''", use
    assert warm_pid() == pid


def test_edited_code_is_never_served_by_the_old_process(warm: Path, tmp_path: Path) -> None:
    package = tmp_path / "src"
    shutil.copytree(Path(PACKAGE), package / "leslie", ignore=shutil.ignore_patterns("__pycache__"))
    env = {"PYTHONPATH": str(package)}
    command = [sys.executable, "-m", "leslie", "--version"]

    def version() -> str:
        proc = subprocess.run(command, env={**os.environ, **env}, capture_output=True, text=True, check=True)
        return proc.stdout

    def copy_status() -> dict[str, object] | None:
        code = ("from leslie.server import client; a = client.control(b'status'); "
                "print(a.decode() if a else 'null')")
        proc = subprocess.run([sys.executable, "-c", code], env={**os.environ, **env}, capture_output=True,
                              text=True, check=True)
        return json.loads(proc.stdout)  # type: ignore[no-any-return]

    assert version() == "leslie 0.1.0\n" or version().startswith("leslie ")
    deadline = time.monotonic() + 30
    while (first := copy_status()) is None:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert first["location"] == str(package / "leslie")
    assert version().startswith("leslie ")  # served warm
    assert copy_status()["served"] >= 1  # type: ignore[index,operator]
    app = package / "leslie" / "cli" / "app.py"
    app.write_text(app.read_text().replace('f"leslie {__version__}\\n"', 'f"leslie {__version__} (edited)\\n"'))
    assert version().endswith("(edited)\n")
    assert version().endswith("(edited)\n")
    wait_gone(first["pid"])  # type: ignore[arg-type]
    deadline = time.monotonic() + 30
    while (second := copy_status()) is None:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert second["pid"] != first["pid"] and second["code"] != first["code"]
    assert version().endswith("(edited)\n")
    subprocess.run([sys.executable, "-c", "from leslie.server import client; client.control(b'stop')"],
                   env={**os.environ, **env}, check=True)


# -- signals, a killed client, a terminal -----------------------------------------------------------------

def hook_waiting_on_stdin(root: Path) -> tuple[subprocess.Popen[bytes], int]:
    """A `leslie hook` whose stdin stays open (it waits for the event), and its child in the warm process."""
    pid = started()["pid"]
    assert isinstance(pid, int)
    proc = subprocess.Popen([LESLIE_EXE, "hook", "claude-code"], cwd=root, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 30
    while not (kids := [k for k in children_of(pid) if k != proc.pid and _is_leslie_child(k, pid)]):
        assert time.monotonic() < deadline, "the command never reached the warm process"
        time.sleep(0.02)
    return proc, kids[0]


def _is_leslie_child(pid: int, parent: int) -> bool:
    """A child of the warm process that serves a command: not its watcher, nor its idle spare (whose
    standard streams are still the warm process's /dev/null)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        stdout = os.readlink(f"/proc/{pid}/fd/1")
    except OSError:
        return False
    return b"leslie.server.watcher" not in cmdline and stdout != os.devnull


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_to_the_client_reaches_the_child(warm: Path, repo_root: Path, signum: int) -> None:
    proc, child = hook_waiting_on_stdin(repo_root)
    time.sleep(0.2)
    proc.send_signal(signum)
    proc.wait(timeout=30)
    wait_gone(child)
    assert proc.stdin is not None
    proc.stdin.close()
    cold = subprocess.Popen([LESLIE_EXE, "hook", "claude-code"], cwd=repo_root, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={**os.environ, "LESLIE_WARM": "0"})
    time.sleep(1.5)  # past the interpreter's start: the signal finds the hook waiting on stdin
    cold.send_signal(signum)
    cold.wait(timeout=30)
    assert proc.returncode == cold.returncode
    assert cold.stdin is not None
    cold.stdin.close()


def test_a_killed_client_takes_its_child_with_it(warm: Path, repo_root: Path) -> None:
    proc, child = hook_waiting_on_stdin(repo_root)
    proc.kill()
    proc.wait(timeout=30)
    wait_gone(child, timeout=10)
    assert warm_pid() is not None  # the warm process itself lives on


def run_on_a_terminal(args: list[str], cwd: Path, keys: list[tuple[str, bytes]], env: dict[str, str],
                      timeout: float = 30) -> tuple[int, str]:
    """Run `leslie ARGS` on a new pseudo-terminal (its controlling terminal), typing each `keys` answer once
    the output shows its prompt; the exit status and everything shown."""
    pid, master = pty.fork()
    if pid == 0:  # the child: a session of its own, the terminal its controlling one
        try:
            os.chdir(cwd)
            os.execve(LESLIE_EXE, [LESLIE_EXE, *args], {**os.environ, **env})
        finally:
            os._exit(127)
    shown = b""
    pending = list(keys)
    deadline = time.monotonic() + timeout
    while True:
        assert time.monotonic() < deadline, shown
        ready, _, _ = select.select([master], [], [], 0.1)
        if ready:
            try:
                chunk = os.read(master, 4096)
            except OSError:
                chunk = b""
            if not chunk:
                break
            shown += chunk
        if pending and pending[0][0].encode() in shown:
            os.write(master, pending.pop(0)[1])
    _, status = os.waitpid(pid, 0)
    os.close(master)
    return os.waitstatus_to_exitcode(status), shown.decode(errors="replace")


@pytest.mark.parametrize("mode", ["warm", "cold"])
def test_a_terminal_stays_a_terminal(warm: Path, repo_root: Path, mode: str) -> None:
    env = {"LESLIE_WARM": "0"} if mode == "cold" else {}
    if mode == "warm":
        started()
    for number in (1, 2, 3):
        assert run_leslie("spawn", "--intent", f"Thread {number}", "--id", f"thread-{number}",
                          cwd=repo_root).code == 0
    env["COLUMNS"] = "60"
    code, shown = run_on_a_terminal(["list"], repo_root, [], env)
    assert code == 0 and "thread-1" in shown
    assert max(len(line) for line in shown.splitlines()) <= 60
    code, shown = run_on_a_terminal(["rm", "thread-2"], repo_root, [("[y/N]", b"y\r")], env)
    assert code == 0, shown
    assert not (repo_root / ".leslie" / "threads" / "thread-2" / "plan.md").exists()
    code, shown = run_on_a_terminal(["rm", "thread-3"], repo_root, [("[y/N]", b"\x03")], env)  # Ctrl-C
    assert code != 0 and (repo_root / ".leslie" / "threads" / "thread-3" / "plan.md").exists(), shown
    if mode == "warm":
        pid = warm_pid()
        assert pid is not None and not [k for k in children_of(pid) if _is_leslie_child(k, pid)]


def test_the_terminal_answers_are_the_same_warm_and_cold(warm: Path, repo_root: Path) -> None:
    started()
    assert run_leslie("spawn", "--intent", "Kept", "--id", "thread-kept", cwd=repo_root).code == 0
    answers = []
    for env in ({}, {"LESLIE_WARM": "0"}):
        code, shown = run_on_a_terminal(["rm", "thread-kept"], repo_root, [("[y/N]", b"n\r")],
                                        {**env, "COLUMNS": "80"})
        answers.append((code, shown))
    assert answers[0] == answers[1]
    assert tree_digest(repo_root / ".leslie")  # still there


def test_a_serving_command_runs_in_the_clients_own_process(warm: Path, repo_root: Path, tmp_path: Path) -> None:
    started()
    assert run_leslie("spawn", "--intent", "Edited", "--id", "thread-edited", cwd=repo_root).code == 0
    editor = tmp_path / "editor.py"
    record = tmp_path / "editor-parent"
    editor.write_text(f"import os, sys\nopen({str(record)!r}, 'w').write(str(os.getppid()))\n")
    proc = subprocess.Popen([LESLIE_EXE, "edit", "thread-edited"], cwd=repo_root,
                            env={**os.environ, "EDITOR": f"{sys.executable} {editor}"},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = proc.communicate(timeout=60)
    assert int(record.read_text()) == proc.pid, (out, err)


def test_list_gives_the_text_it_kept_while_the_watcher_says_nothing_changed(warm: Path, repo_root: Path) -> None:
    """`leslie list` piped, and `--json`, keep their text in the derived store; with the warm process's watcher
    vouching that no thread's files changed, the next run gives it as it is (forged here, to show where it comes
    from). A change draws it anew; a cold run (no watcher to ask) always draws it."""
    for n in range(3):
        spawn(Repository(repo_root), f"Thread {n}", thread_id=f"thread-{n}")
    database = derived.database_path(repo_root)
    assert database is not None

    def forge() -> int:
        with sqlite3.connect(database) as db:
            return db.execute("UPDATE drawings SET text = 'forged' WHERE version LIKE 'activity %'").rowcount

    drawn = run_leslie("list", cwd=repo_root).stdout
    deadline = time.monotonic() + 30  # until the watch is set up and a run kept its text
    while not (run_leslie("list", cwd=repo_root).stdout == drawn and forge()
               and run_leslie("list", cwd=repo_root).stdout == "forged"):
        assert time.monotonic() < deadline, "list never gave a kept text"
        time.sleep(0.1)
    assert run_leslie("list", "--plain", cwd=repo_root).stdout == "forged"  # the same text
    as_json = run_leslie("list", "--json", cwd=repo_root).stdout  # kept apart: another form
    assert [row["id"] for row in json.loads(as_json)] == ["thread-2", "thread-1", "thread-0"]
    assert run_leslie("list", "--json", cwd=repo_root).stdout == as_json
    forge()
    assert run_leslie("list", "--json", cwd=repo_root).stdout == "forged"
    assert run_leslie("list", cwd=repo_root, env={"LESLIE_WARM": "0"}).stdout == drawn
    with open(repo_root / ".leslie" / "threads" / "thread-1" / "progress.md", "a", encoding="utf-8") as log:
        log.write("- appended in place\n")
    after = run_leslie("list", cwd=repo_root).stdout
    assert after == run_leslie("list", cwd=repo_root, env={"LESLIE_WARM": "0"}).stdout != drawn
    assert after.startswith("thread-1\t")  # newest activity first


def test_the_table_on_a_terminal_is_kept_for_its_width_colours_claims_and_day(warm: Path, repo_root: Path) -> None:
    """The table a terminal gets is kept like the piped forms, with what else it shows: a forged kept table shows
    while the watcher vouches for the files and the terminal, its colours, the claims and the local day (its
    offset) are the same; any of them changed draws it anew."""
    repo = Repository(repo_root)
    for n in range(3):
        spawn(repo, f"Thread {n}", thread_id=f"thread-{n}")
    database = derived.database_path(repo_root)
    assert database is not None

    def forge() -> int:
        with sqlite3.connect(database) as db:
            return db.execute("UPDATE drawings SET text = 'forged\n' WHERE version LIKE 'activity %'").rowcount

    drawn = on_a_terminal(repo_root, "list").stdout
    deadline = time.monotonic() + 30  # until the watch is set up and a run kept its text
    while not (on_a_terminal(repo_root, "list").stdout == drawn and forge()
               and on_a_terminal(repo_root, "list").stdout == "forged\n"):
        assert time.monotonic() < deadline, "the table was never kept"
        time.sleep(0.1)
    assert on_a_terminal(repo_root, "list", columns=100).stdout != "forged\n"  # another width
    assert on_a_terminal(repo_root, "list", colour=True).stdout != "forged\n"  # bold
    assert on_a_terminal(repo_root, "list", env={"TZ": "Asia/Kolkata"}).stdout != "forged\n"  # another offset
    assert on_a_terminal(repo_root, "list").stdout == "forged\n"
    assert run_leslie("claim", "thread-1", "--session", "s-1", cwd=repo_root).code == 0
    held = on_a_terminal(repo_root, "list").stdout
    assert "held by" in held and held == on_a_terminal(repo_root, "list", env={"LESLIE_WARM": "0"}).stdout


def test_lists_run_beside_appends_leave_no_stale_text(warm: Path, repo_root: Path) -> None:
    """Four `leslie list` loops (plain and JSON) while another process appends to the threads' logs in place: each
    output is one whole listing, and once the appends stop, the next warm `list` is the listing of the files as
    they are (a cold run's), whatever the loops kept meanwhile."""
    repo = Repository(repo_root)
    ids = [spawn(repo, f"Thread {n}", thread_id=f"thread-{n}").thread.id for n in range(6)]
    run_leslie("list", cwd=repo_root)  # starts the warm process and the watch
    stop = time.monotonic() + 4

    def loop(form: str) -> list[str]:
        seen = []
        while time.monotonic() < stop:
            seen.append(run_leslie("list", *([form] if form else []), cwd=repo_root).stdout)
        return seen

    def append() -> None:
        step = 0
        while time.monotonic() < stop:
            with open(repo.layout.thread_dir(ids[step % len(ids)]) / "progress.md", "a", encoding="utf-8") as log:
                log.write(f"- step {step}\n")
            step += 1
            time.sleep(0.03)

    with concurrent.futures.ThreadPoolExecutor(5) as pool:
        writer = pool.submit(append)
        outputs = [pool.submit(loop, form) for form in ("", "", "--json", "--plain")]
        writer.result()
        seen = [out for future in outputs for out in future.result()]
    assert seen
    for out in seen:  # whole: every thread once
        shown = [row["id"] for row in json.loads(out)] if out.startswith("[") else \
            [line.split("\t")[0] for line in out.splitlines()]
        assert sorted(shown) == sorted(ids), out
    for form in ((), ("--json",)):
        cold = run_leslie("list", *form, cwd=repo_root, env={"LESLIE_WARM": "0"}).stdout
        assert run_leslie("list", *form, cwd=repo_root).stdout == cold
        assert run_leslie("list", *form, cwd=repo_root).stdout == cold


def test_status_says_when_the_warm_process_is_off_or_failing(warm: Path, repo_root: Path) -> None:
    off = run_leslie("status", cwd=repo_root, env={"LESLIE_WARM": "0"})
    assert "warm process: off (LESLIE_WARM=0)" in off.stdout
    started()
    on = run_leslie("status", cwd=repo_root)
    assert "warm process" not in on.stdout
    assert json.loads(run_leslie("--json", "status", cwd=repo_root).stdout)["warm"]["state"] == "running"
    path = client.socket_path()
    pid = warm_pid()
    assert path is not None and pid is not None
    os.kill(pid, signal.SIGSTOP)  # a warm process that no longer answers
    try:
        stuck = run_leslie("status", cwd=repo_root)
    finally:
        os.kill(pid, signal.SIGCONT)
    assert stuck.code == 0 and "warm process: failing (nothing answers on" in stuck.stdout
