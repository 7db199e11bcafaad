"""The index digest (store/digest.py): `list`, `status` and `objective list` read it instead of decoding the index,
print exactly what they print without it, and take nothing from a digest that is stale, forged or not a file."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest

from conftest import run_leslie
from leslie.ops.listing import Filters, load_rows
from leslie.ops.objectives import create_objective
from leslie.ops.threads import RefSpec, reference, set_status, spawn
from leslie.store import digest
from leslie.store.jsonio import dumps_canonical
from leslie.store.repository import Repository
from test_listing import work  # noqa: F401  (the fixture)

READS = (("list", "--plain"), ("list", "--json"), ("list", "--plain", "--sort", "created"), ("status",),
         ("status", "--json"), ("objective", "list"), ("objective", "list", "--json"))


def outputs(root: Path) -> dict[tuple[str, ...], str]:
    """What every reading command prints (each must succeed)."""
    found = {}
    for args in READS:
        result = run_leslie(*args, cwd=root, timeout=20)
        assert result.code == 0, (args, result.stderr)
        found[args] = result.stdout
    return found


def digest_path(repo: Repository) -> Path:
    return repo.layout.state_dir / digest.DIGEST_NAME


def current(repo: Repository) -> digest.Digest | None:
    sig = digest.signature(os.fspath(repo.layout.index_path))
    assert sig is not None
    return digest.load(os.fspath(repo.layout.state_dir), sig)


@pytest.fixture
def odd(work: Repository) -> Repository:  # noqa: F811
    """`work` with the values that are hardest to carry: tabs, line breaks, non-ASCII, quotes, backslashes."""
    spawn(work, 'Intent with "quotes"\nand\ttabs é 🙂 \\', title="Tïtle\twith \"odd\" \\ bits 🙂",
          thread_id="thread-odd", objective="obj-db", refs=[RefSpec("thread-mig"), RefSpec("thread-lex")])
    reference(work, "thread-mig", "thread-odd")
    return work


def test_outputs_are_the_same_with_and_without_a_digest(odd: Repository) -> None:
    assert not digest_path(odd).exists()
    first = outputs(odd.root)  # made without a digest (the first reader writes it)
    assert current(odd) is not None
    assert outputs(odd.root) == first  # read from it
    digest_path(odd).unlink()
    assert outputs(odd.root) == first


def test_a_digest_written_by_one_command_is_used_by_the_next(odd: Repository,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """The probe: the index is decoded by the first read only; the next ones take the digest."""
    decoded: list[int] = []
    original = Repository.read_index

    def counted(self: Repository) -> object:
        decoded.append(1)
        return original(self)

    monkeypatch.setattr(Repository, "read_index", counted)
    first = load_rows(odd, Filters())
    assert len(decoded) == 1 and digest_path(odd).exists()
    assert load_rows(odd, Filters()) == first
    from leslie.ops.doctor import quick_problems
    from leslie.ops.objectives import thread_counts

    assert thread_counts(odd) == {"obj-parser": 2, "obj-db": 3}
    assert len(decoded) == 1  # neither decoded the index again
    assert current(odd).invariants_hold is None  # type: ignore[union-attr]  # `list` does not check them
    assert quick_problems(odd) == []
    assert len(decoded) == 2  # `status` wants the invariants' verdict: decoded once, and the digest rewritten
    assert current(odd).invariants_hold is True  # type: ignore[union-attr]
    assert quick_problems(odd) == [] and load_rows(odd, Filters()) == first
    assert len(decoded) == 2  # the verdict kept: nothing decoded again
    spawn(odd, "New", thread_id="thread-new", objective="obj-db")
    decoded.clear()  # (the spawn read the index itself)
    assert "thread-new" in [row.id for row in load_rows(odd, Filters())]
    assert len(decoded) == 1  # the index changed: decoded once more, and the digest rewritten
    assert current(odd) is not None and "thread-new" in current(odd).ids  # type: ignore[union-attr]


def test_the_signature_changes_with_every_write(repo: Repository) -> None:
    """Even when a write leaves the index the same size ("active" and "paused" are both six letters), the
    next reader sees another signature: a digest is never taken for a later index."""
    spawn(repo, "a", thread_id="thread-a")
    index = os.fspath(repo.layout.index_path)
    seen = [digest.signature(index)]
    for n in range(12):
        set_status(repo, "thread-a", "paused" if n % 2 == 0 else "active")
        seen.append(digest.signature(index))
    sizes = {sig[2] for sig in seen if sig is not None}
    assert len(sizes) == 1  # the same size throughout: only the file's identity and times tell them apart
    assert len(set(seen)) == len(seen) and None not in seen


def test_a_stale_digest_is_ignored_and_rebuilt(odd: Repository) -> None:
    outputs(odd.root)
    stale = digest_path(odd).read_bytes()
    set_status(odd, "thread-mig", "done")
    expected = outputs(odd.root)
    assert "done" in expected[("list", "--plain")].split("thread-mig\t")[1].split("\t")[0]
    digest_path(odd).write_bytes(stale)  # an older digest put back: its signature is not the index's
    assert outputs(odd.root) == expected
    assert digest_path(odd).read_bytes() != stale


def _forgeries(repo: Repository, good: bytes) -> dict[str, bytes]:
    """Digest files that must be ignored: each is what a hostile checkout, a torn write or a bug could leave."""
    head, _, body = good.partition(b"\n")
    fields = head.split(b" ")
    count = int(fields[6])
    # A digest that claims the current signature but lies about its size: a count far beyond the index.
    inflated = b" ".join([*fields[:6], b"999999999", *fields[7:]])
    return {
        "empty": b"",
        "garbage": os.urandom(4096),
        "truncated": good[:len(good) // 2],
        "no header end": good.replace(b"\n", b" ", 1),
        "another format": good.replace(b"leslie-index-digest/2", b"leslie-index-digest/9", 1),
        "another index": b" ".join([fields[0], b"1", b"2", *fields[3:]]) + b"\n" + body,
        "a count too big": inflated + b"\n" + body,
        "a column short": b" ".join([*fields[:6], str(count + 1).encode(), *fields[7:]]) + b"\n" + body,
        "bytes after": good + b"x\0",
        "not UTF-8": good[:-2] + b"\xff\0",
        "NULs only": head + b"\n" + b"\0" * (len(body) + 1000),
        "a bad verdict": b" ".join([*fields[:7], b"2", *fields[8:]]) + b"\n" + body,
    }


def test_forged_or_torn_digests_change_nothing(odd: Repository) -> None:
    expected = outputs(odd.root)
    good = digest_path(odd).read_bytes()
    for name, data in _forgeries(odd, good).items():
        digest_path(odd).write_bytes(data)
        assert current(odd) is None, name
        assert outputs(odd.root) == expected, name
        assert digest_path(odd).read_bytes() == good, name  # rebuilt


def test_a_committed_digest_is_foreign_to_a_clone(odd: Repository, tmp_path: Path) -> None:
    """The hostile case: a repository force-adds its digest. A clone's index has another inode and ctime, so
    the committed file is never current there, whatever it says."""
    from conftest import git

    outputs(odd.root)
    forged = digest_path(odd).read_bytes().replace(b"Write the migration suite", b"Run  rm -rf ~ right now!!")
    digest_path(odd).write_bytes(forged)
    planted = odd.root / ".leslie" / "state" / "index-digest"
    planted.parent.mkdir()
    planted.write_bytes(forged)
    git("add", "-A", cwd=odd.root)
    git("add", "-f", ".leslie/state/index-digest", cwd=odd.root)
    git("commit", "-qm", "hostile", cwd=odd.root)
    clone = tmp_path / "clone"
    git("clone", "-q", str(odd.root), str(clone), cwd=tmp_path)
    assert (clone / ".leslie" / "state" / "index-digest").read_bytes() == forged  # never read: not leslie's
    listed = run_leslie("list", "--plain", cwd=clone)
    assert listed.code == 0 and "Write the migration suite" in listed.stdout and "rm -rf" not in listed.stdout


@pytest.mark.parametrize("kind", ["link", "fifo", "folder", "huge"])
def test_a_digest_that_is_not_a_plain_file_is_never_read(odd: Repository, tmp_path: Path, kind: str) -> None:
    expected = outputs(odd.root)
    good = digest_path(odd).read_bytes()
    path = digest_path(odd)
    path.unlink()
    if kind == "link":
        elsewhere = tmp_path / "elsewhere"
        elsewhere.write_bytes(good)  # even a correct digest is not read through a link
        path.symlink_to(elsewhere)
    elif kind == "fifo":
        os.mkfifo(path)  # opening it for reading must not wait for a writer
    elif kind == "folder":
        path.mkdir()
    else:
        with path.open("wb") as out:  # bigger than the index: refused before a byte of it is decoded
            out.truncate(odd.layout.index_path.stat().st_size + (64 << 20))
    assert current(odd) is None
    assert outputs(odd.root) == expected
    if kind == "link":
        assert elsewhere.read_bytes() == good  # nothing written through the link


def test_an_older_index_without_created_at_and_intent(work: Repository) -> None:  # noqa: F811
    """Entries without created_at/intent (an index from before they were added) are completed from each
    thread.json, digest or not: the digest marks them absent rather than empty."""
    data = json.loads(work.layout.index_path.read_text(encoding="utf-8"))
    for entry in data["threads"].values():
        entry.pop("created_at")
        entry.pop("intent")
    work.layout.index_path.write_bytes(dumps_canonical(data))
    first = outputs(work.root)
    found = current(work)
    assert found is not None and set(found.column(4)) == {None}
    assert outputs(work.root) == first
    assert '"intent": "Syntax tree\\nwith spans"' in first[("list", "--json")]


def test_status_still_sees_hand_edits_and_broken_invariants(odd: Repository) -> None:
    """The cached verdict covers the index; thread.json files changed since it was written are still read."""
    assert "needs attention" in run_leslie("status", cwd=odd.root).stdout
    thread_file = odd.layout.thread_file("thread-lex")
    data = json.loads(thread_file.read_text(encoding="utf-8"))
    data["title"] = "Edited by hand"
    thread_file.write_bytes(dumps_canonical(data))
    index_time = odd.layout.index_path.stat().st_mtime_ns
    os.utime(thread_file, ns=(index_time + 10**9, index_time + 10**9))
    shown = run_leslie("status", cwd=odd.root).stdout
    assert "differs from thread-lex's thread.json" in shown
    index = json.loads(odd.layout.index_path.read_text(encoding="utf-8"))
    index["relations"]["thread-lex"]["referenced_by"] = []  # the mirror of thread-ast -> thread-lex broken
    odd.layout.index_path.write_bytes(dumps_canonical(index))
    for _ in range(2):  # without a digest, then with the one the first run wrote (its verdict: broken)
        shown = run_leslie("status", cwd=odd.root).stdout
        assert "breaks invariants" in shown
    assert current(odd) is not None and not current(odd).invariants_hold  # type: ignore[union-attr]


def test_readers_racing_writers_never_show_a_stale_list(repo: Repository) -> None:
    """A reader that keeps rewriting the digest while threads are spawned: every list taken after a spawn
    returned shows that thread, and the objective's count is right."""
    create_objective(repo, "Race", objective_id="obj-race")
    stop = threading.Event()
    errors: list[str] = []

    def reader() -> None:
        while not stop.is_set():
            result = run_leslie("list", "--plain", cwd=repo.root, timeout=30)
            if result.code != 0:
                errors.append(result.stderr)

    background = [threading.Thread(target=reader) for _ in range(2)]
    for thread in background:
        thread.start()
    try:
        for n in range(12):
            spawned = run_leslie("spawn", "--intent", f"race {n}", "--id", f"thread-race-{n:02d}",
                                 "--objective", "obj-race", cwd=repo.root)
            assert spawned.code == 0, spawned.stderr
            listed = run_leslie("list", "--plain", cwd=repo.root).stdout
            assert f"thread-race-{n:02d}\t" in listed, n
            counted = json.loads(run_leslie("objective", "list", "--json", cwd=repo.root).stdout)
            assert [o["thread_count"] for o in counted if o["id"] == "obj-race"] == [n + 1]
    finally:
        stop.set()
        for thread in background:
            thread.join()
    assert errors == []


def test_doctor_knows_the_digest(odd: Repository) -> None:
    """A current digest is no problem; `doctor --fix` removes a stale one (a local cache: nothing is lost)."""
    outputs(odd.root)
    assert run_leslie("doctor", cwd=odd.root).code == 0
    digest_path(odd).write_bytes(b"leslie-index-digest/2 stale\n")
    checked = run_leslie("doctor", cwd=odd.root)
    assert checked.code == 0 and "digest" not in checked.stdout  # not a problem, and not touched
    assert digest_path(odd).exists()
    fixed = run_leslie("doctor", "--fix", cwd=odd.root)
    assert fixed.code == 0 and "removed the stale index digest .git/leslie/index-digest" in fixed.stdout
    assert not digest_path(odd).exists()
    outputs(odd.root)
    assert "digest" not in run_leslie("doctor", "--fix", cwd=odd.root).stdout  # a current one is kept
    assert digest_path(odd).exists()


@pytest.mark.parametrize("breakage", ["none", "mirror", "self", "dangling", "extra mirror", "duplicate"])
def test_the_canonical_shortcut_is_the_index(odd: Repository, breakage: str) -> None:
    """A digest made straight off a canonical file equals the one made from the decoded `Index` (its sets,
    `invariant_problems`), for a healthy index and for every way a hand edit breaks the mirror."""
    index = json.loads(odd.layout.index_path.read_text(encoding="utf-8"))
    relations = index["relations"]
    if breakage == "mirror":
        relations["thread-lex"]["referenced_by"] = []
    elif breakage == "self":
        relations["thread-mig"]["references_to"] = sorted([*relations["thread-mig"]["references_to"], "thread-mig"])
        relations["thread-mig"]["referenced_by"] = sorted([*relations["thread-mig"]["referenced_by"], "thread-mig"])
    elif breakage == "dangling":
        relations["thread-old"]["references_to"] = ["thread-zzz"]
    elif breakage == "extra mirror":
        relations["thread-old"]["referenced_by"] = ["thread-free"]
    elif breakage == "duplicate":  # still canonical in layout; the sets of `Index` make it one reference
        relations["thread-ast"]["references_to"] = ["thread-lex", "thread-lex"]
    odd.layout.index_path.write_bytes(dumps_canonical(index))
    stored = odd.read_index()
    assert stored.canonical_text() is not None  # the shortcut is taken
    decoded = odd.read_index()
    decoded.threads  # noqa: B018  (decoded in full: the shortcut is not taken)
    assert decoded.canonical_text() is None
    quick, full = digest.digest_of(stored), digest.digest_of(decoded)
    assert quick.columns() == full.columns()
    assert quick.invariants_hold == full.invariants_hold == (breakage in ("none", "duplicate"))


def test_status_finds_what_the_index_and_the_folders_disagree_on(odd: Repository) -> None:
    """Each of the quick check's findings, with a digest and without: a thread missing from the index, an
    entry without its thread.json, a deleted thread still listed, a gone objective; a stray folder is not one."""
    from leslie.ops.doctor import quick_problems

    index = json.loads(odd.layout.index_path.read_text(encoding="utf-8"))
    spawn(odd, "Unindexed", thread_id="thread-new", objective="obj-db")
    odd.layout.index_path.write_bytes(dumps_canonical(index))  # the index from before thread-new
    (odd.layout.thread_dir("thread-old") / "thread.json").unlink()
    deleted = json.loads(odd.layout.thread_file("thread-free").read_text(encoding="utf-8"))
    deleted["status"] = "deleted"
    odd.layout.thread_file("thread-free").write_bytes(dumps_canonical(deleted))
    (odd.layout.threads_dir / "not-a-thread").mkdir()
    (odd.layout.objectives_dir / "obj-parser" / "objective.json").unlink()
    (odd.layout.objectives_dir / "obj-parser").rmdir()
    later = odd.layout.index_path.stat().st_mtime_ns + 10**9
    os.utime(odd.layout.thread_file("thread-free"), ns=(later, later))
    expected = [
        "thread-ast: its objective obj-parser does not exist",
        "thread-lex: its objective obj-parser does not exist",
        ".leslie/thread_relations.json lists thread-old, which has no thread.json",
        ".leslie/thread_relations.json still lists deleted thread thread-free",
        "thread-new is missing from .leslie/thread_relations.json",
    ]
    found = quick_problems(odd)
    assert found == expected, found  # without a digest (it writes one)
    assert current(odd) is not None
    assert quick_problems(odd) == expected  # with it
