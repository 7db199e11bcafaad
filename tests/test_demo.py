"""`leslie demo`, through the real executable, and from a package laid out as the wheel installs it."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

from conftest import git, run_leslie
from test_context import parse_valid

PROJECT = Path(__file__).parents[1]


def block_in(text: str) -> str:
    match = re.search(r"^<thread_context .*?^</thread_context>\n", text, re.MULTILINE | re.DOTALL)
    assert match is not None, text
    return match.group(0)


def test_demo_shows_a_context_with_whole_and_scoped_refs(tmp_path: Path) -> None:
    result = run_leslie("demo", cwd=tmp_path)
    assert result.code == 0, result.stderr
    root = parse_valid(block_in(result.stdout))
    refs = root.findall("ref")
    sizes = {len(ref.findall("asset")) for ref in refs}
    assert 4 in sizes and min(sizes) < 4  # a whole reference (all four asset types) and a scoped one
    assert "AGENTS.md" in result.stdout and "read-only" in result.stdout
    path = re.search(r"^Demo repository: (\S+)", result.stdout, re.MULTILINE)
    assert path is not None and not Path(path.group(1)).exists()  # not kept: cleaned up
    assert not list(tmp_path.iterdir())  # nothing left in the working directory


def test_demo_keep_builds_a_repository_to_explore(tmp_path: Path) -> None:
    where = tmp_path / "demo"
    result = run_leslie("demo", "--keep", str(where), cwd=tmp_path)
    assert result.code == 0, result.stderr
    assert f"Demo repository: {where}" in result.stdout
    assert (where / ".git").is_dir() and (where / ".leslie" / "thread_relations.json").is_file()
    assert "<!-- leslie:begin version=" in (where / "AGENTS.md").read_text(encoding="utf-8")
    assert run_leslie("doctor", cwd=where).code == 0
    assert run_leslie("agents-md", "--check", cwd=where).code == 0
    assert "Example repository" in git("log", "--oneline", cwd=where)
    block = block_in(result.stdout)
    thread = parse_valid(block).get("thread")
    assert run_leslie("context", "--thread", thread, cwd=where).stdout == block

    again = run_leslie("demo", "--keep", str(where), cwd=tmp_path)
    assert again.code == 2 and "--keep" in again.stderr


def test_demo_json(tmp_path: Path) -> None:
    result = run_leslie("demo", "--json", cwd=tmp_path)
    assert result.code == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["kept"] is False
    assert parse_valid(data["context"]).get("thread") == data["thread"]
    assert len(data["objectives"]) >= 2 and len(data["threads"]) >= 5


def test_the_wheel_ships_the_example_as_leslie_example() -> None:
    config = tomllib.loads((PROJECT / "pyproject.toml").read_text(encoding="utf-8"))
    force = config["tool"]["hatch"]["build"]["targets"]["wheel"]["force-include"]
    assert force == {".leslie.example": "leslie/example"}


def test_demo_runs_from_the_installed_package_layout(tmp_path: Path) -> None:
    # The wheel's layout: site-packages/leslie/ with the example at leslie/example (no checkout around it).
    site = tmp_path / "site"
    shutil.copytree(PROJECT / "src" / "leslie", site / "leslie", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(PROJECT / ".leslie.example", site / "leslie" / "example")
    code = (
        "import sys\n"
        f"sys.path.insert(0, {str(site)!r})\n"
        "import leslie.ops.demo\n"
        "print(leslie.ops.demo.example_tree())\n"
        "from leslie.__main__ import main\n"
        "sys.exit(main(['demo']))\n"
    )
    work = tmp_path / "work"
    work.mkdir()
    result = subprocess.run([sys.executable, "-c", code], cwd=work, capture_output=True, text=True, check=False,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    first, _, rest = result.stdout.partition("\n")
    assert first == str(site / "leslie" / "example")
    parse_valid(block_in(rest))
