"""Render docs/img/tree.svg: `leslie list --tree` on the demo repository, as an 80-column terminal shows it.

    .venv/bin/python docs/img/render_tree_svg.py

It draws with the same function as the command (`leslie.cli.tree_view.terminal_lines`) and records the
coloured lines on a Rich console, so the picture changes when the drawing does; re-run it and commit the SVG
with the change.
"""

from __future__ import annotations

import io
import tempfile
from pathlib import Path

from rich.console import Console
from rich.text import Text

from leslie.cli.tree_view import terminal_lines
from leslie.ops.demo import build_demo
from leslie.ops.tree_drawing import load_tree
from leslie.store.repository import Repository

OUT = Path(__file__).resolve().parent / "tree.svg"


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="leslie-tree-svg-") as tmp:
        demo = build_demo(keep=Path(tmp) / "demo")
        tree = load_tree(Repository(demo.root))
    console = Console(record=True, width=80, force_terminal=True, color_system="truecolor", file=io.StringIO())
    for line in terminal_lines(tree, 80):
        console.print(Text.from_ansi(line.removesuffix("\n")), no_wrap=True, crop=True)
    console.save_svg(str(OUT), title="leslie list --tree")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
