"""The write guard's second line: shell tool calls watched from PreToolUse to PostToolUse (and Stop).

Every test drives the real `leslie hook claude-code|codex` executable with the payloads the real clients send
(Claude Code 2.1.330: `PreToolUse`, `PostToolUse`, `PostToolUseFailure`, `Stop`; Codex 0.169.0: `PreToolUse`,
`PostToolUse`, `Stop`, see docs/integrations.md), and runs the "tool call" for real with bash in between,
as the agent would. The commands are ones the first line (`leslie.guard.rules`) cannot read.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from conftest import LESLIE_EXE, git, run_leslie, state_dir
from leslie.store import sessions

OWN = "thread-own"
OTHER = "thread-other"
SESSION = "0f7c2a4e-9d1b-4c8e-8a51-3c2d1e0f9b7a"
OTHER_SESSION = "5b1e9c3d-0a2f-4e6b-9c8d-7f6e5d4c3b2a"


@pytest.fixture
def root(two_threads: Path) -> Path:
    return two_threads


def other(root: Path, name: str = "plan.md") -> Path:
    return root / ".leslie" / "threads" / OTHER / name


def own(root: Path, name: str = "plan.md") -> Path:
    return root / ".leslie" / "threads" / OWN / name


def event(root: Path, name: str, command: str | None = None, *, call: str = "toolu_01", agent: str = "claude-code",
          session: str = SESSION) -> dict[str, Any]:
    """A hook payload as the client sends it."""
    doc: dict[str, Any] = {"session_id": session, "transcript_path": None, "cwd": str(root),
                           "hook_event_name": name}
    if agent == "codex":
        doc.update({"model": "gpt-5.2-codex", "permission_mode": "default", "turn_id": "turn-1"})
    else:
        doc.update({"transcript_path": str(root / "transcript.jsonl"), "permission_mode": "default"})
    if command is not None:
        doc.update({"tool_name": "Bash", "tool_input": {"command": command, "description": "run"},
                    "tool_use_id": call})
    if name == "PostToolUse":
        doc["tool_response"] = {"stdout": "", "stderr": "", "interrupted": False, "isImage": False} \
            if agent == "claude-code" else "exit code 0"
    if name == "PostToolUseFailure":
        doc.update({"error": "Exit code 1", "is_interrupt": False})
    if name == "Stop":
        doc.update({"stop_hook_active": False, "last_assistant_message": "done"})
    if name == "UserPromptSubmit":
        doc["prompt"] = "go on"
    return doc


def hook(root: Path, payload: dict[str, Any], thread: str = OWN, agent: str = "claude-code") -> dict[str, Any] | None:
    result = run_leslie("hook", agent, cwd=root, input=json.dumps(payload), env={"LESLIE_THREAD": thread})
    assert result.code == 0, result.stderr
    return json.loads(result.stdout) if result.stdout.strip() else None


def bash(root: Path, command: str) -> int:
    """The shell tool running the command (the hook never runs it: the agent does)."""
    return subprocess.run(["bash", "-c", command], cwd=root, check=False).returncode


def shell_call(root: Path, command: str, *, thread: str = OWN, agent: str = "claude-code", call: str = "toolu_01",
               session: str = SESSION) -> dict[str, Any] | None:
    """PreToolUse (must let it through), the command, PostToolUse (or PostToolUseFailure if it failed)."""
    assert hook(root, event(root, "PreToolUse", command, call=call, agent=agent, session=session), thread,
                agent) is None
    failed = bash(root, command) != 0
    name = "PostToolUseFailure" if failed and agent == "claude-code" else "PostToolUse"
    return hook(root, event(root, name, command, call=call, agent=agent, session=session), thread, agent)


def python(code: str) -> str:
    return f"python3 -c {shlex.quote(code)}"


def guard_file(root: Path, *parts: str) -> Path:
    return state_dir(root).joinpath("guard", *parts)


def restored_and_blocked(answer: dict[str, Any] | None, *paths: str) -> str:
    assert answer is not None and answer["decision"] == "block", answer
    assert answer["systemMessage"].startswith("leslie: the write guard found changes")
    for path in paths:
        assert path in answer["reason"]
    return str(answer["reason"])


def test_a_python_write_into_another_thread_is_restored_and_reported(root: Path) -> None:
    before = other(root).read_bytes()
    answer = shell_call(root, python(f"open('.leslie/threads/{OTHER}/plan.md', 'a').write('hijacked\\n')"))
    reason = restored_and_blocked(answer, f".leslie/threads/{OTHER}/plan.md")
    assert "restored" in reason and f".leslie/threads/{OWN}/" in reason
    assert other(root).read_bytes() == before
    kept = next(guard_file(root, "quarantine").rglob("plan.md"))
    assert kept.read_text().endswith("hijacked\n")  # the changed version is kept, not destroyed
    incidents = [json.loads(line) for line in guard_file(root, "incidents.jsonl").read_text().splitlines()]
    assert [(i["path"], i["action"], i["threads"]) for i in incidents] == [
        (f".leslie/threads/{OTHER}/plan.md", "restored", [OWN])]
    log = sessions.read_log(sessions.SessionFiles(str(root), "claude-code", SESSION).log)
    assert [e["action"] for e in log if e["kind"] == "guard"] == ["restored"]


def test_an_rm_of_another_thread_s_plan_is_restored(root: Path) -> None:
    before = other(root).read_bytes()
    answer = shell_call(root, "cd .leslie/threads && ls -d thread-oth* | sed 's|$|/plan.md|' | xargs rm")
    assert restored_and_blocked(answer, f".leslie/threads/{OTHER}/plan.md")
    assert other(root).read_bytes() == before


def test_files_created_in_another_thread_are_quarantined(root: Path) -> None:
    answer = shell_call(root, python(f"import os; os.makedirs('.leslie/threads/{OTHER}/design/deep'); "
                                     f"open('.leslie/threads/{OTHER}/design/deep/api.md', 'w').write('x'); "
                                     f"open('.leslie/threads/{OTHER}/notes.md', 'w').write('mine')"))
    reason = restored_and_blocked(answer, f".leslie/threads/{OTHER}/notes.md", f".leslie/threads/{OTHER}/design")
    assert "quarantine" in reason
    assert sorted(p.name for p in other(root, "").iterdir()) == ["plan.md", "progress.md", "thread.json"]
    quarantined = sorted(p.relative_to(guard_file(root, "quarantine")).as_posix()
                         for p in guard_file(root, "quarantine").rglob("*") if p.is_file())
    assert [q.split("/", 1)[1] for q in quarantined] == [f"threads/{OTHER}/design/deep/api.md",
                                                         f"threads/{OTHER}/notes.md"]


def test_own_thread_writes_are_untouched(root: Path) -> None:
    answer = shell_call(root, python(f"import os; open('.leslie/threads/{OWN}/plan.md', 'w').write('step 1'); "
                                     f"os.makedirs('.leslie/threads/{OWN}/design'); "
                                     f"open('.leslie/threads/{OWN}/design/api.md', 'w').write('api')"))
    assert answer is None
    assert own(root).read_text() == "step 1" and own(root, "design/api.md").read_text() == "api"
    assert not guard_file(root, "quarantine").exists()
    assert not guard_file(root, "incidents.jsonl").exists()


def test_a_concurrent_write_by_the_other_thread_s_agent_is_kept(root: Path) -> None:
    command = python("import time; time.sleep(0.01)")
    assert hook(root, event(root, "PreToolUse", command)) is None
    # Meanwhile the other thread's own agent answers a prompt and writes its plan (its Write tool).
    assert hook(root, event(root, "UserPromptSubmit", session=OTHER_SESSION), OTHER) is not None
    other(root).write_text("the other agent's legitimate step\n")
    bash(root, command)
    answer = hook(root, event(root, "PostToolUse", command))
    assert other(root).read_text() == "the other agent's legitimate step\n"
    assert answer is not None and "decision" not in answer
    context = answer["hookSpecificOutput"]["additionalContext"]
    assert answer["hookSpecificOutput"]["hookEventName"] == "PostToolUse"
    assert f".leslie/threads/{OTHER}/plan.md" in context and f"while the agent of {OTHER}" in context
    assert not guard_file(root, "quarantine").exists()


def test_the_other_thread_s_own_shell_call_is_its_business(root: Path) -> None:
    answer = shell_call(root, python(f"open('.leslie/threads/{OTHER}/plan.md', 'w').write('mine')"), thread=OTHER,
                        session=OTHER_SESSION)
    assert answer is None and other(root).read_text() == "mine"


def test_a_changed_thread_json_is_restored_even_the_own_one(root: Path) -> None:
    before = {path: path.read_bytes() for path in (other(root, "thread.json"), own(root, "thread.json"))}
    code = ("import json\n"
            f"for t in ('{OTHER}', '{OWN}'):\n"
            "    p = f'.leslie/threads/{t}/thread.json'\n"
            "    d = json.load(open(p)); d['title'] = 'renamed by hand'; json.dump(d, open(p, 'w'))\n")
    answer = shell_call(root, python(code))
    restored_and_blocked(answer, f".leslie/threads/{OTHER}/thread.json", f".leslie/threads/{OWN}/thread.json")
    assert {path: path.read_bytes() for path in before} == before


def test_leslie_commands_inside_a_call_are_leslie_s_own_writes(root: Path) -> None:
    index = root / ".leslie" / "thread_relations.json"
    before = index.read_bytes(), own(root, "thread.json").read_bytes()
    answer = shell_call(root, f"{LESLIE_EXE} spawn --intent 'a helper' --id thread-helper && "
                              f"LESLIE_THREAD={OWN} {LESLIE_EXE} unreference --target {OTHER}")
    assert answer is None
    assert (root / ".leslie" / "threads" / "thread-helper" / "plan.md").exists()
    assert (index.read_bytes(), own(root, "thread.json").read_bytes()) != before
    assert OTHER not in json.loads(own(root, "thread.json").read_text())["references"]
    assert run_leslie("doctor", cwd=root).code == 0


def test_leslie_rm_inside_a_call_is_leslie_s_own_deletion(root: Path) -> None:
    answer = shell_call(root, f"{LESLIE_EXE} rm {OTHER} --force >/dev/null")
    assert answer is None
    assert sorted(p.name for p in other(root, "").iterdir()) == ["thread.json"]
    assert json.loads(other(root, "thread.json").read_text())["status"] == "deleted"


def test_a_leslie_command_beside_a_deletion_does_not_cover_it(root: Path) -> None:
    before = other(root).read_bytes()
    # `leslie pause` rewrites the other thread's thread.json: its folder's time (the deletion's date) moves
    # into a leslie mutation.
    answer = shell_call(root, python(f"import os; os.remove('.leslie/threads/{OTHER}/plan.md')") +
                        f" && {LESLIE_EXE} pause {OTHER} >/dev/null")
    restored_and_blocked(answer, f".leslie/threads/{OTHER}/plan.md")
    assert other(root).read_bytes() == before
    assert json.loads(other(root, "thread.json").read_text())["status"] == "paused"  # leslie's own: kept


def test_links_are_never_followed(root: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("not yours")
    before = other(root).read_bytes()
    answer = shell_call(root, python(f"import os; p = '.leslie/threads/{OTHER}/plan.md'; os.unlink(p); "
                                     f"os.symlink({str(outside)!r}, p)"))
    restored_and_blocked(answer, f".leslie/threads/{OTHER}/plan.md")
    assert not other(root).is_symlink() and other(root).read_bytes() == before
    assert outside.read_text() == "not yours"
    kept = list(guard_file(root, "quarantine").rglob("plan.md"))
    assert len(kept) == 1 and kept[0].is_symlink()


def test_a_thread_folder_replaced_by_a_link_is_put_back(root: Path, tmp_path: Path) -> None:
    decoy = tmp_path / "decoy"
    decoy.mkdir()
    (decoy / "plan.md").write_text("decoy")
    before = {p.name: p.read_bytes() for p in other(root, "").iterdir()}
    answer = shell_call(root, python(f"import os, shutil; p = '.leslie/threads/{OTHER}'; shutil.rmtree(p); "
                                     f"os.symlink({str(decoy)!r}, p)"))
    restored_and_blocked(answer, f".leslie/threads/{OTHER}/thread.json")
    folder = other(root, "")
    assert folder.is_dir() and not folder.is_symlink()
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before
    assert (decoy / "plan.md").read_text() == "decoy" and sorted(os.listdir(decoy)) == ["plan.md"]


def test_a_deleted_thread_folder_is_restored(root: Path) -> None:
    before = {p.name: p.read_bytes() for p in other(root, "").iterdir()}
    answer = shell_call(root, python(f"import shutil; shutil.rmtree('.leslie/threads/{OTHER}')"))
    restored_and_blocked(answer, f".leslie/threads/{OTHER}/plan.md")
    assert {p.name: p.read_bytes() for p in other(root, "").iterdir()} == before


def test_a_big_file_is_detected_but_not_restored(root: Path) -> None:
    big = other(root, "artifacts/data.bin")
    big.parent.mkdir()
    big.write_bytes(b"x" * (2 << 20))
    answer = shell_call(root, python(f"open('.leslie/threads/{OTHER}/artifacts/data.bin', 'ab').write(b'y')"))
    reason = restored_and_blocked(answer, f".leslie/threads/{OTHER}/artifacts/data.bin")
    assert "bigger than 1 MiB" in reason
    assert big.stat().st_size == (2 << 20) + 1  # left as it is: there is no copy to restore


def test_a_failed_command_is_checked_too(root: Path) -> None:
    before = other(root).read_bytes()
    answer = shell_call(root, python(f"open('.leslie/threads/{OTHER}/plan.md', 'w').write('x'); exit(1)"))
    restored_and_blocked(answer, f".leslie/threads/{OTHER}/plan.md")
    assert other(root).read_bytes() == before


def test_a_git_checkout_that_moves_head_is_reported_not_undone(root: Path) -> None:
    git("checkout", "-qb", "feature", cwd=root)
    other(root).write_text("plan from the feature branch\n")
    git("commit", "-qam", "feature plan", cwd=root)
    git("checkout", "-q", "main", cwd=root)
    answer = shell_call(root, "git checkout -q feature")
    assert other(root).read_text() == "plan from the feature branch\n"
    assert answer is not None and "decision" not in answer
    assert "git operation" in answer["hookSpecificOutput"]["additionalContext"]


def test_damaged_guard_records_fail_closed(root: Path) -> None:
    command = python("print('harmless')")
    assert hook(root, event(root, "PreToolUse", command)) is None
    guard_file(root, "manifest.json").write_text("{not json")
    answer = hook(root, event(root, "PostToolUse", command))
    assert answer is not None and answer["decision"] == "block"
    assert "could not check" in answer["reason"] and "manifest.json" in answer["reason"]
    assert list(guard_file(root).glob("manifest.json.damaged-*"))  # kept for inspection
    before = other(root).read_bytes()  # and the guard works again from the next call on
    answer = shell_call(root, python(f"open('.leslie/threads/{OTHER}/plan.md', 'w').write('x')"), call="c2")
    restored_and_blocked(answer, f".leslie/threads/{OTHER}/plan.md")
    assert other(root).read_bytes() == before


def test_codex_post_tool_use(root: Path) -> None:
    before = other(root).read_bytes()
    answer = shell_call(root, python(f"open('.leslie/threads/{OTHER}/plan.md', 'w').write('x')"), agent="codex",
                        call="call_7Hq2")
    restored_and_blocked(answer, f".leslie/threads/{OTHER}/plan.md")
    assert set(answer or {}) == {"decision", "reason", "systemMessage"}  # all in Codex's output schema
    assert other(root).read_bytes() == before


def test_a_call_without_post_tool_use_is_checked_at_stop(root: Path) -> None:
    before = other(root).read_bytes()
    command = python(f"open('.leslie/threads/{OTHER}/plan.md', 'w').write('x'); exit(3)")
    assert hook(root, event(root, "PreToolUse", command, agent="codex"), agent="codex") is None
    bash(root, command)  # Codex gives a failed command no PostToolUse
    answer = hook(root, event(root, "Stop", agent="codex"), agent="codex")
    restored_and_blocked(answer, f".leslie/threads/{OTHER}/plan.md")
    assert set(answer or {}) == {"decision", "reason", "systemMessage"}
    assert other(root).read_bytes() == before
    assert hook(root, event(root, "Stop", agent="codex"), agent="codex") is None  # told once


def test_nothing_is_watched_without_a_thread(root: Path) -> None:
    command = python(f"open('.leslie/threads/{OTHER}/plan.md', 'w').write('x')")
    result = run_leslie("hook", "claude-code", cwd=root, input=json.dumps(event(root, "PreToolUse", command)))
    assert result.code == 0 and result.stdout == ""
    assert not guard_file(root).exists()


def test_a_session_start_prepares_the_guard_so_prompts_are_recorded(root: Path) -> None:
    start = {**event(root, "SessionStart", session=OTHER_SESSION), "source": "startup"}
    hook(root, start, OTHER)
    assert guard_file(root).is_dir()  # before any shell call: the other agent's prompts are now recorded
    hook(root, event(root, "UserPromptSubmit", session=OTHER_SESSION), OTHER)
    activity = json.loads(guard_file(root, "sessions", f"claude-code.{OTHER_SESSION}.json").read_text())
    assert activity["thread"] == OTHER and isinstance(activity["prompt"], int)
    assert hook(root, event(root, "Stop", session=OTHER_SESSION), OTHER) is None
    activity = json.loads(guard_file(root, "sessions", f"claude-code.{OTHER_SESSION}.json").read_text())
    assert activity["prompt"] is None and len(activity["busy"]) == 1


def test_a_busy_index_lock_fails_closed_for_leslie_commands(root: Path) -> None:
    from conftest import held_lock

    with held_lock(root):
        answer = hook(root, event(root, "PreToolUse", python(f"open('.leslie/threads/{OTHER}/x', 'w')")))
        assert answer is not None and answer["hookSpecificOutput"]["permissionDecision"] == "deny"
        assert "denied to be safe" in answer["hookSpecificOutput"]["permissionDecisionReason"]


def test_the_log_of_leslie_s_own_writes_stays_small(root: Path) -> None:
    from leslie.guard import snapshots
    from leslie.store import mutations

    snapshots.guard_dir(str(root))
    now = time.time_ns()
    for i in range(8000):  # two days without a shell call: 40 bytes a mutation
        mutations.record_leslie_write(str(root), now - (8000 - i) * 20 * 10**9, now - (8000 - i) * 20 * 10**9 + 5)
    windows = mutations.leslie_writes(str(root))
    assert 0 < len(windows) < 8000 and guard_file(root, "leslie-writes").stat().st_size <= mutations.WRITES_LOG_LIMIT
    assert windows[-1][1] == now - 20 * 10**9 + 5  # the newest are kept


def test_hand_edited_guard_records_never_crash_it(root: Path) -> None:
    shell_call(root, python("print(1)"))
    (guard_file(root, "sessions") / "claude-code.forged.json").write_text(json.dumps(
        {"thread": OTHER, "calls": {"x": "soon", "y": True}, "shell": [["a", 1], [1], None], "busy": 7,
         "prompt": 1.5}))
    manifest = json.loads(guard_file(root, "manifest.json").read_text())
    manifest["files"][f"threads/{OTHER}/plan.md"] = ["f"]  # an entry the next sweep needs
    guard_file(root, "manifest.json").write_text(json.dumps(manifest))
    naming = python(f"print(open('.leslie/threads/{OTHER}/plan.md').read())")
    denied = hook(root, event(root, "PreToolUse", naming, call="c2"))
    assert denied is not None and denied["hookSpecificOutput"]["permissionDecision"] == "deny"
    assert "malformed entry" in denied["hookSpecificOutput"]["permissionDecisionReason"]
    # The snapshot was taken again: the next calls are watched as usual, the forged session ignored.
    before = other(root).read_bytes()
    answer = shell_call(root, python(f"open('.leslie/threads/{OTHER}/plan.md', 'w').write('y')"), call="c3")
    restored_and_blocked(answer, f".leslie/threads/{OTHER}/plan.md")
    assert other(root).read_bytes() == before


def test_a_sweep_waits_its_turn_in_the_lock_queue(root: Path) -> None:
    """A writer already queued for the index lock goes first: the guard's sweep queues behind it, instead of
    taking the flock of `index.lock` while it is free for a moment between two writers (issue 18)."""
    import sys

    from leslie.errors import LockTimeoutError
    from leslie.guard import tripwire

    # A writer that joined the queue and waits (its place flocked), with index.lock itself free.
    code = ("import fcntl, os, sys, time\n"
            "folder = os.path.join(sys.argv[1], 'lock-queue'); os.makedirs(folder, exist_ok=True)\n"
            "fd = os.open(os.path.join(folder, '%020d' % 1), os.O_WRONLY | os.O_CREAT)\n"
            "fcntl.flock(fd, fcntl.LOCK_EX); print('queued', flush=True); time.sleep(120)\n")
    waiter = subprocess.Popen([sys.executable, "-c", code, str(state_dir(root))],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert waiter.stdout is not None and waiter.stdout.readline().strip() == "queued"
        with pytest.raises(LockTimeoutError), tripwire.index_lock(str(root), timeout=0.3):
            pass
    finally:
        waiter.kill()
        waiter.wait()
    with tripwire.index_lock(str(root), timeout=5):  # its writer gone, the place is skipped
        assert tripwire.watched_sweep(str(root), None) == []


# -- guard records nested too deeply (red team, findings 2 and 3) -------------------------------------------

DEEP = b"[" * 100_000 + b"]" * 100_000  # past the parser's recursion limit: RecursionError, not ValueError


@pytest.mark.parametrize("name", ["manifest.json", f"sessions/claude-code.{SESSION}.json",
                                  f"notices/claude-code.{SESSION}.jsonl"], ids=["manifest", "session", "notices"])
def test_a_guard_record_nested_too_deeply_is_set_aside_and_the_guard_works_on(root: Path, name: str) -> None:
    """A record of the guard's that no parser can read (100,000 nested brackets) is damaged like invalid JSON:
    set aside or ignored, the check after the call goes on. It raised RecursionError at every call instead,
    which switched the second line off for good."""
    command = python("print('harmless')")
    assert hook(root, event(root, "PreToolUse", command)) is None
    path = guard_file(root, *name.split("/"))
    path.parent.mkdir(exist_ok=True)
    path.write_bytes(DEEP)
    answer = hook(root, event(root, "PostToolUse", command))
    if name == "manifest.json":  # what changed since the last snapshot cannot be known: said, not hidden
        assert answer is not None and answer["decision"] == "block", answer
        assert "could not check" in answer["reason"] and "nested too deeply" in answer["reason"]
        assert list(guard_file(root).glob("manifest.json.damaged-*"))  # kept for inspection
    else:
        assert answer is None
    before = other(root).read_bytes()  # and from the next call on, the guard works as before
    answer = shell_call(root, python(f"open('.leslie/threads/{OTHER}/plan.md', 'w').write('x')"), call="c2")
    restored_and_blocked(answer, f".leslie/threads/{OTHER}/plan.md")
    assert other(root).read_bytes() == before


def test_doctor_skips_an_incident_line_it_cannot_read(root: Path) -> None:
    """`leslie doctor` (and `doctor --fix`, which git's checkout hooks run) exited 70 on a line of
    `state/guard/incidents.jsonl` nested too deeply; the line is skipped and counted, the rest reported."""
    answer = shell_call(root, python(f"open('.leslie/threads/{OTHER}/plan.md', 'w').write('x')"))
    restored_and_blocked(answer, f".leslie/threads/{OTHER}/plan.md")
    with guard_file(root, "incidents.jsonl").open("ab") as log:
        log.write(DEEP + b"\n")
    for args in (("doctor",), ("doctor", "--fix")):
        result = run_leslie(*args, cwd=root)
        assert result.code == 0 and "Traceback" not in result.stderr, (args, result.code, result.stderr)
        assert "recorded 1 change(s)" in result.stdout + result.stderr, result.stdout
        assert f".leslie/threads/{OTHER}/plan.md restored" in result.stdout + result.stderr
        assert "1 line(s) of the write guard's record" in result.stdout + result.stderr
