"""What the warm process loads before it forks (SPEC §12): every child then starts with it loaded.

Nothing done here reads a repository or the environment, or keeps what a command computes:
- every leslie module, and every module they import inside functions (`tomllib`, `subprocess`, `hashlib`...:
  found in their source, so a new lazy import is preloaded without anyone remembering to list it); the serving
  commands' web and ACP stacks stay out (`SKIP`): those commands run in the client's own process;
- Rich's modules that Typer's help and error panels draw with; not `typer.rich_utils` itself, which reads the
  environment (FORCE_COLOR, TERMINAL_WIDTH...) when imported: each child imports it in its own;
- the packaged template, compiled, and lxml's parser; the patterns that tell spawn's scaffold in a plan or
  progress (`context.scaffold`), compiled;
- every command, built by Typer (`cli.app.build_every_command`);
- the digest of leslie's code that every kept drawing's key holds (`store.drawings.code_digest`).
"""

import ast
import importlib
import pkgutil
from typing import Any

import leslie

# `leslie.guard.watcher` (inotify, watchdog) runs in the watcher's own process only; the children ask it through
# `leslie.server.watcher`, which is loaded (each read imported it anew: ~1.3 ms in a child).
SKIP = ("leslie.board", "leslie.integrations.acp", "leslie.cli.board_cmd", "leslie.cli.acp_cmd",
        "leslie.guard.watcher", "leslie.__main__")
RICH = ("rich.align", "rich.box", "rich.columns", "rich.console", "rich.emoji", "rich.highlighter",
        "rich.markdown", "rich.markup", "rich.padding", "rich.panel", "rich.table", "rich.text", "rich.theme",
        "rich.traceback")


def preload() -> None:
    """Import, compile and build all of the above."""
    from leslie.cli.app import build_every_command
    from leslie.context.block import TEMPLATE_NAME
    from leslie.context.render import packaged_environment, parse_xml
    from leslie.context.scaffold import ASSET_TEMPLATES, scaffold_lines
    from leslie.store.drawings import code_digest

    lazy: set[str] = set()
    for info in pkgutil.walk_packages(leslie.__path__, "leslie."):
        if not info.name.startswith(SKIP):
            module = importlib.import_module(info.name)
            lazy |= imported_inside(module)
    for name in sorted(lazy | set(RICH)):
        if not name.startswith(SKIP):
            importlib.import_module(name)
    packaged_environment().get_template(TEMPLATE_NAME)
    parse_xml("<warm-up/>", TEMPLATE_NAME)
    for name in ASSET_TEMPLATES:
        scaffold_lines(name, "")  # compiles each packaged and older form's patterns (kept by their cache)
    build_every_command()
    code_digest()


def imported_inside(module: Any) -> set[str]:
    """The absolute module names that `module`'s source imports inside its functions."""
    path = getattr(module, "__file__", None)
    if not path or not path.endswith(".py"):
        return set()
    with open(path, encoding="utf-8") as source:
        tree = ast.parse(source.read(), path)
    found: set[str] = set()
    for function in ast.walk(tree):
        if isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
            for node in ast.walk(function):
                if isinstance(node, ast.Import):
                    found.update(alias.name for alias in node.names)
                elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                    found.add(node.module)
    return found

