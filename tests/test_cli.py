"""Every SPEC §4 command through the real `leslie` executable, in human and `--json` modes.

After each mutating command the index must equal a rebuild from the thread.json files, byte for byte, and
break no invariant of SPEC §2.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from conftest import LESLIE_EXE, Result, run_leslie, state_dir, tree_digest
from leslie.ops.objectives import create_objective
from leslie.ops.threads import RefSpec, spawn
from leslie.store.jsonio import dumps_canonical
from leslie.store.relations import invariant_problems
from leslie.store.repository import Repository


def ok(*args: str, cwd: Path, env: dict[str, str] | None = None) -> Result:
    """Run leslie, require exit 0, and check the index against a rebuild afterwards."""
    result = run_leslie(*args, cwd=cwd, env=env)
    assert result.code == 0, f"leslie {' '.join(args)} exited {result.code}: {result.stderr}"
    assert "Traceback" not in result.stderr
    assert_index_consistent(cwd)
    return result


def js(*args: str, cwd: Path, env: dict[str, str] | None = None) -> Any:
    return json.loads(ok(*args, "--json", cwd=cwd, env=env).stdout)


def assert_index_consistent(root: Path) -> None:
    repo = Repository.discover(root) if (root / ".leslie").is_dir() else None
    if repo is None:
        return
    stored = repo.layout.index_path.read_bytes()
    assert stored == dumps_canonical(repo.rebuild_index().to_json()), "index differs from a rebuild"
    assert invariant_problems(repo.read_index()) == []


def thread_doc(root: Path, tid: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((root / f".leslie/threads/{tid}/thread.json").read_text(encoding="utf-8"))
    return data


def index_doc(root: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((root / ".leslie/thread_relations.json").read_text(encoding="utf-8"))
    return data


# -- objectives ---------------------------------------------------------------------------------------


def test_objective_commands(repo_root: Path) -> None:
    created = ok("objective", "create", "Ship login", "--description", "a\r\nb", cwd=repo_root)
    oid = created.stdout.strip()
    assert oid.startswith("obj-") and created.stdout == oid + "\n"
    data = js("objective", "create", "Second", "--id", "obj-two", cwd=repo_root)
    assert data["id"] == "obj-two" and data["objective"]["status"] == "active"
    listed = js("objective", "list", cwd=repo_root)
    assert sorted(o["id"] for o in listed) == sorted([oid, "obj-two"])
    human = ok("objective", "list", cwd=repo_root).stdout
    assert oid in human and "Ship login" in human and "obj-two" in human
    ok("spawn", "--intent", "x", "--objective", "obj-two", "--id", "thread-x", cwd=repo_root)
    shown = js("objective", "show", "obj-two", cwd=repo_root)
    assert shown["threads"] == ["thread-x"] and shown["title"] == "Second"
    assert js("objective", "show", oid, cwd=repo_root)["description"] == "a\nb"
    assert "thread-x" in ok("objective", "show", "obj-two", cwd=repo_root).stdout
    assert ok("objective", "set-status", "obj-two", "done", cwd=repo_root).stdout == "obj-two: done\n"
    assert js("objective", "set-status", "obj-two", "archived", cwd=repo_root) == {"id": "obj-two",
                                                                                   "status": "archived"}


# -- spawn --------------------------------------------------------------------------------------------


def test_spawn_prints_only_the_id(repo_root: Path) -> None:
    result = ok("spawn", "--intent", "Fix the login bug", cwd=repo_root)
    tid = result.stdout.strip()
    assert result.stdout == tid + "\n" and tid.startswith("thread-") and len(tid) == len("thread-") + 6
    assert "created objective obj-default" in result.stderr
    doc = thread_doc(repo_root, tid)
    assert doc["status"] == "active" and doc["title"] == "Fix the login bug" and doc["objective"] == "obj-default"
    assert sorted(p.name for p in (repo_root / f".leslie/threads/{tid}").iterdir()) == [
        "plan.md", "progress.md", "thread.json"]


def test_spawn_json_refs_parent_objective(repo_root: Path) -> None:
    ok("objective", "create", "O", "--id", "obj-o", cwd=repo_root)
    ok("objective", "create", "P", "--id", "obj-p", cwd=repo_root)
    ok("spawn", "--intent", "a", "--id", "thread-a", "--objective", "obj-o", cwd=repo_root)
    ok("spawn", "--intent", "b", "--id", "thread-b", "--objective", "obj-p", cwd=repo_root)
    data = js("spawn", "--intent", "Child\nwork", "--title", "Child", "--parent", "thread-a",
              "--ref", "thread-a", "--ref", "thread-b:design/api.md", "--ref", "thread-b:plan.md",
              "--id", "thread-c", cwd=repo_root)
    assert data["id"] == "thread-c"
    thread = data["thread"]
    assert thread["references"] == {"thread-a": [], "thread-b": ["design/api.md", "plan.md"]}
    assert thread["spawned_by"] == "thread-a" and thread["objective"] == "obj-o"  # the parent's
    assert thread["intent"] == "Child\nwork" and thread["title"] == "Child"
    assert thread_doc(repo_root, "thread-c") == thread
    index = index_doc(repo_root)
    assert index["relations"]["thread-b"]["referenced_by"] == ["thread-c"]
    assert index["threads"]["thread-c"] == {"created_at": thread["created_at"], "intent": "Child\nwork",
                                            "objective": "obj-o", "status": "active", "title": "Child"}


def test_spawn_context_prints_id_then_block(repo_root: Path) -> None:
    result = ok("spawn", "--intent", "with context", "--id", "thread-ctx", "--context", cwd=repo_root)
    first, blank, block = result.stdout.split("\n", 2)
    assert first == "thread-ctx" and blank == ""
    assert block.startswith('<thread_context thread="thread-ctx" objective="obj-default"')
    data = js("spawn", "--intent", "again", "--id", "thread-ctx2", "--context", cwd=repo_root)
    assert data["id"] == "thread-ctx2" and data["context"].startswith('<thread_context thread="thread-ctx2"')


def test_spawn_warns_about_missing_scope_file(repo_root: Path) -> None:
    ok("spawn", "--intent", "a", "--id", "thread-a", cwd=repo_root)
    result = ok("spawn", "--intent", "b", "--ref", "thread-a:design/later.md", cwd=repo_root)
    assert "warning: thread-a has no design/later.md yet" in result.stderr
    assert result.stdout.strip().startswith("thread-")


def test_spawn_several_active_objectives_needs_a_choice(repo_root: Path) -> None:
    ok("objective", "create", "A", "--id", "obj-a", cwd=repo_root)
    ok("objective", "create", "B", "--id", "obj-b", cwd=repo_root)
    before = tree_digest(repo_root / ".leslie")
    result = run_leslie("spawn", "--intent", "x", cwd=repo_root)
    assert result.code == 2 and "several active objectives (obj-a “A”, obj-b “B”)" in result.stderr
    assert "--objective" in result.stderr
    assert tree_digest(repo_root / ".leslie") == before


# -- reference / unreference --------------------------------------------------------------------------


@pytest.fixture
def two(repo_root: Path) -> Path:
    """thread-a and thread-b, made through the library to keep the suite fast (spawn's CLI is tested above)."""
    for tid in ("thread-a", "thread-b"):
        spawn(Repository(repo_root), tid[-1], thread_id=tid)
    return repo_root


def test_reference_and_repeat(two: Path) -> None:
    first = ok("reference", "--target", "thread-b", "--thread", "thread-a", cwd=two)
    assert first.stdout == "thread-a -> thread-b [whole thread]\n"
    before = tree_digest(two / ".leslie")
    again = ok("reference", "--target", "thread-b", "--thread", "thread-a", cwd=two)
    assert again.stdout == "thread-a -> thread-b [whole thread] (unchanged)\n"
    assert tree_digest(two / ".leslie") == before
    assert index_doc(two)["relations"]["thread-b"]["referenced_by"] == ["thread-a"]


def test_reference_scopes_add(two: Path) -> None:
    data = js("reference", "--target", "thread-b", "--scope", "plan.md", "--thread", "thread-a", cwd=two)
    assert data == {"changed": True, "thread": "thread-a", "target": "thread-b", "scope": ["plan.md"]}
    result = ok("reference", "--target", "thread-b", "--scope", "design/api.md", "--scope", "./plan.md",
                "--thread", "thread-a", cwd=two)
    assert result.stdout == "thread-a -> thread-b [design/api.md, plan.md]\n"
    assert "warning: thread-b has no design/api.md yet" in result.stderr
    assert thread_doc(two, "thread-a")["references"] == {"thread-b": ["design/api.md", "plan.md"]}
    widened = js("reference", "--target", "thread-b", "--thread", "thread-a", cwd=two)
    assert widened["scope"] == [] and widened["changed"] is True


def test_unreference_partial_and_whole(two: Path) -> None:
    ok("reference", "--target", "thread-b", "--scope", "plan.md", "--scope", "progress.md",
       "--thread", "thread-a", cwd=two)
    partial = ok("unreference", "--target", "thread-b", "--scope", "plan.md", "--thread", "thread-a", cwd=two)
    assert partial.stdout == "thread-a -> thread-b [progress.md]\n"
    data = js("unreference", "--target", "thread-b", "--scope", "progress.md", "--thread", "thread-a", cwd=two)
    assert data == {"changed": True, "thread": "thread-a", "target": "thread-b", "scope": None}
    assert thread_doc(two, "thread-a")["references"] == {}
    ok("reference", "--target", "thread-b", "--thread", "thread-a", cwd=two)
    refused = run_leslie("unreference", "--target", "thread-b", "--scope", "plan.md", "--thread", "thread-a",
                         cwd=two)
    assert refused.code == 2 and "references all of thread-b" in refused.stderr
    whole = ok("unreference", "--target", "thread-b", "--thread", "thread-a", cwd=two)
    assert whole.stdout == "thread-a no longer references thread-b\n"
    noop = ok("unreference", "--target", "thread-b", "--thread", "thread-a", cwd=two)
    assert noop.stdout.endswith("(unchanged)\n")


def test_current_thread_precedence(repo_root: Path) -> None:
    for tid in ("thread-a", "thread-b", "thread-c", "thread-t"):
        spawn(Repository(repo_root), tid, thread_id=tid)
    missing = run_leslie("reference", "--target", "thread-t", cwd=repo_root)
    assert missing.code == 2 and "no current thread" in missing.stderr and "leslie switch" in missing.stderr
    assert ok("switch", "thread-a", cwd=repo_root).stdout == "current thread: thread-a\n"
    assert js("switch", "thread-a", cwd=repo_root) == {"current_thread": "thread-a"}
    ok("reference", "--target", "thread-t", cwd=repo_root)
    ok("reference", "--target", "thread-t", cwd=repo_root, env={"LESLIE_THREAD": "thread-b"})
    ok("reference", "--target", "thread-t", "--thread", "thread-c", cwd=repo_root,
       env={"LESLIE_THREAD": "thread-b"})
    assert index_doc(repo_root)["relations"]["thread-t"]["referenced_by"] == ["thread-a", "thread-b", "thread-c"]
    assert (state_dir(repo_root) / "current_thread").read_text() == "thread-a\n"


def test_unknown_fields_survive_a_rewrite(two: Path) -> None:
    path = two / ".leslie/threads/thread-a/thread.json"
    doc = json.loads(path.read_text())
    doc["added_by_a_newer_leslie"] = {"keep": ["me", 1]}
    path.write_text(json.dumps(doc))
    ok("reference", "--target", "thread-b", "--thread", "thread-a", cwd=two)
    after = thread_doc(two, "thread-a")
    assert after["added_by_a_newer_leslie"] == {"keep": ["me", 1]}
    assert after["references"] == {"thread-b": []}
    ok("retitle", "thread-a", "renamed", cwd=two)
    assert thread_doc(two, "thread-a")["added_by_a_newer_leslie"] == {"keep": ["me", 1]}


# -- list / show --------------------------------------------------------------------------------------


def test_list_filters(repo_root: Path) -> None:
    assert js("list", cwd=repo_root) == []
    repo = Repository(repo_root)
    create_objective(repo, "O", objective_id="obj-o")
    create_objective(repo, "P", objective_id="obj-p")
    spawn(repo, "one", thread_id="thread-1", objective="obj-o")
    spawn(repo, "two", thread_id="thread-2", objective="obj-p", refs=[RefSpec("thread-1")])
    spawn(repo, "three", thread_id="thread-3", objective="obj-o")
    ok("done", "thread-3", cwd=repo_root)
    rows = js("list", "--sort", "id", cwd=repo_root)
    assert [r["id"] for r in rows] == ["thread-1", "thread-2", "thread-3"]
    created = rows[1].pop("created_at")
    assert rows[1].pop("updated_at") >= created
    assert rows[1] == {"id": "thread-2", "objective": "obj-p", "objective_title": "P", "status": "active",
                       "title": "two", "intent": "two", "references_to": ["thread-1"], "referenced_by": [],
                       "held_by": None}
    assert [r["id"] for r in js("list", "--objective", "obj-o", "--sort", "id", cwd=repo_root)] == [
        "thread-1", "thread-3"]
    assert [r["id"] for r in js("list", "--status", "done", cwd=repo_root)] == ["thread-3"]
    assert [r["id"] for r in js("list", "--objective", "obj-o", "--status", "active", cwd=repo_root)] == [
        "thread-1"]
    assert run_leslie("list", "--objective", "obj-none", cwd=repo_root).code == 2
    plain = ok("list", cwd=repo_root).stdout  # piped: the plain lines
    for text in ("thread-1", "thread-2", "thread-3", "obj-p", "done"):
        assert text in plain


def test_show(two: Path) -> None:
    ok("reference", "--target", "thread-b", "--scope", "plan.md", "--thread", "thread-a", cwd=two)
    data = js("show", "thread-b", cwd=two)
    assert data["id"] == "thread-b" and data["referenced_by"] == ["thread-a"]
    assert data["path"] == ".leslie/threads/thread-b/"
    data_a = js("show", "thread-a", cwd=two)
    assert data_a["references"] == {"thread-b": ["plan.md"]}
    human = ok("show", "thread-a", cwd=two).stdout
    assert "thread-a" in human and "thread-b [plan.md]" in human


# -- status, title, rm --------------------------------------------------------------------------------


def test_status_commands(two: Path) -> None:
    for args, status in [(["set-status", "thread-a", "paused"], "paused"), (["done", "thread-a"], "done"),
                         (["pause", "thread-a"], "paused"), (["archive", "thread-a"], "archived"),
                         (["resume", "thread-a"], "active"), (["set-status", "thread-a", "done"], "done")]:
        assert ok(*args, cwd=two).stdout == f"thread-a: {status}\n"
        assert thread_doc(two, "thread-a")["status"] == status
        assert index_doc(two)["threads"]["thread-a"]["status"] == status
    assert js("resume", "thread-a", cwd=two) == {"id": "thread-a", "status": "active", "changed": True}
    assert js("resume", "thread-a", cwd=two) == {"id": "thread-a", "status": "active", "changed": False}


def test_retitle(two: Path) -> None:
    assert ok("retitle", "thread-a", "New\ntitle", cwd=two).stdout == "thread-a: New title\n"
    assert index_doc(two)["threads"]["thread-a"]["title"] == "New title"


def test_rm_refused_dry_run_force_tombstone(two: Path) -> None:
    ok("spawn", "--intent", "c", "--id", "thread-c", "--ref", "thread-b", cwd=two)
    ok("reference", "--target", "thread-b", "--thread", "thread-a", cwd=two)
    before = tree_digest(two / ".leslie")
    refused = run_leslie("rm", "thread-b", cwd=two)
    assert refused.code == 2
    assert "thread-b is referenced by thread-a, thread-c" in refused.stderr and "--force" in refused.stderr
    dry = ok("rm", "thread-b", "--force", "--dry-run", cwd=two)
    assert dry.stdout.splitlines() == [
        "would delete thread-b", "  would remove reference from thread-a", "  would remove reference from thread-c",
        "  would remove .leslie/threads/thread-b/plan.md", "  would remove .leslie/threads/thread-b/progress.md"]
    dry_json = js("rm", "thread-b", "--force", "--dry-run", cwd=two)
    assert dry_json["dry_run"] is True and dry_json["referenced_by"] == ["thread-a", "thread-c"]
    assert tree_digest(two / ".leslie") == before
    data = js("rm", "thread-b", "--force", cwd=two)
    assert data == {"id": "thread-b", "dry_run": False, "referenced_by": ["thread-a", "thread-c"],
                    "files": [".leslie/threads/thread-b/plan.md", ".leslie/threads/thread-b/progress.md"]}
    assert sorted(p.name for p in (two / ".leslie/threads/thread-b").iterdir()) == ["thread.json"]
    assert thread_doc(two, "thread-b")["status"] == "deleted"
    assert thread_doc(two, "thread-a")["references"] == {} and thread_doc(two, "thread-c")["references"] == {}
    assert "thread-b" not in index_doc(two)["threads"] and "thread-b" not in index_doc(two)["relations"]
    gone = run_leslie("rm", "thread-b", cwd=two)
    assert gone.code == 3 and "thread-b is deleted" in gone.stderr
    # An unreferenced thread goes without --force; the human output lists what was removed.
    plain = ok("rm", "thread-c", cwd=two)
    assert plain.stdout.startswith("deleted thread-c\n") and "removed .leslie/threads/thread-c/plan.md" in plain.stdout


# -- relations, global options ------------------------------------------------------------------------


def test_relations_formats(two: Path) -> None:
    ok("reference", "--target", "thread-b", "--thread", "thread-a", cwd=two)
    as_json = ok("relations", cwd=two).stdout
    assert as_json.encode() == (two / ".leslie/thread_relations.json").read_bytes()
    assert ok("relations", "--format", "json", cwd=two).stdout == as_json
    assert ok("relations", "--json", cwd=two).stdout == as_json
    mermaid = ok("relations", "--format", "mermaid", cwd=two).stdout
    assert mermaid.startswith("graph LR\n") and "  t_thread_a --> t_thread_b\n" in mermaid
    dot = ok("relations", "--format", "dot", cwd=two).stdout
    assert dot.startswith("digraph") and '"thread-a" -> "thread-b";' in dot
    bad = run_leslie("relations", "--format", "svg", cwd=two)
    assert bad.code == 2 and "unknown --format 'svg'" in bad.stderr


def test_global_json_and_version(two: Path) -> None:
    assert json.loads(ok("--json", "list", "--sort", "id", cwd=two).stdout)[0]["id"] == "thread-a"
    assert json.loads(ok("--json", "objective", "list", cwd=two).stdout)[0]["id"] == "obj-default"
    assert json.loads(ok("--json", "show", "thread-a", cwd=two).stdout)["id"] == "thread-a"
    version = ok("--version", cwd=two)
    assert version.stdout.startswith("leslie ") and version.stdout.strip().split()[-1][0].isdigit()


def test_debug_shows_traceback(two: Path) -> None:
    quiet = run_leslie("show", "thread-zzz", cwd=two)
    assert quiet.code == 3 and quiet.stderr == "leslie: error: no such thread: thread-zzz\n"
    loud = run_leslie("show", "thread-zzz", cwd=two, env={"LESLIE_DEBUG": "1"})
    assert loud.code == 3 and "Traceback" in loud.stderr


def test_python_m_leslie(two: Path) -> None:
    out = subprocess.run([sys.executable, "-m", "leslie", "--json", "list", "--sort", "id"], cwd=two,
                         capture_output=True, text=True, check=False)
    assert out.returncode == 0 and json.loads(out.stdout)[0]["id"] == "thread-a"


def test_a_reader_that_goes_away_ends_quietly(two: Path) -> None:
    """`leslie list | head -1`: exit 1 and no traceback or error line, as Click ends it."""
    proc = subprocess.Popen([LESLIE_EXE, "list", "--json"], cwd=two, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # the reader is gone before the first byte
    assert proc.wait(timeout=60) == 1
    assert proc.stderr.read() == b""


def test_ctrl_c_ends_quietly_with_130(two: Path, tmp_path: Path) -> None:
    """A command interrupted (SIGINT while it works) exits 130 with nothing on stderr, as Typer ends it."""
    sitecustomize = tmp_path / "interrupting"
    sitecustomize.mkdir()
    # Every command reads the repository's layout first: interrupted right there, as a Ctrl-C would.
    (sitecustomize / "sitecustomize.py").write_text(
        "import leslie.store.repository as r\n"
        "def _interrupted(*args, **kwargs):\n    raise KeyboardInterrupt\n"
        "r.Repository.discover = classmethod(_interrupted)\n", encoding="utf-8")
    result = run_leslie("list", "--plain", cwd=two, env={"PYTHONPATH": str(sitecustomize)})
    assert (result.code, result.stdout, result.stderr) == (130, "", "")


def test_large_output_arrives_whole(two: Path, tmp_path: Path) -> None:
    """Small output (left in the stream's buffer) and output far larger than the buffer arrive whole through
    a pipe and into a file. Buffered as in a terminal-less run: without PYTHONUNBUFFERED."""
    env = {name: value for name, value in os.environ.items() if name != "PYTHONUNBUFFERED"}
    repo = Repository(two)
    for number in range(400):
        spawn(repo, f"intent {number}", title=f"A long enough title for thread number {number} " * 3,
              thread_id=f"thread-big{number:03d}")
    for argv in (["show", "thread-a"], ["list", "--json"], ["list", "--plain"]):
        piped = subprocess.run([LESLIE_EXE, *argv], cwd=two, capture_output=True, check=True, timeout=60,
                               env=env).stdout
        with open(tmp_path / "out", "wb") as out:
            subprocess.run([LESLIE_EXE, *argv], cwd=two, stdout=out, check=True, timeout=60, env=env)
        assert piped == (tmp_path / "out").read_bytes(), argv
        assert len(piped) > (64 * 1024 if argv[0] == "list" else 100), argv
    assert len(json.loads(subprocess.run([LESLIE_EXE, "list", "--json"], cwd=two, capture_output=True, check=True,
                                         timeout=60, env=env).stdout)) == 402


# -- a random sequence of commands keeps the index exact ----------------------------------------------


def test_random_command_sequence_keeps_index_exact(repo_root: Path) -> None:
    rnd = random.Random(20261122)
    ids = [f"thread-s{i}" for i in range(6)]
    live: set[str] = set()
    for tid in ids[:3]:
        ok("spawn", "--intent", tid, "--id", tid, cwd=repo_root)
        live.add(tid)
    for _ in range(14):
        a, b = rnd.sample(ids, 2)
        choice = rnd.choice(["spawn", "ref", "ref-scope", "unref", "status", "rm"])
        if choice == "spawn" and not (repo_root / f".leslie/threads/{a}").exists():
            refs = ["--ref", b] if b in live else []
            ok("spawn", "--intent", a, "--id", a, *refs, cwd=repo_root)
            live.add(a)
        elif choice.startswith("ref") and a in live and b in live:
            scope = ["--scope", "plan.md"] if choice == "ref-scope" else []
            ok("reference", "--target", b, "--thread", a, *scope, cwd=repo_root)
        elif choice == "unref" and a in live and b in live:
            ok("unreference", "--target", b, "--thread", a, cwd=repo_root)
        elif choice == "status" and a in live:
            ok("set-status", a, rnd.choice(["active", "paused", "done", "archived"]), cwd=repo_root)
        elif choice == "rm" and a in live:
            ok("rm", a, "--force", cwd=repo_root)
            live.discard(a)
    assert set(index_doc(repo_root)["threads"]) == live
    assert run_leslie("doctor", cwd=repo_root).code == 0
