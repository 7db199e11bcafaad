"""The render server (`leslie.server.render_server`): real server processes, real Unix sockets, the real hook.

Every test gets its own runtime folder (so its own server) and stops what it started.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import LESLIE_EXE, Result, approve_templates, git, run_leslie, state_dir
from leslie.context import trust
from leslie.context.block import render_context
from leslie.inject import render_client
from leslie.ops.bootstrap import init_repository
from leslie.ops.threads import reference, spawn
from leslie.store.repository import Repository

THREAD = "thread-served"
OTHER = "thread-other"
SERVER = [sys.executable, "-P", "-m", "leslie.server.render_server"]


@pytest.fixture
def runtime(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A private runtime folder (short: socket paths are limited), the server switched on; stopped after."""
    folder = Path(tempfile.mkdtemp(prefix="lrs-", dir="/tmp"))
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(folder))
    monkeypatch.delenv("LESLIE_RENDER_SERVER")
    yield folder
    pid = render_client.ping()
    render_client.stop()
    if pid is not None:
        _wait_gone(pid)
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def root(repo: Repository) -> Path:
    spawn(repo, "Served thread", thread_id=THREAD)
    spawn(repo, "Other thread", thread_id=OTHER)
    reference(repo, THREAD, OTHER, ["plan.md"])
    return repo.root


def _running(pid: int) -> bool:
    """Alive and not a zombie (a server started by a hook is nobody's child here, and may wait to be reaped)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8")
    except FileNotFoundError:
        return False
    except OSError:  # no /proc: signal 0 tells whether the process exists
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _wait_gone(pid: int, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while _running(pid):
        if time.monotonic() > deadline:
            os.kill(pid, 9)
            pytest.fail(f"render server {pid} did not exit")
        time.sleep(0.02)


def wait_for_server(timeout: float = 15.0) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pid = render_client.ping()
        if pid is not None:
            return pid
        time.sleep(0.05)
    pytest.fail("no render server answered")


def prompt_hook(root: Path, session: str, env: dict[str, str] | None = None) -> Result:
    payload = {"session_id": session, "transcript_path": None, "cwd": str(root), "permission_mode": "default",
               "hook_event_name": "UserPromptSubmit", "prompt": "Go on"}
    result = run_leslie("hook", "claude-code", cwd=root, input=json.dumps(payload),
                        env={"LESLIE_THREAD": THREAD, **(env or {})})
    assert result.code == 0, result.stderr
    return result


def injected(result: Result) -> str:
    text: str = json.loads(result.stdout)["hookSpecificOutput"]["additionalContext"]
    return text


def imported(result: Result) -> set[str]:
    """Modules a hook run with PYTHONPROFILEIMPORTTIME=1 imported (from its stderr)."""
    names = set()
    for line in result.stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            names.add(line.rsplit("|", 1)[1].strip())
    return names


def drop_contexts(root: Path) -> None:
    shutil.rmtree(state_dir(root) / "contexts", ignore_errors=True)


def test_a_cold_hook_starts_a_server_and_later_renders_are_served(runtime: Path, root: Path,
                                                                  repo: Repository) -> None:
    first = prompt_hook(root, "s-first")  # no server yet: rendered in the hook's own process
    wait_for_server()
    drop_contexts(root)
    served = prompt_hook(root, "s-served", env={"PYTHONPROFILEIMPORTTIME": "1"})
    assert injected(served) == injected(first) == render_context(Repository(root), THREAD)
    modules = imported(served)
    assert "socket" in modules
    assert not modules & {"jinja2", "lxml", "lxml.etree", "leslie.context.block", "leslie.store.repository"}
    cache = json.loads((state_dir(root) / "contexts" / f"{THREAD}.json").read_text(encoding="utf-8"))
    assert cache["xml"] == injected(first)


def test_changed_settings_are_parsed_by_the_server(runtime: Path, root: Path) -> None:
    prompt_hook(root, "s1")
    wait_for_server()
    (root / ".leslie/config.toml").write_text('[injection]\nmode = "always"\n', encoding="utf-8")
    result = prompt_hook(root, "s1", env={"PYTHONPROFILEIMPORTTIME": "1"})
    assert injected(result) == render_context(Repository(root), THREAD)  # mode "always": every prompt
    assert not imported(result) & {"tomllib", "leslie.store.config"}
    cache = json.loads((state_dir(root) / "config-cache.json").read_text(encoding="utf-8"))
    assert cache["config"]["injection"]["mode"] == "always"


def test_a_broken_config_is_reported_as_without_a_server(runtime: Path, root: Path) -> None:
    prompt_hook(root, "warm")
    wait_for_server()
    (root / ".leslie/config.toml").write_text("[injection\n", encoding="utf-8")
    served = prompt_hook(root, "with-server")
    alone = prompt_hook(root, "without-server", env={"LESLIE_RENDER_SERVER": "0"})
    assert served.stdout == alone.stdout == ""
    assert served.stderr == alone.stderr and "config.toml" in served.stderr
    assert render_client.ping() is not None


def test_a_changed_context_is_served_as_the_library_renders_it(runtime: Path, root: Path,
                                                               repo: Repository) -> None:
    prompt_hook(root, "s1")
    wait_for_server()
    third = spawn(repo, "Third thread").thread.id
    reference(repo, THREAD, third, [])  # a mutation: the next prompt's context changed
    result = prompt_hook(root, "s1", env={"PYTHONPROFILEIMPORTTIME": "1"})
    assert injected(result) == render_context(Repository(root), THREAD)
    assert f'<ref thread="{third}" ' in injected(result)
    assert "jinja2" not in imported(result)


def test_a_session_start_starts_a_server(runtime: Path, root: Path) -> None:
    prompt_hook(root, "warm")  # renders and caches the block (and starts a server)
    wait_for_server()
    assert render_client.stop()
    _wait_gone_socket(runtime)
    payload = {"session_id": "new", "transcript_path": None, "cwd": str(root), "permission_mode": "default",
               "hook_event_name": "SessionStart", "source": "startup", "model": "claude-sonnet-4-5"}
    result = run_leslie("hook", "claude-code", cwd=root, input=json.dumps(payload), env={"LESLIE_THREAD": THREAD})
    assert result.code == 0 and "additionalContext" in result.stdout  # from the cache: nothing to render
    wait_for_server()


def _wait_gone_socket(runtime: Path, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while list(runtime.rglob("*.sock")):
        assert time.monotonic() < deadline, "the server's socket stayed"
        time.sleep(0.02)


def test_only_one_server_runs_however_many_start(runtime: Path) -> None:
    procs = [subprocess.Popen([*SERVER, "60"], stdin=subprocess.DEVNULL) for _ in range(4)]
    try:
        pid = wait_for_server()
        deadline = time.monotonic() + 15
        while sum(p.poll() is None for p in procs) > 1 and time.monotonic() < deadline:
            time.sleep(0.05)
        alive = [p for p in procs if p.poll() is None]
        assert [p.pid for p in alive] == [pid]
        assert all(p.returncode == 0 for p in procs if p not in alive)
    finally:
        render_client.stop()
        for p in procs:
            p.wait(timeout=10)


def test_a_server_exits_when_its_socket_is_removed(runtime: Path) -> None:
    proc = subprocess.Popen([*SERVER, "60"], stdin=subprocess.DEVNULL)
    wait_for_server()
    sockets = list(runtime.rglob("*.sock"))
    assert len(sockets) == 1 and oct(sockets[0].stat().st_mode & 0o777) == "0o600"
    assert oct(sockets[0].parent.stat().st_mode & 0o777) == "0o700"
    sockets[0].unlink()
    assert proc.wait(timeout=10) == 0


def test_a_terminated_server_cleans_up(runtime: Path) -> None:
    proc = subprocess.Popen([*SERVER, "60"], stdin=subprocess.DEVNULL)
    wait_for_server()
    proc.terminate()
    assert proc.wait(timeout=10) == 0
    assert list(runtime.rglob("*")) == [runtime / f"leslie-{os.getuid()}"]


def test_an_idle_server_exits_and_cleans_up(runtime: Path) -> None:
    proc = subprocess.Popen([*SERVER, "0.5"], stdin=subprocess.DEVNULL)
    wait_for_server()
    assert proc.wait(timeout=10) == 0
    assert list(runtime.rglob("*")) == [runtime / f"leslie-{os.getuid()}"]


def _raw(runtime: Path, line: bytes) -> dict[str, object]:
    path = render_client.socket_path()
    assert path is not None
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
        client.settimeout(5)
        client.connect(path)
        client.sendall(line)
        answer: dict[str, object] = json.loads(client.makefile("rb").readline())
    return answer


def test_requests_that_are_not_for_this_server_are_refused(runtime: Path, root: Path) -> None:
    proc = subprocess.Popen([*SERVER, "60"], stdin=subprocess.DEVNULL)
    try:
        wait_for_server()
        ident = render_client.identity()
        good = {"identity": ident, "root": str(root), "thread": THREAD, "key": "k", "trust": trust.trust_file()}
        for bad in ({**good, "identity": "another leslie"}, {**good, "root": str(root.parent)},
                    {**good, "root": "relative/path"}, {**good, "thread": "../etc"}, {**good, "key": 3},
                    {**good, "trust": "relative/trust.json"}, {**good, "trust": None}):
            assert "error" in _raw(runtime, json.dumps(bad).encode() + b"\n"), bad
        assert "error" in _raw(runtime, b"[1, 2]\n")
        answer = _raw(runtime, json.dumps(good).encode() + b"\n")
        assert answer["xml"] == render_context(Repository(root), THREAD)
        assert render_client.ping() == proc.pid  # still serving after the bad ones
    finally:
        render_client.stop()
        proc.wait(timeout=10)


def test_a_broken_template_is_reported_as_without_a_server(runtime: Path, root: Path) -> None:
    prompt_hook(root, "warm")
    wait_for_server()
    (root / ".leslie/templates").mkdir(exist_ok=True)
    (root / ".leslie/templates/thread_context.xml.j2").write_text("<thread_context>{% if %}", encoding="utf-8")
    approve_templates(root)
    served = prompt_hook(root, "with-server")
    alone = prompt_hook(root, "without-server", env={"LESLIE_RENDER_SERVER": "0"})
    assert served.stdout == alone.stdout == ""
    assert served.stderr == alone.stderr
    assert "thread_context.xml.j2" in served.stderr and len(served.stderr.splitlines()) == 1
    assert render_client.ping() is not None  # the error was the template's, not the server's end


# -- one server, many repositories: nothing one repository's templates do reaches another ---------------------
OVERRIDE = '<thread_context thread="{{ thread }}" objective="{{ objective }}" mine="A"/>\n'
HOSTILE = ("{% set x = cycler.__init__.__globals__.os.popen('touch MARKER').read() %}"
           "{{ self._TemplateReference__context }}" + OVERRIDE)


def other_repository(tmp_path: Path) -> Path:
    """Repository B: no template override, a thread of the same ID as A's."""
    b = tmp_path / "b"
    b.mkdir()
    git("init", "-q", "-b", "main", cwd=b)
    init_repository(b)
    spawn(Repository(b), "B's thread", thread_id=THREAD)
    return b


def test_a_repository_s_templates_never_reach_another_s_block(runtime: Path, root: Path, tmp_path: Path) -> None:
    b = other_repository(tmp_path)
    packaged_b = render_context(Repository(b), THREAD, cache=False)
    prompt_hook(b, "warm")
    wait_for_server()
    templates = root / ".leslie" / "templates"
    templates.mkdir()
    (templates / "thread_context.xml.j2").write_text(OVERRIDE, encoding="utf-8")
    approve_templates(root)  # A's own override, approved: A's block uses it ...
    served_a = prompt_hook(root, "a1", env={"PYTHONPROFILEIMPORTTIME": "1"})
    assert 'mine="A"' in injected(served_a) and "jinja2" not in imported(served_a)  # (rendered by the server)
    drop_contexts(b)
    served_b = prompt_hook(b, "b1", env={"PYTHONPROFILEIMPORTTIME": "1"})
    assert injected(served_b) == packaged_b and "jinja2" not in imported(served_b)  # ... and only A's

    (templates / "thread_context.xml.j2").write_text(HOSTILE, encoding="utf-8")
    approve_templates(root)  # even approved, a hostile template runs nothing, in the server or elsewhere
    hostile = prompt_hook(root, "a2")
    assert hostile.stdout == "" and "stopped by the sandbox" in hostile.stderr
    assert not (root / "MARKER").exists() and not (Path("/") / "MARKER").exists()
    trust.revoke(root)  # unapproved: ignored with a warning, the packaged block instead
    unapproved = prompt_hook(root, "a3")
    assert 'mine="A"' not in injected(unapproved) and "not approved" in unapproved.stderr
    assert not (root / "MARKER").exists()
    drop_contexts(b)
    assert injected(prompt_hook(b, "b2")) == packaged_b
    assert render_client.ping() is not None  # still serving


def test_the_server_reads_its_client_s_approvals(runtime: Path, root: Path, tmp_path: Path) -> None:
    elsewhere = {**os.environ, "XDG_CONFIG_HOME": str(tmp_path / "server-config")}
    proc = subprocess.Popen([*SERVER, "60"], stdin=subprocess.DEVNULL, env=elsewhere)
    try:
        wait_for_server()
        templates = root / ".leslie" / "templates"
        templates.mkdir()
        (templates / "thread_context.xml.j2").write_text(OVERRIDE, encoding="utf-8")
        approve_templates(root)  # in the client's trust file, not in the server's
        served = prompt_hook(root, "s1", env={"PYTHONPROFILEIMPORTTIME": "1"})
        assert 'mine="A"' in injected(served) and "jinja2" not in imported(served)
        assert not (tmp_path / "server-config").exists()
    finally:
        render_client.stop()
        proc.wait(timeout=10)


def test_no_server_in_a_folder_others_may_enter(runtime: Path, root: Path) -> None:
    folder = runtime / f"leslie-{os.getuid()}"
    folder.mkdir(mode=0o755)
    folder.chmod(0o755)
    path = render_client.socket_path()
    assert path is None or not path.startswith(str(runtime))  # the next candidate ($TMPDIR, /tmp) if private
    result = prompt_hook(root, "s1")
    assert injected(result) == render_context(Repository(root), THREAD)
    time.sleep(0.5)
    assert list(folder.iterdir()) == []


def test_switched_off_no_server_is_started(runtime: Path, root: Path) -> None:
    result = prompt_hook(root, "s1", env={"LESLIE_RENDER_SERVER": "0"})
    assert injected(result) == render_context(Repository(root), THREAD)
    time.sleep(0.5)
    assert list(runtime.rglob("*.sock")) == []


def test_the_server_does_not_hold_the_callers_pipes_open(runtime: Path, root: Path) -> None:
    read_end, write_end = os.pipe()
    payload = {"session_id": "s1", "transcript_path": None, "cwd": str(root), "hook_event_name": "UserPromptSubmit",
               "prompt": "Go on"}
    env = {**os.environ, "LESLIE_THREAD": THREAD}
    hook = subprocess.run([LESLIE_EXE, "hook", "claude-code"], cwd=root, input=json.dumps(payload).encode(),
                          capture_output=True, env=env, pass_fds=(write_end,), check=True, timeout=60)
    os.close(write_end)
    assert b"additionalContext" in hook.stdout
    pid = wait_for_server()  # started by the hook, which passed it every descriptor it had
    assert os.readlink(f"/proc/{pid}/cwd") == "/"  # nor does it keep the repository as its working folder
    ready, _, _ = select.select([read_end], [], [], 10)
    assert ready and os.read(read_end, 1) == b""  # end of file: nobody holds the write end any more
    os.close(read_end)


@pytest.mark.parametrize("error", [OSError(1, "refused"), NotImplementedError("setsid is not supported")])
def test_a_server_that_cannot_start_never_fails_the_caller(runtime: Path, monkeypatch: pytest.MonkeyPatch,
                                                           error: Exception) -> None:
    def refuse(*args: object, **kwargs: object) -> int:
        raise error

    monkeypatch.setattr(os, "posix_spawn", refuse)  # a platform where spawning fails or lacks setsid
    render_client.start()
    assert render_client.ping() is None


def test_edited_code_gets_a_server_of_its_own(runtime: Path) -> None:
    """A development copy whose module changed must not be served by a server running the old code."""
    module = Path(render_client.__file__).with_name("policy.py")  # a module of a subpackage: covered too
    before = module.stat()
    ident, path = render_client.identity(), render_client.socket_path()
    try:
        os.utime(module, ns=(before.st_atime_ns, before.st_mtime_ns + 1_000_000_000))
        assert render_client.identity() != ident
        assert render_client.socket_path() != path
    finally:
        os.utime(module, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert render_client.identity() == ident
