"""The files a `<thread_context>` block may show: which are in a reference's scope, and how they are read.

Hook-safe (the standard library's `os` only): `leslie.inject.injector` stats referenced files on every prompt, so
that a change in a referenced in-scope file is a context change, without reading or hashing any of them.

- `scope_files` lists the regular files under a reference's scope paths (files, or folders walked without
  following any link), with their stat signatures; bounded (`MAX_SCOPE_FILES`, `MAX_DEPTH`).
- `read_text` reads one file through the hardened reader (regular files only, no links, `MAX_INLINE_BYTES`
  cap) and returns its text only when XML can carry it exactly: binary files (NUL, invalid UTF-8, characters
  XML 1.0 cannot hold) and oversized files are never inlined.
- `cut_head` / `cut_tail` cut a text at line boundaries to fit a number of bytes.

`tokens_of` is leslie's one token estimator (UTF-8 bytes / 4, rounded up): the budget, the injection policy
(`leslie.inject.policy` re-exports it), `leslie stats` and the benchmarks all count with it.
"""

from __future__ import annotations

import os
import stat

from leslie.store.bindings import live_roots

BYTES_PER_TOKEN = 4
MAX_INLINE_BYTES = 256 * 1024  # a larger file is never inlined, nor read: its path says where it is
MAX_SCOPE_FILES = 256  # files of one scope path that leslie looks at (stat), in path order
MAX_DEPTH = 8  # folder levels walked below a scope path
_NOT_XML = frozenset(chr(c) for c in (*range(0x09), 0x0B, 0x0C, *range(0x0E, 0x20), 0xFFFE, 0xFFFF))

Sig = tuple[str, int, int]  # (path relative to the thread's folder, mtime_ns, size)


def tokens_of(size_bytes: int) -> int:
    """The token estimate of a text of `size_bytes` UTF-8 bytes: about 4 bytes a token, rounded up."""
    return (max(0, size_bytes) + BYTES_PER_TOKEN - 1) // BYTES_PER_TOKEN


def _walk(folder: str, rel: str, depth: int, out: list[Sig]) -> None:
    try:
        entries = sorted(os.scandir(folder), key=lambda e: e.name)
    except (OSError, ValueError):
        return
    for entry in entries:
        if len(out) >= MAX_SCOPE_FILES:
            return
        try:
            if entry.is_symlink():
                continue  # never followed: a link could lead out of the scope, or out of the repository
            if entry.is_dir(follow_symlinks=False):
                if depth < MAX_DEPTH:
                    _walk(entry.path, f"{rel}{entry.name}/", depth + 1, out)
                continue
            info = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        if stat.S_ISREG(info.st_mode):
            out.append((rel + entry.name, info.st_mtime_ns, info.st_size))


def _no_link_below(thread_dir: str, path: str) -> os.stat_result | None:
    """lstat of `thread_dir/path`, None when it or a folder on the way is missing or a link (never followed)."""
    here = thread_dir
    info = None
    for part in path.strip("/").split("/"):
        if part in ("", ".", ".."):
            return None
        here = f"{here}/{part}"  # not os.path.join: this runs for every scope path of every reference
        try:
            info = os.lstat(here)
        except (OSError, ValueError):  # ValueError: a NUL in a hand-edited scope (the state read reports it)
            return None
        if stat.S_ISLNK(info.st_mode):
            return None
    return info


def scope_listing(thread_dir: str, paths: list[str]) -> list[tuple[list[Sig], bool]]:
    """For each scope path (relative to the thread's folder): the regular files it covers, sorted by path, and
    whether it is a folder on disk.

    A file path gives itself (when it is a regular file); a folder gives the files below it. Links are never
    followed (at the path, on the way to it, or below it); the thread's folder itself must not be a link.
    Cheap on purpose (the hook runs it on every prompt for every reference): the thread's folder is listed
    by name once (a missing asset then costs nothing, not a failed `lstat` and its exception), a path that
    is there costs one `lstat` per component, and a folder one listing.
    """
    try:
        if not stat.S_ISDIR(os.lstat(thread_dir).st_mode):
            return [([], False) for _ in paths]
        present = set(os.listdir(thread_dir))
    except (OSError, ValueError):
        return [([], False) for _ in paths]
    result: list[tuple[list[Sig], bool]] = []
    for path in paths:
        clean = path.strip("/")
        files: list[Sig] = []
        is_dir = False
        info = _no_link_below(thread_dir, clean) if clean.partition("/")[0] in present else None
        if info is not None and stat.S_ISREG(info.st_mode):
            files.append((clean, info.st_mtime_ns, info.st_size))
        elif info is not None and stat.S_ISDIR(info.st_mode):
            is_dir = True
            _walk(f"{thread_dir}/{clean}", clean + "/", 1, files)
        result.append((files, is_dir))
    return result


def scope_files(thread_dir: str, paths: list[str]) -> list[list[Sig]]:
    """For each scope path, the regular files it covers (see `scope_listing`)."""
    return [files for files, _is_dir in scope_listing(thread_dir, paths)]


def read_text(path: str) -> tuple[str | None, str | None]:
    """`(text, None)` when `path` can be inlined exactly, else `(None, reason)`: `missing`, `binary` (NUL,
    invalid UTF-8, characters XML 1.0 cannot carry), `too large` (over MAX_INLINE_BYTES) or `unreadable`
    (a link, a FIFO or device, a folder, a refused read)."""
    from leslie.errors import LeslieError
    from leslie.store.fsio import read_regular

    try:
        if os.lstat(path).st_size > MAX_INLINE_BYTES:
            return None, "too large"
        data = read_regular(path, MAX_INLINE_BYTES)
    except FileNotFoundError:
        return None, "missing"
    except (OSError, ValueError, LeslieError) as exc:
        return None, "too large" if "larger than" in str(exc) else "unreadable"
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None, "binary"
    if not _NOT_XML.isdisjoint(text):
        return None, "binary"
    return text, None


def lines_of(text: str) -> list[str]:
    """The lines of `text`, each with its `\\n` (the last one may lack it): only LF ends a line, as for the
    agent's file tools, so "line 41" means the same to both."""
    parts = text.split("\n")
    lines = [part + "\n" for part in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines


def cut_head(text: str, max_bytes: int) -> tuple[str, int]:
    """The longest run of whole lines from the start whose UTF-8 size is at most `max_bytes`, and how many
    lines it holds."""
    used = 0
    lines = 0
    end = 0
    for line in lines_of(text):
        size = len(line.encode("utf-8"))
        if used + size > max_bytes:
            break
        used += size
        lines += 1
        end += len(line)
    return text[:end], lines


def cut_tail(text: str, max_bytes: int) -> tuple[str, int]:
    """The longest run of whole lines at the end whose UTF-8 size is at most `max_bytes`, and how many."""
    used = 0
    lines = 0
    start = len(text)
    for line in reversed(lines_of(text)):
        size = len(line.encode("utf-8"))
        if used + size > max_bytes:
            break
        used += size
        lines += 1
        start -= len(line)
    return text[start:], lines


def line_count(text: str) -> int:
    """Lines of `text` (a last line without a newline counts)."""
    return len(lines_of(text))


def stat_sig(path: str) -> list[int] | None:
    """`[mtime_ns, size, inode]` of `path` itself (a link is not followed), None when it is missing."""
    try:
        info = os.lstat(path)
    except (OSError, ValueError):
        return None
    return [info.st_mtime_ns, info.st_size, info.st_ino]


def own_key(root: str, thread_id: str, own_paths: list[str]) -> str:
    """Stat signatures of the own files level 1 inlines (paths relative to the thread's folder): the key of
    a cached block's own content (`leslie.context.block.own_files_key` computes the same from the repository)."""
    folder = os.path.join(root, ".leslie", "threads", thread_id)
    return "[" + ",".join(_json_sig(stat_sig(os.path.join(folder, p))) for p in own_paths) + "]"


def _json_sig(sig: list[int] | None) -> str:
    return "null" if sig is None else "[" + ",".join(str(v) for v in sig) + "]"


def referenced_sigs(root: str, references: object, asset_paths: list[str]) -> dict[str, list[list[object]]]:
    """For each asset of each reference in `references` (a thread.json `references` value, unvalidated): its
    path from the repository root (as the block shows it), mapped to the `[path, mtime_ns, size]` of each
    in-scope file below it, in the worktree it is bound to when that is another one (`store.bindings`). What
    the hook stats on every prompt; nothing is read."""
    result: dict[str, list[list[object]]] = {}
    if not isinstance(references, dict) or not references:
        return result
    elsewhere = live_roots(root)
    for target, scope in sorted(references.items()):
        if not (isinstance(target, str) and target.startswith("thread-") and "/" not in target
                and target not in ("thread-.", "thread-..") and isinstance(scope, (list, tuple))):
            continue
        paths = [p for p in scope if isinstance(p, str)] if scope else asset_paths
        thread_dir = f"{elsewhere.get(target, root)}/.leslie/threads/{target}"  # in its worktree, if bound
        prefix = f".leslie/threads/{target}/"
        for path, (files, is_dir) in zip(paths, scope_listing(thread_dir, paths), strict=True):
            shown = prefix + path
            if is_dir and not shown.endswith("/"):
                shown += "/"  # a folder on disk, as the block shows it
            result[shown] = [[prefix + rel, mtime, size] for rel, mtime, size in files]
    return result


def tokens_by_level(text: str) -> dict[str, int]:
    """Tokens of a rendered block per level: `own` and `refs` (the `tokens` attributes of inlined content,
    before and inside the `<ref>` elements), `paths` (the rest of the block). A literal `<` only ever opens a
    tag (escaping writes every other one as `&lt;`), so `<ref ` occurs only as markup; element text keeps
    quotes literal, so a ` tokens="` counts only inside a tag (after a `<` with no `>` since)."""
    split = text.find("<ref ")
    own = _sum_tokens(text[:split] if split >= 0 else text)
    refs = _sum_tokens(text[split:]) if split >= 0 else 0
    return {"paths": max(0, tokens_of(len(text.encode("utf-8"))) - own - refs), "own": own, "refs": refs}


def _sum_tokens(text: str) -> int:
    total = 0
    start = text.find(' tokens="')
    while start >= 0:
        end = text.find('"', start + 9)
        value = text[start + 9:end]
        in_tag = text.rfind("<", 0, start) > text.rfind(">", 0, start)  # `>` in an attribute is `&gt;`
        total += int(value) if value.isdigit() and in_tag else 0
        start = text.find(' tokens="', end)
    return total
