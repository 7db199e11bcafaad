"""`leslie init`: create `.leslie/` and the repository files that point at it (idempotent)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from leslie.errors import NotFoundError, StorageError
from leslie.store.files import (
    Layout,
    acquire_index_lock,
    find_root,
    read_repository_file,
    repository_target,
    write_repository_file,
)
from leslie.store.fsio import LESLIE_DIR, TEMP_SUFFIX, atomic_write, refuse_links
from leslie.store.machine import in_git
from leslie.store.migration import untrack_state
from leslie.store.relations import Index
from leslie.store.repository import Repository, git_toplevel

LESLIE_GITIGNORE = f"""# Written by leslie: runtime state and temporary files stay out of git.
state/
*{TEMP_SUFFIX}
*.lock
"""
GITATTRIBUTES_LINE = ".leslie/thread_relations.json merge=leslie-relations"


@dataclass(frozen=True)
class InitResult:
    """What `init` did: the root and the paths it created or updated (relative to the root)."""

    root: Path
    changed: tuple[str, ...]
    warnings: tuple[str, ...] = ()


def choose_init_root(explicit: str | os.PathLike[str] | None = None) -> Path:
    """Where `init` works: `--root`/`LESLIE_ROOT`, else an existing root above, else the git top, else here."""
    chosen = explicit if explicit is not None else os.environ.get("LESLIE_ROOT") or None
    if chosen is not None:
        root = Path(chosen).absolute()
        if not root.is_dir():
            raise NotFoundError(f"--root {chosen}: no such folder")
        return root
    try:
        return find_root()
    except NotFoundError:
        pass
    here = Path.cwd()
    return git_toplevel(here) or here


def ensure_line(root: Path, path: Path, line: str) -> bool:
    """Append `line` to a text file of the repository unless present; True when the file changed.

    Through a symbolic link only when it stays inside the repository (`store.repository_target`).
    """
    data = read_repository_file(root, path)
    text = (data or b"").decode("utf-8", "surrogateescape")
    if line in text.splitlines():
        return False
    prefix = "" if not text or text.endswith("\n") else "\n"
    write_repository_file(root, path, (text + prefix + line + "\n").encode("utf-8", "surrogateescape"))
    return True


def _refuse_hostile_targets(root: Path, layout: Layout, claude: bool) -> None:
    """Every file `init` may write, checked before it writes any: a link in `.leslie/` (a committed clone's),
    or an AGENTS.md, CLAUDE.md or .gitattributes leading outside the repository, is refused up front."""
    for path in (layout.lock_path, layout.index_path, layout.leslie_dir / ".gitignore", layout.threads_dir,
                 layout.objectives_dir):
        refuse_links(path)
    for name in (".gitattributes", "AGENTS.md", *(("CLAUDE.md",) if claude else ())):
        repository_target(root, root / name)


def init_repository(root: Path, *, claude: bool = False) -> InitResult:
    """Create `.leslie/` (folders, `.gitignore`, empty index), the `.gitattributes` line and the AGENTS.md block."""
    from leslie.context.agents_md import render_block, update_agents_md

    repo = Repository(root)
    layout = repo.layout
    changed: list[str] = []
    _refuse_hostile_targets(root, layout, claude)
    # Rendered before anything is written (an approved override that fails is refused with the tree as it
    # was), and outside the lock: a repository's template override is read and rendered outside it.
    warnings: list[str] = []
    block = render_block(root, warnings=warnings)
    try:
        for folder in (layout.leslie_dir, layout.threads_dir, layout.objectives_dir, layout.state_dir):
            if not folder.is_dir():
                folder.mkdir(parents=True, exist_ok=True)
                if folder != layout.state_dir or not in_git(root):  # not the machine state in the git folder
                    changed.append(layout.relative(folder) + "/")
    except OSError as exc:
        raise StorageError(f"cannot create {LESLIE_DIR}/ in {root}: {exc.strerror}") from None
    with acquire_index_lock(layout) as lock:
        gitignore = layout.leslie_dir / ".gitignore"
        if not os.path.lexists(gitignore):
            atomic_write(gitignore, LESLIE_GITIGNORE.encode())
            changed.append(layout.relative(gitignore))
        if not os.path.lexists(layout.index_path):
            index = repo.rebuild_index() if repo.thread_ids() else Index.empty()
            repo.write_index(lock, index)
            changed.append(layout.relative(layout.index_path))
        if ensure_line(root, root / ".gitattributes", GITATTRIBUTES_LINE):
            changed.append(".gitattributes")
        if in_git(root) and (count := untrack_state(str(root))):
            changed.append(f"{LESLIE_DIR}/state/ removed from git's index ({count} files of machine state a clone "
                           "brought; leslie never reads them): commit the removal")
        changed.extend(update_agents_md(root, claude=claude, block=block))
    return InitResult(root, tuple(changed), tuple(warnings))
