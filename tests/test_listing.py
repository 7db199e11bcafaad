"""`leslie list` (ops/listing.py, cli/list_view.py): grouping, activity, the table, --plain, filters, sort, limit,
--json, an index written by an older leslie; and objectives shown with titles (`objective list|show`, errors)."""

from __future__ import annotations

import fcntl
import json
import os
import pty
import re
import select
import struct
import subprocess
import termios
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import LESLIE_EXE, Result, run_leslie, tree_digest
from leslie.cli.list_view import PLAIN_COLUMNS, escape_field, table_text, unescape_field
from leslie.ops.listing import Group, Row
from leslie.ops.objectives import create_objective
from leslie.ops.threads import RefSpec, set_status, spawn
from leslie.store.jsonio import dumps_canonical
from leslie.store.repository import Repository
from leslie.terminal import visible_json
from test_context import assert_golden

DAY = 86400
BASE = 1_735_689_600  # 2025-01-01T00:00:00Z: old enough that the table shows dates, not times


def set_activity(repo: Repository, thread_id: str, seconds: int) -> None:
    """Give both files that make a thread's activity the time `seconds`."""
    folder = repo.layout.thread_dir(thread_id)
    for name in ("thread.json", "progress.md"):
        if (folder / name).exists():
            os.utime(folder / name, (seconds, seconds))


@pytest.fixture
def work(repo: Repository) -> Repository:
    """Two objectives and a thread without one, with activities far apart (oldest first below).

    obj-parser "Ship the parser": thread-lex (paused, 2025-01-02), thread-ast (active, 2025-01-05, refs lex)
    obj-db "Migrate the database": thread-mig "Write the migration suite" (active, 2025-01-04), thread-old
    (done, 2025-01-01); thread-free (no objective, 2025-01-03).
    """
    create_objective(repo, "Ship the parser", objective_id="obj-parser")
    create_objective(repo, "Migrate the database", objective_id="obj-db")
    spawn(repo, "Lexer", thread_id="thread-lex", objective="obj-parser")
    spawn(repo, "Syntax tree\nwith spans", title="Syntax tree", thread_id="thread-ast", objective="obj-parser",
          refs=[RefSpec("thread-lex")])
    spawn(repo, "Write the migration suite", thread_id="thread-mig", objective="obj-db")
    spawn(repo, "Old schema notes", thread_id="thread-old", objective="obj-db")
    spawn(repo, "Loose end", thread_id="thread-free", objective="obj-db")
    set_status(repo, "thread-lex", "paused")
    set_status(repo, "thread-old", "done")
    # No objective: what an older leslie or a hand edit leaves (spawn always chooses one).
    data = json.loads(repo.layout.thread_file("thread-free").read_text(encoding="utf-8"))
    data["objective"] = None
    repo.layout.thread_file("thread-free").write_bytes(dumps_canonical(data))
    repo.layout.index_path.write_bytes(dumps_canonical(repo.rebuild_index().to_json()))
    for tid, day in (("thread-old", 0), ("thread-lex", 1), ("thread-free", 2), ("thread-mig", 3),
                     ("thread-ast", 4)):
        set_activity(repo, tid, BASE + day * DAY)
    return repo


def listed(root: Path, *args: str) -> list[dict[str, Any]]:
    result = run_leslie("list", "--json", *args, cwd=root)
    assert result.code == 0, result.stderr
    rows: list[dict[str, Any]] = json.loads(result.stdout)
    return rows


def ids(root: Path, *args: str) -> list[str]:
    return [row["id"] for row in listed(root, *args)]


# -- a real terminal ------------------------------------------------------------------------------------


def on_a_terminal(root: Path, *args: str, columns: int = 80, env: dict[str, str] | None = None,
                  colour: bool = False) -> Result:
    """Run `leslie ARGS` with stdout on a pseudo-terminal `columns` wide (its window size, not COLUMNS)."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, columns, 0, 0))
    full_env = {**os.environ, "TZ": "UTC", "NO_COLOR": "1"}
    for name in ("COLUMNS", *(("NO_COLOR",) if colour else ())):
        full_env.pop(name, None)
    full_env.update(env or {})
    proc = subprocess.Popen([LESLIE_EXE, *args], cwd=root, stdout=slave, stderr=subprocess.PIPE, env=full_env)
    os.close(slave)
    chunks: list[bytes] = []
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if select.select([master], [], [], 0.1)[0]:
                try:
                    chunk = os.read(master, 65536)
                except OSError:  # the child closed the terminal (EIO on Linux)
                    break
                if not chunk:
                    break
                chunks.append(chunk)
            elif proc.poll() is not None:
                break
        _, err = proc.communicate(timeout=60)
    finally:
        os.close(master)
    return Result(proc.returncode, b"".join(chunks).decode().replace("\r\n", "\n"), err.decode())


def test_the_terminal_table_groups_by_objective_newest_activity_first(work: Repository) -> None:
    shown = on_a_terminal(work.root, "list")
    assert shown.code == 0, shown.stderr
    lines = shown.stdout.splitlines()
    headers = [line for line in lines if line and not line.startswith(" ")]
    # Groups by their newest activity (parser: day 4, database: day 3), threads without an objective last.
    assert headers == ["Ship the parser · parser · active · 2 threads",
                       "Migrate the database · db · active · 2 threads", "No objective · 1 thread"]
    order = [line.split()[0] for line in lines if line.startswith("  thread-")]
    assert order == ["thread-ast", "thread-lex", "thread-mig", "thread-old", "thread-free"]
    assert all(len(line) <= 80 for line in lines)
    assert "2025-01-05" in shown.stdout and "\t" not in shown.stdout


def test_the_table_at_80_columns_matches_golden(example_repo: Repository) -> None:
    for number, tid in enumerate(sorted(example_repo.thread_ids())):
        set_activity(example_repo, tid, BASE + number * DAY)
    shown = on_a_terminal(example_repo.root, "list", columns=80)
    assert shown.code == 0, shown.stderr
    assert_golden("list/example-80.txt", shown.stdout)
    assert max(len(line) for line in shown.stdout.splitlines()) <= 80
    # COLUMNS wins over the terminal's own size, as `shutil.get_terminal_size` has it.
    narrow = on_a_terminal(example_repo.root, "list", columns=200, env={"COLUMNS": "80"})
    assert narrow.stdout == shown.stdout


@pytest.mark.parametrize("columns", [20, 40, 60, 80, 132])
def test_the_table_never_wraps_nor_cuts_an_id(example_repo: Repository, columns: int) -> None:
    for tid in example_repo.thread_ids():
        set_activity(example_repo, tid, BASE)
    shown = on_a_terminal(example_repo.root, "list", columns=columns)
    lines = shown.stdout.splitlines()
    assert all(len(line) <= max(columns, 2 + len("thread-0ngwx0") + 2 + 8 + 2 + len("TITLE")) for line in lines), lines
    for tid in example_repo.read_index().threads:  # the live ones
        assert any(line.split()[0] == tid for line in lines if line.startswith("  thread-")), (tid, lines)


def test_hostile_titles_never_reach_the_terminal_as_controls(repo: Repository) -> None:
    # C1 controls and DEL are text XML can carry, so a title may hold them; CSI (U+009B) starts an escape.
    spawn(repo, "x", title="evil\u009b31mred\u007f\tend", thread_id="thread-evil")
    create_objective(repo, "obj\u009b2J wiped", objective_id="obj-evil")
    spawn(repo, "y", title="fine", thread_id="thread-fine", objective="obj-evil")
    shown = on_a_terminal(repo.root, "list")
    assert shown.code == 0, shown.stderr
    assert not re.search("[\x00-\x09\x0b-\x1f\x7f-\x9f]", shown.stdout), repr(shown.stdout)
    assert "evil\\x9b31mred\\x7f\\tend" in shown.stdout and "obj\\x9b2J wiped" in shown.stdout
    coloured = on_a_terminal(repo.root, "list", env={"TERM": "xterm"}, colour=True)
    coloured_env_free = coloured.stdout.replace("\x1b[1m", "").replace("\x1b[0m", "")
    assert "\x1b[1m" in coloured.stdout and not re.search("[\x00-\x09\x0b-\x1f\x7f-\x9f]", coloured_env_free)


def test_golden_table_text_at_80_columns(monkeypatch: pytest.MonkeyPatch) -> None:
    """The formatter alone, with a fixed clock: what a person sees, byte for byte."""
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    def row(tid: str, title: str, status: str, day: int, refs: int) -> Row:
        return Row(tid, title, status, "obj-parser", "Ship the parser", "", "", (BASE + day * DAY) * 10**9,
                   ",".join(f"thread-r{i}" for i in range(refs)), "")
    groups = [Group("obj-parser", "Ship the parser, with a title long enough that it must be cut at eighty",
                    "active", (row("thread-ast", "Syntax tree with spans and a title that is far too long to fit",
                                   "active", 4, 2), row("thread-lexer-long-custom-id", "Lexer", "paused", 1, 0))),
              Group(None, None, None, (Row("thread-free", "Loose\x85end", "done", None, None, "", "",
                                           (BASE + 2 * DAY + 3600) * 10**9, "", ""),))]
    now = BASE + 2 * DAY + 7200  # the same day as thread-free's activity: it shows a time
    text = table_text(groups, 80, now=now)
    monkeypatch.delenv("TZ")
    time.tzset()
    assert_golden("list/table-80.txt", text)
    assert all(len(line) <= 80 for line in text.splitlines())
    assert "thread-lexer-long-custom-id" in text and "Loose\\x85end" in text  # NEL is a line break: shown
    assert table_text([], 80) == "no threads\n"


# -- --plain, the piped default --------------------------------------------------------------------------


def test_piped_list_is_plain_and_grep_finds_a_title(work: Repository) -> None:
    piped = run_leslie("list", cwd=work.root)
    assert piped.code == 0 and piped.stdout == run_leslie("list", "--plain", cwd=work.root).stdout
    grep = subprocess.run(f'"{LESLIE_EXE}" list | grep "migration suite"', shell=True, cwd=work.root,
                          capture_output=True, text=True, check=False)
    assert grep.returncode == 0
    assert grep.stdout.split("\t") == ["thread-mig", "active", "2025-01-04T00:00:00Z", "obj-db",
                                       "Migrate the database", "-", "Write the migration suite\n"]
    lines = piped.stdout.splitlines()
    assert [line.split("\t")[0] for line in lines] == ["thread-ast", "thread-mig", "thread-free", "thread-lex",
                                                        "thread-old"]  # not grouped: newest activity first
    assert all(line.count("\t") == len(PLAIN_COLUMNS) - 1 for line in lines)
    assert "thread-ast\tactive\t2025-01-05T00:00:00Z\tobj-parser\tShip the parser\tthread-lex\tSyntax tree" in lines
    assert "thread-free\tactive\t2025-01-03T00:00:00Z\t-\t-\t-\tLoose end" in lines
    # --plain on a terminal too: the same lines, nothing cut.
    assert on_a_terminal(work.root, "list", "--plain", columns=30).stdout == piped.stdout


def test_a_field_with_tabs_and_controls_stays_on_its_line(repo: Repository) -> None:
    title = "tab\there \\ back\u0085nel\u2028sep"
    spawn(repo, "x", title=title, thread_id="thread-odd")
    create_objective(repo, "Obj\twith tab", objective_id="obj-tab")
    spawn(repo, "y", title="plain", thread_id="thread-two", objective="obj-tab")
    lines = run_leslie("list", "--plain", "--sort", "id", cwd=repo.root).stdout.split("\n")
    assert lines[-1] == "" and len(lines) == 3
    odd = lines[0].split("\t")
    assert len(odd) == len(PLAIN_COLUMNS) and unescape_field(odd[-1]) == title
    assert odd[-1] == "tab\\there \\\\ back\\x85nel\\u2028sep"
    two = lines[1].split("\t")
    assert two[4] == "Obj\\twith tab" and unescape_field(two[4]) == "Obj\twith tab"


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_plain_fields_round_trip_and_never_break_a_line(text: str) -> None:
    field = escape_field(text)
    assert unescape_field(field) == text
    assert not re.search("[\x00-\x1f\x7f-\x9f\u2028\u2029]", field)
    assert "\t".join([field, field]).split("\t") == [field, field]


@settings(max_examples=500, deadline=None)
@given(st.integers(1, 9999), st.integers(1, 12), st.integers(-40, 40), st.integers(-30, 30), st.integers(0, 59),
       st.integers(0, 59))
def test_stored_times_count_seconds_as_calendar_timegm(year: int, month: int, day: int, hour: int, minute: int,
                                                       second: int) -> None:
    import calendar

    from leslie.ops.listing import _parse_time

    fields = (year, month, day, hour, minute, second)
    text = f"{year:04d}-{month:02d}-{day:02d}T{hour:02d}:{minute:02d}:{second:02d}Z"
    if len(text) == 20:  # a negative day or hour takes three characters: not a stored time
        assert _parse_time(text) == calendar.timegm(fields)


def test_a_hand_edited_creation_time_is_shown_not_a_crash(repo: Repository) -> None:
    """A month out of range in the index, and no activity file to stand for it: `list` showed an internal
    error (exit 70, `calendar.timegm`'s ValueError); the thread is now listed as of the epoch."""
    spawn(repo, "odd times", thread_id="thread-odd")
    index = repo.layout.index_path
    index.write_bytes(re.sub(rb'"created_at": "[^"]*"', b'"created_at": "2024-13-01T00:00:00Z"', index.read_bytes()))
    for name in ("thread.json", "progress.md"):
        (repo.layout.thread_dir("thread-odd") / name).unlink()
    for args in (["list", "--plain"], ["list", "--json"], ["list"]):
        result = run_leslie(*args, cwd=repo.root)
        assert result.code == 0 and "thread-odd" in result.stdout, (args, result)


# -- filters, sort, limit, --json ------------------------------------------------------------------------


def test_filters_combine(work: Repository) -> None:
    root = work.root
    assert ids(root, "--status", "paused", "--status", "done") == ["thread-lex", "thread-old"]
    assert ids(root, "--status", "paused,done") == ["thread-lex", "thread-old"]
    assert ids(root, "--objective", "obj-db") == ["thread-mig", "thread-old"]
    assert ids(root, "--objective", "pars") == ["thread-ast", "thread-lex"]  # a prefix
    assert ids(root, "--objective", "Migrate the database") == ["thread-mig", "thread-old"]  # a title
    assert ids(root, "--objective", "ship THE parser") == ["thread-ast", "thread-lex"]
    assert ids(root, "--objective", "db", "--objective", "parser") == ["thread-ast", "thread-mig", "thread-lex",
                                                                       "thread-old"]
    assert ids(root, "--objective", "db", "--objective", "parser", "--status", "active") == [
        "thread-ast", "thread-mig"]
    assert ids(root, "--objective", "db", "--status", "paused") == []


def test_sort_and_limit(work: Repository) -> None:
    root = work.root
    assert ids(root) == ["thread-ast", "thread-mig", "thread-free", "thread-lex", "thread-old"]
    assert ids(root, "--sort", "id") == sorted(ids(root))
    assert ids(root, "--sort", "title") == ["thread-lex", "thread-free", "thread-old", "thread-ast", "thread-mig"]
    assert ids(root, "--sort", "status") == ["thread-ast", "thread-mig", "thread-free", "thread-lex", "thread-old"]
    assert ids(root, "--sort", "created", "--limit", "1") == [listed(root, "--sort", "created")[0]["id"]]
    assert ids(root, "--limit", "2") == ["thread-ast", "thread-mig"]
    assert ids(root, "--limit", "2", "--status", "done") == ["thread-old"]


def test_json_has_intent_times_and_titles_in_sorted_keys(work: Repository) -> None:
    result = run_leslie("list", "--json", "--objective", "parser", cwd=work.root)
    rows = json.loads(result.stdout)
    assert list(rows[0]) == sorted(rows[0])
    created = json.loads(work.layout.thread_file("thread-ast").read_text(encoding="utf-8"))["created_at"]
    assert rows[0] == {"id": "thread-ast", "title": "Syntax tree", "status": "active", "objective": "obj-parser",
                       "objective_title": "Ship the parser", "intent": "Syntax tree\nwith spans",
                       "created_at": created, "updated_at": "2025-01-05T00:00:00Z",
                       "references_to": ["thread-lex"], "referenced_by": [], "held_by": None}
    assert rows[1]["referenced_by"] == ["thread-ast"]
    free = next(r for r in listed(work.root) if r["id"] == "thread-free")
    assert free["objective"] is None and free["objective_title"] is None
    assert run_leslie("--json", "list", "--limit", "1", cwd=work.root).stdout.count("\n") == 3


def test_activity_is_the_newest_of_thread_json_and_progress(work: Repository) -> None:
    root = work.root
    progress = work.layout.thread_dir("thread-old") / "progress.md"
    os.utime(progress, (BASE + 9 * DAY, BASE + 9 * DAY))  # the agent logged progress
    assert ids(root)[0] == "thread-old"
    assert listed(root)[0]["updated_at"] == "2025-01-10T00:00:00Z"
    assert run_leslie("pause", "thread-mig", cwd=root).code == 0  # leslie changed thread.json just now
    assert ids(root)[0] == "thread-mig"
    # Neither file there: the creation time.
    for name in ("thread.json", "progress.md"):
        (work.layout.thread_dir("thread-lex") / name).unlink()
    lex = next(r for r in listed(root) if r["id"] == "thread-lex")
    assert lex["updated_at"] == lex["created_at"]


def test_rows_are_the_same_with_the_derived_store_or_without(work: Repository, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """The index's fields come from the derived store (`store.derived`), the activity from the files: the rows
    are the same when the store is made, current, removed or unusable (an in-memory one then), with every
    kind of activity (progress newer, a link, neither file)."""
    from leslie.ops.listing import Filters, load_rows
    from leslie.store import derived

    folder = work.layout.thread_dir
    os.utime(folder("thread-old") / "progress.md", (BASE + 9 * DAY, BASE + 9 * DAY))
    (folder("thread-mig") / "progress.md").unlink()
    (folder("thread-mig") / "progress.md").symlink_to("/etc/hostname")  # not followed: lends no time
    for name in ("thread.json", "progress.md"):
        (folder("thread-lex") / name).unlink()
    stored = derived.database_path(work.root)
    assert stored is not None
    cache = os.environ["XDG_CACHE_HOME"]
    blocked = tmp_path / "not-a-folder"
    blocked.write_text("")
    for filters in (Filters(), Filters(statuses=frozenset({"active"})), Filters(objectives=frozenset({"obj-db"})),
                    Filters(sort="id", limit=3)):
        derived.discard(stored)
        made = load_rows(work, filters)
        assert os.path.exists(stored)
        assert load_rows(work, filters) == made
        monkeypatch.setenv("XDG_CACHE_HOME", str(blocked))
        assert load_rows(work, filters) == made
        monkeypatch.setenv("XDG_CACHE_HOME", cache)
    here = load_rows(work, Filters())
    assert [r.activity for r in here if r.id == "thread-old"] == [(BASE + 9 * DAY) * 10**9]
    assert sorted(r.id for r in load_rows(work, Filters(objectives=frozenset({"obj-db"})))) == [
        "thread-mig", "thread-old"]


# -- bad values --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("args", "says"), [
    (["--status", "open"], "unknown status 'open' for --status: choose from active, paused, done, archived"),
    (["--status", "active,bogus"], "unknown status 'bogus'"),
    (["--objective", "Nothing like it"], "no objective has the ID, ID prefix or title 'Nothing like it' (the "
                                         "objectives: obj-db “Migrate the database”, obj-parser “Ship the parser”)"),
    (["--objective", "obj-zzz"], "no objective has the ID, ID prefix or title 'obj-zzz'"),
    (["--sort", "newest"], "unknown sort key 'newest' for --sort: choose from activity, created, title, id, status"),
    (["--limit", "0"], "--limit must be at least 1"),
    (["--tree", "--status", "nope"], "unknown status 'nope'"),
])
def test_a_bad_filter_exits_2_with_one_line_and_changes_nothing(work: Repository, args: list[str],
                                                                 says: str) -> None:
    before = tree_digest(work.root / ".leslie")
    result = run_leslie("list", *args, cwd=work.root)
    assert result.code == 2 and says in result.stderr, result.stderr
    assert result.stderr.count("\n") == 1 and result.stdout == ""
    assert tree_digest(work.root / ".leslie") == before


def test_two_objectives_with_one_title_are_named_by_id(work: Repository) -> None:
    create_objective(work, "Ship the parser", objective_id="obj-parser2")
    result = run_leslie("list", "--objective", "Ship the parser", cwd=work.root)
    assert result.code == 2
    assert "several objectives are titled 'Ship the parser' (obj-parser “Ship the parser”, obj-parser2 " in \
        result.stderr
    assert ids(work.root, "--objective", "obj-parser2") == []


# -- an index written by an older leslie ------------------------------------------------------------------


def test_an_older_index_lists_the_same_and_doctor_upgrades_it(work: Repository) -> None:
    root = work.root
    expected = run_leslie("list", "--json", cwd=root).stdout
    plain = [run_leslie("list", "--plain", "--sort", sort, cwd=root).stdout for sort in ("created", "activity")]
    index = json.loads(work.layout.index_path.read_text(encoding="utf-8"))
    for entry in index["threads"].values():
        del entry["created_at"], entry["intent"]
    work.layout.index_path.write_bytes(dumps_canonical(index))
    for tid in work.thread_ids():  # the rewrite above must not count as activity
        set_activity(work, tid, BASE + {"thread-old": 0, "thread-lex": 1, "thread-free": 2, "thread-mig": 3,
                                        "thread-ast": 4}[tid] * DAY)
    assert run_leslie("list", "--json", cwd=root).stdout == expected
    assert [run_leslie("list", "--plain", "--sort", sort, cwd=root).stdout for sort in ("created", "activity")] == plain
    doctor = run_leslie("doctor", cwd=root)
    assert doctor.code == 1
    assert ("was written by an older leslie: 5 thread entries lack created_at and intent" in doctor.stdout
            + doctor.stderr)
    assert run_leslie("doctor", "--fix", cwd=root).code == 0
    assert work.layout.index_path.read_bytes() == dumps_canonical(work.rebuild_index().to_json())
    assert '"intent": "Syntax tree\\nwith spans"' in work.layout.index_path.read_text(encoding="utf-8")
    assert run_leslie("list", "--json", cwd=root).stdout == expected
    assert run_leslie("doctor", cwd=root).code == 0


# -- objectives with titles everywhere --------------------------------------------------------------------


def test_objective_list_and_show_have_titles_and_counts(work: Repository) -> None:
    rows = json.loads(run_leslie("objective", "list", "--json", cwd=work.root).stdout)
    assert [(r["id"], r["title"], r["thread_count"]) for r in rows] == [
        ("obj-db", "Migrate the database", 2), ("obj-parser", "Ship the parser", 2)]
    table = run_leslie("objective", "list", cwd=work.root).stdout
    assert "Migrate the database" in table and "Threads" in table
    shown = run_leslie("objective", "show", "parser", cwd=work.root).stdout
    assert "thread-ast  active  Syntax tree" in shown and "thread-lex  paused  Lexer" in shown


@pytest.mark.parametrize(("args", "says"), [
    (["spawn", "--intent", "x"], "several active objectives (obj-db “Migrate the database”, obj-parser “Ship the "
                                 "parser”): choose one with --objective ID"),
    (["spawn", "--intent", "x", "--objective", "obj-nope"],
     "no such objective: obj-nope (the objectives: obj-db “Migrate the database”, obj-parser “Ship the parser”)"),
    (["objective", "show", "nope"], "no such objective: nope (the objectives: obj-db “Migrate the database”, "
                                    "obj-parser “Ship the parser”)"),
])
def test_errors_naming_objectives_show_their_titles(work: Repository, args: list[str], says: str) -> None:
    result = run_leslie(*args, cwd=work.root)
    assert result.code in (2, 3) and says in result.stderr, result.stderr


@pytest.mark.parametrize("args", [["show", "thread_x"], ["show", "Thread-X"], ["objective", "show", "obj-"],
                                  ["spawn", "--intent", "x", "--id", "thread-"], ["context", "--thread", "t_x"],
                                  ["objective", "create", "T", "--id", "obj-A"]])
def test_no_error_shows_a_regex(work: Repository, args: list[str]) -> None:
    result = run_leslie(*args, cwd=work.root)
    assert result.code == 2, result.stderr
    assert "lower-case letters, digits or dashes" in result.stderr
    assert not re.search(r"\[a-z|\{0,47\}|\\Z|\^", result.stderr), result.stderr


@settings(max_examples=40, deadline=None)
@given(st.text(st.characters(codec="utf-8").filter(lambda c: not re.match("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]",
                                                                           c)), min_size=1, max_size=40)
      .filter(lambda t: t.strip() != ""))
def test_intents_in_the_index_keep_it_canonical_and_fast_to_read(intent: str) -> None:
    """Any intent a thread can hold is spliced into the index exactly as a rebuild writes it, and the result
    is still read by the canonical fast path (not the strict full parse)."""
    from leslie.store.model import Thread
    from leslie.store.relations import _CanonicalText, build_index, decode_index

    base = build_index([Thread("thread-a", "A", "first\tline\n\"quoted\" \\ back", None, created_at="x")])
    data = base.to_bytes()
    assert _CanonicalText.parse(data) is not None
    lazy = decode_index(data, Path("index"), Path("index"))
    thread = Thread("thread-b", "B", intent, "obj-o", references={"thread-a": ()}, created_at="2025-01-01T00:00:00Z")
    lazy.put_thread(thread)
    spliced = lazy.to_bytes()
    rebuilt = build_index([Thread("thread-a", "A", "first\tline\n\"quoted\" \\ back", None, created_at="x"),
                           thread])
    assert spliced == dumps_canonical(rebuilt.to_json())
    assert _CanonicalText.parse(spliced) is not None


def test_listed_rows_are_the_rows_as_tuples(work: Repository) -> None:
    """`list --plain`/`--json` draw from `listed`'s plain tuples, the table from `load_rows`' Rows: the same
    fields in the same order, whatever the filters (without intents: the same but `intent` and `sources`); and
    the sorts' field positions are Row's."""
    from leslie.ops import listing

    assert [Row._fields[i] for i in (listing._ID, listing._TITLE, listing._STATUS, listing._CREATED,
                                     listing._ACTIVITY)] == ["id", "title", "status", "created_at", "activity"]
    for sort in listing.SORT_KEYS:
        for filters in (listing.Filters(sort=sort), listing.Filters(frozenset({"active"}), sort=sort, limit=2)):
            rows = listing.listed(work, filters)
            assert listing.load_rows(work, filters) == [Row(*row) for row in rows]
            assert listing.sort_rows(list(map(Row._make, reversed(rows))), sort) == rows
            assert all(type(row) is tuple for row in rows)
            assert listing.listed(work, filters, intents=False) == [
                (*row[:5], "", *row[6:9], "") for row in rows]  # what the plain lines and the table need


def test_output_in_chunks_is_one_document() -> None:
    """`--json` and `--plain` are written 2,000 rows at a time: the pieces still make one array, one line each."""
    from leslie.cli.list_view import json_text, plain_text

    rows = [Row(f"thread-{i}", f"t{i}\t", "active", None, None, "i", "", 0, "", "") for i in range(4500)]
    decoded = json.loads(json_text(rows))
    assert [r["id"] for r in decoded] == [f"thread-{i}" for i in range(4500)]
    assert json_text(rows).count("\n") == 4500 + 2 and json_text([]) == "[]\n"
    assert json.loads(json_text(rows[:1]))[0]["title"] == "t0\t"
    assert plain_text(rows).splitlines()[2001].startswith("thread-2001\t")


def test_json_lines_are_the_encoders() -> None:
    """`list --json` lays each row's keys out itself: byte for byte what the json encoder makes of `to_json()`
    (keys sorted, not ASCII-escaped) as `visible_json` shows it, for every kind of value a row can hold."""
    from leslie.cli.list_view import json_text

    odd = 'quote " back\\ tab\t nl\n é 🙂 \u2028 \x7f'
    rows = [Row("thread-a", odd, "active", "obj-o", odd, odd, "2026-01-01T00:00:00Z", 5 * 10**9,
                "thread-b,thread-c", "thread-d"),
            Row("thread-b", "", "done", None, None, "", "", 0, "", ""),
            Row("thread-c", "T", "paused", "obj-gone", None, "i", odd, 86_399 * 10**9, "thread-a", ""),
            Row("thread-d", "T2", "archived", "obj-o", odd, "i", "", 1, "", "thread-a,thread-b"),
            # ASCII lines but for one character `visible_json` escapes: DEL alone, then a C1 control, a bidi
            # override, a line separator; and controls the encoder escapes itself
            Row("thread-e", "del \x7f", "active", None, None, "ascii \x1b[2J\t", "x\x7f", 0, "", ""),
            Row("thread-f", "c1 \x9b", "active", None, None, "bidi \u202e", "ls \u2028", 0, "", "")]
    encode = json.JSONEncoder(sort_keys=True, ensure_ascii=False).encode
    shown = "[\n  " + ",\n  ".join(visible_json(encode(row.to_json())) for row in rows) + "\n]\n"
    assert json_text(rows) == shown == visible_json(shown)
    assert json.loads(json_text(rows)) == [row.to_json() for row in rows]
