"""Which module declares each top-level command, so that one command imports only its own module."""

from __future__ import annotations

from importlib import import_module

from leslie.cli.params import Group

# In the order the modules register (the order of `leslie --help`).
MODULES = ("repo_cmd", "objectives_cmd", "threads_cmd", "find_cmd", "acp_cmd", "git_cmd", "context_cmd",
           "agents_cmd", "status_cmd", "board_cmd")

# The module of each top-level command or group; tests/test_cli_lite.py checks it against `root_group()`.
HOME = {
    **dict.fromkeys(("init", "doctor", "relations", "agents-md"), "repo_cmd"),
    "objective": "objectives_cmd",
    **dict.fromkeys(("spawn", "reference", "unreference", "list", "show", "set-status", "done", "pause", "resume",
                     "archive", "retitle", "rm", "switch", "edit"), "threads_cmd"),
    "find": "find_cmd",
    "acp": "acp_cmd",
    **dict.fromkeys(("merge-relations", "git", "gc", "watch"), "git_cmd"),
    **dict.fromkeys(("context", "demo"), "context_cmd"),
    **dict.fromkeys(("hooks", "sessions", "stats", "trust", "hook", "inject", "check-write"), "agents_cmd"),
    "status": "status_cmd",
    "board": "board_cmd",
}


def _register(group: Group, module: str) -> None:
    import_module(f"leslie.cli.{module}").register(group)


def root_group() -> Group:
    """Every command, as `leslie --help` lists them."""
    group = Group()
    for module in MODULES:
        _register(group, module)
    return group


def home_group(name: str) -> Group | None:
    """The commands of the one module that declares `name` (None for a name no module declares)."""
    module = HOME.get(name)
    if module is None:
        return None
    group = Group()
    _register(group, module)
    return group
