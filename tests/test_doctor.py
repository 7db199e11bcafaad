"""doctor.py and `leslie doctor [--fix]`: every SPEC §2 invariant, file integrity, repairs with backups."""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path

import pytest

from conftest import run_leslie, tree_digest
from leslie.ops.doctor import DoctorReport, run_doctor
from leslie.ops.threads import reference, remove, spawn
from leslie.store.jsonio import dumps_canonical
from leslie.store.relations import build_index, invariant_problems
from leslie.store.repository import Repository


@pytest.fixture
def populated(repo: Repository) -> Repository:
    """Three threads: b references a, c references a (plan.md) and b."""
    for tid in ("thread-a", "thread-b", "thread-c"):
        spawn(repo, f"intent {tid}", thread_id=tid)
    reference(repo, "thread-b", "thread-a")
    reference(repo, "thread-c", "thread-a", ["plan.md"])
    reference(repo, "thread-c", "thread-b")
    return repo


def rebuilt_bytes(repo: Repository) -> bytes:
    return dumps_canonical(repo.rebuild_index().to_json())


def edit_json(path: Path, change: object) -> None:
    data = json.loads(path.read_text(encoding="utf-8"))
    change(data)  # type: ignore[operator]
    path.write_text(json.dumps(data), encoding="utf-8")


def backups(repo: Repository) -> list[Path]:
    folder = repo.layout.state_dir / "backups"
    return sorted(folder.iterdir()) if folder.is_dir() else []


def test_clean_repository(populated: Repository) -> None:
    report = run_doctor(populated)
    assert report.ok and report.problems == [] and report.fixed == []
    result = run_leslie("doctor", cwd=populated.root)
    assert result.code == 0 and result.stdout == "ok: index consistent with every thread.json\n"
    as_json = run_leslie("doctor", "--json", cwd=populated.root)
    assert as_json.code == 0 and json.loads(as_json.stdout) == {"ok": True, "problems": [], "fixed": [], "notes": []}


def test_check_changes_nothing(populated: Repository) -> None:
    populated.layout.index_path.unlink()
    (populated.layout.thread_dir("thread-a") / ".x.leslie-tmp").write_text("torn")
    before = tree_digest(populated.root / ".leslie")
    assert run_leslie("doctor", cwd=populated.root).code == 1
    assert tree_digest(populated.root / ".leslie") == before


def test_deleted_index_is_rebuilt(populated: Repository) -> None:
    expected = populated.layout.index_path.read_bytes()
    populated.layout.index_path.unlink()
    result = run_leslie("doctor", cwd=populated.root)
    assert result.code == 1 and "problem: .leslie/thread_relations.json is missing" in result.stdout
    fixed = run_leslie("doctor", "--fix", cwd=populated.root)
    assert fixed.code == 0, fixed.stdout
    assert "fixed: rebuilt .leslie/thread_relations.json" in fixed.stdout
    assert populated.layout.index_path.read_bytes() == expected
    assert backups(populated) == []  # nothing to back up
    assert run_leslie("doctor", cwd=populated.root).code == 0


@pytest.mark.parametrize(
    ("change", "expected_problem"),
    [
        (lambda d: d["relations"]["thread-a"]["referenced_by"].remove("thread-b"), "mirror broken"),
        (lambda d: d["relations"]["thread-b"]["references_to"].append("thread-b"), "references itself"),
        (lambda d: d["relations"]["thread-b"]["references_to"].append("thread-zzz"), "missing thread thread-zzz"),
        (lambda d: d["threads"].pop("thread-c") and d["relations"].pop("thread-c"), "thread-c.references_to lacks"),
        (lambda d: d["threads"]["thread-a"].update(title="edited"), "differs from a rebuild"),
        (lambda d: d["threads"].update({"thread-x": {"status": "active", "title": "x"}}), "no relations entry"),
    ],
    ids=["mirror", "self", "missing", "lost-thread", "stale-title", "no-relations"],
)
def test_edited_index_is_reported_and_rebuilt_with_backup(populated: Repository, change: object,
                                                          expected_problem: str) -> None:
    index = populated.layout.index_path
    edit_json(index, change)
    old = index.read_bytes()
    report = run_doctor(populated)
    assert not report.ok and any(expected_problem in p for p in report.problems), report.problems
    fixed = run_doctor(populated, fix=True)
    assert fixed.ok, fixed.problems
    assert index.read_bytes() == rebuilt_bytes(populated)
    [backup] = backups(populated)
    assert backup.read_bytes() == old
    assert any(populated.layout.relative(backup) in line for line in fixed.fixed)
    assert invariant_problems(populated.read_index()) == []


@pytest.mark.parametrize(
    "content",
    [b"<<<<<<< HEAD\n{}\n=======\n{}\n>>>>>>> b\n", b'{"version": "1.0"', b"\xef\xbb\xbf{}", b"[]", b""],
    ids=["conflict", "truncated", "bom", "wrong-shape", "empty"],
)
def test_corrupt_index_is_rebuilt(populated: Repository, content: bytes) -> None:
    populated.layout.index_path.write_bytes(content)
    assert run_leslie("spawn", "--intent", "x", cwd=populated.root).code == 4
    result = run_leslie("doctor", "--fix", cwd=populated.root)
    assert result.code == 0, result.stdout + result.stderr
    assert populated.layout.index_path.read_bytes() == rebuilt_bytes(populated)
    assert [b.read_bytes() for b in backups(populated)] == ([content] if content else [])
    assert run_leslie("spawn", "--intent", "x", cwd=populated.root).code == 0


def test_index_replaced_by_empty_folder_is_fixed_and_reported_once(populated: Repository) -> None:
    # Regression: the unreadable index was reported twice, and --fix exited 1 after repairing it.
    index = populated.layout.index_path
    expected = index.read_bytes()
    index.unlink()
    index.mkdir()
    report = run_doctor(populated)
    assert len(report.problems) == 1 and "is a folder where a file was expected" in report.problems[0]
    fixed = run_leslie("doctor", "--fix", cwd=populated.root)
    assert fixed.code == 0, fixed.stdout
    assert index.read_bytes() == expected


def test_stale_temp_files_are_removed(populated: Repository) -> None:
    temps = [populated.layout.leslie_dir / ".thread_relations.json.ab12cd34.leslie-tmp",
             populated.layout.thread_dir("thread-a") / ".thread.json.00000000.leslie-tmp"]
    for temp in temps:
        temp.write_text("half")
    report = run_doctor(populated)
    assert sorted(p for p in report.problems if "stale temporary file" in p) == sorted(
        f"stale temporary file {populated.layout.relative(t)}" for t in temps)
    assert run_doctor(populated, fix=True).ok
    assert not any(t.exists() for t in temps)


def test_young_runtime_temp_files_are_left_to_their_writers(populated: Repository) -> None:
    # Regression: hooks write agent-session files under state/ without the index lock; doctor --fix (run by
    # the post-merge hook) deleted such a temp file mid-write, or crashed (exit 6) when it vanished first.
    sessions = populated.layout.state_dir / "sessions"
    sessions.mkdir(parents=True)
    young = sessions / ".abc.json.1234abcd.leslie-tmp"
    old = sessions / ".def.json.5678abcd.leslie-tmp"
    young.write_text("being written")
    old.write_text("left by a crash")
    two_hours_ago = time.time() - 7200
    os.utime(old, (two_hours_ago, two_hours_ago))
    report = run_doctor(populated)
    assert report.problems == [f"stale temporary file {populated.layout.relative(old)}"]
    assert run_doctor(populated, fix=True).ok
    assert young.exists() and not old.exists()


def test_a_young_temp_file_of_the_index_check_record_is_stale(populated: Repository) -> None:
    """`state/index.checked` is written only under the index lock (by every mutation), so a temp file of it is
    a killed command's, however young, while doctor --fix holds the lock (test_crash's SIGKILL loop left one)."""
    young = populated.layout.state_dir / ".index.checked.9f7ef121.leslie-tmp"
    young.write_text("half")
    assert run_doctor(populated).problems == [f"stale temporary file {populated.layout.relative(young)}"]
    assert run_doctor(populated, fix=True).ok
    assert not young.exists()


@pytest.mark.parametrize(
    ("target", "why"),
    [("thread-zzz", "missing thread thread-zzz"), ("thread-b", "itself"), ("thread-d", "deleted thread thread-d")],
)
def test_dangling_references_in_thread_json_are_dropped(populated: Repository, target: str, why: str) -> None:
    spawn(populated, "d", thread_id="thread-d")
    remove(populated, "thread-d")
    edit_json(populated.layout.thread_file("thread-b"), lambda d: d["references"].update({target: []}))
    report = run_doctor(populated)
    assert f"thread-b: has a reference to {why}" in report.problems
    fixed = run_doctor(populated, fix=True)
    assert f"thread-b: removed a reference to {why}" in fixed.fixed and fixed.ok
    refs = json.loads(populated.layout.thread_file("thread-b").read_text())["references"]
    assert refs == {"thread-a": []}
    assert populated.layout.index_path.read_bytes() == rebuilt_bytes(populated)


def test_unreadable_thread_json_is_reported_and_references_to_it_are_kept(populated: Repository) -> None:
    # Regression: --fix treated references to a thread with a corrupt thread.json as dangling and
    # deleted them from the other threads' thread.json (the source of truth).
    path = populated.layout.thread_file("thread-a")
    path.write_bytes(path.read_bytes() + b"<<<<<<< HEAD\n")
    other_before = populated.layout.thread_file("thread-c").read_bytes()
    result = run_leslie("doctor", "--fix", cwd=populated.root)
    assert result.code == 1
    assert "threads/thread-a/thread.json: holds git conflict markers" in result.stdout
    assert "fix or restore it by hand" in result.stdout
    assert populated.layout.thread_file("thread-c").read_bytes() == other_before
    assert json.loads(populated.layout.thread_file("thread-b").read_text())["references"] == {"thread-a": []}


def test_missing_objective_and_folder_without_thread_json(populated: Repository) -> None:
    edit_json(populated.layout.thread_file("thread-a"), lambda d: d.update(objective="obj-gone"))
    (populated.layout.threads_dir / "thread-stray").mkdir()
    (populated.layout.threads_dir / "thread-stray" / "notes.md").write_text("somebody's data")
    report = run_doctor(populated, fix=True)
    assert "thread-a: its objective obj-gone does not exist" in report.problems
    assert any("thread-stray/ has no thread.json" in p for p in report.problems)
    assert (populated.layout.threads_dir / "thread-stray" / "notes.md").is_file()  # data is never deleted


def test_corrupt_objective_is_reported(populated: Repository) -> None:
    [objective] = list(populated.layout.objectives_dir.iterdir())
    (objective / "objective.json").write_text('{"id": "obj-default", "id": "x"}')
    report = run_doctor(populated)
    assert any("objective.json: duplicate key 'id'" in p for p in report.problems)


def test_quiet_and_json_output(populated: Repository) -> None:
    populated.layout.index_path.unlink()
    quiet = run_leslie("doctor", "--fix", "--quiet", cwd=populated.root)
    assert quiet.code == 0 and quiet.stdout == ""
    populated.layout.index_path.unlink()
    as_json = run_leslie("--json", "doctor", "--fix", cwd=populated.root)
    data = json.loads(as_json.stdout)
    assert data["ok"] is True and data["problems"] == [] and data["fixed"][0].startswith("rebuilt ")


def test_doctor_after_hand_edited_thread_json(populated: Repository) -> None:
    # A hand edit (or a git checkout) of a source file: the index is stale until doctor --fix.
    edit_json(populated.layout.thread_file("thread-a"), lambda d: d["references"].update({"thread-b": []}))
    assert not run_doctor(populated).ok
    assert run_doctor(populated, fix=True).ok
    assert populated.read_index().referenced_by["thread-b"] == {"thread-a", "thread-c"}


# -- what doctor walks (issue 18): every place leslie writes, a thread folder's own entries, not below them --

def test_temp_files_everywhere_leslie_writes_are_found_and_removed(populated: Repository) -> None:
    """The atomic-write helper leaves its temp file beside its target: `.leslie/`, an objective's folder, a
    thread's folder (thread.json, plan.md, progress.md) and `state/`. Every one of them is still checked."""
    layout = populated.layout
    objective = next(p for p in layout.objectives_dir.iterdir() if p.is_dir())
    (layout.state_dir / "sessions").mkdir(parents=True, exist_ok=True)
    temps = [layout.leslie_dir / ".thread_relations.json.ab12cd34.leslie-tmp",
             layout.leslie_dir / ".config.toml.0badf00d.leslie-tmp",
             objective / ".objective.json.11111111.leslie-tmp",
             layout.thread_dir("thread-a") / ".thread.json.00000000.leslie-tmp",
             layout.thread_dir("thread-b") / ".plan.md.22222222.leslie-tmp",
             layout.thread_dir("thread-c") / ".progress.md.old.leslie-tmp",
             layout.state_dir / "sessions" / ".def.json.5678abcd.leslie-tmp"]
    two_hours_ago = time.time() - 7200
    for temp in temps:
        temp.write_text("half")
        os.utime(temp, (two_hours_ago, two_hours_ago))
    report = run_doctor(populated)
    assert report.problems == sorted(f"stale temporary file {layout.relative(t)}" for t in temps)
    fixed = run_doctor(populated, fix=True)
    assert fixed.ok and len(fixed.fixed) == len(temps)
    assert not any(t.exists() for t in temps)


def test_folders_inside_a_thread_folder_are_not_walked(populated: Repository) -> None:
    """Documented answer (docs/design.md, "What doctor walks"): leslie writes nothing inside a thread's own
    sub-folders (`design/`, `artifacts/`), so no temp file of its own can be there, and it never follows a
    link or opens a special file there; doctor does not walk them. A link or FIFO directly in the thread's
    folder is still reported (tests/test_hostile.py)."""
    folder = populated.layout.thread_dir("thread-a") / "design" / "deep"
    folder.mkdir(parents=True)
    (folder / ".notes.md.12345678.leslie-tmp").write_text("an editor's, not leslie's")
    os.symlink("/etc", folder / "etc")
    os.mkfifo(folder / "pipe")
    os.symlink("/etc", populated.layout.thread_dir("thread-b") / "etc")
    report = run_doctor(populated)
    assert report.problems == [".leslie/threads/thread-b/etc is a symbolic link (to /etc); leslie never follows "
                               "links under .leslie/ (remove it)"]
    (folder / "pipe").unlink()  # a digest would wait on the FIFO forever
    before = tree_digest(populated.root / ".leslie")
    run_doctor(populated, fix=True)
    assert tree_digest(populated.root / ".leslie") == before  # nothing under design/ touched


def test_a_linked_threads_folder_is_reported_with_every_thread_as_before(populated: Repository,
                                                                        tmp_path: Path) -> None:
    threads = populated.layout.threads_dir
    elsewhere = tmp_path / "elsewhere"
    threads.rename(elsewhere)
    os.symlink(elsewhere, threads)
    report = run_doctor(populated)
    assert report.problems[0].startswith(".leslie/threads is a symbolic link")
    assert [p.split(":")[0] for p in report.problems[1:]] == [
        f".leslie/threads/{t}/thread.json (at .leslie/threads)" for t in ("thread-a", "thread-b", "thread-c")]


def test_a_thread_json_read_on_the_scan_gives_the_same_errors(populated: Repository) -> None:
    """thread.json files are read through their listed folder; a bad one reports exactly what `read_thread`
    says (and a link, FIFO or oversized file in its place is read the ordinary way)."""
    from leslie.errors import CorruptStateError

    layout = populated.layout
    layout.thread_file("thread-a").write_text('{"id": "thread-a", "id": "thread-a"}')
    edit_json(layout.thread_file("thread-b"), lambda d: d.update(status="sleeping"))
    big = layout.thread_file("thread-c")
    big.write_bytes(b" " * (4 * 1024 * 1024 + 1))
    expected = []
    for tid in ("thread-a", "thread-b", "thread-c"):
        with pytest.raises(CorruptStateError) as caught:
            populated.read_thread(tid)
        expected.append(f"{caught.value.message} (fix or restore it by hand; doctor never deletes a thread)")
    assert run_doctor(populated).problems == [
        *expected, f"{populated.layout.relative(populated.layout.index_path)} differs from a rebuild from the "
        "thread.json files"]


@pytest.mark.parametrize("change", [
    lambda b: b,
    lambda b: b.replace(b'"thread-a"\n      ]', b'"thread-a",\n        "thread-a"\n      ]', 1),
    lambda b: b.replace(b'"status": "active"', b'"status": "paused"', 1),
    lambda b: json.dumps(json.loads(b)).encode(),
    lambda b: b[:-2],
    lambda b: b"",
])
def test_the_index_is_compared_with_a_rebuild_exactly_as_bytes(populated: Repository, change: object) -> None:
    """doctor decides "the index is a rebuild" without encoding the rebuild: the same answer as comparing the
    bytes."""
    from leslie.ops.doctor import _encodes

    threads = {tid: populated.read_thread(tid) for tid in populated.thread_ids()}
    expected = dumps_canonical(build_index(threads.values()).to_json())
    data = change(expected)  # type: ignore[operator]
    assert _encodes(data, threads) == (data == expected)


def _hostile_threads(repo: Repository) -> None:
    """Every kind of thread folder doctor tells apart, each several times over, beside plain ones."""
    layout = repo.layout
    for i in range(40):
        spawn(repo, f"intent {i}", thread_id=f"thread-p{i:02d}")
    reference(repo, "thread-p01", "thread-p00")
    layout.thread_file("thread-p02").write_text('{"id": "thread-p02", "id": "thread-p02"}')  # duplicate key
    edit_json(layout.thread_file("thread-p03"), lambda d: d.update(status="sleeping"))
    layout.thread_file("thread-p04").write_bytes(b" " * (4 * 1024 * 1024 + 1))  # over the cap
    edit_json(layout.thread_file("thread-p05"), lambda d: d.update(references={"thread-gone": []}))
    edit_json(layout.thread_file("thread-p06"), lambda d: d.update(title="Hand-edited"))
    os.symlink("/etc", layout.thread_dir("thread-p07") / "etc")
    os.mkfifo(layout.thread_dir("thread-p08") / "pipe")
    (layout.thread_dir("thread-p09") / ".plan.md.12345678.leslie-tmp").write_text("half")
    layout.thread_file("thread-p10").unlink()
    layout.thread_file("thread-p11").unlink()
    for name in os.listdir(layout.thread_dir("thread-p11")):
        target = layout.thread_dir("thread-p11") / name
        if target.is_file():
            target.unlink()
    (layout.thread_dir("thread-p11") / ".thread.json.00000000.leslie-tmp").write_text("half")
    layout.thread_file("thread-p12").unlink()
    os.symlink("/etc/hostname", layout.thread_file("thread-p12"))
    layout.thread_file("thread-p13").unlink()
    os.mkfifo(layout.thread_file("thread-p13"))
    os.symlink("/tmp", layout.threads_dir / "thread-p99")  # a link in a thread folder's place
    edit_json(layout.thread_file("thread-p14"), lambda d: d.update(objective="obj-nowhere"))
    remove(repo, "thread-p15")


# What doctor says about every kind of folder `_hostile_threads` makes, checking and fixing (pinned when the
# folder scan lost its worker processes and doctor its copies of every thread: the same words, in order).
_LINK = "is a symbolic link (to {}); leslie never follows links under .leslie/ (remove it)"
_SPECIAL = "is a FIFO, device or socket; leslie reads only regular files (remove it)"
_BAD = " (run `leslie doctor --fix` to repair derived files) (fix or restore it by hand; doctor never deletes a thread)"
_UNFIXABLE = [
    f".leslie/threads/thread-p07/etc {_LINK.format('/etc')}",
    f".leslie/threads/thread-p08/pipe {_SPECIAL}",
    f".leslie/threads/thread-p12/thread.json {_LINK.format('/etc/hostname')}",
    f".leslie/threads/thread-p13/thread.json {_SPECIAL}",
    f".leslie/threads/thread-p99 {_LINK.format('/tmp')}",
    f".leslie/threads/thread-p02/thread.json: duplicate key 'id'{_BAD}",
    f".leslie/threads/thread-p03/thread.json: field 'status' has unknown value 'sleeping'{_BAD}",
    f".leslie/threads/thread-p04/thread.json: is larger than leslie reads (4194304 bytes){_BAD}",
    ".leslie/threads/thread-p10/ has no thread.json (not a thread; left alone)",
]
HOSTILE_PROBLEMS = [
    *_UNFIXABLE,
    ".leslie/threads/thread-p11/ has no thread.json, only temporary files (an interrupted spawn; `leslie doctor "
    "--fix` removes it)",
    "thread-p05: has a reference to missing thread thread-gone",
    "thread-p14: its objective obj-nowhere does not exist",
    "stale temporary file .leslie/threads/thread-p09/.plan.md.12345678.leslie-tmp",
    "stale temporary file .leslie/threads/thread-p11/.thread.json.00000000.leslie-tmp",
    ".leslie/thread_relations.json differs from a rebuild from the thread.json files",
]
HOSTILE_LEFT_AFTER_FIX = [*_UNFIXABLE, "thread-p14: its objective obj-nowhere does not exist"]
HOSTILE_FIXED = [
    "removed .leslie/threads/thread-p11/: an interrupted spawn (no thread.json, only temporary files)",
    "thread-p05: removed a reference to missing thread thread-gone",
    "removed stale temporary file .leslie/threads/thread-p09/.plan.md.12345678.leslie-tmp",
    "rebuilt .leslie/thread_relations.json: .leslie/thread_relations.json differs from a rebuild from the "
    "thread.json files (old copy kept in .git/leslie/backups/BACKUP)",
]


def test_doctor_on_every_kind_of_folder(repo: Repository) -> None:
    """Links, FIFOs, oversized, unparsable and half-written thread.json files, folders without one, a linked
    folder, a dangling reference, a gone objective, temp files: the report, and what --fix repairs (the index
    then a rebuild, byte for byte)."""
    _hostile_threads(repo)

    def said(report: DoctorReport) -> list[list[str]]:  # backups are named by their second
        return [[re.sub(r"thread_relations\.\d{8}T\d{6}\.json", "BACKUP", line.replace(str(repo.root), "ROOT"))
                 for line in lines] for lines in (report.problems, report.fixed, report.notes)]

    assert said(run_doctor(repo)) == [HOSTILE_PROBLEMS, [], []]
    assert said(run_doctor(repo, fix=True)) == [HOSTILE_LEFT_AFTER_FIX, HOSTILE_FIXED, []]
    assert said(run_doctor(repo)) == [HOSTILE_LEFT_AFTER_FIX, [], []]
    readable = [populated_id for populated_id in repo.thread_ids() if populated_id not in (
        "thread-p02", "thread-p03", "thread-p04", "thread-p12", "thread-p13", "thread-p99")]
    threads = [repo.read_thread(tid) for tid in readable]
    assert repo.layout.index_path.read_bytes() == dumps_canonical(build_index(threads).to_json())


def test_a_cold_cache_gets_the_same_report(repo: Repository, monkeypatch: pytest.MonkeyPatch) -> None:
    """With a cold file cache threads ask the kernel for every thread.json ahead of the look: the report is
    the same, and a FIFO in a thread.json's place is never opened by them."""
    from leslie.ops import folderscan

    _hostile_threads(repo)
    expected = run_doctor(repo)
    asked: list[str] = []
    real = folderscan._ask_ahead

    def ask_ahead(threads_dir: str, names: list[str], done: object) -> None:
        asked.extend(names)
        real(threads_dir, names, done)  # type: ignore[arg-type]

    monkeypatch.setattr(folderscan, "READ_AHEAD_FROM", 0)
    monkeypatch.setattr(folderscan, "_is_cold", lambda *_: True)
    monkeypatch.setattr(folderscan, "_ask_ahead", ask_ahead)
    assert run_doctor(repo) == expected
    assert "thread-p13" in asked and "thread-p00" in asked


def test_the_read_ahead_opens_regular_files_only(tmp_path: Path) -> None:
    """What the cold-cache readers (and their probe) may open: a regular file, never a link, FIFO or folder."""
    from leslie.ops.folderscan import _open_regular

    (tmp_path / "plain").write_text("{}")
    os.mkfifo(tmp_path / "fifo")
    os.symlink(tmp_path / "plain", tmp_path / "link")
    (tmp_path / "folder").mkdir()
    fd = _open_regular(str(tmp_path / "plain"))
    assert fd is not None
    os.close(fd)
    for name in ("fifo", "link", "folder", "missing"):
        assert _open_regular(str(tmp_path / name)) is None, name


def test_the_rebuild_is_encoded_as_the_whole_index_would_be(repo: Repository) -> None:
    """`relations.rebuilt_bytes` (an entry at a time, no Index) gives `build_index(...).to_bytes()` exactly:
    no thread, tombstones, references to itself, to a missing and to a deleted thread, and hostile text."""
    from leslie.store.relations import ThreadFacts, rebuilt_bytes

    assert rebuilt_bytes([]) == dumps_canonical(build_index([]).to_json())
    spawn(repo, 'Intent "quoted"\nover\tlines é 🙂 \\', title="Tïtle <&> \\ 🙂", thread_id="thread-odd")
    for name in "abc":
        spawn(repo, f"intent {name}", thread_id=f"thread-{name}")
    reference(repo, "thread-a", "thread-b", ["plan.md"])
    reference(repo, "thread-c", "thread-a")
    reference(repo, "thread-c", "thread-odd")
    reference(repo, "thread-odd", "thread-c")
    remove(repo, "thread-b", force=True)
    edit_json(repo.layout.thread_file("thread-a"), lambda d: d.update(
        references={"thread-a": [], "thread-b": [], "thread-gone": [], "thread-c": ["plan.md"]}))
    threads = [repo.read_thread(tid) for tid in repo.thread_ids()]
    expected = dumps_canonical(build_index(threads).to_json())
    assert rebuilt_bytes(threads) == expected
    assert rebuilt_bytes([ThreadFacts.of(t) for t in threads]) == expected


def test_fix_removes_the_caches_older_versions_kept(populated: Repository) -> None:
    """The index digest and find's shards of an older leslie (now in the user's cache folder, `store.derived`):
    no problem when checking, removed by --fix; a link in their place is reported, never followed."""
    state = populated.layout.state_dir
    (state / "index-digest").write_bytes(b"leslie-index-digest/2 stale\n")
    (state / "find").mkdir()
    (state / "find" / "00").write_bytes(b"a shard")
    checked = run_doctor(populated)
    assert checked.ok and (state / "index-digest").exists()
    fixed = run_doctor(populated, fix=True)
    shown = populated.layout.relative(state)
    assert fixed.fixed == [
        f"removed {shown}/index-digest, a cache of an older leslie (leslie now keeps its caches in the user's "
        "cache folder)",
        f"removed {shown}/find, a cache of an older leslie (leslie now keeps its caches in the user's cache folder)"]
    assert not (state / "index-digest").exists() and not (state / "find").exists()
    assert run_doctor(populated, fix=True).fixed == []
