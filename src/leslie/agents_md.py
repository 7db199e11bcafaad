"""The static layer: leslie's managed block in the repository's AGENTS.md (SPEC §6)."""

from __future__ import annotations

import re
from pathlib import Path

from leslie import __version__
from leslie.errors import CheckFailed
from leslie.store import atomic_write

BLOCK_RE = re.compile(r"<!-- leslie:begin version=[^>]*-->.*?<!-- leslie:end -->\n?", re.DOTALL)
CLAUDE_LINE = "@AGENTS.md"


def render_block() -> str:
    """The managed block for the installed leslie version."""
    from leslie.render import jinja_environment

    template = jinja_environment(autoescape_xml=False).get_template("agents_md_block.md.j2")
    return template.render(version=__version__)


def updated_text(current: str | None, block: str) -> str:
    """`current` with the managed block replaced (or appended); everything outside the markers kept."""
    if current is None or not current.strip():
        return block
    if BLOCK_RE.search(current):
        return BLOCK_RE.sub(lambda _: block, current, count=1)
    return current + ("" if current.endswith("\n") else "\n") + "\n" + block


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None


def update_agents_md(root: Path, *, claude: bool = False) -> list[str]:
    """Write or refresh the block in `root/AGENTS.md` (and `@AGENTS.md` in CLAUDE.md); return changed paths."""
    changed = []
    path = root / "AGENTS.md"
    current = _read(path)
    new = updated_text(current, render_block())
    if new != current:
        atomic_write(path, new.encode("utf-8"))
        changed.append("AGENTS.md")
    if claude:
        claude_path = root / "CLAUDE.md"
        text = _read(claude_path) or ""
        if CLAUDE_LINE not in text.splitlines():
            prefix = "" if not text or text.endswith("\n") else "\n"
            atomic_write(claude_path, (text + prefix + CLAUDE_LINE + "\n").encode("utf-8"))
            changed.append("CLAUDE.md")
    return changed


def check_agents_md(root: Path) -> None:
    """Raise CheckFailed when the block is missing or differs from what this version would write."""
    current = _read(root / "AGENTS.md")
    if current is None:
        raise CheckFailed("AGENTS.md is missing (run `leslie agents-md`)")
    match = BLOCK_RE.search(current)
    if match is None:
        raise CheckFailed("AGENTS.md has no leslie block (run `leslie agents-md`)")
    if match.group(0).rstrip("\n") != render_block().rstrip("\n"):
        raise CheckFailed("AGENTS.md's leslie block is outdated (run `leslie agents-md`)")
