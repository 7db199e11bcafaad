"""Order between threads (SPEC §14, `ops/order.py`, `cli/order_cmd.py`): edges and cycles, the index mirror,
doctor, merges through the real driver, ready, next racing real processes, the block, the pictures."""

from __future__ import annotations

import json
import os
import subprocess
from itertools import pairwise
from pathlib import Path

import pytest
from lxml import etree

from conftest import LESLIE_EXE, git, run_leslie, tree_digest
from leslie.ops import claims
from leslie.ops.order import cycle_through
from leslie.ops.threads import remove, set_status, spawn
from leslie.store.relations import rebuilt_bytes
from leslie.store.repository import Repository

SCHEMA = Path(__file__).parent.parent / "docs" / "thread_context.rng"
BIN_DIR = os.path.dirname(LESLIE_EXE)


def make(repo: Repository, *names: str) -> None:
    for name in names:
        spawn(repo, f"Work {name}", thread_id=f"thread-{name}")


def index_json(root: Path) -> dict[str, object]:
    document: dict[str, object] = json.loads((root / ".leslie" / "thread_relations.json").read_text("utf-8"))
    return document


def relations_of(root: Path, thread: str) -> dict[str, list[str]]:
    relations = index_json(root)["relations"]
    assert isinstance(relations, dict)
    entry: dict[str, list[str]] = relations[thread]
    return entry


def thread_doc(root: Path, thread: str) -> dict[str, object]:
    document: dict[str, object] = json.loads(
        (root / ".leslie" / "threads" / thread / "thread.json").read_text("utf-8"))
    return document


def assert_index_is_rebuild(repo: Repository) -> None:
    threads = [repo.read_thread(tid) for tid in repo.thread_ids()]
    assert repo.layout.index_path.read_bytes() == rebuilt_bytes(threads)


# -- edges ---------------------------------------------------------------------------------------------------

def test_edges_are_added_mirrored_and_removed(repo: Repository) -> None:
    make(repo, "a", "b", "c")
    root = repo.root
    result = run_leslie("after", "thread-b", "--on", "thread-a", cwd=root)
    assert result.code == 0 and result.stdout == "thread-b comes after thread-a\n", result.stderr
    assert run_leslie("after", "thread-c", "--on", "thread-a", "--json", cwd=root).code == 0
    assert thread_doc(root, "thread-b")["after"] == ["thread-a"]
    assert relations_of(root, "thread-b") == {"after": ["thread-a"], "referenced_by": [], "references_to": []}
    assert relations_of(root, "thread-a") == {"before": ["thread-b", "thread-c"], "referenced_by": [],
                                              "references_to": []}
    assert_index_is_rebuild(repo)
    again = run_leslie("after", "thread-b", "--on", "thread-a", cwd=root)
    assert again.code == 0 and "already comes after" in again.stdout
    gone = run_leslie("after", "thread-b", "--on", "thread-a", "--remove", cwd=root)
    assert gone.code == 0 and gone.stdout == "thread-b no longer comes after thread-a\n"
    assert "after" not in thread_doc(root, "thread-b")  # present only when not empty
    assert relations_of(root, "thread-b") == {"referenced_by": [], "references_to": []}
    assert relations_of(root, "thread-a") == {"before": ["thread-c"], "referenced_by": [], "references_to": []}
    assert_index_is_rebuild(repo)
    assert run_leslie("doctor", cwd=root).code == 0


def test_a_repository_without_order_keeps_the_exact_index_shape(repo: Repository) -> None:
    make(repo, "a", "b")
    run_leslie("after", "thread-b", "--on", "thread-a", cwd=repo.root)
    run_leslie("after", "thread-b", "--on", "thread-a", "--remove", cwd=repo.root)
    for entry in index_json(repo.root)["relations"].values():  # type: ignore[attr-defined]
        assert set(entry) == {"referenced_by", "references_to"}
    assert "after" not in (repo.root / ".leslie" / "thread_relations.json").read_text("utf-8")


def test_spawn_after_records_the_edges(repo: Repository) -> None:
    make(repo, "a", "b")
    result = run_leslie("spawn", "--intent", "Tests", "--id", "thread-t", "--after", "thread-a", "--after", "b",
                        cwd=repo.root)
    assert result.code == 0, result.stderr
    assert thread_doc(repo.root, "thread-t")["after"] == ["thread-a", "thread-b"]
    assert relations_of(repo.root, "thread-b")["before"] == ["thread-t"]
    assert_index_is_rebuild(repo)


@pytest.mark.parametrize("length", [1, 2, 3])
def test_self_edges_and_cycles_are_refused_naming_the_cycle(repo: Repository, length: int) -> None:
    names = ["a", "b", "c"][:length]
    make(repo, *names)
    for earlier, later in pairwise(names):  # b after a, c after b
        assert run_leslie("after", f"thread-{later}", "--on", f"thread-{earlier}", cwd=repo.root).code == 0
    snapshot = tree_digest(repo.root / ".leslie")
    # a after the last one closes the cycle a → last → ... → a
    result = run_leslie("after", "thread-a", "--on", f"thread-{names[-1]}", cwd=repo.root)
    assert result.code == 2, result.stderr
    chain = " → ".join(["thread-a", *(f"thread-{n}" for n in reversed(names[1:])), "thread-a"]) if length > 1 \
        else "thread-a → thread-a"
    assert chain in result.stderr and "Traceback" not in result.stderr
    assert result.stderr.count("\n") == 1
    assert tree_digest(repo.root / ".leslie") == snapshot


def test_spawn_after_itself_is_refused(repo: Repository) -> None:
    snapshot = tree_digest(repo.root / ".leslie")
    result = run_leslie("spawn", "--intent", "x", "--id", "thread-x", "--after", "thread-x", cwd=repo.root)
    assert result.code in (2, 3) and "Traceback" not in result.stderr  # no such thread yet, or itself
    assert tree_digest(repo.root / ".leslie") == snapshot


def test_cycle_through_names_the_chain() -> None:
    edges = {"b": {"a"}, "c": {"b"}}
    assert cycle_through(edges, "a", "c") == ["a", "c", "b", "a"]
    assert cycle_through(edges, "d", "c") is None
    assert cycle_through(edges, "a", "a") == ["a", "a"]


@pytest.mark.parametrize("command", [
    ["after", "thread-a", "--on", "thread-zzz"],
    ["after", "thread-zzz", "--on", "thread-a"],
    ["after", "thread-a", "--on", "thread-gone"],
    ["spawn", "--intent", "x", "--after", "thread-zzz"],
    ["spawn", "--intent", "x", "--after", "thread-gone"],
])
def test_an_edge_to_a_missing_or_deleted_thread_exits_3(repo: Repository, command: list[str]) -> None:
    make(repo, "a", "gone")
    remove(repo, "thread-gone")
    snapshot = tree_digest(repo.root / ".leslie")
    result = run_leslie(*command, cwd=repo.root)
    assert result.code == 3, result.stderr
    assert "Traceback" not in result.stderr and result.stderr.count("\n") == 1
    assert tree_digest(repo.root / ".leslie") == snapshot


@pytest.mark.parametrize("value", ['"thread-a"', "[1]", '["Thread-A"]', '["thread-a", null]', "{}"])
def test_a_malformed_after_is_corrupt_state(repo: Repository, value: str) -> None:
    make(repo, "a", "b")
    path = repo.root / ".leslie" / "threads" / "thread-b" / "thread.json"
    document = json.loads(path.read_text("utf-8"))
    text = json.dumps(document, indent=2, sort_keys=True)
    path.write_text(text[:-1] + f',\n  "after": {value}\n}}\n', encoding="utf-8")
    for command in (["show", "thread-b"], ["after", "thread-b", "--on", "thread-a"], ["doctor"]):
        result = run_leslie(*command, cwd=repo.root)
        assert result.code in (1, 4), (command, result.stderr)
        assert "thread-b" in result.stderr + result.stdout and "Traceback" not in result.stderr


@pytest.mark.parametrize("value", ['"thread-a"', "[5]", '["thread-a,thread-c"]', '["thread-a", null]', "{}"])
def test_a_malformed_order_list_in_the_index_fails_the_pictures_cleanly(repo: Repository, value: str) -> None:
    """The tree and the graphs take the order from the index's mirror in the derived store (filled from the
    index as it is read, with the same checks): a hostile order list in the index, the store already holding
    the good one, is exit 4 in one line, and changes nothing under `.leslie/`."""
    make(repo, "a", "b", "c")
    assert run_leslie("after", "thread-b", "--on", "thread-a", cwd=repo.root).code == 0
    pictures = (["list", "--tree"], ["list", "--tree", "--json"], ["relations", "--format", "mermaid"])
    for command in pictures:
        assert run_leslie(*command, cwd=repo.root).code == 0  # the store holds the good order
    index = repo.layout.index_path
    text = index.read_text("utf-8")
    hostile = text.replace('"after": [\n        "thread-a"\n      ]', f'"after": {value}', 1)
    assert hostile != text
    index.write_text(hostile, encoding="utf-8")
    snapshot = tree_digest(repo.root / ".leslie")
    for command in pictures:
        result = run_leslie(*command, cwd=repo.root)
        assert result.code == 4, (command, result.stderr)
        assert "Traceback" not in result.stderr and result.stderr.count("\n") == 1
    assert tree_digest(repo.root / ".leslie") == snapshot


# -- the mirror and doctor -------------------------------------------------------------------------------------

def test_doctor_repairs_a_hand_edited_after(repo: Repository) -> None:
    make(repo, "a", "b")
    path = repo.root / ".leslie" / "threads" / "thread-b" / "thread.json"
    document = json.loads(path.read_text("utf-8"))
    document["after"] = ["thread-a", "thread-missing"]
    path.write_text(json.dumps(document, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    check = run_leslie("doctor", cwd=repo.root)
    assert check.code == 1
    assert "order edge to missing thread thread-missing" in check.stdout + check.stderr
    assert "differs from a rebuild" in check.stdout + check.stderr
    fixed = run_leslie("doctor", "--fix", cwd=repo.root)
    assert fixed.code == 0, fixed.stdout + fixed.stderr
    assert thread_doc(repo.root, "thread-b")["after"] == ["thread-a"]
    assert relations_of(repo.root, "thread-a")["before"] == ["thread-b"]
    assert_index_is_rebuild(repo)
    assert run_leslie("doctor", cwd=repo.root).code == 0


def test_doctor_reports_a_broken_mirror_in_the_index(repo: Repository) -> None:
    make(repo, "a", "b")
    run_leslie("after", "thread-b", "--on", "thread-a", cwd=repo.root)
    index = repo.root / ".leslie" / "thread_relations.json"
    document = json.loads(index.read_text("utf-8"))
    del document["relations"]["thread-a"]["before"]
    index.write_text(json.dumps(document, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    assert run_leslie("doctor", cwd=repo.root).code == 1
    assert run_leslie("doctor", "--fix", cwd=repo.root).code == 0
    assert relations_of(repo.root, "thread-a")["before"] == ["thread-b"]


def test_an_edge_to_a_deleted_thread_counts_as_done(repo: Repository) -> None:
    make(repo, "a", "b")
    run_leslie("after", "thread-b", "--on", "thread-a", cwd=repo.root)
    remove(repo, "thread-a")
    assert thread_doc(repo.root, "thread-b")["after"] == ["thread-a"]  # kept: the tombstone says it is gone
    assert "after" not in relations_of(repo.root, "thread-b")
    assert_index_is_rebuild(repo)
    assert run_leslie("doctor", cwd=repo.root).code == 0
    assert run_leslie("ready", cwd=repo.root).stdout.startswith("thread-b")


# -- merges through the real driver ------------------------------------------------------------------------------

def _git_repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("PATH", BIN_DIR + os.pathsep + os.environ.get("PATH", ""))
    root = tmp_path / "merged"
    root.mkdir()
    git("init", "-q", "-b", "main", cwd=root)
    git("config", "user.email", "t@example.com", cwd=root)
    git("config", "user.name", "t", cwd=root)
    assert run_leslie("init", "--git", cwd=root).code == 0
    for name in "abcd":
        assert run_leslie("spawn", "--intent", name, "--id", f"thread-{name}", cwd=root).code == 0
    git("add", "-A", cwd=root)
    git("commit", "-q", "-m", "base", cwd=root)
    return root


def _on_branch(root: Path, branch: str, *edges: tuple[str, str]) -> None:
    git("checkout", "-q", "-b", branch, "main", cwd=root)
    for later, earlier in edges:
        assert run_leslie("after", later, "--on", earlier, cwd=root).code == 0
    git("add", "-A", cwd=root)
    git("commit", "-q", "-m", branch, cwd=root)


def test_a_merge_of_two_branches_that_each_add_an_edge_keeps_both(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    root = _git_repo(tmp_path, monkeypatch)
    _on_branch(root, "one", ("thread-b", "thread-a"))
    _on_branch(root, "two", ("thread-b", "thread-c"), ("thread-d", "thread-a"))
    git("checkout", "-q", "one", cwd=root)
    merged = subprocess.run(["git", "merge", "-q", "--no-edit", "two"], cwd=root, capture_output=True, text=True,
                            check=False)
    assert merged.returncode == 0, merged.stderr
    assert thread_doc(root, "thread-b")["after"] == ["thread-a", "thread-c"]
    assert thread_doc(root, "thread-d")["after"] == ["thread-a"]
    assert relations_of(root, "thread-a")["before"] == ["thread-b", "thread-d"]
    assert relations_of(root, "thread-c")["before"] == ["thread-b"]
    assert "<<<<<<<" not in (root / ".leslie" / "thread_relations.json").read_text("utf-8")
    assert_index_is_rebuild(Repository(root))
    assert run_leslie("doctor", cwd=root).code == 0


def test_a_merge_that_closes_a_cycle_is_reported_by_doctor(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = _git_repo(tmp_path, monkeypatch)
    _on_branch(root, "one", ("thread-b", "thread-a"))
    _on_branch(root, "two", ("thread-a", "thread-b"))
    git("checkout", "-q", "one", cwd=root)
    subprocess.run(["git", "merge", "-q", "--no-edit", "two"], cwd=root, capture_output=True, text=True,
                   check=False)
    assert thread_doc(root, "thread-a")["after"] == ["thread-b"]
    assert thread_doc(root, "thread-b")["after"] == ["thread-a"]
    assert_index_is_rebuild(Repository(root))
    check = run_leslie("doctor", cwd=root)
    assert check.code == 1 and "order cycle" in check.stdout and "thread-a" in check.stdout
    ready = run_leslie("ready", cwd=root).stdout
    assert "thread-a" not in ready and "thread-b" not in ready and "thread-c" in ready
    assert run_leslie("after", "thread-a", "--on", "thread-b", "--remove", cwd=root).code == 0
    assert run_leslie("doctor", cwd=root).code == 0


# -- ready and next --------------------------------------------------------------------------------------------

def test_ready_follows_done_deleted_and_held_predecessors(repo: Repository) -> None:
    make(repo, "design", "impl", "tests", "docs", "other")
    root = repo.root
    for later, earlier in (("impl", "design"), ("tests", "impl"), ("docs", "other")):
        assert run_leslie("after", f"thread-{later}", "--on", f"thread-{earlier}", cwd=root).code == 0

    def ready() -> list[str]:
        result = run_leslie("ready", "--json", cwd=root)
        assert result.code == 0, result.stderr
        return sorted(row["thread"] for row in json.loads(result.stdout))  # spawned within a second or two

    assert ready() == ["thread-design", "thread-other"]
    set_status(repo, "thread-design", "done")
    assert ready() == ["thread-impl", "thread-other"]
    remove(repo, "thread-other")  # a deleted predecessor counts as done
    assert ready() == ["thread-docs", "thread-impl"]
    claims.claim(repo, "thread-impl", session="agent-1")  # held by a live session: not ready
    assert ready() == ["thread-docs"]
    set_status(repo, "thread-docs", "paused")  # not active: not ready
    assert ready() == []
    assert run_leslie("ready", cwd=root).stdout == ""
    set_status(repo, "thread-impl", "done")
    assert ready() == ["thread-tests"]


def test_ready_lists_the_oldest_first(repo: Repository) -> None:
    import time

    make(repo, "z")
    time.sleep(1.1)  # creation times are kept to the second
    make(repo, "a")
    assert run_leslie("ready", cwd=repo.root).stdout == "thread-z  Work z\nthread-a  Work a\n"
    assert run_leslie("next", "--session", "s", cwd=repo.root).stdout == "thread-z\n"


def test_ready_by_objective(repo: Repository) -> None:
    assert run_leslie("objective", "create", "One", "--id", "obj-one", cwd=repo.root).code == 0
    assert run_leslie("objective", "create", "Two", "--id", "obj-two", cwd=repo.root).code == 0
    spawn(repo, "one", thread_id="thread-one", objective="obj-one")
    spawn(repo, "two", thread_id="thread-two", objective="obj-two")
    result = run_leslie("ready", "--objective", "obj-two", "--json", cwd=repo.root)
    assert [row["thread"] for row in json.loads(result.stdout)] == ["thread-two"]
    assert run_leslie("ready", "--objective", "obj-nope", cwd=repo.root).code in (2, 3)


def test_next_claims_switches_and_exits_3_when_nothing_is_ready(repo: Repository) -> None:
    make(repo, "a", "b")
    run_leslie("after", "thread-b", "--on", "thread-a", cwd=repo.root)
    first = run_leslie("next", "--session", "s1", "--agent", "codex", cwd=repo.root)
    assert first.code == 0 and first.stdout == "thread-a\n", first.stderr
    held = claims.holder(repo, "thread-a")
    assert held is not None and held.claim.session == "s1" and held.claim.agent == "codex"
    assert repo.recorded_current_thread() == "thread-a"
    snapshot = tree_digest(repo.root / ".leslie")
    none = run_leslie("next", "--session", "s2", cwd=repo.root)
    assert none.code == 3 and none.stdout == "" and "no thread is ready" in none.stderr
    assert tree_digest(repo.root / ".leslie") == snapshot
    set_status(repo, "thread-a", "done")
    second = run_leslie("next", "--session", "s2", "--json", cwd=repo.root)
    assert second.code == 0 and json.loads(second.stdout)["thread"] == "thread-b"


def _hook(root: Path, event: dict[str, object], session: str) -> dict[str, object]:
    payload = {"session_id": session, "cwd": str(root), "transcript_path": None, **event}
    result = run_leslie("hook", "claude-code", cwd=root, input=json.dumps(payload))
    assert result.code == 0, result.stderr
    answer: dict[str, object] = json.loads(result.stdout) if result.stdout.strip() else {}
    return answer


def test_next_run_by_an_agent_is_its_own_session_s(repo: Repository) -> None:
    """`leslie next` from Claude Code's Bash tool (which sets CLAUDE_CODE_SESSION_ID) claims for that session,
    and the session follows: its next prompt gets the new thread's block, and the guard lets it write there."""
    make(repo, "a", "b")
    run_leslie("switch", "thread-a", cwd=repo.root)
    session = "0f7c2a4e-9d1b-4c8e-8a51-3c2d1e0f9b7a"
    first = _hook(repo.root, {"hook_event_name": "UserPromptSubmit", "prompt": "take the next thing"}, session)
    assert 'thread_context thread="thread-a"' in str(first["hookSpecificOutput"])
    agent_env = {"CLAUDECODE": "1", "CLAUDE_CODE_SESSION_ID": session}
    taken = run_leslie("next", "--json", cwd=repo.root, env=agent_env)
    assert taken.code == 0, taken.stderr
    assert (json.loads(taken.stdout)["thread"], json.loads(taken.stdout)["agent"]) == ("thread-b", "claude-code")
    held = claims.holder(repo, "thread-b")
    assert held is not None and (held.claim.agent, held.claim.session) == ("claude-code", session)
    rows = json.loads(run_leslie("who", "--json", cwd=repo.root).stdout)
    assert [(r["session"], r["thread"]) for r in rows if r["session"] == session] == [(session, "thread-b")]
    after = _hook(repo.root, {"hook_event_name": "UserPromptSubmit", "prompt": "go on"}, session)
    assert 'thread_context thread="thread-b"' in str(after["hookSpecificOutput"])
    for thread, allowed in (("thread-b", True), ("thread-a", False)):
        path = str(repo.root / ".leslie" / "threads" / thread / "plan.md")
        answer = _hook(repo.root, {"hook_event_name": "PreToolUse", "tool_name": "Write", "tool_use_id": "t1",
                                   "tool_input": {"file_path": path, "content": "x"}}, session)
        decision = answer.get("hookSpecificOutput", {}).get("permissionDecision")  # type: ignore[union-attr]
        assert (decision != "deny") is allowed, answer
    claimed = run_leslie("claim", "thread-a", "--json", cwd=repo.root,
                         env={**agent_env, "CLAUDE_CODE_SESSION_ID": "s9"})
    assert claimed.code == 0 and json.loads(claimed.stdout)["session"] == "s9", claimed.stderr


def test_eight_concurrent_next_calls_never_get_the_same_thread(repo: Repository) -> None:
    make(repo, *(f"t{n}" for n in range(5)))
    make(repo, "blocked")
    run_leslie("after", "thread-blocked", "--on", "thread-t0", cwd=repo.root)
    racers = [subprocess.Popen([LESLIE_EXE, "next", "--session", f"racer-{n}"], cwd=repo.root,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for n in range(8)]
    results = [(racer.wait(timeout=120), *racer.communicate()) for racer in racers]
    taken = [out.strip() for code, out, _err in results if code == 0]
    assert sorted(taken) == [f"thread-t{n}" for n in range(5)], results  # each ready thread exactly once
    assert sorted(code for code, _out, _err in results) == [0] * 5 + [3] * 3, results
    for number, (code, out, _err) in enumerate(results):
        if code == 0:
            held = claims.holder(repo, out.strip())
            assert held is not None and held.claim.session == f"racer-{number}"


# -- the block -------------------------------------------------------------------------------------------------

def _validated(text: str) -> etree._Element:
    parser = etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False)
    root = etree.fromstring(text.encode("utf-8"), parser)
    schema = etree.RelaxNG(etree.parse(str(SCHEMA)))
    assert schema.validate(root), f"{schema.error_log}\n{text}"
    return root


def test_the_block_shows_what_a_thread_waits_for_and_what_waits_on_it(repo: Repository) -> None:
    make(repo, "a", "b", "c", "d")
    root = repo.root
    for later, earlier in (("b", "a"), ("b", "d"), ("c", "b")):
        run_leslie("after", f"thread-{later}", "--on", f"thread-{earlier}", cwd=root)
    set_status(repo, "thread-d", "done")
    block = run_leslie("context", "--thread", "thread-b", "--budget", "0", cwd=root)
    assert block.code == 0, block.stderr
    element = _validated(block.stdout)
    assert [(e.get("thread"), e.get("title"), e.get("status")) for e in element.iter("after")] == [
        ("thread-a", "Work a", "active")]  # thread-d is done: no longer waited for
    assert [(e.get("thread"), e.get("status")) for e in element.iter("before")] == [("thread-c", "active")]
    plain = _validated(run_leslie("context", "--thread", "thread-d", "--budget", "0", cwd=root).stdout)
    assert [e.get("thread") for e in plain.iter("before")] == ["thread-b"] and not list(plain.iter("after"))
    json_form = json.loads(run_leslie("context", "--thread", "thread-b", "--format", "json", cwd=root).stdout)
    assert json_form["after"] == [{"thread": "thread-a", "title": "Work a", "status": "active"}]


def test_a_block_without_order_has_no_order_element(repo: Repository) -> None:
    make(repo, "a")
    text = run_leslie("context", "--thread", "thread-a", cwd=repo.root).stdout
    assert "<after" not in text and "<before" not in text
    assert "after" not in json.loads(run_leslie("context", "--thread", "thread-a", "--format", "json",
                                                cwd=repo.root).stdout)


def test_a_change_of_order_changes_the_fingerprint(repo: Repository) -> None:
    from leslie.context.block import context_fingerprint
    from leslie.inject.blocks import inputs_key

    make(repo, "a", "b", "c")
    print_before = context_fingerprint(repo, "thread-a")
    key_before = inputs_key(str(repo.root), "thread-a")
    run_leslie("after", "thread-b", "--on", "thread-a", cwd=repo.root)  # thread-a's own file is untouched
    assert inputs_key(str(repo.root), "thread-a") != key_before
    assert context_fingerprint(repo, "thread-a") != print_before
    unrelated = context_fingerprint(repo, "thread-c")
    set_status(repo, "thread-b", "paused")
    assert context_fingerprint(repo, "thread-c") == unrelated  # no order around it: unchanged


# -- the pictures ----------------------------------------------------------------------------------------------

def test_the_pictures_draw_order_apart_from_references(repo: Repository) -> None:
    make(repo, "a", "b", "c")
    root = repo.root
    run_leslie("after", "thread-b", "--on", "thread-a", cwd=root)
    assert run_leslie("reference", "thread-a", "--thread", "thread-c", cwd=root).code == 0
    mermaid = run_leslie("relations", "--format", "mermaid", cwd=root).stdout
    assert 't_thread_a ==>|"then"| t_thread_b' in mermaid
    assert "t_thread_c --> t_thread_a" in mermaid
    assert "active · b · blocked" in mermaid and "active · a · ready" in mermaid
    dot = run_leslie("relations", "--format", "dot", cwd=root).stdout
    assert '"thread-a" -> "thread-b" [label="then", style=bold' in dot
    assert '"thread-c" -> "thread-a";' in dot
    relations = json.loads(run_leslie("relations", cwd=root).stdout)["relations"]
    assert relations["thread-b"]["after"] == ["thread-a"] and relations["thread-a"]["before"] == ["thread-b"]
    tree = run_leslie("list", "--tree", cwd=root).stdout
    assert "⋯ blocked: waits for a" in tree and "⋯ after  a  Work a  (active)" in tree
    assert "⋯ before b  Work b  (active)" in tree and "→ a  Work a  [whole thread]" in tree
    tree_json = json.loads(run_leslie("list", "--tree", "--json", cwd=root).stdout)
    nodes = {t["id"]: t for g in tree_json["groups"] for t in g["threads"]}
    assert nodes["thread-b"]["order"] == "blocked" and nodes["thread-a"]["order"] == "ready"
    assert "order" not in nodes["thread-c"]
    show = run_leslie("show", "thread-b", cwd=root).stdout
    assert "after          thread-a (active)" in show and "blocked: waits for thread-a" in show
    shown = json.loads(run_leslie("show", "thread-a", "--json", cwd=root).stdout)
    assert shown["before"] == ["thread-b"] and shown["order"] == "ready"
    assert "order" not in json.loads(run_leslie("show", "thread-c", "--json", cwd=root).stdout)


def test_the_board_draws_order_apart_from_references(repo: Repository) -> None:
    from leslie.board.app import environment
    from leslie.board.data import read_board
    from leslie.board.graph import layout

    make(repo, "a", "b", "c")
    run_leslie("after", "thread-b", "--on", "thread-a", cwd=repo.root)
    assert run_leslie("reference", "thread-a", "--thread", "thread-c", cwd=repo.root).code == 0
    board = read_board(repo)
    cards = {card.id: card for group in board.groups for card in group.cards}
    assert cards["thread-a"].order == "ready" and cards["thread-b"].order == "blocked: waits for thread-a"
    assert cards["thread-c"].order == ""
    graph = layout(board.threads, {})
    kinds = {(edge.source, edge.target, edge.order) for edge in graph.edges}
    assert kinds == {("thread-b", "thread-a", True), ("thread-c", "thread-a", False)}
    svg = environment().get_template("graph.html.j2").render(graph=graph, problems=[], page="graph")
    assert 'class="edge order"' in svg and "thread-b comes after thread-a" in svg
    html = environment().get_template("board.html.j2").render(board=board, total=3, page="board")
    assert "blocked: waits for thread-a" in html and 'class="order order-ready"' in html


def test_a_corrupt_index_does_not_stop_the_block(repo: Repository) -> None:
    make(repo, "a", "b")
    run_leslie("after", "thread-b", "--on", "thread-a", cwd=repo.root)
    index = repo.root / ".leslie" / "thread_relations.json"
    index.write_text("<<<<<<< ours\n{}\n=======\n{}\n>>>>>>> theirs\n", encoding="utf-8")
    block = run_leslie("context", "--thread", "thread-b", "--budget", "0", cwd=repo.root)
    assert block.code == 0, block.stderr
    assert not list(_validated(block.stdout).iter("after"))  # no order shown, but a block


def test_the_lazy_index_keeps_order_edges_through_every_mutation(repo: Repository) -> None:
    """In-process (the index read from its canonical file and spliced): after each mutation the index is its
    rebuild, and its invariants (mirror included) hold."""
    from leslie.ops.order import add_after, remove_after
    from leslie.ops.threads import reference, retitle
    from leslie.store.relations import invariant_problems

    make(repo, "a", "b", "c", "d")
    steps = [
        lambda: add_after(repo, "thread-b", "thread-a"),
        lambda: add_after(repo, "thread-c", "thread-b"),
        lambda: add_after(repo, "thread-c", "thread-a"),
        lambda: reference(repo, "thread-d", "thread-c"),
        lambda: retitle(repo, "thread-a", "Renamed"),  # an entry re-encoded: its before list must stay
        lambda: set_status(repo, "thread-b", "done"),
        lambda: remove_after(repo, "thread-c", "thread-a"),
        lambda: remove(repo, "thread-b"),  # a predecessor deleted: its edges leave the index
        lambda: spawn(repo, "e", thread_id="thread-e", after=["thread-c", "thread-d"]),
        lambda: remove(repo, "thread-d", force=True),
    ]
    for step in steps:
        step()
        assert_index_is_rebuild(repo)
        assert invariant_problems(repo.read_index()) == []
    assert relations_of(repo.root, "thread-c")["before"] == ["thread-e"]
    assert relations_of(repo.root, "thread-e")["after"] == ["thread-c"]


def test_the_merge_functions_keep_order_edges_from_both_sides() -> None:
    from leslie.ops.merge import merge_indexes, merge_thread_documents
    from leslie.store.model import Thread
    from leslie.store.relations import build_index

    def doc(after: list[str]) -> dict[str, object]:
        return Thread("thread-b", "B", "B", None, created_at="2026-01-01T00:00:00Z", after=tuple(after)).to_json()

    merged = merge_thread_documents(doc(["thread-x"]), doc(["thread-x", "thread-a"]), doc(["thread-c"]))
    assert merged["after"] == ["thread-a", "thread-c"]  # x removed on one side: removed; a and c added: kept
    assert "after" not in merge_thread_documents(doc([]), doc([]), doc([]))

    def threads(**after: list[str]) -> list[Thread]:
        return [Thread(f"thread-{n}", n, n, None, after=tuple(after.get(n, ()))) for n in "abc"]

    base = build_index(threads())
    result = merge_indexes(base, build_index(threads(b=["thread-a"])), build_index(threads(c=["thread-a"])))
    assert result == build_index(threads(b=["thread-a"], c=["thread-a"]))
    assert result.before["thread-a"] == {"thread-b", "thread-c"}
