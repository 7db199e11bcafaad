"""Every command has help and is documented in docs/commands.md; `--help` stays free of heavy imports."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from conftest import LESLIE_EXE, run_leslie
from leslie.cli.app import click_command

DOCS = Path(__file__).resolve().parent.parent / "docs" / "commands.md"

# Commands without --root, and why: `hook` runs inside an agent and finds its root from the working directory
# and the event; `merge-relations` is called by git with three file paths; `demo` builds its own repository.
NO_ROOT = {"hook", "merge-relations", "demo", "warm"}
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

    walk(click_command(), [])
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
    # Rich is allowed: the help is drawn with it (panels by group, `cli/help.py`)
    out = subprocess.run([sys.executable, "-c", _IMPORT_PROBE, '[["--help"]]', *HEAVY, "filelock"],
                         cwd=tmp_path, capture_output=True, text=True, check=True)
    assert json.loads(out.stdout.splitlines()[-1])["heavy"] == []


_HELP_PROBE = """
import contextlib, io, json, sys
from leslie.cli.app import run
pages = {}
for name in json.loads(sys.argv[1]):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = run([*name.split(), "--help"])
    pages[name] = [code, out.getvalue()]
print(json.dumps(pages))
"""
# What Typer prints from Python types when a parameter has no readable metavar (issue 17, "Help").
_LEAKS = re.compile(r"<(str|int|float|bool|path)>|list\[|\{[A-Z_]+\}|<class |typing\.|NoneType")


def _help_pages(tmp_path: Path) -> dict[str, tuple[int, str]]:
    names = ["", *sorted({*COMMANDS, *(n.split()[0] for n in COMMANDS)})]
    proc = subprocess.run([sys.executable, "-c", _HELP_PROBE, json.dumps(names)], cwd=tmp_path, text=True,
                          capture_output=True, check=True, env={**os.environ, "COLUMNS": "200", "TERM": "dumb"})
    pages: dict[str, tuple[int, str]] = json.loads(proc.stdout)
    return pages


def test_every_help_page_reads_well(tmp_path: Path) -> None:
    """No Python type leaks into any --help, and every command shows an example (cli/help.py)."""
    pages = _help_pages(tmp_path)
    for name, (code, text) in pages.items():
        where = f"leslie {name} --help".replace("  ", " ")
        assert code == 0 and "Usage:" in text, where
        assert not _LEAKS.search(text), f"{where} shows {_LEAKS.search(text)}"
        assert "Example: leslie " in text, f"{where}: no example"
    assert re.search(r"--status +STATUS +Only threads with this status: active, paused, done or archived\.",
                     pages["list"][1])  # a choice lists its values
    assert "[[context.commands]]" in pages["trust"][1]  # a docstring's brackets survive Rich markup
    assert "--ref" in pages["spawn"][1] and "ID[:SCOPE]" in pages["spawn"][1]
    # Usage lines as Click writes them; an argument shown by its name alone, no type beside it.
    assert "Usage: leslie hook [OPTIONS] AGENT [EVENT]" in pages["hook"][1]
    assert "Usage: leslie check-write [OPTIONS] PATHS..." in pages["check-write"][1]
    assert "Usage: leslie acp [OPTIONS] [AGENT_COMMAND]..." in pages["acp"][1]
    assert re.search(r"\* +ID +The thread to show\.", pages["show"][1])
    assert re.search(r"\* +BASE +The common ancestor's version", pages["merge-relations"][1])
    assert re.search(r"--idle +NUMBER \[x>=1\.0\]", pages["warm serve"][1])  # a metavar from the option's type


def test_the_top_level_help_groups_commands(tmp_path: Path) -> None:
    from leslie.cli.help import PANELS

    text = _help_pages(tmp_path)[""][1]
    panels = [line.split("─ ", 1)[1].split(" ")[0] for line in text.splitlines() if line.startswith("╭─ ")]
    assert panels == ["Options", "Threads", "References", "Order", "Context", "Agents", "Parallel", "Git",
                      "Maintenance"]
    assert "Commands" not in panels  # every command is in a panel: a new one needs its line in PANELS
    assert set(COMMANDS) | {n.split()[0] for n in COMMANDS} <= {*PANELS, *(n for n in COMMANDS if " " in n)}


def test_the_root_says_truly_where_each_command_is_declared() -> None:
    """`cli.app.COMMANDS` names, for every top-level command, the module and the Typer that declare it: each
    Typer of each command module, built on its own, holds exactly the commands that COMMANDS gives it, and
    COMMANDS lists them panel by panel, as `leslie --help` shows them."""
    import importlib
    import pkgutil

    import typer

    import leslie.cli
    from leslie.cli.app import COMMANDS as WHERE
    from leslie.cli.help import PANELS

    declared: dict[str, tuple[str, str]] = {}
    for info in pkgutil.iter_modules(leslie.cli.__path__):
        module = importlib.import_module(f"leslie.cli.{info.name}")
        for attribute, value in vars(module).items():
            if not isinstance(value, typer.Typer) or info.name == "app":
                continue
            if attribute == "app":
                declared.update(dict.fromkeys(typer.main.get_group(value).commands, (info.name, attribute)))
            else:  # a command group: one name in COMMANDS
                groups = [name for name, where in WHERE.items() if where == (info.name, attribute)]
                assert len(groups) == 1, f"{info.name}.{attribute} is not in COMMANDS once"
                declared[groups[0]] = (info.name, attribute)
    assert declared == WHERE
    order = list(dict.fromkeys(PANELS.values()))
    panels = [order.index(PANELS[name]) for name in WHERE]
    assert panels == sorted(panels) and set(PANELS) == set(WHERE)


def test_a_command_line_builds_only_its_own_module(tmp_path: Path) -> None:
    """The root builds a command's module at its first use (Click's lazy loading): `leslie hook --help` builds
    hook_cmd's commands only, and the warm process's `build_every_command` builds every module's."""
    script = (
        "import sys\n"
        "from leslie.cli import app\n"
        "assert app.run(['hook', '--help']) == 0\n"
        "built_first = app._built.cache_info().currsize\n"
        "app.build_every_command()\n"
        "sys.stderr.write(f'{built_first} {app._built.cache_info().currsize}')\n"
    )
    done = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, check=True)
    from leslie.cli.app import COMMANDS as WHERE

    sources = {(module, declared, None if declared == "app" else name) for name, (module, declared) in WHERE.items()}
    assert done.stderr.split() == ["1", str(len(sources))]


def test_version_and_completion(tmp_path: Path) -> None:
    from leslie.version import __version__

    for flag in ("-V", "--version"):
        assert run_leslie(flag, cwd=tmp_path).stdout == f"leslie {__version__}\n"
    # The shell named, not detected: with shellingham installed Typer looks for a shell among the ancestor
    # processes, which depends on what started pytest (it found none, now and then, under xdist).
    shown = run_leslie("--show-completion", "bash", cwd=tmp_path,
                       env={"SHELL": "/bin/bash", "_TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION": "1"})
    assert shown.code == 0 and "_LESLIE_COMPLETE" in shown.stdout
    completion = subprocess.run([LESLIE_EXE], cwd=tmp_path, capture_output=True, text=True, check=False,
                                env={**os.environ, "_LESLIE_COMPLETE": "complete_bash", "COMP_WORDS": "leslie sp",
                                     "COMP_CWORD": "1"})
    assert "spawn" in completion.stdout
