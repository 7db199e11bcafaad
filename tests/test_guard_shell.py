"""The write guard on shell commands: what a user expects caught before the call, and what must pass.

Each case is a realistic command an agent of `thread-own` could run in a real leslie repository that also
holds `thread-other`. "deny" means the guard must refuse it before it runs; None means the guard has no
objection (the agent's own permission rules decide). `{root}` stands for the repository's absolute path.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from leslie.guard import rules as guard
from leslie.guard.paths import Verdict
from leslie.ops.threads import spawn
from leslie.store.repository import Repository

OWN = "thread-own"
OTHER = "thread-other"
O = f".leslie/threads/{OTHER}"  # noqa: E741 (short names keep the table readable)
M = f".leslie/threads/{OWN}"
DENY = "deny"


@pytest.fixture
def root(repo: Repository) -> str:
    spawn(repo, "Own work", thread_id=OWN)
    spawn(repo, "Someone else's", thread_id=OTHER)
    (repo.root / "src").mkdir()
    (repo.root / "notes.md").write_text("notes\n")
    (repo.root / "fix.diff").write_text(f"--- a/{O}/plan.md\n+++ b/{O}/plan.md\n@@ -1 +1 @@\n-a\n+b\n")
    return str(repo.root)


def verdict_of(root: str, command: str, cwd: str = "") -> Verdict:
    """The guard's verdict as a hook gives it: with no root and thread from the working directory when it
    lies outside the repository (the root is then found from the paths the command writes)."""
    command = command.replace("{root}", root)
    if cwd.startswith("/"):
        return guard.check_bash(None, None, command, cwd, thread_of=lambda _root: OWN)
    return guard.check_bash(root, OWN, command, os.path.join(root, cwd))


CASES: list[tuple[str, str | None, str]] = [
    # -- 1. the root found from the written path, not only from the working directory
    (f"echo x > {{root}}/{O}/plan.md", DENY, "/"),
    (f"cp notes.md {{root}}/{O}/", DENY, "/tmp"),
    (f"sed -i s/a/b/ {{root}}/{O}/plan.md", DENY, "/tmp"),
    ("rm -rf {root}", DENY, "/tmp"),
    (f"echo x > {{root}}/{M}/plan.md", None, "/tmp"),
    # -- 2. `#` inside a word is no comment
    (f"echo a#b; echo x > {O}/plan.md", DENY, ""),
    (f"echo a#b >{O}/plan.md", DENY, ""),
    (f"echo x # > {O}/plan.md", None, ""),
    (f"echo issue#12 > {M}/progress.md", None, ""),
    # -- 3. leslie's own folder and state files: changed through leslie commands only
    ("rm -rf .leslie", DENY, ""),
    ("mv .leslie /tmp/x", DENY, ""),
    ("rm -r .leslie/threads", DENY, ""),
    (f"echo '{{}}' > {M}/thread.json", DENY, ""),
    (f"sed -i 's/active/done/' {M}/thread.json", DENY, ""),
    (f"cp /tmp/t.json {O}/thread.json", DENY, ""),
    ("echo '{}' > .leslie/objectives/objective-x/objective.json", DENY, ""),
    ("echo '{}' > .leslie/thread_relations.json", DENY, ""),
    ("echo 'timeout = 1' >> .leslie/config.toml", DENY, ""),
    ("cp evil.j2 .leslie/templates/thread_context.xml.j2", DENY, ""),
    ("rm -rf .leslie/state", DENY, ""),
    ("rm -rf .", DENY, ""),
    ("rm -rf ..", DENY, "src"),
    ("rm -rf .*", DENY, ""),
    (f"rm -rf {M}", DENY, ""),
    ("rm -rf build/ dist *.egg-info", None, ""),
    ("rm -rf *", None, ""),
    (f"rm -rf {M}/design/old", None, ""),
    (f"mkdir -p {M}/design/api && touch {M}/artifacts/out.txt", None, ""),
    (f"rm -f {M}/*.md", None, ""),
    # -- 4. shells, here-documents fed to shells, eval
    (f"bash -lc 'echo x > {O}/plan.md'", DENY, ""),
    (f"bash -ec 'rm {O}/plan.md'", DENY, ""),
    (f"sh -xc 'touch {O}/x'", DENY, ""),
    (f"bash -o pipefail -c 'cat a | tee {O}/plan.md'", DENY, ""),
    (f"bash --norc -c \"echo x >> {O}/plan.md\"", DENY, ""),
    (f"bash <<'EOF'\necho x > {O}/plan.md\nEOF", DENY, ""),
    (f"sh -s <<EOF\nrm -f {O}/plan.md\nEOF", DENY, ""),
    (f"bash <<< 'rm {O}/plan.md'", DENY, ""),
    (f"echo 'rm {O}/plan.md' | sh", DENY, ""),
    (f"eval \"echo x > {O}/plan.md\"", DENY, ""),
    ("eval 'rm -rf .leslie'", DENY, ""),
    (f"bash -c \"sh -c 'rm {O}/plan.md'\"", DENY, ""),
    (f"bash -c 'echo x > {M}/plan.md'", None, ""),
    # -- 5. directories that may or may not change
    (f"cd {O} || true; echo x > plan.md", DENY, ""),
    (f"cd {O}; cd /tmp; cd -; echo x > plan.md", DENY, ""),
    (f"( cd {O}; echo x > plan.md )", DENY, ""),
    (f"(cd {M}); echo x > plan.md", None, ""),
    (f"pushd {O} && echo x > plan.md; popd", DENY, ""),
    (f"pushd {O} >/dev/null; pushd /tmp; popd; rm plan.md", DENY, ""),
    (f"{{ cd {O}; echo x > plan.md; }}", DENY, ""),
    (f"echo $(cd {O} && rm plan.md)", DENY, ""),
    (f"x=`rm {O}/plan.md`", DENY, ""),
    (f"cd {M} && echo x > plan.md", None, ""),
    (f"cd nowhere; echo x > {M}/plan.md", None, ""),
    (f"cd .leslie/threads && cd {OWN} && echo x > plan.md", None, ""),
    # -- 6. keywords and prefixes before a command
    (f"if true; then echo x > {O}/plan.md; fi", DENY, ""),
    (f"for f in a b; do rm {O}/$f; done", DENY, ""),
    (f"! rm {O}/plan.md", DENY, ""),
    (f"while false; do :; done; time rm {O}/plan.md", DENY, ""),
    (f"if false; then :; else cp notes.md {O}/plan.md; fi", DENY, ""),
    (f"case x in x) rm {O}/plan.md;; esac", DENY, ""),
    (f"f() {{ rm {O}/plan.md; }}; f", DENY, ""),
    # -- 7. wrappers and their options
    (f"nice -n 5 cp notes.md {O}/plan.md", DENY, ""),
    (f"timeout -s KILL 5 tee {O}/plan.md < notes.md", DENY, ""),
    (f"timeout 5s rm {O}/plan.md", DENY, ""),
    (f"sudo -u bob rm {O}/plan.md", DENY, ""),
    (f"env -u HOME rm {O}/plan.md", DENY, ""),
    (f"env -C {O} rm plan.md", DENY, ""),
    (f"env -C {O} cat plan.md; echo x > notes.md", None, ""),  # -C is for that command only
    (f"stdbuf -o0 tee {O}/plan.md < notes.md", DENY, ""),
    (f"ionice -c 3 rm {O}/plan.md", DENY, ""),
    (f"ls | xargs -I{{}} cp {{}} {O}/", DENY, ""),
    (f"command -p rm {O}/plan.md", DENY, ""),
    (f"exec -a name rm {O}/plan.md", DENY, ""),
    (f"FOO=1 nohup sh -c 'rm {O}/plan.md' &", DENY, ""),
    (f"find {O} -name '*.md' -delete", DENY, ""),
    (f"find {O} -name '*.md' -exec rm {{}} \\;", DENY, ""),
    ("find . -name '*.pyc' -delete", None, ""),
    # -- 8. git commands that write the working tree (pathspecs; whole-tree cases in test_git_*)
    (f"git checkout -- {O}/plan.md", DENY, ""),
    (f"git checkout HEAD~1 -- {O}/plan.md", DENY, ""),
    (f"git restore {O}/plan.md", DENY, ""),
    (f"git restore --source=HEAD~2 --worktree {O}", DENY, ""),
    (f"git rm -r {O}", DENY, ""),
    (f"git mv {O}/plan.md elsewhere.md", DENY, ""),
    (f"git stash push -- {O}/plan.md", DENY, ""),
    (f"git clean -fd {O}", DENY, ""),
    (f"git -C {O} checkout -- plan.md", DENY, ""),
    (f"git -C {{root}} restore {O}/plan.md", DENY, "/tmp"),
    (f"git rm --cached {O}/plan.md", None, ""),
    (f"git restore --staged {O}/plan.md", None, ""),
    (f"git diff {O}/plan.md && git log --oneline -- {O}", None, ""),
    ("git checkout -- src/app.py && git add -A && git commit -m 'rm -rf .leslie'", None, ""),
    (f"git checkout -- {M}/plan.md", None, ""),
    # -- 9. downloads and archives
    (f"curl -o {O}/page.html https://example.invalid/", DENY, ""),
    (f"curl --output {O}/page.html https://example.invalid/", DENY, ""),
    (f"curl -sSLo {O}/page.html https://example.invalid/", DENY, ""),
    (f"curl -o{O}/page.html https://example.invalid/", DENY, ""),
    ("curl -O https://example.invalid/page.html", DENY, O),
    (f"wget -O {O}/page.html https://example.invalid/", DENY, ""),
    (f"wget -qP {O} https://example.invalid/", DENY, ""),
    (f"tar -C {O} -xf a.tar", DENY, ""),
    (f"tar -xzf a.tgz -C {O}", DENY, ""),
    (f"tar xzf a.tgz -C {O}", DENY, ""),
    (f"tar czf {O}/backup.tgz src", DENY, ""),
    (f"unzip -d {O} a.zip", DENY, ""),
    (f"unzip -o a.zip -d {O}", DENY, ""),
    ("unzip a.zip", DENY, O),
    (f"cpio -idm -D {O} < a.cpio", DENY, ""),
    (f"patch -o {O}/plan.md notes.md fix.diff", DENY, ""),
    ("patch -p1 < fix.diff", DENY, O),
    (f"python3 -m zipfile -e a.zip {O}", DENY, ""),
    ("curl -O https://example.invalid/page.html", None, ""),
    (f"curl -sSLo {M}/artifacts/page.html https://example.invalid/", None, ""),
    (f"curl -d @{O}/plan.md https://example.invalid/", None, ""),
    ("tar -xf a.tar -C build", None, ""),
    (f"tar -tvf a.tar -C {O}", None, ""),
    (f"tar -cf - -C {O} . | gzip > {M}/artifacts/other.tgz", None, ""),
    (f"unzip -l a.zip -d {O}", None, ""),
    # -- 10. $PWD, ${{PWD}}, $HOME, ~ (HOME is the repository in test_home_and_tilde)
    (f"echo x > $PWD/{O}/plan.md", DENY, ""),
    (f"echo x > ${{PWD}}/{O}/plan.md", DENY, ""),
    (f"echo x > \"$PWD/{O}/plan.md\"", DENY, ""),
    (f"cd src && rm $PWD/../{O}/plan.md", DENY, ""),
    # -- 11. case-insensitive volumes
    (".Leslie/Threads/THREAD-other/plan.md", None, ""),  # only a word, not a write
    ("echo x > .Leslie/Threads/THREAD-other/plan.md", DENY, ""),
    ("rm -rf .LESLIE", DENY, ""),
    (f"echo x > {M}/Thread.JSON", DENY, ""),
    (f"echo x > .leslie/threads/{OWN.upper()}/plan.md", None, ""),
    # -- quoting, expansions, globs and variables that visibly target another thread
    (f"echo x > '{O}/plan.md'", DENY, ""),
    ("echo x > .les\"lie\"/threads/thread-other/plan.md", DENY, ""),
    ("echo x > .leslie/thre\\ads/thread-other/plan.md", DENY, ""),
    ("echo x > $'.leslie/threads/thread-\\x6fther/plan.md'", DENY, ""),
    ("rm .leslie/threads/*/plan.md", DENY, ""),
    ("echo x > .leslie/threads/$T/plan.md", DENY, ""),
    ("touch .leslie/threads/{thread-own,thread-other}/x", DENY, ""),
    (f"D={O}; echo x > $D/plan.md", DENY, ""),
    (f"export D={O} && rm \"$D/plan.md\"", DENY, ""),
    (f"tee >(cat > {O}/plan.md) < notes.md", DENY, ""),
    (f"cp notes.md {M}/$NAME", None, ""),
    (f"rm {M}/*.md {M}/design/*", None, ""),
    (f"diff <(cat {O}/plan.md) {M}/plan.md", None, ""),
    # -- other visible writes
    (f"sort -o {O}/plan.md notes.md", DENY, ""),
    (f"gzip {O}/plan.md", DENY, ""),
    (f"chmod 000 {O}/plan.md", DENY, ""),
    (f"ln -sf /etc/passwd {O}/plan.md", DENY, ""),
    (f"install -m 644 notes.md {O}/plan.md", DENY, ""),
    (f"mv /tmp/thread.json {M}/", DENY, ""),  # into a folder: the file keeps its name
    ("cp -r /tmp/evil/.leslie .", DENY, ""),
    (f"cp -t {M} /tmp/x/thread.json", DENY, ""),
    (f"cp notes.md src/app.py {M}/design/", None, ""),
    ("rsync -a /tmp/evil/ src/", None, ""),
    (f"rsync -a src/ {O}/", DENY, ""),
    ("rsync -a --delete src/ ./", DENY, ""),
    (f"truncate -s 0 {O}/plan.md", DENY, ""),
    (f"dd if=/dev/zero of={O}/plan.md bs=1 count=1", DENY, ""),
    (f"cat notes.md > {M}/plan.md 2> {O}/err.log", DENY, ""),
    (f"{{ echo a; echo b; }} > {O}/plan.md", DENY, ""),
    (f"while read l; do echo $l; done < notes.md > {O}/plan.md", DENY, ""),
    (f"exec 3> {O}/plan.md", DENY, ""),
    # -- loops, pipes into xargs, find filters, patches read from their files
    (f"for f in {O}/*.md; do rm \"$f\"; done", DENY, ""),
    (f"for f in {M}/*.md; do cp \"$f\" {M}/artifacts/; done", None, ""),
    (f"echo {O}/plan.md | xargs rm", DENY, ""),
    (f"find {O} -name '*.md' | xargs rm -f", DENY, ""),
    (f"find {O} -name '*.md' -print0 | xargs -0 -I{{}} cp notes.md {{}}", DENY, ""),
    (f"echo {O}/plan.md | xargs cat", None, ""),
    (f"find . -path './{O}/*' -delete", DENY, ""),
    ("find . -name '*.md' -delete", DENY, ""),
    ("find . -type f -exec sed -i 's/foo/bar/' {} +", DENY, ""),
    ("find . -name '*.orig' -delete && find src -name '*.md' -exec sed -i 's/a/b/' {} +", None, ""),
    (f"find {M} -name '*.bak' -delete", None, ""),
    ("find . -name '*.md' -exec grep -l TODO {} +", None, ""),
    (f"watch -n 1 'echo x > {O}/plan.md'", DENY, ""),
    (f"ed -s {O}/plan.md <<< $'1d\\nw'", DENY, ""),
    ("git apply fix.diff", DENY, ""),
    ("patch -p1 < fix.diff", DENY, ""),
    ("patch -p1 -i fix.diff", DENY, ""),
    (f"echo x > \"$(pwd)/{O}/plan.md\"", DENY, ""),
    (f"cd \"$(git rev-parse --show-toplevel)\" && rm {O}/plan.md", DENY, ""),
    (f": > {O}/plan.md", DENY, ""),
    (f"exec {{fd}}> {O}/plan.md", DENY, ""),
    (f"echo hi | {{ T={O}; curl -sSLo $T/plan.md https://example.invalid/; }}", DENY, ""),
    # -- 12. no false denials: reading, data, and the own thread's assets
    (f"cat > {M}/plan.md <<'EOF'\n# Plan\necho x > {O}/plan.md\nrm -rf .leslie\nEOF", None, ""),
    (f"cat <<EOF > {M}/notes.md\nbash -c 'rm {O}/plan.md'\nEOF", None, ""),
    (f"perl -I lib -Mstrict -ne 'print' {O}/plan.md", None, ""),
    (f"perl -Mwarnings -e 'print 1' > {M}/artifacts/out.txt", None, ""),
    (f"sed -n 5p {O}/plan.md", None, ""),
    (f"sed -E 's/a/b/' {O}/plan.md > {M}/plan.md", None, ""),
    (f"grep -i todo {O}/plan.md", None, ""),
    (f"cp {O}/plan.md {M}/design/their-plan.md", None, ""),
    (f"wc -l < {O}/plan.md", None, ""),
    (f"head -n 5 {O}/plan.md > {M}/notes.md", None, ""),
    (f"ls -la {O} 2>&1", None, ""),
    (f"echo \"rm -rf .leslie\" > {M}/notes.md", None, ""),
    (f"printf '%s\\n' '> {O}/plan.md' >> {M}/progress.md", None, ""),
    (f"grep -rn 'echo x > {O}' src", None, ""),
    (f"[[ -f {O}/plan.md && 2 > 1 ]] && echo yes", None, ""),
    ("(( n > 3 )) && echo big", None, ""),
    ("git status --short && pytest -q > /dev/null 2>&1", None, ""),
    (f"echo x > {M}/plan.md; echo y >> {M}/progress.md; mkdir -p {M}/artifacts/run1", None, ""),
    (f"cd {M}/design && rm -f old.md && cp ../plan.md plan-v1.md", None, ""),
    ("", None, ""),
]


@pytest.mark.parametrize(("command", "expected", "cwd"), CASES, ids=[f"{i}" for i in range(len(CASES))])
def test_what_a_user_expects(root: str, command: str, expected: str | None, cwd: str) -> None:
    verdict = verdict_of(root, command, cwd)
    assert verdict.decision == expected, (command, verdict)
    if expected == DENY:
        assert verdict.reason


def test_the_root_is_found_from_another_repository(root: str, tmp_path: Path) -> None:
    """An agent working in another leslie repository writes into this one by its absolute path."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / ".leslie" / "threads" / "thread-b").mkdir(parents=True)
    command = f"cp notes.md {root}/{O}/plan.md"
    # Judged by the thread this repository records for the session, never by the other repository's own.
    assert guard.check_bash(str(elsewhere), "thread-b", command, str(elsewhere), thread_of=lambda r: OWN).decision \
        == DENY
    assert guard.check_bash(str(elsewhere), "thread-b", command, str(elsewhere)).decision is None
    assert guard.check_bash(str(elsewhere), "thread-b", command, str(elsewhere),
                            thread_of=lambda r: None).decision is None
    assert guard.check_bash(None, None, command, "/", thread_of=lambda r: OWN).decision == DENY
    mine = f"cp notes.md {root}/{M}/plan.md"
    assert guard.check_bash(None, None, mine, "/", thread_of=lambda r: OWN).decision is None
    assert guard.check_bash(None, None, command, "/", thread_of=lambda r: None).decision is None


def test_home_and_tilde(root: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", root)
    for command in (f"echo x > ~/{O}/plan.md", f"rm $HOME/{O}/plan.md", f"cp a ${{HOME}}/{O}/",
                    f"cd ~ && rm {O}/plan.md", f"cd && rm {O}/plan.md", "rm -rf ~"):
        assert guard.check_bash(root, OWN, command, "/tmp").decision == DENY, command
    for command in (f"echo x > ~/{M}/plan.md", f"echo '~/{O}/plan.md' > ~/{M}/notes.md"):
        assert guard.check_bash(root, OWN, command, "/tmp").decision is None, command


def test_a_symlink_into_another_thread_is_followed(root: str) -> None:
    (Path(root) / "shortcut").symlink_to(Path(root) / O)
    assert verdict_of(root, "echo x > shortcut/plan.md").decision == DENY
    (Path(root) / M / "peek").symlink_to(Path(root) / O / "design")
    assert verdict_of(root, f"echo x > {M}/peek/../plan.md").decision == DENY
    assert verdict_of(root, "cd shortcut && touch x").decision == DENY


def test_the_reason_names_both_threads(root: str) -> None:
    verdict = verdict_of(root, f"cd /tmp && cp notes.md {root}/{O}/plan.md")
    assert OTHER in verdict.reason and OWN in verdict.reason
    state = verdict_of(root, f"echo '{{}}' > {M}/thread.json")
    assert "leslie" in state.reason and "thread.json" in state.reason


# -- git commands that rewrite the whole working tree ----------------------------------------------------
@pytest.fixture
def committed(root: str) -> str:
    """The repository with everything committed, ready for local changes."""
    from conftest import git

    git("add", "-A", cwd=Path(root))
    git("commit", "-qm", "start", cwd=Path(root))
    return root


WHOLE_TREE = ["git stash", "git stash push -m wip", "git stash -u", "git reset --hard", "git reset --hard HEAD~0",
              "git checkout .", "git checkout -- .", "git restore .", "git checkout -f", "git clean -fd",
              "git clean -fdx", "cd src && git checkout -- ..", "git -C {root} stash"]


@pytest.mark.parametrize("command", WHOLE_TREE)
def test_whole_tree_git_commands_are_denied_when_another_thread_has_changes(committed: str, command: str) -> None:
    root = committed
    plan = Path(root) / O / "plan.md"
    plan.write_text(plan.read_text() + "their uncommitted work\n")
    (Path(root) / O / "new-notes.md").write_text("untracked, theirs\n")
    verdict = verdict_of(root, command)
    assert verdict.decision == DENY, (command, verdict)
    assert OTHER in verdict.reason or ".leslie/state" in verdict.reason  # -x: leslie's ignored state too


@pytest.mark.parametrize("command", WHOLE_TREE)
def test_whole_tree_git_commands_pass_when_only_own_work_changed(committed: str, command: str) -> None:
    root = committed
    (Path(root) / "notes.md").write_text("changed\n")
    (Path(root) / "src" / "new.py").write_text("untracked\n")
    plan = Path(root) / M / "plan.md"
    plan.write_text(plan.read_text() + "my uncommitted work\n")
    (Path(root) / M / "design" / "draft.md").parent.mkdir(exist_ok=True)
    (Path(root) / M / "design" / "draft.md").write_text("untracked, mine\n")
    # leslie's own state is in .git/leslie/ (`store.machine`), which even `git clean -fdx` leaves alone
    assert verdict_of(root, command).decision is None, command


def test_git_clean_keeps_to_what_it_would_remove(committed: str) -> None:
    root = committed
    (Path(root) / O / "new-notes.md").write_text("untracked, theirs\n")
    assert verdict_of(root, "git clean -fd src").decision is None
    assert verdict_of(root, "git clean -fdx -e .leslie").decision is None
    assert verdict_of(root, "git clean -n").decision is None  # a dry run writes nothing
    assert verdict_of(root, "git stash list && git stash show").decision is None
