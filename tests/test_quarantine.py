"""The guard and people (SPEC §13, issue 32): a person's edit is never quarantined; what the guard did move is
listed by `leslie status` and `leslie quarantine list`, and `leslie quarantine restore` brings it back.

Each test drives the real `leslie hook claude-code` with the payloads Claude Code sends, runs the "tool call"
with bash in between (`test_tripwire.shell_call`), and the commands as a person would.
"""

from __future__ import annotations

import json
import os
import shlex
import time
from pathlib import Path

from conftest import LESLIE_EXE, run_leslie, state_dir
from leslie.guard import tripwire
from test_tripwire import OTHER, OWN, event, hook, other, own, python, root, shell_call

__all__ = ["root"]  # the fixture, from test_tripwire

NOOP = python("pass")  # watched: the guard cannot tell it writes nothing (`true` is not watched at all)
WRITE_OTHER = python(f"open('.leslie/threads/{OTHER}/plan.md', 'w').write('agent was here\\n')")


def quarantine_json(root: Path) -> list[dict[str, str]]:
    result = run_leslie("quarantine", "list", "--json", cwd=root)
    assert result.code == 0, result.stderr
    listed: list[dict[str, str]] = json.loads(result.stdout)
    return listed


def leslie_tree(root: Path) -> dict[str, bytes]:
    folder = root / ".leslie"
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()
            and "state" not in p.relative_to(folder).parts}


def test_a_person_s_edit_between_shell_calls_is_never_quarantined(root: Path) -> None:
    original = other(root).read_bytes()
    hook(root, event(root, "UserPromptSubmit"))
    assert shell_call(root, NOOP) is None
    other(root).write_text("a person wrote this\n")  # no shell call of any agent is running
    assert shell_call(root, NOOP, call="toolu_02") is None
    assert other(root).read_text() == "a person wrote this\n"
    assert quarantine_json(root) == []
    assert original != other(root).read_bytes()


def test_an_edit_long_after_a_call_left_open_is_a_person_s(root: Path) -> None:
    """A call that never got its PostToolUse (Esc, a crash) is not taken to run for an hour."""
    assert hook(root, event(root, "PreToolUse", "make build", call="toolu_lost")) is None
    session_file = next(Path(state_dir(root), "guard", "sessions").glob("*.json"))
    record = json.loads(session_file.read_text())
    record["calls"] = {"toolu_lost": time.time_ns() - tripwire.OPEN_CALL_NS - 60 * 10**9}  # started 11 min ago
    session_file.write_text(json.dumps(record))
    other(root).write_text("a person wrote this\n")
    assert shell_call(root, NOOP, call="toolu_02") is None
    assert other(root).read_text() == "a person wrote this\n"
    assert quarantine_json(root) == []


def test_status_lists_the_quarantine_and_restore_brings_the_file_back(root: Path) -> None:
    original = other(root).read_text()
    answer = shell_call(root, WRITE_OTHER)
    assert answer is not None and answer["decision"] == "block"
    assert other(root).read_text() == original
    listed = quarantine_json(root)
    assert [item["path"] for item in listed] == [f".leslie/threads/{OTHER}/plan.md"]
    assert listed[0]["kind"] == "file"
    status = run_leslie("status", cwd=root, env={"LESLIE_THREAD": OWN})
    assert "quarantine: 1 entry" in status.stdout and f".leslie/threads/{OTHER}/plan.md" in status.stdout
    status_json = json.loads(run_leslie("status", "--json", cwd=root, env={"LESLIE_THREAD": OWN}).stdout)
    assert status_json["attention"]["quarantine"] == listed

    restored = run_leslie("quarantine", "restore", f".leslie/threads/{OTHER}/plan.md", cwd=root)
    assert restored.code == 0, restored.stderr
    assert other(root).read_text() == "agent was here\n"
    assert "the version that was there is kept in" in restored.stdout
    # What was there (the guard's put-back version) is in the quarantine now: nothing lost, and reversible.
    now = quarantine_json(root)
    assert len(now) == 1 and now[0]["kept"] != listed[0]["kept"]
    assert Path(root, now[0]["kept"]).read_text() == original
    # The restore is a person's edit: the next shell call of another thread's session leaves it alone.
    assert shell_call(root, NOOP, call="toolu_02") is None
    assert other(root).read_text() == "agent was here\n"
    again = run_leslie("quarantine", "restore", now[0]["kept"], cwd=root)  # and it can be undone the same way
    assert again.code == 0, again.stderr
    assert other(root).read_text() == original


def test_a_restore_run_by_an_agent_inside_its_shell_call_is_undone(root: Path) -> None:
    """`leslie quarantine restore` is no way around the guard: in another thread's agent's shell call, its
    write is judged as that call's."""
    original = other(root).read_text()
    shell_call(root, WRITE_OTHER)
    assert other(root).read_text() == original
    command = f"{shlex.quote(LESLIE_EXE)} quarantine restore .leslie/threads/{OTHER}/plan.md"
    answer = shell_call(root, command, call="toolu_02")
    assert answer is not None and answer["decision"] == "block", answer
    assert other(root).read_text() == original
    assert any(Path(root, item["kept"]).read_text() == "agent was here\n" for item in quarantine_json(root))


def test_a_created_file_comes_back_without_replacing_anything(root: Path) -> None:
    shell_call(root, python(f"open('.leslie/threads/{OTHER}/notes.md', 'w').write('notes\\n')"))
    assert not other(root, "notes.md").exists()
    result = run_leslie("quarantine", "restore", str(other(root, "notes.md")), cwd=root / ".leslie")
    assert result.code == 0, result.stderr
    assert other(root, "notes.md").read_text() == "notes\n"
    assert quarantine_json(root) == []


def test_restoring_what_is_not_there_exits_3_and_changes_nothing(root: Path) -> None:
    before = leslie_tree(root)
    result = run_leslie("quarantine", "restore", f".leslie/threads/{OTHER}/plan.md", cwd=root)
    assert result.code == 3 and "holds nothing" in result.stderr and "Traceback" not in result.stderr
    assert leslie_tree(root) == before
    assert run_leslie("quarantine", "list", cwd=root).stdout == "the quarantine is empty\n"


def test_hostile_entries_are_listed_as_they_are_and_never_brought_back(root: Path, tmp_path: Path) -> None:
    """Outside git the quarantine lies in `.leslie/state/`, which a copied folder can bring: a planted link is
    listed as a link and not moved into a thread folder; a name no sweep makes is not listed."""
    batch = Path(state_dir(root), "guard", "quarantine", "20260101T000000-1")
    (batch / "threads" / OTHER).mkdir(parents=True)
    secret = tmp_path / "secret"
    secret.write_text("secret\n")
    (batch / "threads" / OTHER / "plan.md").symlink_to(secret)
    (batch / "state").mkdir()
    (batch / "state" / "x.json").write_text("{}")
    (batch / "threads" / OTHER / "fifo").parent.mkdir(exist_ok=True)
    os.mkfifo(batch / "threads" / OTHER / "fifo")
    listed = quarantine_json(root)
    assert sorted((item["path"], item["kind"]) for item in listed) == [
        (f".leslie/threads/{OTHER}/fifo", "special"), (f".leslie/threads/{OTHER}/plan.md", "link")]
    before = leslie_tree(root)
    for name in ("plan.md", "fifo"):
        result = run_leslie("quarantine", "restore", f".leslie/threads/{OTHER}/{name}", cwd=root)
        assert result.code == 2 and "link or a special file" in result.stderr, result.stderr
    assert leslie_tree(root) == before and not other(root).is_symlink()
    assert own(root).exists()
