"""leslie in a hostile clone (issue 11, findings 2-5): links, special files, traversal scopes, hostile JSON.

Every test builds a real git repository made to hurt its user, clones it, runs the real `leslie` executable
in the clone with a timeout (a hang fails), and checks: the exit code (never 70), one message naming the
file, nothing outside the repository written or deleted (`Hostile.intact`), `.leslie/` unchanged when the
command is rejected.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from conftest import Result, git, state_dir
from hostile import SESSION, Hostile, link, make_hostile, prompt_payload, tree
from leslie.store.jsonio import loads_strict

THREAD_A = ".leslie/threads/thread-a/thread.json"
HOOK_ENV = {"LESLIE_THREAD": "thread-a"}


def _edit_json(path: Path, **changes: object) -> None:
    data = json.loads(path.read_text())
    data.update(changes)
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")


def _rejected(hostile: Hostile, names: str, *args: str, code: int = 4) -> None:
    """`leslie ARGS` fails with `code`, one message naming `names`, and changes nothing anywhere."""
    before = hostile.leslie_digest()
    result = hostile.leslie(*args)
    assert result.code == code, (args, result.code, result.stderr)
    assert names in result.stderr, result.stderr
    assert "Traceback" not in result.stderr
    assert hostile.leslie_digest() == before, f"{args} changed .leslie/ although it was rejected"
    hostile.intact()


def _hook_warns(hostile: Hostile, names: str, env: dict[str, str] | None = None) -> str:
    """The hook on a UserPromptSubmit: exit 0, a warning naming `names`, nothing written outside."""
    result = hostile.leslie("hook", "claude-code", input=prompt_payload(hostile.root),
                            env=HOOK_ENV if env is None else env)
    assert result.code == 0, result.stderr
    assert "leslie: warning:" in result.stderr and names in result.stderr, result.stderr
    assert "Traceback" not in result.stderr
    hostile.intact()
    return result.stdout


# -- finding 2: no write, append, lock or delete follows a link ------------------------------------------

# In a git clone, `.leslie/state/` is never read (machine state lives in `.git/leslie/`, `store.machine`): what
# the attacker planted there is ignored and the command works. Outside git (the same files as a tarball or a
# copy) `.leslie/state/` is where leslie keeps its state, so the plant is read, and refused.
IN_GIT = pytest.mark.parametrize("git_clone", [True, False], ids=["clone", "copy"])


def _ignored(hostile: Hostile, *args: str, env: dict[str, str] | None = None, stdin: str | None = None) -> Result:
    """In a git clone: `leslie ARGS` succeeds, warns of nothing planted, and leaves the plant as it came."""
    planted = tree(hostile.root / ".leslie" / "state")
    result = hostile.leslie(*args, env=env, input=stdin)
    assert result.code == 0, (args, result.stderr)
    assert "leslie: warning" not in result.stderr and "Traceback" not in result.stderr, result.stderr
    assert tree(hostile.root / ".leslie" / "state") == planted
    hostile.intact()
    return result


@IN_GIT
@pytest.mark.parametrize("suffix", [".jsonl", ".json", ".lock"], ids=["log", "state", "lock"])
def test_hook_never_writes_a_git_hook_through_a_linked_session_file(tmp_path: Path, suffix: str,
                                                                   git_clone: bool) -> None:
    def plant(origin: Path, home: Path) -> None:
        link(origin / f".leslie/state/sessions/claude-code.{SESSION}{suffix}", "../../../.git/hooks/post-checkout")

    hostile = make_hostile(tmp_path, plant, git_clone=git_clone)
    if not git_clone:  # no git folder, so no git hook to overwrite: the link is refused all the same
        assert _hook_warns(hostile, f"claude-code.{SESSION}{suffix}") == ""
        return
    hook = hostile.root / ".git/hooks/post-checkout"  # as `leslie git setup` would have installed it
    hook.write_text("#!/bin/sh\necho checked out\n")
    hook.chmod(0o755)
    hostile.snapshot()
    _ignored(hostile, "hook", "claude-code", stdin=prompt_payload(hostile.root), env=HOOK_ENV)
    assert hook.read_text() == "#!/bin/sh\necho checked out\n"


@IN_GIT
def test_hook_never_writes_into_a_linked_sessions_folder(tmp_path: Path, git_clone: bool) -> None:
    def plant(origin: Path, home: Path) -> None:
        (home / "outside").mkdir()
        link(origin / ".leslie/state/sessions", home / "outside")

    hostile = make_hostile(tmp_path, plant, git_clone=git_clone)
    if git_clone:
        _ignored(hostile, "hook", "claude-code", stdin=prompt_payload(hostile.root), env=HOOK_ENV)
    else:
        _hook_warns(hostile, ".leslie/state/sessions")
    assert list((hostile.home / "outside").iterdir()) == []


@IN_GIT
def test_a_linked_index_lock_is_refused_not_truncated(tmp_path: Path, git_clone: bool) -> None:
    hostile = make_hostile(tmp_path, lambda origin, home: link(origin / ".leslie/state/index.lock",
                                                               home / "victim.txt"), git_clone=git_clone)
    if git_clone:
        _ignored(hostile, "spawn", "--intent", "new work")
        return
    _rejected(hostile, "index.lock", "spawn", "--intent", "new work")
    _rejected(hostile, "index.lock", "doctor", "--fix", code=4)


@IN_GIT
@pytest.mark.parametrize("plant", ["link", "missing"])
def test_a_read_that_records_the_index_never_follows_the_lock_file(tmp_path: Path, git_clone: bool,
                                                                   plant: str) -> None:
    """A read that checked the index in full records it under the lock, making the lock file when there is none
    (a fresh clone's first read): a planted link there is neither followed nor written through, and the read
    answers all the same."""
    def planted(origin: Path, home: Path) -> None:
        if plant == "link":
            link(origin / ".leslie/state/index.lock", home / "victim.txt")

    hostile = make_hostile(tmp_path, planted, git_clone=git_clone)
    result = hostile.leslie("list", "--plain")
    assert result.code == 0 and "Traceback" not in result.stderr, result.stderr
    hostile.intact()
    lock = Path(state_dir(hostile.root), "index.lock")
    assert lock.is_symlink() if plant == "link" and not git_clone else lock.is_file() and not lock.is_symlink()


@IN_GIT
def test_a_linked_current_thread_is_refused(tmp_path: Path, git_clone: bool) -> None:
    hostile = make_hostile(tmp_path, lambda origin, home: link(origin / ".leslie/state/current_thread",
                                                               home / "victim.txt"), git_clone=git_clone)
    if git_clone:
        _ignored(hostile, "switch", "thread-a")
        assert "thread-a" in _ignored(hostile, "context").stdout
        return
    _rejected(hostile, "current_thread", "switch", "thread-a")
    _rejected(hostile, "current_thread", "context")
    _hook_warns(hostile, "current_thread", env={})


@IN_GIT
def test_linked_context_caches_are_refused(tmp_path: Path, git_clone: bool) -> None:
    def plant(origin: Path, home: Path) -> None:
        link(origin / ".leslie/state/contexts/thread-a.xml", home / "victim.txt")
        link(origin / ".leslie/state/contexts/thread-a.json", home / "victim.txt")

    hostile = make_hostile(tmp_path, plant, git_clone=git_clone)
    if git_clone:
        _ignored(hostile, "context", "--thread", "thread-a")
        assert "<thread_context" in _ignored(hostile, "hook", "claude-code", stdin=prompt_payload(hostile.root),
                                             env=HOOK_ENV).stdout
        return
    _rejected(hostile, "thread-a.xml", "context", "--thread", "thread-a")
    assert _hook_warns(hostile, "thread-a.json") == ""


def test_rm_refuses_a_thread_folder_linked_to_the_working_tree(tmp_path: Path) -> None:
    def plant(origin: Path, home: Path) -> None:
        (origin / "src").mkdir()
        (origin / "src/main.py").write_text("print('the work')\n")
        # thread-x is the repository itself; its "thread.json" sits at the top of the working tree.
        (origin / "thread.json").write_text(json.dumps({
            "created_at": "", "id": "thread-x", "intent": "", "objective": None, "references": {},
            "spawned_by": None, "status": "active", "title": "x", "version": 1}))
        link(origin / ".leslie/threads/thread-x", "../..")

    hostile = make_hostile(tmp_path, plant)
    _rejected(hostile, ".leslie/threads/thread-x", "rm", "thread-x")
    _rejected(hostile, ".leslie/threads/thread-x", "rm", "thread-x", "--force")
    assert (hostile.root / "src/main.py").is_file() and (hostile.root / ".git/HEAD").is_file()
    for fix in ((), ("--fix",)):
        before = hostile.leslie_digest()
        result = hostile.leslie("doctor", *fix)
        assert result.code == 1, result.stderr
        assert ".leslie/threads/thread-x" in result.stdout and "symbolic link" in result.stdout
        assert hostile.leslie_digest() == before
        hostile.intact()


def test_a_linked_objective_folder_is_refused(tmp_path: Path) -> None:
    def plant(origin: Path, home: Path) -> None:
        (home / "objdir").mkdir()
        (home / "objdir/objective.json").write_text(json.dumps(
            {"created_at": "", "id": "obj-x", "status": "active", "title": "x", "version": 1}))
        link(origin / ".leslie/objectives/obj-x", home / "objdir")

    hostile = make_hostile(tmp_path, plant)
    _rejected(hostile, ".leslie/objectives/obj-x", "objective", "set-status", "obj-x", "done")
    _rejected(hostile, ".leslie/objectives/obj-x", "objective", "list")
    result = hostile.leslie("doctor")
    assert result.code == 1 and ".leslie/objectives/obj-x" in result.stdout


def test_agents_md_linked_outside_the_repository_is_refused(tmp_path: Path) -> None:
    hostile = make_hostile(tmp_path, lambda origin, home: link(origin / "AGENTS.md",
                                                               home / ".ssh/authorized_keys"))
    _rejected(hostile, "AGENTS.md", "agents-md")
    _rejected(hostile, "AGENTS.md", "agents-md", "--check")
    _rejected(hostile, "AGENTS.md", "init")


def test_agents_md_linked_inside_the_repository_is_written_there(tmp_path: Path) -> None:
    def plant(origin: Path, home: Path) -> None:
        (origin / "docs").mkdir()
        (origin / "docs/AGENTS.md").write_text("# Our agents\n")
        link(origin / "AGENTS.md", "docs/AGENTS.md")

    hostile = make_hostile(tmp_path, plant)
    result = hostile.leslie("agents-md")
    assert result.code == 0, result.stderr
    assert (hostile.root / "AGENTS.md").is_symlink()
    text = (hostile.root / "docs/AGENTS.md").read_text()
    assert text.startswith("# Our agents\n") and "<!-- leslie:begin" in text
    assert hostile.leslie("agents-md", "--check").code == 0


@pytest.mark.parametrize(("name", "victim", "command"), [
    ("CLAUDE.md", "victim.txt", ("agents-md", "--claude")),
    (".gitattributes", "victim.txt", ("git", "setup")),
    (".claude/settings.json", "settings.json", ("hooks", "install", "claude-code", "--shared")),
    (".claude/settings.json", "settings.json", ("hooks", "install", "claude-code")),  # read, for leslie's old ones
    (".claude/settings.local.json", "settings.json", ("hooks", "install", "claude-code")),
    (".codex/hooks.json", "settings.json", ("hooks", "install", "codex")),
    (".claude", "dotclaude", ("hooks", "install", "claude-code")),
])
def test_repository_files_linked_outside_are_never_written(tmp_path: Path, name: str, victim: str,
                                                           command: tuple[str, ...]) -> None:
    def plant(origin: Path, home: Path) -> None:
        (home / "settings.json").write_text("{}\n")
        (home / "dotclaude").mkdir()
        (home / "dotclaude/settings.json").write_text("{}\n")
        link(origin / name, home / victim)

    hostile = make_hostile(tmp_path, plant)
    _rejected(hostile, name, *command)


def test_git_setup_never_writes_a_hook_linked_outside_the_repository(tmp_path: Path) -> None:
    from conftest import git

    hostile = make_hostile(tmp_path, lambda origin, home: link(origin / ".husky/post-merge", home / "bin/tool"))
    git("config", "core.hooksPath", ".husky", cwd=hostile.root)  # what husky's install step does
    hostile.snapshot()
    before = (hostile.root / ".gitattributes").read_bytes()
    _rejected(hostile, ".husky/post-merge", "git", "setup")
    assert (hostile.root / ".gitattributes").read_bytes() == before  # checked before anything is written


# -- finding 3: scopes (and IDs) validated when read -------------------------------------------------------

@pytest.mark.parametrize("scope", ["../../../../etc/shadow", "/etc/shadow", "..\\..\\secret", ".git/config",
                                   "plan.md/../../../../../etc", "a\u0000b"])
def test_traversal_scopes_in_a_cloned_thread_json_are_corrupt_state(tmp_path: Path, scope: str) -> None:
    hostile = make_hostile(tmp_path, lambda origin, home: _edit_json(origin / THREAD_A,
                                                                     references={"thread-b": [scope]}))
    _rejected(hostile, THREAD_A, "context", "--thread", "thread-a")
    _rejected(hostile, THREAD_A, "show", "thread-a")
    result = hostile.leslie("doctor")
    assert result.code == 1 and THREAD_A in result.stdout and "scope" in result.stdout
    assert _hook_warns(hostile, THREAD_A) == ""


@pytest.mark.parametrize(("field", "value"), [("objective", "../../../etc"), ("spawned_by", "../thread-b"),
                                              ("id", "thread-b")])
def test_ids_in_a_cloned_thread_json_are_validated(tmp_path: Path, field: str, value: str) -> None:
    hostile = make_hostile(tmp_path, lambda origin, home: _edit_json(origin / THREAD_A, **{field: value}))
    _rejected(hostile, THREAD_A, "context", "--thread", "thread-a")
    _hook_warns(hostile, THREAD_A)


# -- finding 4: special files never hang or exhaust memory -------------------------------------------------

def test_config_linked_to_dev_zero(tmp_path: Path) -> None:
    hostile = make_hostile(tmp_path, lambda origin, home: link(origin / ".leslie/config.toml", "/dev/zero"))
    _rejected(hostile, ".leslie/config.toml", "context", "--thread", "thread-a")
    _hook_warns(hostile, ".leslie/config.toml")


def test_thread_json_linked_to_dev_zero(tmp_path: Path) -> None:
    hostile = make_hostile(tmp_path, lambda origin, home: link(origin / ".leslie/threads/thread-b/thread.json",
                                                               "/dev/zero"))
    _rejected(hostile, "threads/thread-b/thread.json", "context", "--thread", "thread-a")
    _rejected(hostile, "threads/thread-b/thread.json", "show", "thread-b")
    result = hostile.leslie("doctor", "--fix")
    assert result.code == 1 and "threads/thread-b/thread.json" in result.stdout
    hostile.intact()


@pytest.mark.parametrize("planted", ["file", "folder"])
def test_the_first_reads_of_every_thread_never_follow_a_planted_link(tmp_path: Path, planted: str) -> None:
    """A clone's first `status` and `list --tree` read every `thread.json` through the threads folder held open
    (`Repository.threads_folder`): a thread.json linked to /dev/zero, or a thread folder linked to one outside
    holding a thread.json of the same ID, is never read, and is reported or refused as `read_thread` does."""
    def plant(origin: Path, home: Path) -> None:
        if planted == "file":
            link(origin / ".leslie/threads/thread-b/thread.json", "/dev/zero")
        else:
            import shutil

            shutil.copytree(origin / ".leslie/threads/thread-b", home / "outside")
            link(origin / ".leslie/threads/thread-b", home / "outside")

    hostile = make_hostile(tmp_path, plant)
    before = hostile.leslie_digest()
    told = hostile.leslie("status")  # a linked thread folder is `leslie doctor`'s to report (docs/commands.md)
    assert told.code == 0 and "Traceback" not in told.stderr, told.stderr
    assert planted == "folder" or "threads/thread-b/thread.json" in told.stdout, told.stdout
    assert hostile.leslie_digest() == before
    _rejected(hostile, "threads/thread-b", "list", "--tree")
    hostile.intact()


@pytest.mark.parametrize(("name", "args"), [
    ("thread_relations.json", ("spawn", "--intent", "new work", "--ref", "thread-a")),
    ("thread_relations.json", ("reference", "--thread", "thread-b", "--target", "thread-a")),
    ("threads/thread-a/thread.json", ("spawn", "--intent", "new work", "--ref", "thread-a")),
    ("threads/thread-a/thread.json", ("reference", "--thread", "thread-b", "--target", "thread-a")),
    ("config.toml", ("context", "--thread", "thread-a")),
])
def test_a_fifo_never_hangs_a_command_nor_holds_the_lock(tmp_path: Path, name: str, args: tuple[str, ...]) -> None:
    hostile = make_hostile(tmp_path, lambda origin, home: None)
    hostile.fifo(f".leslie/{name}")
    hostile.snapshot()
    _rejected(hostile, name, *args)
    result = hostile.leslie("switch", "thread-b")  # the lock is free again at once
    assert result.code == 0, result.stderr
    hostile.intact()


def test_a_fifo_current_thread_never_hangs_the_hook(tmp_path: Path) -> None:
    hostile = make_hostile(tmp_path, lambda origin, home: None)
    hostile.fifo(str(Path(state_dir(hostile.root), "current_thread").relative_to(hostile.root)))
    result = hostile.leslie("hook", "claude-code", input=prompt_payload(hostile.root), timeout=20)
    assert result.code == 0 and "current_thread" in result.stderr


# -- finding 5: hostile JSON is exit 4, never 70; the merge drivers keep their promise ----------------------

HOSTILE_JSON = {
    "deep": b'{"id": "thread-a", "x": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
    "deep-under-the-recursion-limit": b'{"id": "thread-a", "x": ' + b"[" * 900 + b"]" * 900 + b"}",
    "huge-int": b'{"id": "thread-a", "version": 1' + b"0" * 5000 + b"}",
    "lone-surrogate": b'{"id": "thread-a", "title": "\\ud800"}',
}


@pytest.mark.parametrize("kind", sorted(HOSTILE_JSON))
def test_hostile_json_in_a_thread_json_is_exit_4(tmp_path: Path, kind: str) -> None:
    hostile = make_hostile(tmp_path, lambda origin, home: (origin / THREAD_A).write_bytes(HOSTILE_JSON[kind]))
    _rejected(hostile, THREAD_A, "show", "thread-a")
    _rejected(hostile, THREAD_A, "context", "--thread", "thread-a")
    _hook_warns(hostile, THREAD_A)


@pytest.mark.parametrize(("name", "content", "args"), [
    (".leslie/config.toml", b"a = " + b"[" * 100_000 + b"]" * 100_000, ("context", "--thread", "thread-a")),
    (".leslie/config.toml", b"a = 1" + b"0" * 5000, ("context", "--thread", "thread-a")),
    (".claude/settings.json", b"[" * 100_000 + b"]" * 100_000, ("hooks", "install", "claude-code")),
    (".claude/settings.json", b'{"x": "\\ud800"}', ("hooks", "install", "claude-code")),
    (".codex/hooks.json", b'{"x": 1' + b"0" * 5000 + b"}", ("hooks", "install", "codex")),
], ids=["toml-deep", "toml-huge-int", "settings-deep", "settings-surrogate", "codex-huge-int"])
def test_hostile_content_in_other_repository_files_is_exit_4(tmp_path: Path, name: str, content: bytes,
                                                              args: tuple[str, ...]) -> None:
    def plant(origin: Path, home: Path) -> None:
        (origin / name).parent.mkdir(parents=True, exist_ok=True)
        (origin / name).write_bytes(content)

    hostile = make_hostile(tmp_path, plant)
    _rejected(hostile, name, *args)


@pytest.mark.parametrize("status", [b"[]", b"{}", b'["active"]'])
def test_a_status_that_is_no_string_in_the_index_is_exit_4(tmp_path: Path, status: bytes) -> None:
    """A list or an object is no member of the set of statuses: it raised TypeError (exit 70) in every read."""
    def plant(origin: Path, home: Path) -> None:
        index = origin / ".leslie/thread_relations.json"
        index.write_bytes(index.read_bytes().replace(b'"status": "active"', b'"status": ' + status, 1))

    hostile = make_hostile(tmp_path, plant)
    for args in (("list",), ("show", "thread-a"), ("find", "thread"), ("relations", "--format", "json"),
                 ("spawn", "--intent", "new work")):
        _rejected(hostile, "thread_relations.json", *args)
    told = hostile.leslie("status")  # status reports what is wrong and succeeds
    assert told.code == 0 and "thread_relations.json" in told.stdout and "Traceback" not in told.stderr
    assert hostile.leslie("doctor").code == 1


def test_a_lone_surrogate_in_a_canonical_index_is_exit_4_and_spawn_writes_utf8(tmp_path: Path) -> None:
    def plant(origin: Path, home: Path) -> None:
        index = origin / ".leslie/thread_relations.json"
        index.write_bytes(index.read_bytes().replace(b'"title": "thread a"', b'"title": "\\ud800"'))

    hostile = make_hostile(tmp_path, plant)
    _rejected(hostile, "thread_relations.json", "spawn", "--intent", "new work", "--ref", "thread-a")
    _rejected(hostile, "thread_relations.json", "list")
    assert hostile.leslie("doctor", "--fix").code == 0
    assert hostile.leslie("spawn", "--intent", "new work", "--ref", "thread-a").code == 0
    loads_strict((hostile.root / ".leslie/thread_relations.json").read_bytes())


@pytest.mark.parametrize("kind", sorted(HOSTILE_JSON))
def test_the_index_merge_driver_keeps_its_promise_on_hostile_json(tmp_path: Path, kind: str) -> None:
    hostile = make_hostile(tmp_path, lambda origin, home: None)
    index = (hostile.root / ".leslie/thread_relations.json").read_bytes()
    base, ours, theirs = (tmp_path / name for name in ("base", "ours", "theirs"))
    base.write_bytes(index)
    ours.write_bytes(HOSTILE_JSON[kind])
    theirs.write_bytes(index.replace(b'"title": "thread b"', b'"title": "thread b, renamed"'))
    result = hostile.leslie("merge-relations", str(base), str(ours), str(theirs))
    assert result.code == 0, result.stderr
    merged = loads_strict(ours.read_bytes())
    assert merged["threads"]["thread-b"]["title"] == "thread b, renamed"
    assert sorted(merged["threads"]) == ["thread-a", "thread-b"]


@pytest.mark.parametrize("kind", [*sorted(HOSTILE_JSON), "other-id", "folder-mismatch"])
def test_the_thread_merge_driver_never_guesses_on_hostile_json(tmp_path: Path, kind: str) -> None:
    hostile = make_hostile(tmp_path, lambda origin, home: None)
    original = (hostile.root / THREAD_A).read_bytes()
    base, ours, theirs = (tmp_path / name for name in ("base", "ours", "theirs"))
    base.write_bytes(original)
    theirs.write_bytes(original.replace(b'"title": "thread a"', b'"title": "thread a, renamed"'))
    path = THREAD_A
    if kind == "other-id":
        ours.write_bytes(original.replace(b'"thread-a"', b'"thread-b"'))
    elif kind == "folder-mismatch":  # both sides agree, but the file lives in another thread's folder
        ours.write_bytes(original)
        path = ".leslie/threads/thread-b/thread.json"
    else:
        ours.write_bytes(HOSTILE_JSON[kind])
    before = ours.read_bytes()
    result = hostile.leslie("merge-relations", "--kind", "thread", "--path", path, str(base), str(ours),
                            str(theirs))
    assert result.code == 1, result.stderr  # a conflict for a human, OURS left as it was
    assert "Traceback" not in result.stderr and "leslie merge-relations:" in result.stderr
    assert ours.read_bytes() == before


def test_git_merges_through_the_thread_driver_refuse_another_threads_thread_json(tmp_path: Path) -> None:
    # Through git itself, which names the file (%P): one branch gives thread-a's file the id of thread-b.
    from conftest import git

    hostile = make_hostile(tmp_path, lambda origin, home: None)
    root = hostile.root
    assert hostile.leslie("git", "setup").code == 0
    git("commit", "-q", "-am", "git setup", cwd=root)
    git("checkout", "-q", "-b", "hostile", cwd=root)
    _edit_json(root / THREAD_A, id="thread-b", title="thread b, really")
    git("commit", "-q", "-am", "hostile edit", cwd=root)
    git("checkout", "-q", "main", cwd=root)
    _edit_json(root / THREAD_A, title="thread a, renamed")
    git("commit", "-q", "-am", "rename", cwd=root)
    ours = (root / THREAD_A).read_bytes()
    merge = subprocess.run(["git", "merge", "-q", "hostile"], cwd=root, capture_output=True, text=True,
                           check=False, timeout=60)
    assert merge.returncode != 0  # a conflict for a human
    assert f"refusing to merge {THREAD_A}" in merge.stdout + merge.stderr
    assert (root / THREAD_A).read_bytes() == ours  # ours kept, no conflict markers


def test_a_linked_leslie_folder_is_refused_by_every_command(tmp_path: Path) -> None:
    def plant(origin: Path, home: Path) -> None:
        import shutil

        shutil.copytree(origin / ".leslie", home / "elsewhere")
        link(origin / ".leslie", home / "elsewhere")

    hostile = make_hostile(tmp_path, plant)
    for args in (("doctor",), ("doctor", "--fix"), ("spawn", "--intent", "x"), ("show", "thread-a"), ("list",),
                 ("watch",), ("init",), ("switch", "thread-a")):
        _rejected(hostile, ".leslie", *args)
    _hook_warns(hostile, ".leslie")


# -- doctor: tracked runtime state, links and special files anywhere under .leslie/ -----------------------

def test_doctor_reports_tracked_state_links_and_special_files(tmp_path: Path) -> None:
    def plant(origin: Path, home: Path) -> None:
        (origin / ".leslie/state/sessions").mkdir(parents=True)
        (origin / ".leslie/state/sessions/claude-code.x.json").write_text("{}\n")
        link(origin / ".leslie/threads/thread-a/notes", "/etc")
        link(origin / ".leslie/templates/thread_context.xml.j2", "/dev/zero")

    hostile = make_hostile(tmp_path, plant)
    hostile.fifo(".leslie/threads/thread-b/pipe")
    hostile.snapshot()
    for fix in ((), ("--fix",)):
        before = hostile.leslie_digest()
        result = hostile.leslie("doctor", *fix)
        assert result.code == 1, result.stderr
        out = result.stdout
        assert ("git tracks .leslie/state/" in out and "sessions/claude-code.x.json" in out) or fix
        assert ".leslie/threads/thread-a/notes" in out and ".leslie/templates/thread_context.xml.j2" in out
        assert ".leslie/threads/thread-b/pipe" in out
        assert hostile.leslie_digest() == before  # --fix untracks the state (git's index), and leaves the files
        hostile.intact()
    assert "removed .leslie/state/ from git's index" in result.stdout
    assert git("ls-files", "--", ".leslie/state", cwd=hostile.root) == ""


def test_rm_removes_links_inside_a_thread_folder_without_following_them(tmp_path: Path) -> None:
    def plant(origin: Path, home: Path) -> None:
        (home / "keep").mkdir()
        (home / "keep/data.txt").write_text("mine\n")
        link(origin / ".leslie/threads/thread-b/docs", home / "keep")
        link(origin / ".leslie/threads/thread-b/notes.md", home / "victim.txt")

    hostile = make_hostile(tmp_path, plant)
    result = hostile.leslie("rm", "thread-b", "--force")
    assert result.code == 0, result.stderr
    assert sorted(os.listdir(hostile.root / ".leslie/threads/thread-b")) == ["thread.json"]
    hostile.intact()


# -- the write guard's own records (red team, finding 1): a planted manifest never steers a restore ----------

def _bash_payload(root: Path, event: str, command: str) -> str:
    """A Claude Code `PreToolUse`/`PostToolUse` event of a `Bash` call in `root`."""
    doc: dict[str, object] = {"hook_event_name": event, "session_id": SESSION, "cwd": str(root),
                              "transcript_path": "", "permission_mode": "default", "tool_name": "Bash",
                              "tool_input": {"command": command, "description": "run"}, "tool_use_id": "toolu_01"}
    if event == "PostToolUse":
        doc["tool_response"] = {"stdout": "", "stderr": "", "interrupted": False, "isImage": False}
    return json.dumps(doc)


EVIL_CONFIG = b"[core]\n\tfsmonitor = /nonexistent/leslie-test-planted-fsmonitor\n"


def _plant_guard_records(files: list[str], digest_name: str | None = None) -> Callable[[Path, Path], None]:
    """A committed `.leslie/state/guard/` (see `_guard_records`)."""

    def plant(origin: Path, home: Path) -> None:
        _guard_records(origin / ".leslie" / "state" / "guard", files, digest_name)

    return plant


def _guard_records(guard: Path, files: list[str], digest_name: str | None = None) -> None:
    """Guard records in `guard`: a manifest whose keys `files` name files "deleted since the last snapshot",
    their "copy" in the object store (EVIL_CONFIG), and an agent session of another thread whose shell window
    covers every moment, so that the next sweep puts the copies back at once."""
    import hashlib

    digest = hashlib.blake2b(EVIL_CONFIG, digest_size=16).hexdigest()
    (guard / "objects" / digest[:2]).mkdir(parents=True)
    (guard / "objects" / digest[:2] / digest).write_bytes(EVIL_CONFIG)
    entry = ["f", len(EVIL_CONFIG), 1, 1]
    (guard / "manifest.json").write_text(json.dumps({
        "version": 2, "head": None, "copies": 0, "pending": False,
        "files": dict.fromkeys(files, entry), "digests": dict.fromkeys(files, digest_name or digest)}))
    (guard / "sessions").mkdir()
    (guard / "sessions" / "claude-code.planted.json").write_text(json.dumps({
        "agent": "claude-code", "session_id": "planted", "thread": "thread-a", "calls": {},
        "shell": [[0, 2**62]], "busy": [], "prompt": None}))


def _watched_call(hostile: Hostile, command: str = "make --version") -> None:
    """A `Bash` call the first line lets through, watched by the second: its PreToolUse and PostToolUse."""
    for event in ("PreToolUse", "PostToolUse"):
        result = hostile.leslie("hook", "claude-code", input=_bash_payload(hostile.root, event, command),
                                env=HOOK_ENV)
        assert result.code == 0 and "Traceback" not in result.stderr, result.stderr


def test_a_committed_guard_manifest_is_never_read(tmp_path: Path) -> None:
    """The red team's finding 1, as found: a committed manifest names `../.git/config` as a protected file
    deleted since the last snapshot, with a planted copy; a second key outside the repository makes the guard's
    `git status` fail, so no git operation explains the change. `snapshots.restore_file` joined the key under
    `.leslie/` and wrote the copy over `.git/config`, whose `core.fsmonitor` git runs at the next
    `git status`. In a clone, the guard's records are in `.git/leslie/guard/`: the committed ones are never
    read, nor changed."""
    hostile = make_hostile(tmp_path, _plant_guard_records(["../.git/config", "../../outside-the-repository"]))
    planted = tree(hostile.root / ".leslie" / "state")
    config_before = (hostile.root / ".git" / "config").read_bytes()
    _watched_call(hostile)
    assert (hostile.root / ".git" / "config").read_bytes() == config_before
    hostile.intact()
    assert tree(hostile.root / ".leslie" / "state") == planted
    assert "../.git/config" not in json.loads((state_dir(hostile.root) / "guard" / "manifest.json").read_text())


def test_a_planted_guard_manifest_never_makes_a_restore_write_git_config(tmp_path: Path) -> None:
    """The same records in the guard's own folder (however they got there): a key `scan` could not have
    produced makes the manifest corrupt: set aside, the snapshot taken again."""
    hostile = make_hostile(tmp_path, lambda origin, home: None)
    guard = state_dir(hostile.root) / "guard"
    _guard_records(guard, ["../.git/config", "../../outside-the-repository"])
    hostile.snapshot()
    config_before = (hostile.root / ".git" / "config").read_bytes()
    _watched_call(hostile)
    assert (hostile.root / ".git" / "config").read_bytes() == config_before
    hostile.intact()
    assert list(guard.glob("manifest.json.damaged-*")), "the planted manifest was not set aside"
    manifest = json.loads((guard / "manifest.json").read_text())
    assert "../.git/config" not in manifest["files"] and not list(guard.glob("quarantine/**/config"))


def test_a_planted_digest_never_names_a_file_outside_the_object_store(tmp_path: Path) -> None:
    """A digest is an object's name: only 32 hex digits are one (`objects/<2>/<digest>`). A manifest with
    any other digest for a file a sweep uses is corrupt: set aside, never joined into a path."""
    hostile = make_hostile(tmp_path, lambda origin, home: None)
    _guard_records(state_dir(hostile.root) / "guard", ["threads/thread-b/plan.md"], "/../../../../config")
    hostile.snapshot()
    _watched_call(hostile)
    hostile.intact()
    assert (hostile.root / ".leslie" / "threads" / "thread-b" / "plan.md").read_bytes() != EVIL_CONFIG
    assert list((state_dir(hostile.root) / "guard").glob("manifest.json.damaged-*"))


def test_twenty_thousand_planted_guard_sessions_cost_a_shell_call_a_bounded_number_of_reads(tmp_path: Path) -> None:
    """Outside git, `.leslie/state/` comes with a copied folder: 20,000 guard session files, each with an open
    shell window, dated in the future (a tar keeps mtimes) so none looks stale. A sweep reads the
    MAX_ACTIVE newest of them, not all, and the call stays quick."""
    from leslie.guard import tripwire

    def plant(origin: Path, home: Path) -> None:
        folder = origin / ".leslie" / "state" / "guard" / "sessions"
        folder.mkdir(parents=True)
        body = json.dumps({"agent": "claude-code", "session_id": "x", "thread": "thread-b", "calls": {},
                           "shell": [[0, 2**62]], "busy": [], "prompt": None})
        future = time.time() + 86400
        for n in range(20_000):
            path = folder / f"claude-code.planted{n}.json"
            path.write_text(body)
            os.utime(path, (future, future))

    hostile = make_hostile(tmp_path, plant, git_clone=False)
    assert len(tripwire.activities(str(hostile.root), time.time_ns())) == tripwire.MAX_ACTIVE
    start = time.monotonic()
    _watched_call(hostile)
    assert time.monotonic() - start < 15
    hostile.intact()
