"""The docs are true to the commands: every `leslie ...` that docs/*.md, the README and AGENTS.md show names
a command that exists and only options it takes (tests/test_help.py checks the other way: every option is
documented)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from leslie.cli.app import click_command

ROOT = Path(__file__).resolve().parent.parent
# Options of `leslie` itself, which may come before the command (`leslie --root ../proj --json list`).
GLOBAL_OPTIONS = {"--root": True, "--json": False, "--version": False, "-V": False, "--help": False, "-h": False,
                  "--install-completion": False, "--show-completion": False}


def _commands() -> dict[str, Any]:
    found: dict[str, Any] = {}

    def walk(command: Any, prefix: list[str]) -> None:
        found[" ".join(prefix)] = command
        for name, sub in (getattr(command, "commands", None) or {}).items():
            walk(sub, [*prefix, name])

    walk(click_command(), [])
    return found


COMMANDS = _commands()


def _options(command: Any) -> set[str]:
    names = {"--help", "-h"}
    for param in command.params:
        names.update(param.opts)
        names.update(param.secondary_opts)
    return names


def _code_blocks(text: str) -> list[str]:
    return re.findall(r"^```[a-z]*\n(.*?)^```", text, flags=re.MULTILINE | re.DOTALL)


def _command_lines(block: str) -> list[str]:
    """The `leslie ...` invocations of a code block: continuation lines joined, `a | leslie b` split, comments
    dropped."""
    lines: list[str] = []
    for raw in block.splitlines():
        if raw.startswith((" ", "\t")) and lines:
            lines[-1] += " " + raw.strip()
        elif raw.startswith("leslie ") or raw == "leslie":
            lines.append(raw)
    found: list[str] = []
    for line in lines:
        command = re.sub(r"\s+#\s.*$", "", line)
        found += ["leslie " + part for part in re.split(r"(?:^|\s\|\s)leslie\s", command) if part.strip()]
    return found


# Inline spans that show output or a placeholder, not a command line.
NOT_COMMANDS = {"leslie COMMAND --help", "leslie initialised in ROOT (what changed)",
                "leslie hooks installed in PATH (events)",
                "leslie board: http://127.0.0.1:PORT/?token=TOKEN (Ctrl-C to stop)"}


def invocations(path: Path) -> list[str]:
    """Every `leslie ...` the file shows: in its code blocks, and in its inline code spans."""
    text = path.read_text(encoding="utf-8")
    found = [line for block in _code_blocks(text) for line in _command_lines(block)]
    return found + [span for span in re.findall(r"`(leslie [^`\n]+)`", text) if span not in NOT_COMMANDS]


def check(invocation: str) -> list[str]:
    """Problems with one documented invocation: an unknown command, or an option the command does not take."""
    words = invocation.split()[1:]
    # leading options of `leslie` itself
    while words and words[0] in GLOBAL_OPTIONS:
        words = words[2:] if GLOBAL_OPTIONS[words[0]] else words[1:]
    name: list[str] = []
    while words and " ".join([*name, words[0]]) in COMMANDS and re.fullmatch(r"[a-z][a-z-]*", words[0]):
        name.append(words.pop(0))
    command = COMMANDS[" ".join(name)]
    runs_alone = getattr(command, "invoke_without_command", False)  # a group that is a command too (`warm`)
    if not name or (getattr(command, "commands", None) and not runs_alone):
        if words and words[0].startswith("-") and not name:
            return [f"{invocation!r}: unknown global option {words[0]}"]
        return [] if not name and not words and invocation.split()[1:] else [
            f"{invocation!r}: no such command (leslie {' '.join(name + words[:1])})"]
    takes = _options(command)
    problems = []
    if "--" in words:  # what follows is another program's command line (`leslie acp -- AGENT ...`)
        words = words[:words.index("--")]
    for option in re.findall(r"(?<![\w-])(--?[a-zA-Z][a-zA-Z-]*)", " ".join(words)):
        if option not in takes and option not in GLOBAL_OPTIONS:
            problems.append(f"{invocation!r}: leslie {' '.join(name)} has no option {option}")
    return problems


DOCUMENTED = sorted({line for path in [*sorted((ROOT / "docs").glob("*.md")), ROOT / "README.md", ROOT / "AGENTS.md"]
                      for line in invocations(path)})


def test_the_docs_show_commands() -> None:
    assert len(DOCUMENTED) > 40
    assert any(line.startswith("leslie edit ") for line in DOCUMENTED)


@pytest.mark.parametrize("invocation", DOCUMENTED)
def test_every_documented_command_and_option_exists(invocation: str) -> None:
    assert check(invocation) == []


def test_the_checker_catches_what_is_not_there() -> None:
    assert check("leslie spawn --intent x --nope") != []
    assert check("leslie nosuch ID") != []
    assert check("leslie objective nosuch") != []
    assert check("leslie rm ID -z") != []
    assert check("leslie --root x --json list") == []
    assert check("leslie --version") == [] and check("leslie -V") == [] and check("leslie") != []
    assert check("leslie rm ID [--yes|-y]") == []
    assert check("leslie acp -- agent --its-own-option") == []


def test_the_readme_root_claim_is_true() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    claim = re.search(r"Every command prints `--help`[^,]*, takes `--root PATH`(.*?)\n\n", readme, flags=re.DOTALL)
    assert claim is not None
    without = {name for name, command in COMMANDS.items() if name and not getattr(command, "commands", None)
               and "--root" not in _options(command)}
    for name in without:
        assert f"`{name}`" in claim.group(1), f"the README says every command takes --root, but {name} does not"
