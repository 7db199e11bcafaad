"""The distribution's name: `leslie` on the package index is an unrelated project (issue 17)."""

from __future__ import annotations

import importlib.metadata
import tomllib
from pathlib import Path

from leslie.version import __version__

PYPROJECT = Path(__file__).resolve().parent.parent / "pyproject.toml"


def test_the_distribution_has_a_name_of_its_own() -> None:
    project = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))["project"]
    assert project["name"] == "leslie-threads"
    # the command stays `leslie`: an entry point, so pip, pipx and uv all make it (tests/test_install.py)
    assert project["scripts"] == {"leslie": "leslie.__main__:main"}
    assert importlib.metadata.version("leslie-threads") == __version__


def test_the_readme_names_the_distribution() -> None:
    readme = (PYPROJECT.parent / "README.md").read_text(encoding="utf-8")
    assert "leslie-threads" in readme
    assert "pip install leslie\n" not in readme and "pip install leslie " not in readme
