"""Everyday edits and safety (issue 17): `edit` (by option and in $EDITOR), `objective retitle`, `switch` alone,
`rm` asking on a terminal, and rejected `init`s that leave the tree as it was."""

from __future__ import annotations

import json
import os
import pty
import select
import subprocess
import time
from pathlib import Path

import pytest

from conftest import LESLIE_EXE, Result, approve_templates, git, run_leslie, tree_digest
from leslie.ops.objectives import create_objective
from leslie.ops.threads import reference, spawn
from leslie.store.jsonio import dumps_canonical
from leslie.store.repository import Repository

END = "<!-- leslie:end -->"


@pytest.fixture
def threads_repo(repo: Repository) -> Repository:
    """thread-a ("Login page", obj-default) referencing thread-b; a second objective obj-auth."""
    spawn(repo, "Build the login page\nwith a form", title="Login page", thread_id="thread-a")
    spawn(repo, "thread b", thread_id="thread-b")
    reference(repo, "thread-a", "thread-b")
    create_objective(repo, "Authentication", objective_id="obj-auth")
    return repo


def thread_doc(repo: Repository, tid: str) -> dict[str, object]:
    data: dict[str, object] = json.loads(repo.layout.thread_file(tid).read_text(encoding="utf-8"))
    return data


def assert_index_exact(repo: Repository) -> None:
    assert repo.layout.index_path.read_bytes() == dumps_canonical(repo.rebuild_index().to_json())


def editor(tmp_path: Path, body: str, name: str = "editor") -> dict[str, str]:
    """A real editor: a shell script run as `$EDITOR FILE`; the environment that selects it."""
    script = tmp_path / name
    script.write_text("#!/bin/sh\n" + body, encoding="utf-8")
    script.chmod(0o755)
    return {"EDITOR": str(script)}


# -- edit by option ---------------------------------------------------------------------------------


def test_edit_changes_title_intent_and_objective_in_thread_json_and_index(threads_repo: Repository) -> None:
    root = threads_repo.root
    result = run_leslie("edit", "thread-a", "--title", "Sign-in page", "--intent", "Build the sign-in page\r\n",
                        "--objective", "obj-auth", cwd=root)
    assert result.code == 0, result.stderr
    assert result.stdout == "thread-a: changed title, intent, objective\n"
    doc = thread_doc(threads_repo, "thread-a")
    assert (doc["title"], doc["intent"], doc["objective"]) == ("Sign-in page", "Build the sign-in page\n", "obj-auth")
    assert doc["references"] == {"thread-b": []}  # what edit does not name stays
    entry = threads_repo.read_index().threads["thread-a"]
    assert (entry["title"], entry["objective"]) == ("Sign-in page", "obj-auth")
    assert_index_exact(threads_repo)
    again = run_leslie("edit", "thread-a", "--title", "Sign-in page", "--json", cwd=root)
    data = json.loads(again.stdout)
    assert (data["changed"], data["fields"], data["thread"]["title"]) == (False, [], "Sign-in page")


def test_edit_without_objective(threads_repo: Repository) -> None:
    result = run_leslie("edit", "thread-a", "--no-objective", "--json", cwd=threads_repo.root)
    assert result.code == 0, result.stderr
    assert json.loads(result.stdout)["fields"] == ["objective"]
    assert thread_doc(threads_repo, "thread-a")["objective"] is None
    assert_index_exact(threads_repo)


@pytest.mark.parametrize(("args", "code", "says"), [
    (["--objective", "obj-missing"], 3, "no such objective: obj-missing"),
    (["--objective", "obj-auth", "--no-objective"], 2, "disagree"),
    (["--title", " "], 2, "title is empty"),
    (["--intent", "x" * 70_000], 2, "intent"),
    (["--objective", "Obj-Bad"], 2, "no objective has the ID, ID prefix or title"),
])
def test_a_refused_edit_changes_nothing(threads_repo: Repository, args: list[str], code: int, says: str) -> None:
    before = tree_digest(threads_repo.root / ".leslie")
    result = run_leslie("edit", "thread-a", *args, cwd=threads_repo.root)
    assert result.code == code and says in result.stderr, result.stderr
    assert tree_digest(threads_repo.root / ".leslie") == before


def test_edit_of_a_deleted_or_missing_thread(threads_repo: Repository) -> None:
    assert run_leslie("edit", "thread-zz", "--title", "x", cwd=threads_repo.root).code == 3
    assert run_leslie("rm", "thread-b", "--force", cwd=threads_repo.root).code == 0
    gone = run_leslie("edit", "thread-b", "--title", "x", cwd=threads_repo.root)
    assert gone.code == 3 and "deleted" in gone.stderr


# -- edit in $EDITOR --------------------------------------------------------------------------------


def test_edit_in_the_editor_applies_the_text(threads_repo: Repository, tmp_path: Path) -> None:
    # The script rewrites the title, moves the thread and replaces the intent (a Markdown heading included).
    env = editor(tmp_path, """python3 - "$1" <<'EOF'
import sys
path = sys.argv[1]
text = open(path).read()
head, _, tail = text.partition("# ------------------------ >8")
assert "title: Login page\\nobjective: obj-default\\n\\nBuild the login page\\nwith a form\\n" in head, head
assert "obj-auth  Authentication" in tail, tail
new = "title: Sign-in page\\nobjective: obj-auth\\n\\n# Goal\\nSign in\\n\\n"
open(path, "w").write(new + "# ------------------------ >8" + tail)
EOF
""")
    result = run_leslie("edit", "thread-a", cwd=threads_repo.root, env=env)
    assert result.code == 0, result.stderr
    assert result.stdout == "thread-a: changed title, intent, objective\n"
    doc = thread_doc(threads_repo, "thread-a")
    assert (doc["title"], doc["intent"], doc["objective"]) == ("Sign-in page", "# Goal\nSign in", "obj-auth")
    assert_index_exact(threads_repo)


def test_edit_with_visual_when_editor_is_unset(threads_repo: Repository, tmp_path: Path) -> None:
    env = {"VISUAL": editor(tmp_path, "sed -i 's/^objective: .*/objective:/' \"$1\"\n")["EDITOR"]}
    result = run_leslie("edit", "thread-a", cwd=threads_repo.root, env=env)
    assert result.code == 0, result.stderr
    assert thread_doc(threads_repo, "thread-a")["objective"] is None


def test_an_unchanged_text_writes_nothing(threads_repo: Repository, tmp_path: Path) -> None:
    before = tree_digest(threads_repo.root / ".leslie")
    mtime = threads_repo.layout.thread_file("thread-a").stat().st_mtime_ns
    result = run_leslie("edit", "thread-a", cwd=threads_repo.root, env=editor(tmp_path, "exit 0\n"))
    assert result.code == 0 and result.stdout == "thread-a: unchanged\n", result.stderr
    assert tree_digest(threads_repo.root / ".leslie") == before
    assert threads_repo.layout.thread_file("thread-a").stat().st_mtime_ns == mtime


@pytest.mark.parametrize(("body", "code", "says"), [
    ("printf 'nonsense\\n\\nintent\\n' > \"$1\"\n", 2, "line 1"),
    ("printf 'title:\\n\\nintent\\n' > \"$1\"\n", 2, "title is empty"),
    ("printf 'title: t\\nobjective: obj-nope\\n\\nintent\\n' > \"$1\"\n", 3, "no such objective"),
    ("printf 'title: t\\n' > \"$1\"\n", 2, "intent is empty"),
    ("exit 3\n", 2, "exited with 3"),
])
def test_an_invalid_text_changes_nothing(threads_repo: Repository, tmp_path: Path, body: str, code: int,
                                         says: str) -> None:
    before = tree_digest(threads_repo.root / ".leslie")
    result = run_leslie("edit", "thread-a", cwd=threads_repo.root, env=editor(tmp_path, body))
    assert result.code == code and says in result.stderr, result.stderr
    assert "Traceback" not in result.stderr
    assert tree_digest(threads_repo.root / ".leslie") == before
    if code != 2 or "exited" not in says:
        kept = result.stderr.split("your text is kept in ")[1].rstrip(")\n")
        assert Path(kept).is_file()  # the edit is not lost
        Path(kept).unlink()


def test_no_editor_is_a_clear_error(threads_repo: Repository) -> None:
    env = dict.fromkeys(("EDITOR", "VISUAL"), "")
    result = run_leslie("edit", "thread-a", cwd=threads_repo.root, env=env)
    assert result.code == 2 and "set EDITOR" in result.stderr


def test_a_thread_changed_while_edited_is_not_overwritten(threads_repo: Repository, tmp_path: Path) -> None:
    # The editor retitles the thread through leslie (another person, meanwhile), then saves its own change.
    env = editor(tmp_path, f"{LESLIE_EXE} retitle thread-a 'Meanwhile' >/dev/null\n"
                 "sed -i 's/^title: .*/title: Mine/' \"$1\"\n")
    result = run_leslie("edit", "thread-a", cwd=threads_repo.root, env=env)
    assert result.code == 2 and "changed while it was being edited" in result.stderr
    assert thread_doc(threads_repo, "thread-a")["title"] == "Meanwhile"
    kept = Path(result.stderr.split("your text is kept in ")[1].rstrip(")\n"))
    assert kept.read_text(encoding="utf-8").startswith("title: Mine\n")  # the edit is not lost
    kept.unlink()


# -- objective retitle ------------------------------------------------------------------------------


def test_objective_retitle(threads_repo: Repository) -> None:
    root = threads_repo.root
    result = run_leslie("objective", "retitle", "obj-auth", "Sign-in\nand tokens", cwd=root)
    assert result.code == 0 and result.stdout == "obj-auth: Sign-in and tokens\n", result.stderr
    assert threads_repo.read_objective("obj-auth").title == "Sign-in and tokens"
    same = json.loads(run_leslie("objective", "retitle", "obj-auth", "Sign-in and tokens", "--json", cwd=root).stdout)
    assert same == {"id": "obj-auth", "title": "Sign-in and tokens", "changed": False}
    before = tree_digest(root / ".leslie")
    assert run_leslie("objective", "retitle", "obj-nope", "x", cwd=root).code == 3
    assert run_leslie("objective", "retitle", "obj-auth", "", cwd=root).code == 2
    assert tree_digest(root / ".leslie") == before


# -- switch alone -----------------------------------------------------------------------------------


def test_switch_alone_prints_the_current_thread(threads_repo: Repository) -> None:
    root = threads_repo.root
    none = run_leslie("switch", cwd=root)
    assert none.code == 1 and none.stdout == "" and "no current thread" in none.stderr
    none_json = run_leslie("switch", "--json", cwd=root)
    assert none_json.code == 1 and json.loads(none_json.stdout) == {"current_thread": None}
    assert run_leslie("switch", "thread-a", cwd=root).code == 0
    before = tree_digest(root / ".leslie")
    shown = run_leslie("switch", cwd=root)
    assert shown.code == 0 and shown.stdout == "current thread: thread-a (Login page)\n"
    assert json.loads(run_leslie("switch", "--json", cwd=root).stdout) == {
        "current_thread": "thread-a", "title": "Login page", "status": "active", "source": "switch"}
    by_env = run_leslie("switch", cwd=root, env={"LESLIE_THREAD": "thread-b"})
    assert by_env.stdout == "current thread: thread-b (thread b) from LESLIE_THREAD\n"
    assert tree_digest(root / ".leslie") == before  # asking changes nothing
    assert run_leslie("rm", "thread-a", cwd=root).code == 0
    gone = run_leslie("switch", cwd=root)
    assert gone.code == 3 and "thread-a" in gone.stderr


# -- rm on a terminal -------------------------------------------------------------------------------


def rm_on_a_terminal(root: Path, answer: bytes | None, *args: str) -> Result:
    """Run `leslie rm` with a real pseudo-terminal on stdin, typing `answer` once it asks."""
    master, slave = pty.openpty()
    proc = subprocess.Popen([LESLIE_EXE, "rm", *args], cwd=root, stdin=slave, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    os.close(slave)
    try:
        if answer is not None:
            os.write(master, answer)
        deadline = time.monotonic() + 60
        while proc.poll() is None and time.monotonic() < deadline:
            # drain the terminal's echo so the child never blocks on a full buffer
            if select.select([master], [], [], 0.1)[0]:
                try:
                    os.read(master, 4096)
                except OSError:
                    break
        out, err = proc.communicate(timeout=60)
    finally:
        os.close(master)
    return Result(proc.returncode, out.decode(), err.decode())


def test_rm_on_a_terminal_asks_and_no_keeps_everything(threads_repo: Repository) -> None:
    root = threads_repo.root
    before = tree_digest(root / ".leslie")
    declined = rm_on_a_terminal(root, b"n\n", "thread-a")
    assert declined.code == 1, declined.stderr
    assert "Delete thread thread-a (Login page)? [y/N]" in declined.stderr
    assert "would remove .leslie/threads/thread-a/plan.md" in declined.stderr
    assert "not deleted; nothing changed" in declined.stderr
    assert tree_digest(root / ".leslie") == before
    eof = rm_on_a_terminal(root, b"\x04", "thread-a")  # Ctrl-D: no answer is a no
    assert eof.code == 1 and tree_digest(root / ".leslie") == before


def test_rm_on_a_terminal_takes_a_prefix_and_shows_the_full_id(threads_repo: Repository) -> None:
    """The ID is resolved before the question (it once said "invalid thread ID" for a prefix on a terminal)."""
    root = threads_repo.root
    before = tree_digest(root / ".leslie")
    unknown = rm_on_a_terminal(root, b"y\n", "zz")
    assert unknown.code == 3 and "Delete" not in unknown.stderr  # refused before anything is asked
    declined = rm_on_a_terminal(root, b"n\n", "a")
    assert declined.code == 1, declined.stderr
    assert "Delete thread thread-a (Login page)? [y/N]" in declined.stderr
    assert tree_digest(root / ".leslie") == before
    accepted = rm_on_a_terminal(root, b"y\n", "a")
    assert accepted.code == 0, accepted.stderr
    assert thread_doc(threads_repo, "thread-a")["status"] == "deleted"


def test_rm_on_a_terminal_deletes_on_yes(threads_repo: Repository) -> None:
    root = threads_repo.root
    accepted = rm_on_a_terminal(root, b"y\n", "thread-a")
    assert accepted.code == 0, accepted.stderr
    assert accepted.stdout.startswith("deleted thread-a\n")
    assert thread_doc(threads_repo, "thread-a")["status"] == "deleted"


def test_rm_yes_skips_the_question_and_refusals_come_first(threads_repo: Repository) -> None:
    root = threads_repo.root
    referenced = rm_on_a_terminal(root, None, "thread-b")  # referenced by thread-a: refused before asking
    assert referenced.code == 2 and "[y/N]" not in referenced.stderr
    dry = rm_on_a_terminal(root, None, "thread-a", "--dry-run")
    assert dry.code == 0 and "[y/N]" not in dry.stderr
    quiet = rm_on_a_terminal(root, None, "thread-a", "--yes")
    assert quiet.code == 0 and "[y/N]" not in quiet.stderr
    assert thread_doc(threads_repo, "thread-a")["status"] == "deleted"


def test_rm_without_a_terminal_does_not_ask(threads_repo: Repository) -> None:
    result = run_leslie("rm", "thread-a", cwd=threads_repo.root, input="n\n")  # a pipe: scripts keep working
    assert result.code == 0 and "[y/N]" not in result.stderr
    assert thread_doc(threads_repo, "thread-a")["status"] == "deleted"


# -- rejected init ----------------------------------------------------------------------------------


def test_init_git_outside_git_leaves_nothing(tmp_path: Path) -> None:
    folder = tmp_path / "plain"
    folder.mkdir()
    (folder / "AGENTS.md").write_text("# mine\n", encoding="utf-8")
    before = tree_digest(folder)
    for args in (["init", "--git"], ["init", "--git", "--claude"], ["init", "--git", "--root", str(folder)]):
        result = run_leslie(*args, cwd=folder)
        assert result.code == 2 and "not inside a git working tree" in result.stderr, result.stderr
        assert tree_digest(folder) == before
    assert not (folder / ".leslie").exists() and not (folder / ".gitattributes").exists()


def test_init_git_with_a_hook_leading_out_leaves_nothing(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    root.mkdir()
    git("init", "-q", cwd=root)
    outside = tmp_path / "outside-hook"
    outside.write_text("#!/bin/sh\n", encoding="utf-8")
    (root / ".git" / "hooks" / "post-merge").symlink_to(outside)
    before = tree_digest(root)
    result = run_leslie("init", "--git", cwd=root)
    assert result.code == 4, result.stderr
    assert tree_digest(root) == before


def test_init_with_a_failing_approved_template_leaves_nothing(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    (root / ".leslie" / "templates").mkdir(parents=True)
    (root / ".leslie" / "templates" / "agents_md_block.md.j2").write_text(f"sneaky {END}\n", encoding="utf-8")
    approve_templates(root)
    before = tree_digest(root)
    result = run_leslie("init", cwd=root)
    assert result.code == 2 and "agents_md_block.md.j2" in result.stderr, result.stderr
    assert tree_digest(root) == before


def test_init_git_in_a_git_repository_still_works(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    root.mkdir()
    git("init", "-q", cwd=root)
    result = run_leslie("init", "--git", cwd=root)
    assert result.code == 0, result.stderr
    assert (root / ".leslie").is_dir() and (root / ".git" / "hooks" / "post-merge").is_file()



# -- one reference syntax ---------------------------------------------------------------------------


def test_one_reference_syntax_in_every_place(threads_repo: Repository) -> None:
    root = threads_repo.root
    spawn(threads_repo, "thread c", thread_id="thread-c", objective="obj-auth")
    added = run_leslie("reference", "thread-c:design/api.md", "--scope", "plan.md", "--thread", "thread-b",
                       cwd=root)
    assert added.code == 0 and added.stdout == "thread-b -> thread-c [design/api.md, plan.md]\n", added.stderr
    assert run_leslie("reference", "--target", "thread-c:notes.md", "--thread", "thread-b", cwd=root).code == 0
    narrowed = run_leslie("unreference", "thread-c:plan.md", "--thread", "thread-b", cwd=root)
    assert narrowed.stdout == "thread-b -> thread-c [design/api.md, notes.md]\n", narrowed.stderr
    assert run_leslie("unreference", "--target", "thread-c", "--thread", "thread-b", cwd=root).code == 0
    assert thread_doc(threads_repo, "thread-b")["references"] == {}
    long = json.loads(run_leslie("spawn", "--intent", "x", "--ref", "thread-c", "--scope", "plan.md", "--json",
                                 "--objective", "obj-auth", cwd=root).stdout)
    short = json.loads(run_leslie("spawn", "--intent", "x", "--ref", "thread-c:plan.md", "--json", "--objective",
                                  "obj-auth", cwd=root).stdout)
    assert long["thread"]["references"] == short["thread"]["references"] == {"thread-c": ["plan.md"]}
    before = tree_digest(root / ".leslie")
    for args in (["reference", "--thread", "thread-b"], ["reference", "thread-c", "--target", "thread-c"],
                 ["unreference", "--thread", "thread-b"],
                 ["spawn", "--intent", "x", "--ref", "thread-a", "--ref", "thread-c", "--scope", "plan.md"]):
        refused = run_leslie(*args, cwd=root)
        assert refused.code == 2, (args, refused.stderr)
    assert tree_digest(root / ".leslie") == before
    assert_index_exact(threads_repo)


def test_the_python_api_has_the_same_edits(threads_repo: Repository) -> None:
    import leslie

    assert leslie.current_thread(threads_repo) is None
    leslie.switch(threads_repo, "thread-a")
    current = leslie.current_thread(threads_repo)
    assert current is not None and (current.thread.id, current.source) == ("thread-a", "switch")
    outcome = leslie.edit(threads_repo, "thread-a", intent="New intent", objective=None)
    assert (outcome.changed, outcome.thread.intent, outcome.thread.objective) == (True, "New intent", None)
    assert leslie.edit(threads_repo, "thread-a", title="Login page").changed is False
    assert leslie.retitle_objective(threads_repo, "obj-auth", "Auth")[1] is True
    assert_index_exact(threads_repo)
