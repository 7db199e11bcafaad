"""IDs people can type (store/names.py): every command naming a thread or objective takes a unique prefix.

Through the real `leslie` executable: the random part (`8lg`) or the full form (`thread-8lg`) of a prefix
names the one thread it starts; an exact ID wins over a longer one; several candidates are exit 2 with one
message listing them and their titles; none is the usual "no such thread" (exit 3). Nothing under `.leslie/`
changes when a prefix is refused, and what is stored is always the full ID.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from conftest import run_leslie, state_dir, tree_digest
from leslie.errors import NotFoundError, UsageError
from leslie.ops.objectives import create_objective
from leslie.ops.threads import reference, remove, spawn
from leslie.store.names import resolve_objective_id, resolve_thread_id
from leslie.store.repository import Repository


@pytest.fixture
def named(repo: Repository) -> Path:
    """Threads whose IDs share prefixes, and two objectives that do too."""
    create_objective(repo, "Ship the parser", objective_id="obj-ship")
    create_objective(repo, "Shore up the docs", objective_id="obj-shore")
    spawn(repo, "Fix the parser", thread_id="thread-8lgk2m", objective="obj-ship")
    spawn(repo, "Migrate the suite", thread_id="thread-8lzq01", objective="obj-ship")
    spawn(repo, "Exact one", thread_id="thread-abc", objective="obj-shore")
    spawn(repo, "Longer one", thread_id="thread-abcdef", objective="obj-shore")
    spawn(repo, "Write the guide", thread_id="thread-w7x9p0", objective="obj-shore")
    return repo.root


def leslie(root: Path, *args: str) -> tuple[int, str, str]:
    result = run_leslie(*args, "--root", str(root), cwd=root)
    return result.code, result.stdout, result.stderr


def stored(root: Path, thread_id: str) -> dict[str, object]:
    data: dict[str, object] = json.loads((root / ".leslie" / "threads" / thread_id / "thread.json").read_text())
    return data


def test_the_resolver_rules(named: Path) -> None:
    assert resolve_thread_id(named, "8lg") == "thread-8lgk2m"
    assert resolve_thread_id(named, "thread-8lz") == "thread-8lzq01"
    assert resolve_thread_id(named, "thread-8lgk2m") == "thread-8lgk2m"
    assert resolve_thread_id(named, "abc") == "thread-abc"  # exact wins over thread-abcdef
    assert resolve_thread_id(named, "thread-abc") == "thread-abc"
    assert resolve_thread_id(named, "abcd") == "thread-abcdef"
    assert resolve_thread_id(named, "thread-gone") == "thread-gone"  # full-ID shaped: the command says why
    assert resolve_objective_id(named, "shi") == "obj-ship"
    assert resolve_objective_id(named, "obj-sho") == "obj-shore"
    with pytest.raises(NotFoundError, match="no such objective: default"):
        resolve_objective_id(named, "default")  # no obj-default here
    with pytest.raises(UsageError, match="ambiguous thread ID '8l'"):
        resolve_thread_id(named, "8l")


@pytest.mark.parametrize("typed", ["8lg", "8lgk", "thread-8lg", "thread-8lgk2m"])
def test_show_takes_a_prefix_of_either_form(named: Path, typed: str) -> None:
    code, out, _err = leslie(named, "show", typed, "--json")
    assert code == 0 and json.loads(out)["id"] == "thread-8lgk2m"


def test_an_exact_id_wins_over_a_longer_one(named: Path) -> None:
    assert json.loads(leslie(named, "show", "abc", "--json")[1])["id"] == "thread-abc"
    assert json.loads(leslie(named, "show", "thread-abc", "--json")[1])["id"] == "thread-abc"
    assert json.loads(leslie(named, "show", "abcd", "--json")[1])["id"] == "thread-abcdef"


@pytest.mark.parametrize("args", [
    ["show", "8l"], ["show", "thread-8l"], ["done", "8l"], ["set-status", "thread-8", "paused"], ["rm", "8l"],
    ["rm", "8l", "--force"], ["retitle", "8l", "New"], ["switch", "8l"], ["context", "--thread", "8l"],
    ["reference", "--thread", "w7", "--target", "8l"], ["reference", "--thread", "8l", "--target", "w7"],
    ["unreference", "--thread", "w7", "--target", "8l"], ["spawn", "--intent", "x", "--ref", "8l"],
    ["spawn", "--intent", "x", "--ref", "thread-8l:plan.md"], ["spawn", "--intent", "x", "--parent", "8l"],
    ["spawn", "--intent", "x", "--objective", "sh"], ["spawn", "--intent", "x", "--objective", "obj-sh"],
    ["objective", "show", "sh"], ["objective", "set-status", "obj-sh", "done"], ["list", "--objective", "sh"],
    ["sessions", "--thread", "8l"], ["stats", "--thread", "8l"],
])
def test_an_ambiguous_prefix_is_a_usage_error_listing_the_candidates(named: Path, args: list[str]) -> None:
    before = tree_digest(named / ".leslie")
    code, out, err = leslie(named, *args)
    assert code == 2 and out == ""
    assert err.count("leslie: error:") == 1 and "ambiguous" in err
    if any(a in ("sh", "obj-sh") for a in args):
        assert re.search(r"\n  obj-ship +Ship the parser\n  obj-shore +Shore up the docs\n$", err)
    else:
        assert re.search(r"\n  thread-8lgk2m +Fix the parser\n  thread-8lzq01 +Migrate the suite\n$", err)
    assert tree_digest(named / ".leslie") == before


@pytest.mark.parametrize("args", [
    ["show", "zz"], ["done", "thread-zz"], ["rm", "zz"], ["switch", "zz"], ["retitle", "zz", "T"],
    ["reference", "--thread", "w7", "--target", "zz"], ["reference", "--thread", "zz", "--target", "w7"],
    ["spawn", "--intent", "x", "--ref", "zz"], ["spawn", "--intent", "x", "--parent", "thread-zz"],
    ["spawn", "--intent", "x", "--objective", "zz"], ["objective", "show", "zz"], ["context", "--thread", "zz"],
])
def test_an_unknown_prefix_is_no_such_thread(named: Path, args: list[str]) -> None:
    before = tree_digest(named / ".leslie")
    code, out, err = leslie(named, *args)
    assert (code, out) == (3, "") and "no such" in err and "zz" in err
    assert tree_digest(named / ".leslie") == before


def test_mutations_store_full_ids(named: Path) -> None:
    code, out, _err = leslie(named, "spawn", "--intent", "child", "--ref", "8lg:plan.md", "--ref", "thread-w7",
                             "--parent", "8lz", "--objective", "shi", "--id", "thread-child")
    assert (code, out) == (0, "thread-child\n")
    child = stored(named, "thread-child")
    assert child["references"] == {"thread-8lgk2m": ["plan.md"], "thread-w7x9p0": []}
    assert (child["spawned_by"], child["objective"]) == ("thread-8lzq01", "obj-ship")
    assert leslie(named, "switch", "w7")[1] == "current thread: thread-w7x9p0\n"
    assert leslie(named, "reference", "--target", "abcd")[1] == "thread-w7x9p0 -> thread-abcdef [whole thread]\n"
    assert leslie(named, "reference", "--thread", "thread-8lg", "--target", "w7")[0] == 0
    assert stored(named, "thread-8lgk2m")["references"] == {"thread-w7x9p0": []}
    assert leslie(named, "unreference", "--thread", "8lg", "--target", "w7")[1] == \
        "thread-8lgk2m no longer references thread-w7x9p0\n"
    assert leslie(named, "done", "8lz")[1] == "thread-8lzq01: done\n"
    assert leslie(named, "retitle", "thread-8lz", "Renamed")[1] == "thread-8lzq01: Renamed\n"
    assert leslie(named, "objective", "set-status", "sho", "done")[1] == "obj-shore: done\n"
    index = (named / ".leslie" / "thread_relations.json").read_text()
    assert '"thread-w7x9p0"' in index and '"w7"' not in index and '"8lg"' not in index
    assert (state_dir(named) / "current_thread").read_text() == "thread-w7x9p0\n"
    listed = json.loads(leslie(named, "list", "--objective", "shi", "--sort", "id", "--json")[1])
    assert listed[0]["id"] == "thread-8lgk2m"
    assert json.loads(leslie(named, "objective", "show", "obj-shi", "--json")[1])["id"] == "obj-ship"
    assert leslie(named, "rm", "abcd", "--force")[1].startswith("deleted thread-abcdef\n")


def test_context_inject_and_check_write_take_a_prefix(named: Path) -> None:
    code, out, _err = leslie(named, "context", "--thread", "8lg")
    assert code == 0 and 'thread="thread-8lgk2m"' in out
    result = run_leslie("inject", "--thread", "8lz", cwd=named)
    assert result.code == 0 and 'thread="thread-8lzq01"' in result.stdout
    result = run_leslie("inject", "--thread", "8l", cwd=named)
    assert result.code == 2 and "ambiguous" in result.stderr and "thread-8lgk2m" in result.stderr
    own = named / ".leslie" / "threads" / "thread-w7x9p0" / "notes.md"
    assert run_leslie("check-write", str(own), "--thread", "w7", cwd=named).code == 0
    assert run_leslie("check-write", str(own), "--thread", "8lg", cwd=named).code == 1


def test_a_live_thread_wins_over_a_deleted_one(named: Path) -> None:
    remove(Repository(named), "thread-8lzq01")
    assert json.loads(leslie(named, "show", "8l", "--json")[1])["id"] == "thread-8lgk2m"
    remove(Repository(named), "thread-8lgk2m")
    code, _out, err = leslie(named, "done", "8l")  # only deleted ones start so: ambiguous between them
    assert code == 2 and "thread-8lgk2m" in err
    code, _out, err = leslie(named, "done", "8lg")  # one deleted thread: said so, as for its full ID
    assert code == 3 and "thread-8lgk2m is deleted" in err


def test_a_hostile_title_is_shown_harmlessly(named: Path, repo: Repository) -> None:
    spawn(repo, "x", thread_id="thread-8lx000", objective="obj-ship")
    path = named / ".leslie" / "threads" / "thread-8lx000" / "thread.json"
    data = json.loads(path.read_text())
    data["title"] = "\x1b[31mred\x1b]0;pwned\x07" + "y" * 200
    path.write_text(json.dumps(data))
    _code, _out, err = leslie(named, "show", "8l")
    assert "\x1b" not in err and "\x07" not in err and "y" * 80 not in err and "thread-8lx000" in err


def test_a_malformed_prefix_is_a_usage_error(named: Path) -> None:
    for typed in ("8LG", "x_y", "8l g", "thread-"):
        code, _out, err = leslie(named, "show", typed)
        assert code == 2 and "invalid thread ID" in err


def test_objective_default_by_its_name(repo: Repository) -> None:
    spawn(repo, "first")  # creates obj-default
    assert resolve_objective_id(repo.root, "default") == "obj-default"
    code, out, _err = leslie(repo.root, "objective", "show", "def", "--json")
    assert code == 0 and json.loads(out)["id"] == "obj-default"


def test_a_reference_by_prefix_makes_the_same_edge(named: Path) -> None:
    reference(Repository(named), "thread-abc", "thread-w7x9p0")
    code, out, _err = leslie(named, "reference", "--thread", "abc", "--target", "w7", "--json")
    assert code == 0 and json.loads(out) == {"changed": False, "thread": "thread-abc", "target": "thread-w7x9p0",
                                             "scope": []}
