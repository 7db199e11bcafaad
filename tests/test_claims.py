"""Presence and claims (SPEC §13, `ops/claims.py`, `store/presence.py`): real processes racing, real git
worktrees, real hook calls."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from conftest import LESLIE_EXE, git, run_leslie, tree_digest
from leslie.errors import HeldError, UsageError
from leslie.ops import claims
from leslie.ops.threads import remove, set_status, spawn
from leslie.store import presence
from leslie.store.machine import shared_dir
from leslie.store.repository import Repository


@pytest.fixture
def thread_id(repo: Repository) -> str:
    return spawn(repo, "Fix the login", thread_id="thread-login").thread.id


def prompt(root: Path, session: str, agent: str = "claude-code") -> dict[str, object]:
    """One UserPromptSubmit of a Claude Code session, through the real hook command; its JSON answer."""
    payload = {"hook_event_name": "UserPromptSubmit", "session_id": session, "cwd": str(root), "prompt": "go on"}
    result = run_leslie("hook", agent, cwd=root, input=json.dumps(payload))
    assert result.code == 0, result.stderr
    answer: dict[str, object] = json.loads(result.stdout) if result.stdout.strip() else {}
    return answer


def block_of(answer: dict[str, object]) -> str:
    output = answer["hookSpecificOutput"]
    assert isinstance(output, dict)
    return str(output["additionalContext"])


def test_sixteen_processes_race_for_one_thread_and_exactly_one_wins(repo: Repository, thread_id: str) -> None:
    racers = [subprocess.Popen([LESLIE_EXE, "claim", thread_id, "--session", f"racer-{n}", "--json"],
                               cwd=repo.root, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
              for n in range(16)]
    results = [(racer.wait(timeout=60), *racer.communicate()) for racer in racers]
    winners = [n for n, (code, _out, _err) in enumerate(results) if code == 0]
    assert len(winners) == 1, results
    assert sorted(code for code, _out, _err in results) == [0] + [7] * 15
    winner = f"racer-{winners[0]}"
    assert json.loads(results[winners[0]][1])["session"] == winner
    for code, out, err in results:
        if code == 7:  # one line naming the holder, nothing on stdout
            assert out == "" and err.count("\n") == 1 and f"session {winner} " in err
    held = claims.holder(repo, thread_id)
    assert held is not None and held.claim.session == winner


def test_a_held_thread_refuses_another_session_and_changes_nothing(repo: Repository, thread_id: str) -> None:
    assert run_leslie("claim", "login", "--session", "s1", "--agent", "codex", cwd=repo.root).code == 0
    before = tree_digest(Path(shared_dir(repo.root)))
    for command in (["claim", "login", "--session", "s2"], ["release", "login", "--session", "s2"]):
        result = run_leslie(*command, cwd=repo.root)
        assert result.code == 7 and "held by codex session s1" in result.stderr and "nothing changed" in result.stderr
    assert tree_digest(Path(shared_dir(repo.root))) == before
    again = run_leslie("claim", "login", "--session", "s1", "--json", cwd=repo.root)
    assert again.code == 0 and json.loads(again.stdout)["new"] is False  # its own claim: renewed
    assert run_leslie("release", "login", "--session", "s1", cwd=repo.root).stdout == "released thread-login\n"
    assert claims.holder(repo, thread_id) is None
    assert run_leslie("release", "login", "--session", "s1", cwd=repo.root).stdout == "thread-login was not claimed\n"


def test_a_claim_expires_after_its_ttl(repo: Repository, thread_id: str) -> None:
    claims.claim(repo, thread_id, session="s1", ttl=1)
    with pytest.raises(HeldError):
        claims.claim(repo, thread_id, session="s2")
    time.sleep(2.2)  # times are kept to the second
    assert claims.holder(repo, thread_id) is None
    held, new = claims.claim(repo, thread_id, session="s2")
    assert new and held.claim.session == "s2"


def test_a_claim_ends_when_its_thread_is_done_or_deleted(repo: Repository, thread_id: str) -> None:
    claims.claim(repo, thread_id, session="s1")
    set_status(repo, thread_id, "done")
    assert claims.holder(repo, thread_id) is None and claims.read_claim(repo.root, thread_id) is None
    with pytest.raises(UsageError, match="is done"):
        claims.claim(repo, thread_id, session="s2")
    other = spawn(repo, "Another", thread_id="thread-other").thread.id
    claims.claim(repo, other, session="s1")
    remove(repo, other)
    assert claims.read_claim(repo.root, other) is None
    result = run_leslie("claim", other, "--session", "s2", cwd=repo.root)
    assert result.code in (2, 3)  # a tombstone is not claimable


def test_a_thread_ended_elsewhere_has_no_holder(repo: Repository, thread_id: str) -> None:
    """A claim's thread marked done by a merge (not by `leslie done`): every reader ignores the claim."""
    claims.claim(repo, thread_id, session="s1")
    path = repo.layout.thread_file(thread_id)
    data = json.loads(path.read_text(encoding="utf-8"))
    data["status"] = "done"
    path.write_text(json.dumps(data), encoding="utf-8")
    assert claims.read_claim(repo.root, thread_id) is not None and claims.holder(repo, thread_id) is None
    assert run_leslie("who", "--json", cwd=repo.root).stdout.strip() == "[]"


def test_claims_are_shared_by_worktrees_and_invisible_to_git(repo: Repository, thread_id: str,
                                                              tmp_path: Path) -> None:
    git("add", "-A", cwd=repo.root)
    git("commit", "-qm", "threads", cwd=repo.root)
    other = tmp_path / "repo.worktrees" / "b"
    git("worktree", "add", "-q", "-b", "leslie/b", str(other), cwd=repo.root)
    assert run_leslie("claim", "login", "--session", "in-main", cwd=repo.root).code == 0
    taken = run_leslie("claim", "login", "--session", "in-b", cwd=other)
    assert taken.code == 7 and "in-main" in taken.stderr  # the other worktree sees the claim
    run_leslie("switch", "login", cwd=other)
    assert "<held_by " in block_of(prompt(other, "agent-b"))  # a hook session in worktree B: present, not holding
    rows = json.loads(run_leslie("who", "--json", cwd=repo.root).stdout)
    assert {(r["session"], r["claimed"], r["worktree"], r["branch"]) for r in rows} == {
        ("in-main", True, str(repo.root), "main"), ("agent-b", False, str(other), "leslie/b")}
    assert git("status", "--porcelain", cwd=repo.root) == "" and git("status", "--porcelain", cwd=other) == ""


def test_a_hook_session_claims_its_thread_and_a_second_one_is_told_who_holds_it(repo: Repository,
                                                                                 thread_id: str) -> None:
    run_leslie("switch", thread_id, cwd=repo.root)
    first = block_of(prompt(repo.root, "sess-a"))
    assert "<held_by" not in first
    held = claims.holder(repo, thread_id)
    assert held is not None and (held.claim.agent, held.claim.session) == ("claude-code", "sess-a")
    second = block_of(prompt(repo.root, "sess-b"))  # not blocked: it gets its block, saying who holds it
    assert second.count("<held_by ") == 1
    element = second[second.index("<held_by "):].split("\n", 1)[0]
    assert 'agent="claude-code"' in element and 'session="sess-a"' in element
    assert f'worktree="{repo.root}"' in element and "since=" in element and "last_seen=" in element
    assert claims.holder(repo, thread_id).claim.session == "sess-a"  # type: ignore[union-attr]
    rows = json.loads(run_leslie("who", "--json", cwd=repo.root).stdout)
    assert {(r["agent"], r["session"], r["thread"], r["claimed"]) for r in rows} == {
        ("claude-code", "sess-a", thread_id, True), ("claude-code", "sess-b", thread_id, False)}
    shown = json.loads(run_leslie("show", "login", "--json", cwd=repo.root).stdout)
    assert shown["held_by"]["session"] == "sess-a"
    assert "held by: claude-code session sess-a" in run_leslie("status", cwd=repo.root).stdout


def tool_call(root: Path, session: str, agent: str = "claude-code") -> None:
    """One PreToolUse (a Read) of a session, through the real hook command."""
    payload = {"hook_event_name": "PreToolUse", "session_id": session, "cwd": str(root), "tool_name": "Read",
               "tool_input": {"file_path": str(root / "README.md")}, "tool_use_id": "toolu_1"}
    assert run_leslie("hook", agent, cwd=root, input=json.dumps(payload)).code == 0


def test_tool_calls_are_signs_of_life(repo: Repository, thread_id: str) -> None:
    """A session seen only through tool calls is in `who`, and a long turn of tool calls keeps its claim live."""
    run_leslie("switch", thread_id, cwd=repo.root)
    tool_call(repo.root, "sess-tools")
    rows = json.loads(run_leslie("who", "--json", cwd=repo.root).stdout)
    assert [(r["session"], r["thread"], r["claimed"]) for r in rows] == [("sess-tools", thread_id, False)]
    prompt(repo.root, "sess-a")  # claims the thread
    record = Path(shared_dir(repo.root), "presence", "claude-code.sess-a.json")
    for path, field in ((record, "last_seen"), (Path(shared_dir(repo.root), "claims", f"{thread_id}.json"), "renewed")):
        old = json.loads(path.read_text())
        old[field] = "2020-01-01T00:00:00Z"  # the prompt and the claim were long ago: only tool calls since
        path.write_text(json.dumps(old))
    assert claims.holder(repo, thread_id) is None  # the claim would have expired...
    tool_call(repo.root, "sess-a")
    held = claims.holder(repo, thread_id)  # ...and the tool call keeps it live
    assert held is not None and held.claim.session == "sess-a"
    written = record.stat().st_mtime_ns
    tool_call(repo.root, "sess-a")  # within REFRESH_SECONDS: not written again
    assert record.stat().st_mtime_ns == written


def test_auto_claims_can_be_turned_off(repo: Repository, thread_id: str) -> None:
    (repo.root / ".leslie" / "config.toml").write_text("[claims]\nauto = false\n", encoding="utf-8")
    run_leslie("switch", thread_id, cwd=repo.root)
    prompt(repo.root, "sess-a")
    assert claims.holder(repo, thread_id) is None
    assert [r["claimed"] for r in json.loads(run_leslie("who", "--json", cwd=repo.root).stdout)] == [False]


def test_a_released_hook_claim_is_not_taken_again_by_the_next_prompt(repo: Repository, thread_id: str) -> None:
    run_leslie("switch", thread_id, cwd=repo.root)
    prompt(repo.root, "sess-a")
    assert run_leslie("release", "--session", "sess-a", cwd=repo.root).code == 0
    prompt(repo.root, "sess-a")
    assert claims.holder(repo, thread_id) is None


@pytest.mark.parametrize("setting", ["ttl_seconds = 0", "ttl_seconds = true", "ttl_seconds = 1.5", 'auto = "yes"'])
def test_a_bad_claims_setting_is_a_corrupt_config(repo: Repository, thread_id: str, setting: str) -> None:
    (repo.root / ".leslie" / "config.toml").write_text(f"[claims]\n{setting}\n", encoding="utf-8")
    result = run_leslie("claim", "login", "--session", "s1", cwd=repo.root)
    assert result.code == 4 and "claims." in result.stderr
    assert claims.read_claim(repo.root, thread_id) is None


def test_bad_arguments(repo: Repository, thread_id: str) -> None:
    before = tree_digest(repo.root / ".leslie")
    for args in (["claim", "login", "--ttl", "0"], ["claim", "login", "--agent", "Bad Agent"],
                 ["claim", "login", "--session", "a\x1bb"], ["claim", "thread-nope"], ["release", "../etc"]):
        result = run_leslie(*args, cwd=repo.root)
        assert result.code in (2, 3), (args, result)
        assert "Traceback" not in result.stderr and result.stderr.count("\n") >= 1
    assert tree_digest(repo.root / ".leslie") == before
    assert claims.read_claim(repo.root, thread_id) is None


def test_hostile_claim_and_presence_files_are_ignored(repo: Repository, thread_id: str, tmp_path: Path) -> None:
    folder = Path(shared_dir(repo.root))
    (folder / "claims").mkdir(parents=True)
    (folder / "presence").mkdir()
    secret = tmp_path / "secret.json"
    secret.write_text(json.dumps({"thread": thread_id, "agent": "x", "session": "evil", "worktree": "/",
                                  "since": "2099-01-01T00:00:00Z", "renewed": "2099-01-01T00:00:00Z", "ttl": 9}))
    os.symlink(secret, folder / "claims" / f"{thread_id}.json")
    os.mkfifo(folder / "presence" / "claude-code.fifo.json")
    (folder / "presence" / "codex.junk.json").write_text("[1, 2", encoding="utf-8")
    assert claims.holder(repo, thread_id) is None  # a link is never followed
    assert presence.seen(str(repo.root)) == []
    assert run_leslie("who", "--json", cwd=repo.root, timeout=20).stdout.strip() == "[]"
    os.unlink(folder / "claims" / f"{thread_id}.json")
    assert run_leslie("claim", "login", "--session", "s1", cwd=repo.root).code == 0


def test_list_names_the_holder(repo: Repository, thread_id: str) -> None:
    spawn(repo, "Free", thread_id="thread-free")
    claims.claim(repo, thread_id, session="sess-<a>", agent="codex")
    rows = {row["id"]: row for row in json.loads(run_leslie("list", "--json", cwd=repo.root).stdout)}
    assert rows["thread-free"]["held_by"] is None
    held = rows[thread_id]["held_by"]
    assert (held["agent"], held["session"], held["worktree"]) == ("codex", "sess-<a>", str(repo.root))
    from leslie.cli.list_view import table_text
    from leslie.ops.listing import Filters, group_rows, load_rows

    shown = load_rows(repo, Filters(frozenset(), frozenset(), "id", None))
    table = table_text(group_rows(repo, shown, "id"), 120, holders={thread_id: "codex session sess-<a>"})
    assert "Fix the login  [held by codex session sess-<a>]" in table
    assert "Free  [held" not in table
