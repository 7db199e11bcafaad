"""cli/quick.py: `leslie spawn` and `leslie reference` parsed without Typer behave exactly like the Typer commands.

Each case runs twice on identical copies of a repository: through the real `leslie` executable (which
takes the quick path for the simple forms) and through the Typer application directly. Exit code, stdout,
stderr and every byte under `.leslie/` must match. Forms the quick parser does not take fall through to
Typer, which the last tests check.
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
    command = [LESLIE_EXE, *argv] if via == "quick" else [sys.executable, "-c", TYPER, *argv]
    proc = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=60, check=False,
                          env={**os.environ, **(env or {})})
    # the two twins run a moment apart: their timestamps may differ by a second
    stdout = re.sub(r'"created_at": "[^"]*"', '"created_at": "…"', proc.stdout)
    return proc.returncode, stdout, proc.stderr


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
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_quick_path_matches_typer(twins: tuple[Path, Path], case: str) -> None:
    quick_root, typer_root = twins
    argv = CASES[case]
    quick = run([*argv, "--root", str(quick_root)], quick_root, "quick")
    typer = run([*argv, "--root", str(typer_root)], typer_root, "typer")
    assert quick == typer
    assert tree_digest(quick_root / ".leslie") == _digest_without_times(typer_root, quick_root)


def _digest_without_times(typer_root: Path, quick_root: Path) -> dict[str, str]:
    """The Typer twin's digest, with files that differ only in `created_at` taken from the quick twin."""
    digest = tree_digest(typer_root / ".leslie")
    for rel, value in tree_digest(quick_root / ".leslie").items():
        if digest.get(rel) != value and rel.endswith(".json"):
            a = (quick_root / ".leslie" / rel).read_text().splitlines()
            b = (typer_root / ".leslie" / rel).read_text().splitlines()
            same = [x for x, y in zip(a, b, strict=True) if x != y and not x.lstrip().startswith('"created_at"')]
            if not same:
                digest[rel] = value
    return digest


def test_reference_uses_the_current_thread(twins: tuple[Path, Path]) -> None:
    quick_root, typer_root = twins
    env = {"LESLIE_THREAD": "thread-c"}
    quick = run(["reference", "--target", "thread-a", "--root", str(quick_root)], quick_root, "quick", env)
    typer = run(["reference", "--target", "thread-a", "--root", str(typer_root)], typer_root, "typer", env)
    assert quick == typer
    assert quick[0] == 0


def test_several_active_objectives_refused_alike(twins: tuple[Path, Path]) -> None:
    for root in twins:
        create_objective(Repository(root), "Second", objective_id="obj-second")
    quick = run(["spawn", "--intent", "x", "--root", str(twins[0])], twins[0], "quick")
    typer = run(["spawn", "--intent", "x", "--root", str(twins[1])], twins[1], "typer")
    assert quick == typer
    assert quick[0] == 2


QUICK_PROBE = ("import sys\nfrom leslie.__main__ import main\ncode = main(sys.argv[1:])\n"
               "print('TYPER' if 'typer' in sys.modules else 'QUICK', code)\n")


@pytest.mark.parametrize(("argv", "quick"), [
    (["spawn", "--intent", "x"], True),
    (["reference", "--thread", "thread-c", "--target", "thread-a", "--json"], True),
    (["spawn", "--intent", "x", "--context"], False),
    (["spawn", "--help"], False),
    (["spawn", "--intent", "x", "--intent", "y"], False),
    (["spawn", "--intent", "-starts-with-a-dash"], False),
    (["spawn", "--title", "no intent"], False),
    (["reference", "thread-a", "--thread", "thread-c"], True),
    (["reference", "thread-a", "thread-b"], False),
    (["reference", "--scope", "plan.md"], False),
])
def test_only_simple_forms_skip_typer(twins: tuple[Path, Path], argv: list[str], quick: bool) -> None:
    root = twins[0]
    proc = subprocess.run([sys.executable, "-c", QUICK_PROBE, *argv], cwd=root, capture_output=True, text=True,
                          timeout=60, check=False)
    assert proc.stdout.splitlines()[-1].startswith("QUICK" if quick else "TYPER"), proc.stdout + proc.stderr
