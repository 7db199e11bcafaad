"""cli/lite.py: every command's common forms, parsed without Typer, behave exactly like the Typer commands.

Each case runs twice on identical copies of a repository: through the real `leslie` executable (which
takes the lite path for the plain forms) and through the Typer application directly. Exit code, stdout,
stderr and every byte under `.leslie/` must match. Forms the lite parser does not take fall through to
Typer, which the last tests check; `registry.HOME` is checked against the whole app.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import LESLIE_EXE, tree_digest
from leslie.ops.objectives import create_objective
from leslie.ops.threads import reference, spawn
from leslie.store.repository import Repository

TYPER = "import sys\nfrom leslie.cli.app import run\nsys.exit(run(sys.argv[1:]))\n"


def run(argv: list[str], cwd: Path, via: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    command = [LESLIE_EXE, *argv] if via == "lite" else [sys.executable, "-c", TYPER, *argv]
    proc = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=60, check=False,
                          env={**os.environ, **(env or {})})
    # the two twins run a moment apart: their timestamps may differ by a second
    stdout = re.sub(r'"(created|deleted)_at": "[^"]*"', r'"\1_at": "…"', proc.stdout)
    # the twins live in different folders: a path that names the root is the same path
    root = str(cwd)
    return proc.returncode, stdout.replace(root, "<root>"), proc.stderr.replace(root, "<root>")


@pytest.fixture
def twins(repo: Repository, tmp_path: Path) -> tuple[Path, Path]:
    spawn(repo, "thread a", thread_id="thread-a")
    spawn(repo, "thread b", thread_id="thread-b")
    (repo.layout.thread_dir("thread-b") / "design").mkdir()
    (repo.layout.thread_dir("thread-b") / "design" / "api.md").write_text("api")
    spawn(repo, "thread c", thread_id="thread-c")
    spawn(repo, "prefixed one", thread_id="thread-pfx-one")
    spawn(repo, "prefixed two", thread_id="thread-pfx-two")
    reference(repo, "thread-a", "thread-b")
    other = tmp_path / "twin"
    shutil.copytree(repo.root, other, symlinks=True)
    return repo.root, other


CASES = {
    "spawn": ["spawn", "--intent", "Fix the login bug", "--id", "thread-new"],
    "spawn-json": ["spawn", "--intent=Multi\nline intent", "--id=thread-new", "--json"],
    "spawn-title-refs": ["spawn", "--intent", "x", "--title", "A title", "--id", "thread-new", "--ref", "thread-a",
                         "--ref", "thread-b:design/api.md", "--ref", "thread-b:plan.md"],
    "spawn-parent-objective": ["spawn", "--intent", "x", "--id", "thread-new", "--parent", "thread-a",
                               "--objective", "obj-default"],
    "spawn-missing-scope-warning": ["spawn", "--intent", "x", "--id", "thread-new", "--ref", "thread-a:nope.md"],
    "spawn-bad-id": ["spawn", "--intent", "x", "--id", "Thread-Bad"],
    "spawn-existing-id": ["spawn", "--intent", "x", "--id", "thread-a"],
    "spawn-bad-ref": ["spawn", "--intent", "x", "--ref", "thread-missing"],
    "spawn-bad-scope": ["spawn", "--intent", "x", "--ref", "thread-a:../escape"],
    "spawn-no-objective": ["spawn", "--intent", "x", "--objective", "obj-missing"],
    "spawn-empty-intent": ["spawn", "--intent", " "],
    "reference": ["reference", "--thread", "thread-c", "--target", "thread-a"],
    "reference-scopes": ["reference", "--thread", "thread-c", "--target", "thread-b", "--scope", "design/api.md",
                         "--scope", "plan.md"],
    "reference-json": ["reference", "--thread=thread-c", "--target=thread-b", "--json"],
    "reference-unchanged": ["reference", "--thread", "thread-a", "--target", "thread-b"],
    "reference-self": ["reference", "--thread", "thread-a", "--target", "thread-a"],
    "reference-missing": ["reference", "--thread", "thread-a", "--target", "thread-zzz"],
    "reference-no-thread": ["reference", "--target", "thread-a"],
    "reference-bad-scope": ["reference", "--thread", "thread-a", "--target", "thread-b", "--scope", "/etc/passwd"],
    # one reference syntax (issue 17): ID[:SCOPE] as reference's argument or --target, --scope on spawn
    "reference-argument": ["reference", "thread-b", "--thread", "thread-c"],
    "reference-argument-scope": ["reference", "--thread", "thread-c", "thread-b:design/api.md", "--scope", "plan.md"],
    "reference-target-scope": ["reference", "--thread", "thread-c", "--target", "thread-b:design/api.md"],
    "reference-argument-and-target": ["reference", "thread-b", "--thread", "thread-c", "--target", "thread-a"],
    "reference-argument-bad": ["reference", "thread-b:../x", "--thread", "thread-c"],
    "spawn-ref-scope": ["spawn", "--intent", "x", "--id", "thread-new", "--ref", "thread-b", "--scope",
                        "design/api.md", "--scope", "plan.md"],
    "spawn-refs-scope": ["spawn", "--intent", "x", "--id", "thread-new", "--ref", "thread-b", "--ref", "thread-a",
                         "--scope", "plan.md"],
    "spawn-scope-alone": ["spawn", "--intent", "x", "--id", "thread-new", "--scope", "plan.md"],
    # IDs named by a unique prefix (store/names.py): resolved alike, stored in full; ambiguous or unknown alike
    "spawn-prefixes": ["spawn", "--intent", "x", "--id", "thread-new", "--ref", "pfx-o:plan.md", "--ref",
                       "thread-pfx-t", "--parent", "b", "--objective", "default"],
    "spawn-ambiguous-ref": ["spawn", "--intent", "x", "--ref", "pfx"],
    "spawn-ambiguous-parent": ["spawn", "--intent", "x", "--parent", "thread-pfx-"],
    "spawn-unknown-prefix": ["spawn", "--intent", "x", "--ref", "zz"],
    "spawn-unknown-objective-prefix": ["spawn", "--intent", "x", "--objective", "zz"],
    "reference-prefixes": ["reference", "--thread", "pfx-o", "--target", "thread-pfx-t", "--scope", "plan.md"],
    "reference-ambiguous": ["reference", "--thread", "c", "--target", "pfx"],
    "reference-ambiguous-thread": ["reference", "--thread", "thread-p", "--target", "a"],
    "reference-unknown-prefix": ["reference", "--thread", "c", "--target", "qq"],
    # reads
    "list": ["list"],
    "list-json": ["list", "--json"],
    "list-status": ["list", "--status", "active"],
    "list-bad-status": ["list", "--status", "nope"],
    "list-tree": ["list", "--tree"],
    "list-objective-prefix": ["list", "--objective", "default", "--json"],
    "show": ["show", "thread-a"],
    "show-prefix-json": ["show", "b", "--json"],
    "show-missing": ["show", "thread-zzz"],
    "show-ambiguous": ["show", "pfx"],
    "relations": ["relations"],
    "relations-json": ["relations", "--format", "json"],
    "relations-mermaid": ["relations", "--format", "mermaid"],
    "relations-bad-format": ["relations", "--format", "nope"],
    "find": ["find", "thread"],
    "find-none": ["find", "zanzibar"],
    "find-json": ["find", "prefixed", "--json"],
    "context": ["context", "--thread", "thread-a"],
    "context-budget": ["context", "--thread", "thread-a", "--budget", "50"],
    "context-no-thread": ["context"],
    "status": ["status", "--thread", "thread-a"],
    "status-json": ["status", "--json"],
    "doctor": ["doctor"],
    "doctor-json": ["doctor", "--json"],
    "objective-list": ["objective", "list"],
    "objective-show": ["objective", "show", "default"],
    "objective-show-missing": ["objective", "show", "obj-zzz"],
    "sessions": ["sessions", "--json"],
    "stats": ["stats"],
    "trust-check": ["trust", "--check"],
    # mutations
    "set-status": ["set-status", "thread-c", "paused"],
    "set-status-bad": ["set-status", "thread-c", "sleeping"],
    "done": ["done", "c", "--json"],
    "pause": ["pause", "thread-a"],
    "archive-resume": ["archive", "thread-pfx-one"],
    "retitle": ["retitle", "thread-a", "A new title"],
    "retitle-empty": ["retitle", "thread-a", " "],
    "rm-referenced": ["rm", "thread-b", "--yes"],
    "rm": ["rm", "thread-c", "--yes"],
    "rm-dry-run": ["rm", "thread-c", "--dry-run"],
    "switch": ["switch", "thread-a"],
    "switch-alone": ["switch"],
    "unreference": ["unreference", "thread-b", "--thread", "thread-a"],
    "unreference-scope": ["unreference", "thread-b:plan.md", "--thread", "thread-a", "--json"],
    "edit-intent": ["edit", "thread-a", "--intent", "A sharper intent"],
    "edit-title-objective": ["edit", "thread-a", "--title", "T", "--objective", "obj-default", "--json"],
    "edit-bad-objective": ["edit", "thread-a", "--objective", "obj-zzz"],
    "objective-create": ["objective", "create", "Ship it", "--id", "obj-ship", "--description", "All of it"],
    "objective-create-bad-id": ["objective", "create", "Ship it", "--id", "Obj-Bad"],
    "objective-retitle": ["objective", "retitle", "default", "Renamed"],
    "objective-set-status": ["objective", "set-status", "default", "done"],
    "gc": ["gc", "--older-than", "0", "--json"],
    "agents-md": ["agents-md", "--check"],
    "root-json-before": ["--json", "show", "thread-a"],
}
# The root comes before the command in these (`leslie --root R show ...`), not after it.
ROOT_FIRST = {"root-json-before"}


@pytest.mark.parametrize("case", sorted(CASES))
def test_lite_path_matches_typer(twins: tuple[Path, Path], case: str) -> None:
    lite_root, typer_root = twins
    argv = CASES[case]
    lite = run(_rooted(argv, lite_root, case), lite_root, "lite")
    typer = run(_rooted(argv, typer_root, case), typer_root, "typer")
    assert lite == typer
    assert _digest(lite_root) == _digest_without_times(typer_root, lite_root)


def _rooted(argv: list[str], root: Path, case: str) -> list[str]:
    return ["--root", str(root), *argv] if case in ROOT_FIRST else [*argv, "--root", str(root)]


def _rooted(argv: list[str], root: Path, case: str) -> list[str]:
    return ["--root", str(root), *argv] if case in ROOT_FIRST else [*argv, "--root", str(root)]


def _digest(root: Path) -> dict[str, str]:
    """Every file under `.leslie/` but the rendered-context cache, whose key holds the files' inode numbers, and
    `find`'s cache (file signatures, and a MAC bound to the repository's path); of the index's digest (keyed by
    the index file's inode and times too) only whether it is there."""
    digest = tree_digest(root / ".leslie")
    for keyed in ("state/index-digest", "state/index.checked"):  # keyed by the index file's inode and times
        if keyed in digest:
            digest[keyed] = "present"
    return {rel: value for rel, value in digest.items() if not rel.startswith(("state/contexts/", "state/find/"))}


def _digest_without_times(typer_root: Path, lite_root: Path) -> dict[str, str]:
    """The Typer twin's digest, with files that differ only in `created_at` or `deleted_at` taken from the lite twin."""
    digest = _digest(typer_root)
    for rel, value in _digest(lite_root).items():
        if digest.get(rel) != value and rel.endswith(".json"):
            a = (lite_root / ".leslie" / rel).read_text().splitlines()
            b = (typer_root / ".leslie" / rel).read_text().splitlines()
            times = ('"created_at"', '"deleted_at"')
            same = [x for x, y in zip(a, b, strict=True) if x != y and not x.lstrip().startswith(times)]
            if not same:
                digest[rel] = value
    # The record of the index's fingerprint (`state/index.checked`) names the index file's inode and ctime: of
    # it, as of the index's digest, the twins compare only whether it is there.
    return digest


def test_reference_uses_the_current_thread(twins: tuple[Path, Path]) -> None:
    lite_root, typer_root = twins
    env = {"LESLIE_THREAD": "thread-c"}
    lite = run(["reference", "--target", "thread-a", "--root", str(lite_root)], lite_root, "lite", env)
    typer = run(["reference", "--target", "thread-a", "--root", str(typer_root)], typer_root, "typer", env)
    assert lite == typer
    assert lite[0] == 0


def test_several_active_objectives_refused_alike(twins: tuple[Path, Path]) -> None:
    for root in twins:
        create_objective(Repository(root), "Second", objective_id="obj-second")
    lite = run(["spawn", "--intent", "x", "--root", str(twins[0])], twins[0], "lite")
    typer = run(["spawn", "--intent", "x", "--root", str(twins[1])], twins[1], "typer")
    assert lite == typer
    assert lite[0] == 2


LITE_PROBE = ("import sys\nfrom leslie.__main__ import main\ncode = main(sys.argv[1:])\n"
              "print('TYPER' if 'typer' in sys.modules else 'LITE', code)\n")


@pytest.mark.parametrize(("argv", "lite"), [
    (["spawn", "--intent", "x"], True),
    (["reference", "--thread", "thread-c", "--target", "thread-a", "--json"], True),
    (["spawn", "--intent", "x", "--context"], True),
    (["--json", "list"], True),
    (["--root", ".", "show", "thread-a"], True),
    (["objective", "list"], True),
    (["context", "--thread", "thread-a", "--budget", "10"], True),
    (["gc", "--older-than", "1.5", "--dry-run"], True),
    (["spawn", "--help"], False),
    (["show", "-h"], False),
    (["-V"], False),
    ([], False),
    (["objective"], False),
    (["nope"], False),
    (["spawn", "--intent", "x", "--intent", "y"], False),
    (["spawn", "--intent", "-starts-with-a-dash"], False),
    (["spawn", "--title", "no intent"], False),
    (["spawn", "--intent", "x", "--nope"], False),
    (["spawn", "--intent", "x", "--"], False),
    (["reference", "thread-a", "thread-b"], False),
    (["list", "--json=yes"], False),
    (["context", "--thread", "thread-a", "--budget", "ten"], False),
    (["gc", "--older-than", "1e3"], False),
    (["acp", "--", "agent"], False),
])
def test_only_plain_forms_skip_typer(twins: tuple[Path, Path], argv: list[str], lite: bool) -> None:
    root = twins[0]
    proc = subprocess.run([sys.executable, "-c", LITE_PROBE, *argv], cwd=root, capture_output=True, text=True,
                          timeout=60, check=False, stdin=subprocess.DEVNULL)
    assert proc.stdout.splitlines()[-1].startswith("LITE" if lite else "TYPER"), proc.stdout + proc.stderr


def test_completion_is_typers(twins: tuple[Path, Path]) -> None:
    proc = subprocess.run([sys.executable, "-c", LITE_PROBE, "show", "thread-a"], cwd=twins[0], text=True,
                          capture_output=True, timeout=60, check=False,
                          env={**os.environ, "_LESLIE_COMPLETE": "bash_complete", "COMP_WORDS": "leslie sh",
                               "COMP_CWORD": "1"})
    assert proc.stdout.splitlines()[-1].startswith("TYPER")


def test_home_names_every_command() -> None:
    """`registry.HOME` (which module to import for a command) agrees with the whole app."""
    from leslie.cli.registry import HOME, home_group, root_group

    whole = root_group()
    assert set(HOME) == set(whole.commands) | set(whole.groups)
    for name in HOME:
        home = home_group(name)
        assert home is not None
        assert name in home.commands or name in home.groups


def test_a_reader_that_goes_away_ends_quietly(twins: tuple[Path, Path]) -> None:
    """`leslie list | head -1`: exit 1 and no traceback or error line, as Click does on the Typer path."""
    for via in ("lite", "typer"):
        command = [LESLIE_EXE] if via == "lite" else [sys.executable, "-c", TYPER]
        proc = subprocess.Popen([*command, "list", "--json", "--root", str(twins[0])], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE)
        assert proc.stdout is not None and proc.stderr is not None
        proc.stdout.close()  # the reader is gone before the first byte
        assert proc.wait(timeout=60) == 1, via
        assert proc.stderr.read() == b"", via


def test_ctrl_c_ends_quietly_with_130_on_both_paths(twins: tuple[Path, Path], tmp_path: Path) -> None:
    """A command interrupted (SIGINT while it works) exits 130 with nothing on stderr, as Typer ends it."""
    sitecustomize = tmp_path / "interrupting"
    sitecustomize.mkdir()
    # Every command reads the repository's layout first: interrupted right there, as a Ctrl-C would.
    (sitecustomize / "sitecustomize.py").write_text(
        "import leslie.store.repository as r\n"
        "def _interrupted(*args, **kwargs):\n    raise KeyboardInterrupt\n"
        "r.Repository.discover = classmethod(_interrupted)\n", encoding="utf-8")
    env = {"PYTHONPATH": str(sitecustomize)}
    for via in ("lite", "typer"):
        code, out, err = run(["list", "--plain", "--root", str(twins[0])], twins[0], via, env)
        assert (code, out, err) == (130, "", ""), via


def test_output_is_whole_when_the_process_skips_its_teardown(twins: tuple[Path, Path], tmp_path: Path) -> None:
    """A one-shot command ends with `os._exit` once it flushed (`leslie.__main__.exit_now`): its output, small
    (left in the stream's buffer) or far larger than the buffer, arrives whole through a pipe and into a
    file, as on the Typer path. Buffered as in a terminal-less run: without PYTHONUNBUFFERED."""
    env = {name: value for name, value in os.environ.items() if name != "PYTHONUNBUFFERED"}
    repo = Repository(twins[0])
    for number in range(400):
        spawn(repo, f"intent {number}", title=f"A long enough title for thread number {number} " * 3,
              thread_id=f"thread-big{number:03d}")
    for command in (["show", "thread-a"], ["list", "--json"], ["list", "--plain"]):
        argv = [*command, "--root", str(twins[0])]
        piped = subprocess.run([LESLIE_EXE, *argv], capture_output=True, check=True, timeout=60, env=env).stdout
        typer = subprocess.run([sys.executable, "-c", TYPER, *argv], capture_output=True, check=True, timeout=60,
                               env=env).stdout
        with open(tmp_path / "out", "wb") as out:
            subprocess.run([LESLIE_EXE, *argv], stdout=out, check=True, timeout=60, env=env)
        assert piped == typer == (tmp_path / "out").read_bytes(), argv
        assert len(piped) > (64 * 1024 if argv[0] == "list" else 100), argv
