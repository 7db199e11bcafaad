"""The static layer: leslie's managed block in the repository's AGENTS.md (SPEC §6).

The block sits between two marker comments; the begin marker carries the leslie version that wrote it.
Everything outside the markers is the user's and is never changed: not its bytes, not its line endings.
"""

from __future__ import annotations

import re
from pathlib import Path

from leslie.errors import CheckFailed, CorruptStateError, UsageError
from leslie.store.files import read_repository_file, repository_target, write_repository_file
from leslie.version import __version__

TEMPLATE_NAME = "agents_md_block.md.j2"
BEGIN_MARKER = "<!-- leslie:begin version={version} -->"
END_MARKER = "<!-- leslie:end -->"
# From a begin marker (any version) to the first end marker, plus the line ending after it. The block may not
# contain another begin marker: an orphaned begin (its end deleted by hand) is then left alone as user text
# instead of swallowing everything up to the next block.
BLOCK_RE = re.compile(
    r"<!-- leslie:begin version=[^>\r\n]*-->(?:(?!<!-- leslie:begin).)*?<!-- leslie:end -->(?:\r?\n)?", re.DOTALL)
CLAUDE_LINE = "@AGENTS.md"


def render_block(root: Path | None = None, *, warnings: list[str] | None = None) -> str:
    """The managed block (markers included, LF line endings, one trailing newline) for this leslie version.

    The body comes from the packaged `agents_md_block.md.j2`, or from the approved override of that name in
    the repository's `.leslie/templates/` (an unapproved one is ignored with a note in `warnings`, see
    `leslie.context.render.render_template`); the markers are always written here, so an override cannot lose them.
    """
    from leslie.context.render import render_template

    body = render_template(TEMPLATE_NAME, {"version": __version__}, root=root, warnings=warnings).text
    body = body.replace("\r\n", "\n").strip("\n")
    if "<!-- leslie:begin" in body or END_MARKER in body:
        raise UsageError(f"template {TEMPLATE_NAME} must not contain leslie's marker comments (leslie adds them)")
    return f"{BEGIN_MARKER.format(version=__version__)}\n{body}\n{END_MARKER}\n"


def _newline_of(text: str) -> str:
    """The file's line ending, so the block matches a CRLF file instead of mixing endings."""
    return "\r\n" if "\r\n" in text and text.count("\r\n") >= text.count("\n") - text.count("\r\n") else "\n"


def updated_text(current: str | None, block: str) -> str:
    """`current` with the managed block replaced (or appended); everything outside the markers kept as is."""
    if not current:
        return block
    newline = _newline_of(current)
    block = block.replace("\n", newline)
    match = BLOCK_RE.search(current)
    if match is not None:
        # Keep the user's ending after the end marker: none at the end of a file stays none.
        replacement = block if match.group(0).endswith("\n") else block[: -len(newline)]
        return current[: match.start()] + replacement + current[match.end():]
    separator = newline if current.endswith("\n") else newline * 2
    return current + separator + block


def _read(root: Path, path: Path) -> str | None:
    """The text of a repository file (no newline translation: CRLF is kept), None when it does not exist.

    Read where its links lead only inside the repository (see `store.repository_target`), as a regular file of
    bounded size; a file that is not UTF-8 is left alone with an error.
    """
    data = read_repository_file(root, path)
    if data is None:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise CorruptStateError(path.name, "is not UTF-8 text", "fix it by hand; leslie leaves it untouched") \
            from None


def update_agents_md(root: Path, *, claude: bool = False, warnings: list[str] | None = None,
                     block: str | None = None) -> list[str]:
    """Write or refresh the block in `root/AGENTS.md` (and `@AGENTS.md` in CLAUDE.md); return changed paths.

    `block` is the block `render_block` made, for a caller that rendered it before taking the index lock.
    A symbolic link is written through (AGENTS.md is often a link to a shared file) when it leads to a file
    inside the repository; one leading outside it is refused (CorruptStateError), before anything is written.
    """
    changed = []
    path = root / "AGENTS.md"
    current = _read(root, path)
    if claude:
        repository_target(root, root / "CLAUDE.md")  # refused now, not after AGENTS.md was written
    new = updated_text(current, block if block is not None else render_block(root, warnings=warnings))
    if new != current:
        write_repository_file(root, path, new.encode("utf-8"))
        changed.append("AGENTS.md")
    if claude and _add_claude_import(root):
        changed.append("CLAUDE.md")
    return changed


def _add_claude_import(root: Path) -> bool:
    """Add an `@AGENTS.md` line to CLAUDE.md (Claude Code reads CLAUDE.md, not AGENTS.md); True if changed."""
    claude_path = root / "CLAUDE.md"
    if repository_target(root, claude_path) == repository_target(root, root / "AGENTS.md"):
        return False  # CLAUDE.md is AGENTS.md (a symlink): it already holds the block
    text = _read(root, claude_path) or ""
    if CLAUDE_LINE in (line.strip() for line in text.splitlines()):
        return False
    newline = _newline_of(text) if text else "\n"
    prefix = "" if not text or text.endswith("\n") else newline
    write_repository_file(root, claude_path, (text + prefix + CLAUDE_LINE + newline).encode("utf-8"))
    return True


def block_status(root: Path, *, warnings: list[str] | None = None) -> str | None:
    """None when AGENTS.md holds the block this version would write, else what is wrong (one line)."""
    current = _read(root, root / "AGENTS.md")
    if current is None:
        return "AGENTS.md is missing (run `leslie agents-md`)"
    match = BLOCK_RE.search(current)
    if match is None:
        return "AGENTS.md has no leslie block (run `leslie agents-md`)"
    found = match.group(0).replace("\r\n", "\n")
    if found.rstrip("\n") != render_block(root, warnings=warnings).rstrip("\n"):
        version = re.match(r"<!-- leslie:begin version=([^ >]*)", found)
        written_by = version.group(1) if version else "?"
        if written_by != __version__:
            return (f"AGENTS.md's leslie block was written by leslie {written_by}; this is {__version__} "
                    "(run `leslie agents-md`)")
        return "AGENTS.md's leslie block differs from what leslie would write (run `leslie agents-md`)"
    return None


def check_agents_md(root: Path, *, warnings: list[str] | None = None) -> None:
    """Raise CheckFailed when the block is missing or differs from what this version would write."""
    problem = block_status(root, warnings=warnings)
    if problem is not None:
        raise CheckFailed(problem)
