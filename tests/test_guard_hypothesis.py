"""The write guard against generated shell commands, with bash itself as the judge.

A grammar of visible writes (redirections, tee, cp/mv/install/ln, sed -i, perl -pi, touch, rm, truncate,
dd, tar -C), wrapped in wrappers with options, preceded by `cd`s (certain and uncertain), placed in
subshells, `bash -c`, `{ }`, `$( )`, `if`, `eval`, quoted in various ways and joined to harmless commands
with `&&`, `||`, `;`, `|` and newlines. The target is a file of another thread or of the own thread.

Executed variant: each command runs for real (bash, in a fresh copy of a leslie repository, nothing but
harmless local commands), and what changed on disk decides: a change in another thread's folder or in
leslie's state must have been denied; a command writing the own thread's assets is never denied.
Labelled variant: commands that must not run here (downloads, sudo, git) are judged by their label.
"""

from __future__ import annotations

import hashlib
import os
import shlex
import shutil
import subprocess
import tarfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from leslie.guard import rules as guard
from leslie.ops.threads import spawn
from leslie.store.repository import Repository

OWN = "thread-own"
OTHER = "thread-other"
FILES = ("plan.md", "progress.md", "artifacts/new.txt", "notes.txt")
SETTINGS = settings(max_examples=250, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def _base(repo: Repository) -> Path:
    """The repository every example copies: two threads with assets, scratch files, a tar archive."""
    spawn(repo, "Own work", thread_id=OWN)
    spawn(repo, "Someone else's", thread_id=OTHER)
    root = repo.root
    for thread in (OWN, OTHER):
        folder = root / ".leslie" / "threads" / thread
        (folder / "artifacts").mkdir(exist_ok=True)
        (folder / "notes.txt").write_text("a line with a few letters\n")
        (folder / "plan.md").write_text((folder / "plan.md").read_text() + "a plan, with letters\n")
    (root / "src").mkdir()
    (root / "notes.md").write_text("notes: a b c\n")
    (root / "scratch.txt").write_text("scratch\n")
    with tarfile.open(root / "payload.tar", "w") as archive:
        (root / "new.txt").write_text("from the archive\n")
        archive.add(root / "new.txt", arcname="new.txt")
    (root / "new.txt").unlink()
    shutil.rmtree(root / ".git")  # not needed by the executed grammar; copies stay small
    return root


# -- the grammar ----------------------------------------------------------------------------------------
@st.composite
def located_path(draw: st.DrawFn, thread: str) -> tuple[str, str, str]:
    """(a `cd` prefix, the path as the command spells it, the folder relative to the root for `tar -C`)."""
    name = draw(st.sampled_from(FILES))
    rel = f".leslie/threads/{thread}/{name}"
    folder = os.path.dirname(rel)
    how = draw(st.sampled_from(["relative", "absolute", "pwd", "cd", "cd-uncertain", "cd-back", "from-src",
                                "quoted", "partly-quoted", "escaped", "variable"]))
    if how == "absolute":
        return "", "{root}/" + rel, "{root}/" + folder
    if how == "pwd":
        return "", '"$PWD"/' + rel, "$PWD/" + folder
    if how == "cd":
        inside = f".leslie/threads/{thread}"
        return f"cd {inside} && ", name, os.path.relpath(folder, inside)
    if how == "cd-uncertain":
        return "cd nowhere-at-all 2>/dev/null || true; ", rel, folder
    if how == "cd-back":
        return "cd /tmp && cd - >/dev/null && ", rel, folder
    if how == "from-src":
        return "cd src && ", "../" + rel, "../" + folder
    if how == "quoted":
        return "", shlex.quote(rel) if "'" not in rel else rel, folder
    if how == "partly-quoted":
        return "", '.les"lie"/threads/' + f"'{thread}'/{name}", folder
    if how == "escaped":
        return "", "\\.leslie/thr\\eads/" + thread + "/" + name, folder
    if how == "variable":
        return f"T=.leslie/threads/{thread}; ", "$T/" + name, "$T"
    return "", rel, folder


WRITES = [
    "echo x > {p}", "echo x >> {p}", "echo x &> {p}", "ls /nonexistent-leslie 2> {p}", "echo x >| {p}",
    "echo x | tee {p} >/dev/null", "echo x | tee -a {p} >/dev/null", "cp notes.md {p}", "mv scratch.txt {p}",
    "install -m 644 notes.md {p}", "sed -i s/a/b/ {p}", "sed -i.bak -e s/a/b/ {p}", "perl -pi -e s/a/b/ {p}",
    "touch {p}", "rm -f {p}", "truncate -s 0 {p}", "dd if=notes.md of={p} status=none", "ln -sf notes.md {p}",
    "tar -C {d} -xf payload.tar", "tar -xf payload.tar -C {d}", "printf '%s' y > {p}", "cat notes.md > {p}",
]
WRAPPERS = ["", "nice -n 5 ", "timeout 5 ", "timeout -s KILL 5 ", "env -u FOO ", "env FOO=1 ", "stdbuf -o0 ",
            "command ", "ionice -c 3 ", "time -p ", "FOO=1 "]
CONTEXTS = ["{w}", "( {w} )", "{{ {w}; }}", "bash -c {q}", "sh -c {q}", "bash -lc {q}", "eval {q}",
            "if true; then {w}; fi", "echo \"$({w})\" >/dev/null", "true && {w}", "{w}; true", "false || {w}",
            "echo hi | {{ {w}; }}", "true\n{w}", "for i in 1; do {w}; done"]


@st.composite
def command(draw: st.DrawFn, thread: str, writes: list[str]) -> str:
    """One generated command line writing one file of `thread` (with `{root}` for the root)."""
    prefix, path, folder = draw(located_path(thread))
    write = draw(st.sampled_from(writes))
    wrapper = draw(st.sampled_from(WRAPPERS)) if not write.startswith("echo x |") else ""
    body = prefix + wrapper + write.format(p=path, d=folder)
    context = draw(st.sampled_from(CONTEXTS))
    return context.format(w=body, q=shlex.quote(body))


def _digest(root: Path) -> dict[str, str]:
    found: dict[str, str] = {}
    for path in sorted((root / ".leslie").rglob("*")):
        rel = path.relative_to(root).as_posix()
        if path.is_symlink():
            found[rel] = "link:" + os.readlink(path)
        elif path.is_file():
            found[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
    return found


def _changed(before: dict[str, str], after: dict[str, str]) -> set[str]:
    return {p for p in before.keys() | after.keys() if before.get(p) != after.get(p)}


def _run(root: Path, line: str) -> set[str]:
    """Run `line` with bash in `root`; the paths under `.leslie/` it changed."""
    before = _digest(root)
    env = {"PATH": os.environ["PATH"], "HOME": os.environ["HOME"], "LC_ALL": "C"}
    subprocess.run(["bash", "-c", line], cwd=root, env=env, capture_output=True, timeout=20, check=False)
    return _changed(before, _digest(root))


def test_generated_commands_against_what_bash_really_does(repo: Repository, tmp_path: Path) -> None:
    base = _base(repo)
    tally = {"other": 0, "other-changed": 0, "own": 0}

    @SETTINGS
    @given(data=st.data())
    def check(data: st.DataObject) -> None:
        thread = data.draw(st.sampled_from([OTHER, OWN]), label="thread")
        line = data.draw(command(thread, WRITES), label="command")
        copy = tmp_path / f"copy-{sum(tally.values())}"
        shutil.copytree(base, copy, symlinks=True)
        line = line.replace("{root}", str(copy))
        verdict = guard.check_bash(str(copy), OWN, line, str(copy))
        changed = _run(copy, line)
        shutil.rmtree(copy)
        trespassed = {p for p in changed if not p.startswith(f".leslie/threads/{OWN}/")
                      or p == f".leslie/threads/{OWN}/thread.json"}
        if trespassed:
            assert verdict.decision == "deny", (line, sorted(trespassed), verdict)
        if thread == OWN:
            tally["own"] += 1
            assert verdict.decision != "deny", (line, verdict)
        else:
            tally["other"] += 1
            tally["other-changed"] += bool(trespassed)
            assert verdict.decision == "deny", (line, verdict)  # the label: it names another thread's file

    check()
    assert tally["own"] > 50 and tally["other"] > 50, tally
    assert tally["other-changed"] > tally["other"] // 2, tally  # the grammar really writes, most of the time


LABELLED = [
    "curl -sSLo {p} https://example.invalid/x", "curl --output {p} https://example.invalid/x",
    "wget -qO {p} https://example.invalid/x", "sudo -u bob tee {p} </dev/null", "git checkout -- {p}",
    "git restore --source=HEAD {p}", "git rm -q {p}", "xargs -I{{}} cp {{}} {p} </dev/null", "unzip -o -d {d} a.zip",
    "doas rm {p}", "rsync -a notes.md {p}", "scp notes.md {p}", "gzip -f {p}", "sort -o {p} notes.md",
    "chmod 600 {p}", "mkdir -p {d}/sub", "python3 -m zipfile -e a.zip {d}",
]


def test_labelled_commands_that_cannot_run_here(repo: Repository) -> None:
    root = str(_base(repo))

    @SETTINGS
    @given(data=st.data())
    def check(data: st.DataObject) -> None:
        thread = data.draw(st.sampled_from([OTHER, OWN]), label="thread")
        line = data.draw(command(thread, LABELLED), label="command").replace("{root}", root)
        verdict = guard.check_bash(root, OWN, line, root)
        assert verdict.decision == ("deny" if thread == OTHER else verdict.decision), (line, verdict)
        if thread == OWN:
            assert verdict.decision != "deny", (line, verdict)

    check()
