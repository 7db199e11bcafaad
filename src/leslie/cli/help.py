"""What `--help` says: commands grouped in panels, readable metavars, an example per command.

The commands are declared in their modules with plain Typer annotations; `polish` goes over each command as
Typer builds it (`cli/app.py`; microseconds) and sets what Typer would otherwise print from its types: `<str>`
beside an argument, `<bool>` on a flag, `{ID}` in a usage line. It is written against Typer 0.27 and 0.28
(pyproject.toml says why not 0.29) and uses Click's own hooks: an option's `metavar`, an argument's
`get_usage_pieces`, a type's `get_metavar`. Keeping it here, not on each option, means a new
option gets a readable metavar without anyone remembering to write one, and `tests/test_help.py` walks every
command to check that nothing leaks and that each has an example.

The app renders help with `rich_markup_mode="rich"` (Typer shows `rich_help_panel` groups only then), so
every text a person wrote is escaped here: a `[context]` in a docstring must print, not vanish as markup.
"""

from __future__ import annotations

import copy
import inspect
from typing import Any

import typer.core

HELP_OPTION_NAMES = ["-h", "--help"]
THREADS, REFERENCES, ORDER, CONTEXT, AGENTS, PARALLEL, GIT, MAINTENANCE = (
    "Threads", "References", "Order", "Context", "Agents", "Parallel agents", "Git", "Maintenance")

# The panel of each top-level command, in the order `leslie --help` shows the panels.
PANELS = {
    **dict.fromkeys(("status", "spawn", "list", "show", "find", "edit", "board", "set-status", "done", "pause",
                     "resume", "archive", "retitle", "rm", "switch", "objective"), THREADS),
    **dict.fromkeys(("reference", "unreference", "relations"), REFERENCES),
    **dict.fromkeys(("after", "ready", "next"), ORDER),
    **dict.fromkeys(("context", "inject", "agents-md", "trust"), CONTEXT),
    **dict.fromkeys(("hooks", "hook", "acp", "check-write", "quarantine", "sessions", "stats"), AGENTS),
    **dict.fromkeys(("who", "claim", "release", "worktree"), PARALLEL),
    **dict.fromkeys(("git", "merge-relations", "watch"), GIT),
    **dict.fromkeys(("init", "doctor", "gc", "demo", "warm"), MAINTENANCE),
}

# One example per command, by its path under `leslie` (prefixes such as `8lg` name a thread: docs/commands.md).
EXAMPLES = {
    "": "leslie spawn --intent \"Fix the login bug\"; leslie status; leslie show 8lg",
    "status": "leslie status --json",
    "spawn": "leslie spawn --intent \"Fix the login bug\" --ref 8lg:plan.md --parent 8lg --worktree",
    "list": "leslie list --status active --objective default",
    "show": "leslie show 8lg",
    "set-status": "leslie set-status 8lg paused",
    "done": "leslie done 8lg",
    "pause": "leslie pause 8lg",
    "resume": "leslie resume 8lg",
    "archive": "leslie archive 8lg",
    "retitle": "leslie retitle 8lg \"Login: fix the session cookie\"",
    "rm": "leslie rm 8lg --dry-run",
    "switch": "leslie switch 8lg   (alone: print the current thread)",
    "edit": "leslie edit 8lg --intent \"Fix the login bug, then the logout\"   (no option: $EDITOR)",
    "board": "leslie board --no-open --port 8123",
    "find": "leslie find \"session cookie\"",
    "objective": "leslie objective create \"Ship the parser\"",
    "objective create": "leslie objective create \"Ship the parser\" --description \"Everything for 2.0\"",
    "objective list": "leslie objective list --json",
    "objective show": "leslie objective show default",
    "objective set-status": "leslie objective set-status default done",
    "objective retitle": "leslie objective retitle default \"Ship the parser 2.0\"",
    "reference": "leslie reference 8lg:plan.md",
    "unreference": "leslie unreference 8lg",
    "relations": "leslie relations --format mermaid",
    "after": "leslie after 8lg --on k3x   (8lg waits until k3x is done; --remove drops the edge)",
    "ready": "leslie ready --objective default --json",
    "next": "leslie next --session review-bot --agent codex",
    "context": "leslie context --thread 8lg --budget 0",
    "inject": "leslie inject --message \"next step?\"",
    "agents-md": "leslie agents-md --check",
    "trust": "leslie trust --check",
    "hooks": "leslie hooks install claude-code",
    "hooks install": "leslie hooks install claude-code",
    "hooks uninstall": "leslie hooks uninstall codex",
    "hooks status": "leslie hooks status",
    "hook": "leslie hook claude-code < event.json",
    "acp": "leslie acp --thread 8lg -- my-acp-agent --stdio",
    "check-write": "leslie check-write src/app.py --thread 8lg",
    "quarantine": "leslie quarantine list",
    "quarantine list": "leslie quarantine list --json",
    "quarantine restore": "leslie quarantine restore .leslie/threads/8lg-login/plan.md",
    "sessions": "leslie sessions --thread 8lg",
    "stats": "leslie stats --json",
    "who": "leslie who --json",
    "claim": "leslie claim 8lg --session review-bot --agent codex --ttl 600",
    "release": "leslie release 8lg --session review-bot",
    "worktree": "leslie worktree add 8lg",
    "worktree add": "leslie worktree add 8lg ../api-8lg --branch fix/login",
    "worktree list": "leslie worktree list --json",
    "worktree remove": "leslie worktree remove 8lg --force",
    "git": "leslie git setup",
    "git setup": "leslie git setup --check",
    "merge-relations": "leslie merge-relations %O %A %B --kind index",
    "watch": "leslie watch --rescan 0",
    "init": "leslie init --git",
    "doctor": "leslie doctor --fix",
    "gc": "leslie gc --older-than 7 --dry-run",
    "demo": "leslie demo --keep /tmp/leslie-demo",
    "warm": "leslie warm --json",
    "warm stop": "leslie warm stop",
    "warm serve": "leslie warm serve --idle 60   (what the first command starts by itself)",
}

# Metavars by option name, then by the name of its Click type (Typer names them `str`, `int`, `float`, `path`,
# and `int range` or `float range` when bounded); a flag shows none.
_BY_NAME = {
    "--thread": "ID", "--target": "ID", "--parent": "ID", "--objective": "ID", "--id": "ID",
    "--ref": "ID[:SCOPE]", "--root": "PATH", "--scope": "PATH", "--transcript": "PATH", "--path": "PATH",
    "--usage": "USED/SIZE", "--status": "STATUS", "--format": "json|mermaid|dot",
    "--kind": "index|thread", "--session": "ID", "--after": "ID", "--on": "ID", "--agent": "NAME", "--ttl": "SECONDS",
}
_BY_TYPE = {"int": "INTEGER", "float": "NUMBER", "path": "PATH", "file": "PATH", "directory": "PATH"}
# The values of an option whose metavar only names them (a list of choices would not fit the column).
_CHOICES = {"--status": "active, paused, done or archived"}


def escape(text: str) -> str:
    """`text` as Rich prints it literally: `[` starts markup there (Rich reads `\\[` as a plain bracket)."""
    return text.replace("[", "\\[")


def _metavar(param: Any) -> str:
    """The metavar an option without one gets: from its name, else from its Click type."""
    if param.is_flag or param.count:
        return ""
    if param.opts[0] in _BY_NAME:
        return _BY_NAME[param.opts[0]]
    return _BY_TYPE.get(param.type.name.removesuffix(" range"), "TEXT")


class _Argument(typer.core.TyperArgument):
    """A positional argument shown in usage lines as Click shows it: `ID`, `[ID]`, `PATH...`, never `{ID}`."""

    def get_usage_pieces(self, ctx: Any) -> list[str]:
        name = self.human_readable_name if self.required else f"[{self.human_readable_name}]"
        return [name + ("..." if self.nargs != 1 else "")]


def _without_metavar(param_type: Any) -> Any:
    """A copy of an argument's Click type that converts as it does but names no metavar: the Arguments panel
    then shows the argument by its metavar alone (`ID`), without Typer's `<str>` beside it."""
    untyped = copy.copy(param_type)
    untyped.get_metavar = lambda param, ctx: ""
    return untyped


def _reflow(text: str) -> str:
    """A docstring as Rich should print it: dedented, escaped, each paragraph's lines joined into one.

    Typer's rich mode keeps the docstring's own line breaks inside a paragraph, which breaks the terminal's
    wrapping (a line ends mid-sentence); a paragraph starting with Click's `\b` keeps its lines.
    """
    paragraphs = inspect.cleandoc(text).split("\n\n")
    return escape("\n\n".join(p if p.startswith("\b") else " ".join(p.split("\n")) for p in paragraphs))


def polish(command: Any, path: str = "") -> None:
    """Group, escape and give metavars and an example to `command` and every command under it."""
    command.help = _reflow(command.help) if command.help else command.help
    command.short_help = _reflow(command.short_help) if command.short_help else command.short_help
    example = EXAMPLES.get(path)
    if example is not None:
        command.epilog = escape(f"Example: {example}")
    for param in command.params:
        if param.param_type_name == "option":
            if param.metavar is None:
                param.metavar = _metavar(param)
            choices = _CHOICES.get(param.opts[0])
            if choices and param.help and choices not in param.help:
                param.help = f"{param.help.rstrip('.')}: {choices}."
            if param.help:
                param.help = escape(param.help)
        elif isinstance(param, typer.core.TyperArgument):
            if param.metavar is None:
                param.metavar = (param.name or "ARG").upper()
            param.__class__ = _Argument  # only the usage line changes (see the class)
            param.type = _without_metavar(param.type)
            if param.help:
                param.help = escape(param.help)
    # The help option is made on first use; made now (with the app's names) so that it loses `<bool>` too.
    help_option = command.get_help_option(command.context_class(command, help_option_names=HELP_OPTION_NAMES))
    if help_option is not None:
        help_option.metavar = ""
    for name, sub in getattr(command, "commands", {}).items():  # a group's commands (Typer's own Click: duck-typed)
        polish(sub, f"{path} {name}".strip())
