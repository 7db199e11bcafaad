"""Every command has help and is documented in docs/commands.md; `--help` stays free of heavy imports."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import typer

from conftest import run_leslie
from leslie.cli.app import app

DOCS = Path(__file__).resolve().parent.parent / "docs" / "commands.md"

# Commands without --root, and why: `hook` runs inside an agent and finds its root from the working directory
# and the event; `merge-relations` is called by git with three file paths; `demo` builds its own repository.
NO_ROOT = {"hook", "merge-relations", "demo"}
# The core commands of SPEC §4 that print data: each must accept --json.
MUST_HAVE_JSON = {
    "init", "doctor", "relations", "objective create", "objective list", "objective show", "objective set-status",
    "spawn", "reference", "unreference", "list", "show", "set-status", "done", "pause", "resume", "archive",
    "retitle", "rm", "switch",
}
HEAVY = ("lxml", "jinja2", "watchdog")


def leaf_commands() -> dict[str, Any]:
    """Every runnable command of the Typer app, by its full name (`objective create`)."""
    found: dict[str, Any] = {}

    def walk(command: Any, prefix: list[str]) -> None:
        subcommands = getattr(command, "commands", None)
        if subcommands:
            assert (command.help or "").strip(), f"command group {' '.join(prefix) or 'leslie'} has no help"
            for name, sub in subcommands.items():
                walk(sub, [*prefix, name])
        else:
            found[" ".join(prefix)] = command

    walk(typer.main.get_command(app), [])
    return found


COMMANDS = leaf_commands()


def option_names(command: Any) -> list[str]:
    return [param.opts[0] for param in command.params if param.opts and param.opts[0].startswith("--")]


def docs_section(name: str) -> str:
    """The part of commands.md that documents `leslie NAME` (its heading or its synopsis names it)."""
    sections = re.split(r"^### ", DOCS.read_text(encoding="utf-8"), flags=re.MULTILINE)[1:]
    for section in sections:
        if section.startswith(f"`leslie {name}`"):
            return section
    # A shortcut (`done`, `pause`, ...) is documented in the synopsis of the command it abbreviates.
    synopsis = re.compile(rf"(^|\| )leslie {re.escape(name)} ", flags=re.MULTILINE)
    return next((section for section in sections if synopsis.search(section)), "")


def test_the_core_commands_exist() -> None:
    for name in MUST_HAVE_JSON:
        assert name in COMMANDS, f"leslie {name} is missing"


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_command_has_help_and_docs(name: str) -> None:
    command = COMMANDS[name]
    assert (command.help or "").strip(), f"leslie {name} has no help (its docstring is its --help)"
    for param in command.params:
        assert (getattr(param, "help", None) or "").strip(), f"leslie {name}: {param.name} has no help"
    section = docs_section(name)
    assert section, f"leslie {name} is not documented in docs/commands.md"
    for option in option_names(command):
        assert option in section, f"docs/commands.md does not mention {option} for leslie {name}"


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_command_takes_root_and_json(name: str) -> None:
    options = option_names(COMMANDS[name])
    if name.split(maxsplit=1)[0] not in NO_ROOT:
        assert "--root" in options, f"leslie {name} lacks --root"
    if name in MUST_HAVE_JSON:
        assert "--json" in options, f"leslie {name} lacks --json"


def test_exit_codes_are_documented() -> None:
    text = DOCS.read_text(encoding="utf-8")
    for code in range(7):
        assert re.search(rf"^\| {code} \|", text, flags=re.MULTILINE), f"exit code {code} is not in the table"


def test_help_exits_zero(tmp_path: Path) -> None:
    for args in (["--help"], ["-h"], ["spawn", "--help"], ["objective", "--help"], []):
        result = run_leslie(*args, cwd=tmp_path)
        expected = 0 if args else 2  # no arguments: the help, as a usage error
        assert result.code == expected, (args, result.stderr)
        assert "Usage:" in result.stdout + result.stderr
    top = run_leslie("--help", cwd=tmp_path).stdout
    for name in ("spawn", "reference", "doctor", "objective"):
        assert name in top


_IMPORT_PROBE = """
import json, sys
from leslie.__main__ import main
codes = [main(args) for args in json.loads(sys.argv[1])]
print(json.dumps({"codes": codes, "heavy": sorted(m for m in sys.modules if m.split(".")[0] in sys.argv[2:])}))
"""


def test_help_does_not_import_heavy_modules(tmp_path: Path) -> None:
    """`leslie --help` and every command's --help run without lxml, jinja2 or watchdog (SPEC §10)."""
    every = [["--help"], *[[*name.split(), "--help"] for name in sorted(COMMANDS)]]
    out = subprocess.run([sys.executable, "-c", _IMPORT_PROBE, json.dumps(every), *HEAVY], cwd=tmp_path,
                         capture_output=True, text=True, check=True)
    result = json.loads(out.stdout.splitlines()[-1])
    assert result["codes"] == [0] * len(every)
    assert result["heavy"] == []


def test_top_level_help_alone_is_light(tmp_path: Path) -> None:
    out = subprocess.run([sys.executable, "-c", _IMPORT_PROBE, '[["--help"]]', *HEAVY, "filelock", "rich"],
                         cwd=tmp_path, capture_output=True, text=True, check=True)
    assert json.loads(out.stdout.splitlines()[-1])["heavy"] == []
