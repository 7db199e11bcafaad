"""SPEC §9, case by case, through the real executable.

Every rejected command must exit with its code, print one clear message on stderr naming the offending
argument or file (never a traceback), print nothing on stdout, and leave `.leslie/` byte-for-byte unchanged.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from conftest import LESLIE_EXE, held_lock, state_dir, tree_digest
from leslie.errors import UsageError
from leslie.ops.bootstrap import init_repository
from leslie.ops.objectives import create_objective
from leslie.ops.threads import RefSpec, reference, spawn
from leslie.store.repository import Repository

Arg = str | bytes


@dataclass
class Case:
    """One bad input: the arguments, the expected exit code, and a text the message must contain."""

    id: str
    args: list[Arg]
    code: int
    says: str
    setup: Callable[[Path], None] | None = None
    env: dict[str, str] = field(default_factory=dict)
    one_line: bool = True  # False for Typer's own usage errors, which add a usage hint


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An objective obj-o; thread-a; thread-b referencing thread-a; thread-c with a design/ folder."""
    root = tmp_path_factory.mktemp("template") / "repo"
    (root / ".git").mkdir(parents=True)  # a stand-in: these cases need the folder, not a repository
    init_repository(root)
    repo = Repository(root)
    create_objective(repo, "Objective", objective_id="obj-o")
    spawn(repo, "a", thread_id="thread-a")
    spawn(repo, "b", thread_id="thread-b", refs=[RefSpec("thread-a")])
    spawn(repo, "c", thread_id="thread-c")
    (repo.layout.thread_dir("thread-c") / "design").mkdir()
    return root


@pytest.fixture
def base(template: Path, tmp_path: Path) -> Path:
    """A fresh copy of the template repository for one case."""
    root = tmp_path / "repo"
    shutil.copytree(template, root, symlinks=True)
    return root


def run(root: Path, args: list[Arg], env: dict[str, str] | None = None, cwd: Path | None = None,
        limit_file_size: int | None = None) -> subprocess.CompletedProcess[str]:
    """Run the real executable; `args` may hold bytes (argv that is not valid UTF-8)."""
    full_env = {**os.environ, **(env or {})}

    def preexec() -> None:
        if limit_file_size is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit_file_size, limit_file_size))

    proc = subprocess.run([LESLIE_EXE, *args], cwd=cwd or root, env=full_env, capture_output=True,
                          check=False, timeout=60, preexec_fn=preexec if limit_file_size is not None else None)
    return subprocess.CompletedProcess(proc.args, proc.returncode, proc.stdout.decode("utf-8", "replace"),
                                       proc.stderr.decode("utf-8", "replace"))


def assert_rejected(root: Path, case: Case, cwd: Path | None = None) -> None:
    if case.setup:
        case.setup(root)
    before = tree_digest(root / ".leslie")
    result = run(root, case.args, case.env, cwd)
    assert result.returncode == case.code, (result.returncode, result.stderr)
    assert "Traceback" not in result.stderr
    assert case.says in result.stderr, result.stderr
    if case.code == 4:
        assert "leslie doctor --fix" in result.stderr
    assert result.stdout == ""
    if case.one_line:
        assert result.stderr.startswith("leslie: error: ") and result.stderr.count("\n") == 1, result.stderr
    assert tree_digest(root / ".leslie") == before


def params(cases: list[Case]) -> list[object]:
    return [pytest.param(case, id=case.id) for case in cases]


# -- scopes (exit 2) ----------------------------------------------------------------------------------

BAD_SCOPES = [
    ("empty", "", "invalid scope ''"),
    ("absolute", "/etc/passwd", "invalid scope '/etc/passwd': must be relative"),
    ("dotdot", "../thread-a/plan.md", "must not contain '..'"),
    ("dotdot-inner", "design/../../x", "must not contain '..'"),
    ("backslash", "design\\api.md", "use forward slashes"),
    ("control", "a\x01b", "control character"),
    ("newline", "plan\n.md", "control character"),
    ("tab", "plan\t.md", "control character"),
    ("delete", "plan\x7f", "control character"),
    ("into-leslie", ".leslie/thread_relations.json", "must not point into .git or .leslie"),
    ("into-git", ".git/config", "must not point into .git or .leslie"),
    ("git-inside", "design/.git/hooks", "must not point into .git or .leslie"),
    ("thread-folder-itself", ".", "names the thread folder itself"),
]

SCOPE_CASES = [
    *[Case(f"reference-{name}", ["reference", "--thread", "thread-a", "--target", "thread-c", "--scope", scope],
           2, says) for name, scope, says in BAD_SCOPES],
    # The same validation serves --ref and unreference --scope: a sample of it through each.
    *[Case(f"spawn-ref-{name}", ["spawn", "--intent", "x", "--ref", f"thread-c:{scope}"], 2, says)
      for name, scope, says in BAD_SCOPES if name in ("empty", "absolute", "dotdot", "backslash", "into-git")],
    *[Case(f"unreference-{name}",
           ["unreference", "--thread", "thread-b", "--target", "thread-a", "--scope", scope], 2, says)
      for name, scope, says in BAD_SCOPES if name in ("absolute", "dotdot", "control")],
]


@pytest.mark.parametrize("case", params(SCOPE_CASES))
def test_bad_scope(base: Path, case: Case) -> None:
    assert_rejected(base, case)


@pytest.mark.parametrize(
    ("link", "command"),
    [("/etc", "reference"), ("../../../..", "reference"), ("../../../.git", "reference"),
     ("../../thread_relations.json", "reference"), ("../thread-a", "reference"), ("/etc", "spawn")],
    ids=["absolute", "above-repo", "into-git", "into-leslie", "into-another-thread", "spawn-absolute"],
)
def test_scope_escaping_through_a_symlink(base: Path, link: str, command: str) -> None:
    os.symlink(link, base / ".leslie/threads/thread-c/escape")
    args: list[Arg] = (["reference", "--thread", "thread-a", "--target", "thread-c", "--scope", "escape/x"]
                       if command == "reference" else ["spawn", "--intent", "x", "--ref", "thread-c:escape"])
    assert_rejected(base, Case("symlink", args, 2, "leads outside the thread through a symlink"))


def test_nul_in_a_scope_is_rejected_by_the_api(base: Path) -> None:
    # argv cannot carry NUL (execve takes C strings), so this case can only reach leslie through the API.
    before = tree_digest(base / ".leslie")
    with pytest.raises(UsageError, match="control character"):
        reference(Repository(base), "thread-a", "thread-c", ["plan\x00.md"])
    with pytest.raises(UsageError, match="control character"):
        RefSpec.parse("thread-c:plan\x00.md")
    assert tree_digest(base / ".leslie") == before


# -- IDs (exit 2) -------------------------------------------------------------------------------------

BAD_THREAD_ID = "Thread-A"
LONG_THREAD_ID = "thread-" + "a" * 49
BAD_OBJ_ID = "obj_1"

ID_CASES = [
    Case("spawn-id", ["spawn", "--intent", "x", "--id", BAD_THREAD_ID], 2, f"invalid thread ID '{BAD_THREAD_ID}'"),
    Case("spawn-id-too-long", ["spawn", "--intent", "x", "--id", LONG_THREAD_ID], 2, "invalid thread ID"),
    Case("spawn-id-newline", ["spawn", "--intent", "x", "--id", "thread-abc\n"], 2, "invalid thread ID"),
    Case("spawn-id-path", ["spawn", "--intent", "x", "--id", "thread-a/../../x"], 2, "invalid thread ID"),
    Case("spawn-id-objective-pattern", ["spawn", "--intent", "x", "--id", "obj-abc"], 2, "invalid thread ID"),
    Case("spawn-ref", ["spawn", "--intent", "x", "--ref", BAD_THREAD_ID], 2, "invalid referenced thread ID"),
    Case("spawn-ref-scoped", ["spawn", "--intent", "x", "--ref", "thread-:plan.md"], 2, "'thread-'"),
    Case("spawn-parent", ["spawn", "--intent", "x", "--parent", "thread_"], 2, "invalid parent thread ID 'thread_'"),
    Case("spawn-objective", ["spawn", "--intent", "x", "--objective", BAD_OBJ_ID], 2,
         f"no objective has the ID, ID prefix or title '{BAD_OBJ_ID}'"),  # a title would do too
    Case("spawn-objective-bad-id", ["spawn", "--intent", "x", "--objective", "obj-A"], 2,
         "invalid objective ID 'obj-A'"),
    Case("spawn-objective-thread-id", ["spawn", "--intent", "x", "--objective", "thread-a"], 2,
         "invalid objective ID 'thread-a'"),
    Case("reference-target", ["reference", "--thread", "thread-a", "--target", BAD_THREAD_ID], 2,
         f"invalid target thread ID '{BAD_THREAD_ID}'"),
    Case("reference-thread", ["reference", "--thread", "thread_a", "--target", "thread-c"], 2,
         "invalid thread ID 'thread_a'"),
    Case("reference-env-thread", ["reference", "--target", "thread-c"], 2, "invalid thread ID 'nope'",
         env={"LESLIE_THREAD": "nope"}),
    Case("reference-empty-thread", ["reference", "--thread", "", "--target", "thread-c"], 2,
         "invalid thread ID ''", env={"LESLIE_THREAD": "thread-a"}),
    Case("unreference-target", ["unreference", "--thread", "thread-b", "--target", "A"], 2,
         "invalid target thread ID 'A'"),
    Case("show", ["show", LONG_THREAD_ID], 2, "invalid thread ID"),
    Case("rm", ["rm", "../thread-a"], 2, "invalid thread ID '../thread-a'"),
    Case("rm-force", ["rm", "--force", BAD_THREAD_ID], 2, "invalid thread ID"),
    Case("set-status", ["set-status", BAD_THREAD_ID, "done"], 2, "invalid thread ID"),
    Case("done", ["done", BAD_THREAD_ID], 2, "invalid thread ID"),
    Case("switch", ["switch", BAD_THREAD_ID], 2, "invalid thread ID"),
    Case("retitle", ["retitle", BAD_THREAD_ID, "x"], 2, "invalid thread ID"),
    Case("objective-create-id", ["objective", "create", "T", "--id", BAD_OBJ_ID], 2, "invalid objective ID"),
    Case("objective-create-id-long", ["objective", "create", "T", "--id", "obj-" + "a" * 49], 2,
         "invalid objective ID"),
    Case("objective-retitle-empty", ["objective", "retitle", "o", " "], 2, "title is empty"),
    Case("objective-show", ["objective", "show", "obj-"], 2, "invalid objective ID 'obj-'"),
    Case("objective-set-status", ["objective", "set-status", "OBJ-O", "done"], 2,
         "no objective has the ID, ID prefix or title 'OBJ-O'"),
    Case("objective-set-status-bad-id", ["objective", "set-status", "obj-O", "done"], 2, "invalid objective ID"),
    Case("list-objective", ["list", "--objective", BAD_OBJ_ID], 2, "no objective has the ID, ID prefix or title"),
    Case("spawn-existing-id", ["spawn", "--intent", "x", "--id", "thread-a"], 2, "thread thread-a already exists"),
    Case("objective-existing-id", ["objective", "create", "T", "--id", "obj-o"], 2,
         "objective obj-o already exists"),
]


@pytest.mark.parametrize("case", params(ID_CASES))
def test_bad_id(base: Path, case: Case) -> None:
    assert_rejected(base, case)


# -- text (exit 2) ------------------------------------------------------------------------------------

TEXT_CASES = [
    Case("intent-control", ["spawn", "--intent", "a\x01b"], 2, "intent contains U+0001 at position 1"),
    Case("intent-escape", ["spawn", "--intent", "colour \x1b[31m"], 2, "intent contains U+001B"),
    Case("intent-fffe", ["spawn", "--intent", "a\ufffe"], 2, "intent contains U+FFFE"),
    Case("intent-ffff", ["spawn", "--intent", "a\uffff"], 2, "intent contains U+FFFF"),
    Case("intent-encoded-surrogate", [b"spawn", b"--intent", b"a\xed\xa0\x80b"], 2, "intent contains U+DC"),
    Case("intent-invalid-utf8", [b"spawn", b"--intent", b"caf\xe9"], 2, "intent contains U+DCE9"),
    Case("intent-too-long", ["spawn", "--intent", "x" * (64 * 1024 + 1)], 2,
         "intent is 65537 bytes long; the limit is 64 KiB"),
    Case("intent-too-long-utf8", ["spawn", "--intent", "é" * (32 * 1024 + 1)], 2, "the limit is 64 KiB"),
    Case("intent-empty", ["spawn", "--intent", "  "], 2, "intent is empty"),
    Case("title-control", ["spawn", "--intent", "x", "--title", "a\x0cb"], 2, "title contains U+000C"),
    Case("title-surrogate", [b"spawn", b"--intent", b"x", b"--title", b"\xff"], 2, "title contains U+DCFF"),
    Case("title-too-long", ["spawn", "--intent", "x", "--title", "t" * 513], 2,
         "title is 513 characters long; the limit is 512"),
    Case("title-empty", ["spawn", "--intent", "x", "--title", "\n"], 2, "title is empty"),
    Case("default-title-from-bad-intent", ["spawn", "--intent", "\x02"], 2, "intent contains U+0002"),
    Case("objective-title-control", ["objective", "create", "a\x1fb"], 2,
         "title contains U+001F"),
    Case("objective-title-too-long", ["objective", "create", "o" * 513], 2, "the limit is 512"),
    Case("objective-title-surrogate", [b"objective", b"create", b"\xed\xbf\xbf"], 2, "title contains U+DC"),
    Case("objective-description-ffff", ["objective", "create", "T", "--description", "\uffff"], 2,
         "description contains U+FFFF"),
    Case("objective-description-too-long", ["objective", "create", "T", "--description", "d" * 65537], 2,
         "description is 65537 bytes long"),
    Case("retitle-control", ["retitle", "thread-a", "x\x08"], 2, "title contains U+0008"),
    Case("retitle-too-long", ["retitle", "thread-a", "r" * 600], 2, "the limit is 512"),
    Case("edit-title-empty", ["edit", "thread-a", "--title", " "], 2, "title is empty"),
    Case("edit-intent-control", ["edit", "thread-a", "--intent", "a\x01"], 2, "intent contains U+0001"),
    Case("scope-surrogate", [b"reference", b"--thread", b"thread-a", b"--target", b"thread-c", b"--scope",
                             b"\xffplan.md"], 2, "scope contains U+DCFF"),
]


@pytest.mark.parametrize("case", params(TEXT_CASES))
def test_bad_text(base: Path, case: Case) -> None:
    assert_rejected(base, case)


def test_newlines_folded_and_crlf_normalised(base: Path) -> None:
    result = run(base, ["spawn", "--intent", "line 1\r\nline 2\rline 3", "--title", "Two\nlines\r\nhere",
                        "--id", "thread-new"])
    assert result.returncode == 0, result.stderr
    doc = json.loads((base / ".leslie/threads/thread-new/thread.json").read_text(encoding="utf-8"))
    assert doc["title"] == "Two lines here" and doc["intent"] == "line 1\nline 2\nline 3"
    result = run(base, ["objective", "create", "Obj\r\ntitle", "--description", "a\r\nb", "--id", "obj-new"])
    assert result.returncode == 0, result.stderr
    obj = json.loads((base / ".leslie/objectives/obj-new/objective.json").read_text(encoding="utf-8"))
    assert obj["title"] == "Obj title" and obj["description"] == "a\nb"
    assert run(base, ["retitle", "thread-new", "re\ntitled"]).returncode == 0
    index = json.loads((base / ".leslie/thread_relations.json").read_text(encoding="utf-8"))
    assert index["threads"]["thread-new"]["title"] == "re titled"


def test_limits_are_inclusive(base: Path) -> None:
    result = run(base, ["spawn", "--intent", "x" * 65536, "--title", "t" * 512, "--id", "thread-max"])
    assert result.returncode == 0, result.stderr


# -- self-reference, status, and other usage errors (exit 2) ------------------------------------------

USAGE_CASES = [
    Case("self-reference", ["reference", "--thread", "thread-a", "--target", "thread-a"], 2,
         "a thread cannot reference itself (thread-a)"),
    Case("self-reference-spawn", ["spawn", "--intent", "x", "--id", "thread-n", "--ref", "thread-n"], 2,
         "cannot reference itself (thread-n)"),
    Case("status-unknown", ["set-status", "thread-a", "finished"], 2, "unknown status 'finished'"),
    Case("status-deleted", ["set-status", "thread-a", "deleted"], 2, "use `leslie rm` to delete"),
    Case("status-case", ["set-status", "thread-a", "DONE"], 2, "unknown status 'DONE'"),
    Case("objective-status-unknown", ["objective", "set-status", "obj-o", "paused"], 2,
         "unknown status 'paused'"),
    Case("list-status-unknown", ["list", "--status", "open"], 2, "unknown status 'open'"),
    Case("rm-referenced", ["rm", "thread-a"], 2, "thread-a is referenced by thread-b"),
    Case("rm-referenced-dry-run", ["rm", "thread-a", "--dry-run"], 2, "referenced by thread-b"),
    Case("narrow-whole-reference", ["unreference", "--thread", "thread-b", "--target", "thread-a", "--scope",
                                    "plan.md"], 2, "references all of thread-a"),
    Case("no-current-thread", ["reference", "--target", "thread-a"], 2, "no current thread"),
    Case("relations-format", ["relations", "--format", "png"], 2, "unknown --format 'png'"),
    Case("find-nothing", ["find", ""], 2, "find needs some text"),
    Case("gc-negative-days", ["gc", "--older-than", "-1"], 2, "--older-than must be 0 or more days"),
    Case("editor-fails", ["edit", "thread-a"], 2, "nothing changed", env={"EDITOR": "false", "VISUAL": ""}),
    Case("missing-intent", ["spawn"], 2, "Missing option '--intent'", one_line=False),
    Case("unknown-option", ["spawn", "--intent", "x", "--colour", "red"], 2, "No such option: --colour",
         one_line=False),
    Case("unknown-command", ["spwan"], 2, "No such command 'spwan'", one_line=False),
    Case("missing-argument", ["set-status", "thread-a"], 2, "Missing argument 'STATUS'", one_line=False),
]


@pytest.mark.parametrize("case", params(USAGE_CASES))
def test_usage_error(base: Path, case: Case) -> None:
    assert_rejected(base, case)


def test_several_active_objectives(base: Path) -> None:
    create_objective(Repository(base), "Second", objective_id="obj-p")
    assert_rejected(base, Case("ambiguous", ["spawn", "--intent", "x"], 2,
                               "several active objectives (obj-o “Objective”, obj-p “Second”): choose one with "
                               "--objective ID"))


# -- not found (exit 3) -------------------------------------------------------------------------------

NOT_FOUND_CASES = [
    Case("show", ["show", "thread-zzz"], 3, "no such thread: thread-zzz"),
    Case("rm", ["rm", "thread-zzz", "--force"], 3, "no such thread: thread-zzz"),
    Case("set-status", ["set-status", "thread-zzz", "done"], 3, "no such thread: thread-zzz"),
    Case("archive", ["archive", "thread-zzz"], 3, "no such thread: thread-zzz"),
    Case("retitle", ["retitle", "thread-zzz", "x"], 3, "no such thread: thread-zzz"),
    Case("switch", ["switch", "thread-zzz"], 3, "no such thread: thread-zzz"),
    Case("reference-target", ["reference", "--thread", "thread-a", "--target", "thread-zzz"], 3,
         "no such thread: thread-zzz"),
    Case("reference-source", ["reference", "--thread", "thread-zzz", "--target", "thread-a"], 3,
         "no such thread: thread-zzz"),
    Case("reference-switched-source", ["reference", "--target", "thread-a"], 3, "no such thread: thread-gone",
         env={"LESLIE_THREAD": "thread-gone"}),
    Case("unreference-target", ["unreference", "--thread", "thread-a", "--target", "thread-zzz"], 3,
         "no such thread: thread-zzz"),
    Case("spawn-ref", ["spawn", "--intent", "x", "--ref", "thread-zzz:plan.md"], 3, "no such thread: thread-zzz"),
    Case("spawn-parent", ["spawn", "--intent", "x", "--parent", "thread-zzz"], 3, "no such thread: thread-zzz"),
    Case("spawn-objective", ["spawn", "--intent", "x", "--objective", "obj-zzz"], 3,
         "no such objective: obj-zzz"),
    Case("objective-show", ["objective", "show", "obj-zzz"], 3, "no such objective: obj-zzz"),
    Case("objective-set-status", ["objective", "set-status", "obj-zzz", "done"], 3, "no such objective: obj-zzz"),
    Case("objective-retitle", ["objective", "retitle", "obj-zzz", "T"], 3, "no such objective: obj-zzz"),
    Case("edit", ["edit", "thread-zzz", "--intent", "x"], 3, "no such thread: thread-zzz"),
    Case("edit-objective", ["edit", "thread-a", "--objective", "obj-zzz"], 3, "no such objective: obj-zzz"),
    Case("context", ["context", "--thread", "thread-zzz"], 3, "no such thread: thread-zzz"),
]


@pytest.mark.parametrize("case", params(NOT_FOUND_CASES))
def test_not_found(base: Path, case: Case) -> None:
    assert_rejected(base, case)


def _tombstone_a(root: Path) -> None:
    from leslie.ops.threads import remove

    remove(Repository(root), "thread-a", force=True)


TOMBSTONE_CASES = [
    Case("reference-deleted", ["reference", "--thread", "thread-c", "--target", "thread-a"], 3,
         "thread thread-a is deleted", setup=_tombstone_a),
    Case("spawn-ref-deleted", ["spawn", "--intent", "x", "--ref", "thread-a"], 3, "thread thread-a is deleted",
         setup=_tombstone_a),
    Case("rm-deleted", ["rm", "thread-a"], 3, "thread thread-a is deleted", setup=_tombstone_a),
    Case("resume-deleted", ["resume", "thread-a"], 3, "thread thread-a is deleted", setup=_tombstone_a),
    Case("switch-deleted", ["switch", "thread-a"], 3, "thread thread-a is deleted", setup=_tombstone_a),
    Case("respawn-deleted-id", ["spawn", "--intent", "x", "--id", "thread-a"], 2, "already exists",
         setup=_tombstone_a),
]


@pytest.mark.parametrize("case", params(TOMBSTONE_CASES))
def test_deleted_thread(base: Path, case: Case) -> None:
    assert_rejected(base, case)


@pytest.mark.parametrize("args", [["list"], ["spawn", "--intent", "x"], ["objective", "list"]])
def test_no_root(tmp_path: Path, args: list[Arg]) -> None:
    nowhere = tmp_path / "nowhere"
    nowhere.mkdir()
    result = run(nowhere, args)
    assert result.returncode == 3 and "no .leslie/ found" in result.stderr and "leslie init" in result.stderr
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert list(nowhere.iterdir()) == []


def test_root_option_and_env_without_leslie(base: Path, tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    # Run from inside a valid root: the explicit choice must win and fail, not fall back to the found root.
    assert_rejected(base, Case("root-option", ["list", "--root", str(empty)], 3, f"no .leslie/ in {empty}"))
    assert_rejected(base, Case("root-before", ["--root", str(empty), "spawn", "--intent", "x"], 3,
                               "no .leslie/ in"))
    assert_rejected(base, Case("root-env", ["spawn", "--intent", "x"], 3, "no .leslie/ in",
                               env={"LESLIE_ROOT": str(empty)}))
    assert_rejected(base, Case("root-missing", ["list", "--root", str(tmp_path / "missing")], 3, "no .leslie/"))


# -- corrupt state files (exit 4) ---------------------------------------------------------------------

CORRUPTIONS: dict[str, Callable[[bytes], bytes]] = {
    "truncated": lambda data: data[: len(data) // 2],
    "duplicate-keys": lambda data: data.replace(b'"status"', b'"status": "active", "status"', 1),
    "nan": lambda data: data.replace(b'"version": ', b'"version": NaN, "v": ', 1),
    "bom": lambda data: b"\xef\xbb\xbf" + data,
    "conflict-markers": lambda data: b"<<<<<<< HEAD\n" + data + b"=======\n" + data + b">>>>>>> branch\n",
    "empty": lambda data: b"",
    "not-json": lambda data: b"status: active\n",
    "invalid-utf8": lambda data: data.replace(b'"status"', b'"st\xffatus"', 1),
}

WRONG_TYPES = {
    "index": {"version": "1.0", "threads": {"thread-a": {"status": 1, "title": "a"}}, "relations": {}},
    "thread": {"id": "thread-a", "status": "active", "title": "a", "references": ["thread-b"]},
    "objective": {"id": "obj-o", "status": "active", "title": 7},
}

STATE_FILES = {
    "index": (".leslie/thread_relations.json", [["spawn", "--intent", "x"], ["list"],
                                                ["reference", "--thread", "thread-c", "--target", "thread-a"],
                                                ["rm", "thread-c"], ["relations"]]),
    "thread": (".leslie/threads/thread-a/thread.json", [["show", "thread-a"], ["done", "thread-a"],
                                                        ["reference", "--thread", "thread-c", "--target",
                                                         "thread-a"], ["rm", "thread-a", "--force"]]),
    "objective": (".leslie/objectives/obj-o/objective.json", [["objective", "show", "obj-o"],
                                                              ["objective", "set-status", "obj-o", "done"],
                                                              ["objective", "list"],
                                                              ["spawn", "--intent", "x", "--objective", "obj-o"]]),
}


def _corrupt(rel: str, how: str) -> Callable[[Path], None]:
    def setup(root: Path) -> None:
        path = root / rel
        if how == "wrong-types":
            kind = next(k for k, (r, _) in STATE_FILES.items() if r == rel)
            path.write_text(json.dumps(WRONG_TYPES[kind]), encoding="utf-8")
        else:
            path.write_bytes(CORRUPTIONS[how](path.read_bytes()))

    return setup


CORRUPT_CASES = [
    Case(f"{kind}-{how}-{'-'.join(str(a) for a in args[:2])}", list(args), 4, rel.split("/")[-1],
         setup=_corrupt(rel, how))
    for kind, (rel, commands) in STATE_FILES.items()
    for how in [*CORRUPTIONS, "wrong-types"]
    # Every defect through one command; conflict markers (the likeliest, after a merge) through every command.
    for args in (commands if how == "conflict-markers" else commands[:1])
]


@pytest.mark.parametrize("case", params(CORRUPT_CASES))
def test_corrupt_state_file(base: Path, case: Case) -> None:
    assert_rejected(base, case)


@pytest.mark.parametrize(
    ("rel", "args", "escape"),
    [(".leslie/threads/thread-a/thread.json", ["show", "thread-a"], "\\ud800"),
     (".leslie/threads/thread-a/thread.json", ["reference", "--thread", "thread-c", "--target", "thread-a"],
      "\\u0007"),
     (".leslie/objectives/obj-o/objective.json", ["objective", "list"], "\\udc00")],
    ids=["thread-surrogate", "thread-control", "objective-surrogate"],
)
def test_hand_edited_text_xml_cannot_carry(base: Path, rel: str, args: list[Arg], escape: str) -> None:
    """A JSON escape can put into a state file what the commands refuse at input: that file is corrupt.

    A lone surrogate is refused by the strict reader itself (no UTF-8 file can hold one); a control
    character by the field check."""
    def edit(root: Path) -> None:
        path = root / rel
        data = path.read_text(encoding="utf-8")
        path.write_text(data.replace('"title": "', '"title": "' + escape, 1), encoding="utf-8")

    name = rel.rsplit("/", 1)[-1]
    says = f"{name}: holds a lone surrogate escape" if "\\ud" in escape else f"{name}: field 'title' holds U+"
    assert_rejected(base, Case("xml-unsafe", args, 4, says, setup=edit))


# -- lock timeout (exit 5) ----------------------------------------------------------------------------


def test_lock_timeout(base: Path) -> None:
    with held_lock(base):
        assert_rejected(base, Case("lock", ["spawn", "--intent", "x"], 5, "could not lock .git/leslie/index.lock",
                                   env={"LESLIE_LOCK_TIMEOUT": "0.3"}))


# -- I/O errors (exit 6) ------------------------------------------------------------------------------
# We run as root, so chmod cannot make a folder unwritable. Two failures that hold even for root:
# RLIMIT_FSIZE (write() fails with EFBIG, like a full disk) and a regular file where a folder must be.


@pytest.mark.parametrize(
    "args",
    [["spawn", "--intent", "x", "--objective", "obj-o"], ["reference", "--thread", "thread-c", "--target", "thread-a"],
     ["rm", "thread-a", "--force"], ["done", "thread-c"], ["unreference", "--thread", "thread-b", "--target",
                                                            "thread-a"]],
    ids=["spawn", "reference", "rm", "done", "unreference"],
)
def test_io_error_file_too_large(base: Path, args: list[Arg]) -> None:
    for tid in ("thread-d", "thread-e"):
        spawn(Repository(base), tid, thread_id=tid)
    limit = 600  # every thread.json and asset fits; the index, even after rm, does not
    assert (base / ".leslie/thread_relations.json").stat().st_size > limit + 250
    before = tree_digest(base / ".leslie")
    result = run(base, args, limit_file_size=limit)
    assert result.returncode == 6, result.stderr
    assert result.stderr.startswith("leslie: error: cannot write ") and "thread_relations.json" in result.stderr
    assert "File too large" in result.stderr and result.stderr.count("\n") == 1
    assert result.stdout == ""
    assert tree_digest(base / ".leslie") == before


def test_io_error_state_folder_is_a_file(base: Path) -> None:
    def replace_state(root: Path) -> None:
        state = state_dir(root)
        for child in state.iterdir():
            child.unlink()
        state.rmdir()
        state.write_text("not a folder")

    assert_rejected(base, Case("state-is-file", ["spawn", "--intent", "x"], 6, ".git/leslie/index.lock",
                               setup=replace_state))


def test_io_error_objectives_folder_is_a_file(base: Path) -> None:
    def replace_objectives(root: Path) -> None:
        folder = root / ".leslie/objectives"
        (folder / "obj-o/objective.json").unlink()
        (folder / "obj-o").rmdir()
        folder.rmdir()
        folder.write_text("a file where a folder must be")

    assert_rejected(base, Case("objectives-is-file", ["objective", "create", "T", "--id", "obj-x"], 6,
                               "cannot write", setup=replace_objectives))
