"""guard.py: which writes an agent of one thread may make; and `leslie check-write` on the command line."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from conftest import run_leslie
from leslie.guard import rules as guard
from leslie.guard.paths import REMOVE, check_path, check_paths, is_inside_leslie
from leslie.ops.threads import spawn
from leslie.store.repository import Repository

OWN = "thread-own"
OTHER = "thread-other"


@pytest.fixture
def root(repo: Repository) -> str:
    spawn(repo, "Own work", thread_id=OWN)
    spawn(repo, "Someone else's", thread_id=OTHER)
    return str(repo.root)


@pytest.mark.parametrize(("path", "decision"), [
    (f".leslie/threads/{OTHER}/plan.md", "deny"),
    (f".leslie/threads/{OTHER}/design/api.md", "deny"),
    (f".leslie/threads/{OTHER}/new-file.txt", "deny"),
    (f".leslie/threads/{OTHER}", "deny"),
    (f".leslie/threads/{OWN}/plan.md", "allow"),
    (f".leslie/threads/{OWN}/artifacts/out/report.md", "allow"),
    (f".leslie/threads/{OWN}/thread.json", "deny"),  # leslie's record: changed through leslie commands
    (f".leslie/threads/{OWN}/design/thread.json", "allow"),
    (f".leslie/threads/{OWN}", "allow"),
    (".leslie/threads", "deny"),
    (".leslie/threads/not-a-thread/x", "deny"),
    (f".leslie/threads/{OWN}/../{OTHER}/plan.md", "deny"),
    ("src/app.py", None),
    ("README.md", None),
    (".leslie/config.toml", "deny"),
    (".leslie/thread_relations.json", "deny"),
    (".leslie/templates/thread_context.xml.j2", "deny"),
    (".leslie/objectives/objective-x/objective.json", "deny"),
    (".leslie/state/current_thread", "deny"),
    (".git/leslie/current_thread", "deny"),  # the machine state in a git work tree (store.machine)
    (".git/leslie/guard/manifest.json", "deny"),
    (".git/worktrees/side/leslie/sessions/claude-code.s.json", "deny"),
    (".git/config", None),
    (".git/leslie-notes", None),
    (".leslie", "deny"),
    (".leslie/threadsX/a", "deny"),
    (".leslieX/a", None),
    ("/etc/hosts", None),
])
def test_paths(root: str, path: str, decision: str | None) -> None:
    verdict = check_path(root, OWN, path, root)
    assert verdict.decision == decision, verdict
    if decision == "deny" and OTHER in path and "/../" not in path:
        assert OTHER in verdict.reason and OWN in verdict.reason


def test_absolute_relative_and_subfolder_paths(root: str) -> None:
    sub = os.path.join(root, "src")
    os.mkdir(sub)
    assert check_path(root, OWN, f"../.leslie/threads/{OTHER}/plan.md", sub).decision == "deny"
    assert check_path(root, OWN, f"{root}/.leslie/threads/{OTHER}/plan.md", "/").decision == "deny"


def test_symlinks_cannot_smuggle_a_write(root: str, tmp_path: Path) -> None:
    into_other = Path(root) / "shortcut"
    into_other.symlink_to(Path(root) / ".leslie" / "threads" / OTHER)
    assert check_path(root, OWN, "shortcut/plan.md", root).decision == "deny"
    from_own = Path(root) / ".leslie" / "threads" / OWN / "peek"
    from_own.symlink_to(Path(root) / ".leslie" / "threads" / OTHER)
    assert check_path(root, OWN, f".leslie/threads/{OWN}/peek/plan.md", root).decision == "deny"
    outside = tmp_path / "outside"
    outside.mkdir()
    (Path(root) / ".leslie" / "threads" / OWN / "out").symlink_to(outside)
    # The own thread's asset as written, outside the repository resolved: no allow (it would skip the agent's
    # own permission check for a write anywhere), no deny either.
    assert check_path(root, OWN, f".leslie/threads/{OWN}/out/x", root).decision is None
    assert check_path(root, OWN, f".leslie/threads/{OWN}/out/x", root, kind=REMOVE).decision is None


def test_a_repository_reached_through_a_link_is_this_repository(root: str, tmp_path: Path) -> None:
    """Its resolved path names the same repository: the own thread is allowed in both views."""
    alias = tmp_path / "alias"
    alias.symlink_to(root)
    assert check_path(str(alias), OWN, f".leslie/threads/{OWN}/plan.md", str(alias)).decision == "allow"
    assert check_path(str(alias), OWN, f".leslie/threads/{OTHER}/plan.md", str(alias)).decision == "deny"


def test_another_repository_is_judged_by_its_own_thread_only(root: str, tmp_path: Path) -> None:
    elsewhere = f"{tmp_path}/elsewhere/.leslie/threads/{OTHER}/plan.md"
    assert check_path(root, OWN, elsewhere, root).decision is None
    assert check_path(root, OWN, elsewhere, root, thread_of=lambda r: None).decision is None
    assert check_path(root, OWN, elsewhere, root, thread_of=lambda r: "thread-c").decision == "deny"
    assert check_path(None, OWN, elsewhere, root, thread_of=lambda r: None).decision == "deny"  # no repository here


def test_check_paths_is_as_strict_as_its_strictest_path(root: str) -> None:
    own = f".leslie/threads/{OWN}/plan.md"
    other = f".leslie/threads/{OTHER}/plan.md"
    assert check_paths(root, OWN, [own, own], root).decision == "allow"
    assert check_paths(root, OWN, [own, "src/x"], root).decision is None
    assert check_paths(root, OWN, [own, other, "src/x"], root).decision == "deny"
    assert check_paths(root, OWN, [], root).decision is None


OTHER_PLAN = f".leslie/threads/{OTHER}/plan.md"
OWN_PLAN = f".leslie/threads/{OWN}/plan.md"


@pytest.mark.parametrize("command", [
    f"echo hi > {OTHER_PLAN}",
    f"echo hi >> {OTHER_PLAN}",
    f"echo hi>{OTHER_PLAN}",
    f"echo hi >| {OTHER_PLAN}",
    f"echo hi &> {OTHER_PLAN}",
    f"ls 2> {OTHER_PLAN}",
    f"cat notes.md | tee -a {OTHER_PLAN} > /dev/null",
    f"sed -i 's/a/b/' {OTHER_PLAN}",
    f"sed -i.bak -e 's/a/b/' {OTHER_PLAN}",
    f"sed --in-place 's/a/b/' {OTHER_PLAN}",
    f"perl -pi -e 's/a/b/' {OTHER_PLAN}",
    f"cp notes.md {OTHER_PLAN}",
    f"cp -r drafts .leslie/threads/{OTHER}/design/",
    f"cp -t .leslie/threads/{OTHER}/ a b",
    f"mv {OTHER_PLAN} /tmp/stolen.md",
    f"mv notes.md {OTHER_PLAN}",
    f"rm {OTHER_PLAN}",
    f"rm -rf .leslie/threads/{OTHER}",
    f"touch .leslie/threads/{OTHER}/x",
    f"mkdir -p .leslie/threads/{OTHER}/design/new",
    f"dd if=/dev/zero of={OTHER_PLAN} bs=1 count=1",
    f"cd .leslie/threads/{OTHER} && echo x > plan.md",
    f"cd .leslie/threads && rm -r {OTHER}",
    f"bash -c 'echo x > {OTHER_PLAN}'",
    f"FOO=1 sudo -E tee {OTHER_PLAN} < input.txt",
    f"true; echo x > {OTHER_PLAN}",
    f"make build && cp out.txt {OTHER_PLAN}",
    f"echo one\necho two > {OTHER_PLAN}",
    "echo x > .leslie/threads/*/plan.md",
    f"cat > {OTHER_PLAN} <<'EOF'\nhello\nEOF",
    f"apply_patch <<'EOF'\n*** Begin Patch\n*** Update File: {OTHER_PLAN}\n@@\n-a\n+b\n*** End Patch\nEOF",
    f"echo x > {OWN_PLAN}; echo y > {OTHER_PLAN}",
    f"echo 'unbalanced > {OTHER_PLAN}",
])
def test_bash_writes_into_another_thread_are_denied(root: str, command: str) -> None:
    verdict = guard.check_bash(root, OWN, command, root)
    assert verdict.decision == "deny", (command, guard.bash_write_targets(command, root))


@pytest.mark.parametrize("command", [
    f"cat {OTHER_PLAN}",
    f"grep -n TODO {OTHER_PLAN} > todo.txt",
    f"cp {OTHER_PLAN} my-copy.md",
    f"sed -n 1,10p {OTHER_PLAN}",
    f"diff {OTHER_PLAN} {OWN_PLAN}",
    f"ls 2>&1 .leslie/threads/{OTHER}",
    f"wc -l < {OTHER_PLAN}",
    f"echo x > {OWN_PLAN}",
    f"tee -a {OWN_PLAN} < notes.md",
    "git status --short",
    "pytest -q > /dev/null 2>&1",
    "",
])
def test_bash_reads_and_own_writes_get_no_opinion(root: str, command: str) -> None:
    assert guard.check_bash(root, OWN, command, root).decision is None, command


def test_removing_is_stricter_than_writing(root: str) -> None:
    own = f".leslie/threads/{OWN}"
    assert check_path(root, OWN, own, root).decision == "allow"  # `mkdir -p`, `cp x own/`
    assert check_path(root, OWN, own, root, kind=REMOVE).decision == "deny"  # its thread.json
    assert check_path(root, OWN, f"{own}/design", root, kind=REMOVE).decision == "allow"
    assert check_path(root, OWN, ".", root, kind=REMOVE).decision == "deny"  # holds .leslie/
    assert check_path(root, OWN, ".", root).decision is None
    assert check_path(root, OWN, "build", root, kind=REMOVE).decision is None


def test_bash_targets_resolve_in_the_directory_of_the_moment(root: str) -> None:
    from leslie.guard.shell.words import Budget
    from leslie.guard.shell.writes import write_targets

    os.mkdir(os.path.join(root, "a"))
    targets, trees = write_targets("cd a && echo x > b; cd /tmp; touch c; cd nowhere; rm d", root, Budget(10**6))
    assert [(t.kind, t.path) for t in targets] == [
        ("write", f"{root}/a/b"), ("write", "/tmp/c"), ("remove", "/tmp/nowhere/d"), ("remove", "/tmp/d")]
    assert trees == []


def test_patch_targets() -> None:
    patch = ("*** Begin Patch\n*** Add File: a.txt\n+x\n*** Update File: b/c.md\n*** Move to: d.md\n"
             "*** Delete File: e\n*** End Patch\n")
    assert guard.patch_targets(patch) == ["a.txt", "b/c.md", "d.md", "e"]


def test_is_inside_leslie(root: str) -> None:
    assert is_inside_leslie(OTHER_PLAN, root)
    assert is_inside_leslie("/elsewhere/.Leslie/config.toml", root)
    assert not is_inside_leslie("src/app.py", root)


# -- leslie check-write ------------------------------------------------------------------------------------
def test_check_write_exit_codes(root: str) -> None:
    where = Path(root)
    allowed = run_leslie("check-write", OWN_PLAN, "src/app.py", "--thread", OWN, cwd=where)
    assert (allowed.code, allowed.stdout, allowed.stderr) == (0, "", "")
    denied = run_leslie("check-write", "src/app.py", OTHER_PLAN, "--thread", OWN, cwd=where)
    assert denied.code == 1 and denied.stdout == ""
    assert denied.stderr.count("\n") == 1 and OTHER in denied.stderr and "denied" in denied.stderr
    env = run_leslie("check-write", OTHER_PLAN, cwd=where, env={"LESLIE_THREAD": OTHER})
    assert env.code == 0
    assert run_leslie("switch", OWN, cwd=where).code == 0
    assert run_leslie("check-write", OTHER_PLAN, cwd=where).code == 1
    assert run_leslie("check-write", f"--thread={OTHER}", OTHER_PLAN, cwd=where).code == 0


def test_check_write_errors(root: str, tmp_path: Path) -> None:
    no_thread = run_leslie("check-write", "x", cwd=Path(root))
    assert no_thread.code == 2 and "no current thread" in no_thread.stderr
    bad = run_leslie("check-write", "x", "--thread", "nope", cwd=Path(root))
    assert bad.code == 2 and "invalid thread ID" in bad.stderr
    assert run_leslie("check-write", "--thread", OWN, cwd=Path(root)).code == 2
    assert run_leslie("check-write", "x", "--frobnicate", cwd=Path(root)).code == 2
    outside = run_leslie("check-write", "x", "--thread", OWN, cwd=tmp_path)
    assert outside.code == 3 and ".leslie" in outside.stderr
    via_root = run_leslie("check-write", f"{root}/{OTHER_PLAN}", "--thread", OWN, "--root", root, cwd=tmp_path)
    assert via_root.code == 1


def test_check_write_as_a_git_pre_commit_hook(root: str) -> None:
    """The recipe of docs/integrations.md: staged paths go through check-write."""
    where = Path(root)
    hook = where / ".git" / "hooks" / "pre-commit"
    hook.write_text("#!/bin/sh\ngit diff --cached --name-only --diff-filter=MD -- .leslie/threads "
                    "| grep -v '/thread\\.json$' | xargs -r -d '\\n' leslie check-write\n")
    hook.chmod(0o755)
    env = {"LESLIE_THREAD": OWN, "PATH": f"{Path(os.sys.executable).parent}:{os.environ['PATH']}"}
    assert _git(where, env, "add", "-A") == 0
    assert _git(where, env, "commit", "-qm", "two new threads") == 0  # new folders: spawned, not trespassed
    (where / OWN_PLAN).write_text("# mine\n")
    assert run_leslie("set-status", OTHER, "paused", cwd=where).code == 0  # leslie's bookkeeping
    assert _git(where, env, "commit", "-qam", "own work") == 0
    (where / OTHER_PLAN).write_text("# not mine\n")
    assert _git(where, env, "commit", "-qam", "sneaky") != 0
    (where / OTHER_PLAN).unlink()
    assert _git(where, env, "commit", "-qam", "sneakier") != 0


def _git(where: Path, env: dict[str, str], *args: str) -> int:
    import subprocess

    return subprocess.run(["git", *args], cwd=where, env={**os.environ, **env}, capture_output=True,
                          check=False).returncode
