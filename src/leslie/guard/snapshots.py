"""The snapshot store of the write guard's second line (`leslie.guard.tripwire`): what leslie's protected files
looked like before a shell tool call, so that what the call changed can be found and put back.

Protected: every entry under `.leslie/threads/` (each thread's folder is "another thread's folder" for every
other session), `.leslie/objectives/`, `.leslie/templates/`, and `.leslie/thread_relations.json` and
`.leslie/config.toml`. Everything lives in the guard folder of this work tree's machine state
(`store.machine`: `.git/leslie/guard/` in a git work tree, out of any clone's reach):

- `manifest.json`: `files`, one entry per protected path (relative to `.leslie/`): a file's `["f", size,
  inode, ctime_ns]`, a folder's `["d"]`, a symbolic link's `["l", target]`, anything else `["s"]`, exactly
  as `scan` returns them, so that "nothing changed" is one comparison of two dicts; `digests`, the name of
  each file's copy (`""`: not copied yet, `"-"`: not restorable, bigger than `MAX_COPY` or unreadable);
  `head`, the git HEAD seen at the last sweep. The ctime alone tells a change: every write, rename, chmod or
  `touch` sets it to the current time, and no one can set it by hand (mtime adds nothing to it).
- `objects/<2 hex>/<digest>`: content-addressed copies (BLAKE2b-128) of files up to `MAX_COPY` bytes.
- `quarantine/<time>-<id>/<path>`: what a restore moved out of the way (a created file, or the version a
  restore replaced; `leslie.guard.quarantine`). Nothing the guard touches is ever deleted.
- `leslie-writes`: the time windows of leslie's own mutations (`store.acquire_index_lock` appends one line
  per mutation while this folder exists), so that the guard tells `leslie spawn` from a hand edit.

Only stat calls find a change (`os.scandir`, `lstat`): unchanged files are never read or hashed. Nothing
here follows a symbolic link: the walk uses lstat, copies are read with `O_NOFOLLOW`, a restore checks that
every folder on its way is a real folder, and a quarantine renames the link itself.

Nothing here trusts the guard's own records either: they lie in the working tree, where a clone, a merge or
any process may have put them. Every record is read by `load_json` (capped, never through a link, a file
that cannot be decoded is CorruptStateError, however deeply it nests), a manifest names only paths `scan`
could have produced (`is_protected_rel`), and the path of a protected entry or of a copy is made in one place
each (`protected_path`, `_object_path`), which refuses any other.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import time
from typing import Any

from leslie.errors import CorruptStateError, StorageError
from leslie.store import fsio
from leslie.store.fsio import atomic_write
from leslie.store.model import is_thread_id
from leslie.store.mutations import guard_dir as guard_path

MAX_COPY = 1 << 20  # bytes: bigger files are watched but not copied, so not restorable
MANIFEST_VERSION = 2
PROTECTED_FOLDERS = ("threads", "objectives", "templates")
PROTECTED_FILES = ("thread_relations.json", "config.toml")
DIR = "d"
FILE = "f"
NOT_COPIED = ""
NOT_RESTORABLE = "-"
DIGEST_LENGTH = 32  # hex digits of a BLAKE2b-128 digest: the name of a copy
# The manifest grows with the protected entries (2.7 MB at 40,000, docs/benchmarks.md): the index's cap.
MANIFEST_CAP = fsio.INDEX_CAP
_HEX = frozenset("0123456789abcdef")
# `/` separates a relative path's parts everywhere; a system that takes another character for a separator
# too (`\` on Windows) must not find one in a part. On POSIX a backslash is an ordinary character of a
# file name: `scan` produces it, and refusing it would let one such file set every manifest aside.
_OTHER_SEPARATORS = tuple(sep for sep in (os.sep, os.altsep) if sep and sep != "/")

Entry = list[Any]


def leslie_dir(root: str) -> str:
    return os.path.join(root, ".leslie")


def guard_dir(root: str) -> str:
    """The guard's folder in this work tree's machine state (`store.machine`), created if missing;
    StorageError when it or the state folder is not a real folder."""
    folder = guard_path(root)
    state = os.path.dirname(folder)
    try:
        os.makedirs(os.path.dirname(state), exist_ok=True)
    except OSError as exc:
        raise StorageError(f"cannot create {state}: {exc.strerror}") from None
    real_folder(state)
    return real_folder(folder)


def real_folder(path: str) -> str:
    """`path`, created if missing; StorageError when it is not a real folder (a link, a file)."""
    try:
        mode = os.lstat(path).st_mode  # a failing mkdir costs more than an lstat: look first
    except FileNotFoundError:
        try:
            os.mkdir(path)
        except FileExistsError:
            pass
        except OSError as exc:
            raise StorageError(f"cannot create {path}: {exc.strerror}") from None
        mode = os.lstat(path).st_mode
    if not stat.S_ISDIR(mode):
        raise StorageError(f"{path} is not a folder (a symbolic link?); the write guard refuses to use it")
    return path


# -- what is protected ----------------------------------------------------------------------------------

def owner_of(rel: str) -> str | None:
    """The thread whose folder `rel` (relative to `.leslie/`) lies in, or None."""
    parts = rel.split("/", 2)
    return parts[1] if parts[0] == "threads" and len(parts) > 1 and is_thread_id(parts[1]) else None


def is_protected_rel(rel: object) -> bool:
    """True when `rel` is a path `scan` can produce, relative to `.leslie/`: one of PROTECTED_FOLDERS or
    PROTECTED_FILES, or a POSIX path below one of the folders whose parts are never empty, `.` or `..`; no
    NUL, and so never absolute. Whatever names a protected entry (a manifest's key) must pass this before
    it becomes a path: a restore writes where the key says."""
    if not isinstance(rel, str) or "\0" in rel or any(sep in rel for sep in _OTHER_SEPARATORS):
        return False
    head, slash, rest = rel.partition("/")
    if not slash:
        return rel in PROTECTED_FOLDERS or rel in PROTECTED_FILES
    return head in PROTECTED_FOLDERS and all(part not in ("", ".", "..") for part in rest.split("/"))


def protected_path(root: str, rel: str) -> str:
    """The path of the protected entry `rel` (relative to `.leslie/`). CorruptStateError, naming the manifest,
    when `rel` is not a path `scan` can produce: checked here, where it is joined, whatever checked it before,
    so no restore, copy or quarantine ever reaches outside the protected files."""
    if not is_protected_rel(rel):
        raise CorruptStateError(manifest_path(root), f"names {rel!r}, which is not a path the write guard "
                                                     "protects")
    return os.path.join(leslie_dir(root), *rel.split("/"))


def is_state_file(rel: str) -> bool:
    """leslie's own state, which no agent writes by hand: a `thread.json`, anything under `objectives/` or
    `templates/`, the index, the config, and anything in `threads/` outside a thread's folder."""
    parts = rel.split("/")
    if parts[0] != "threads" or owner_of(rel) is None:
        return True
    return len(parts) == 3 and parts[2] == "thread.json"


# -- scanning -------------------------------------------------------------------------------------------

def _entry(path: str, st: os.stat_result) -> Entry:
    mode = st.st_mode
    if stat.S_ISREG(mode):
        return [FILE, st.st_size, st.st_ino, st.st_ctime_ns]
    if stat.S_ISDIR(mode):
        return [DIR]
    if stat.S_ISLNK(mode):
        try:
            return ["l", os.readlink(path)]
        except OSError:
            return ["l", ""]
    return ["s"]


def scan(root: str, only: list[str] | None = None) -> dict[str, Entry]:
    """Every protected entry now, by path relative to `.leslie/` (lstat only, never a link followed); with
    `only`, the entries at and under those paths.

    The hot loop of the guard: one lstat per file (none per folder, whose type comes from the listing).
    """
    base = leslie_dir(root)
    found: dict[str, Entry] = {}
    stack: list[tuple[str, str]] = []
    for name in (*PROTECTED_FOLDERS, *PROTECTED_FILES) if only is None else only:
        path = os.path.join(base, *name.split("/"))
        try:
            entry = _entry(path, os.lstat(path))
        except (FileNotFoundError, NotADirectoryError):
            continue
        found[name] = entry
        if entry[0] == DIR:
            stack.append((path, name + "/"))
    folder_entry = [DIR]
    push, pop, scandir = stack.append, stack.pop, os.scandir  # local names: this loop runs 40,000 times
    while stack:
        folder, prefix = pop()
        try:
            listing = scandir(folder)
        except (FileNotFoundError, NotADirectoryError):
            continue  # removed while we walk: the next sweep sees it
        with listing:
            for item in listing:
                rel = prefix + item.name
                if item.is_dir(follow_symlinks=False):
                    found[rel] = folder_entry
                    push((item.path, rel + "/"))
                    continue
                try:
                    st = item.stat(follow_symlinks=False)
                except FileNotFoundError:
                    continue
                if st.st_mode & 0o170000 == stat.S_IFREG:
                    found[rel] = [FILE, st.st_size, st.st_ino, st.st_ctime_ns]
                else:
                    found[rel] = _entry(item.path, st)
    return found


def unchanged(root: str, files: dict[str, Entry], rels: list[str]) -> bool:
    """True when every entry at and under `rels` is now what `files` (a manifest's) says it was."""
    now = scan(root, rels)
    prefixes = tuple(rel + "/" for rel in rels
                     if (files.get(rel) or [None])[0] == DIR or (now.get(rel) or [None])[0] == DIR)
    expected = {rel: files[rel] for rel in rels if rel in files}
    if prefixes:  # one pass over the manifest, each key tested in C
        expected.update({rel: entry for rel, entry in files.items() if rel.startswith(prefixes)})
    return expected == now


def valid_entry(entry: object) -> bool:
    """`entry` has the shape `scan` gives (a manifest read from disk may hold anything)."""
    if not isinstance(entry, list) or not entry:
        return False
    kind = entry[0]
    if kind == FILE:
        return len(entry) == 4 and all(type(v) is int for v in entry[1:])
    if kind == "l":
        return len(entry) == 2 and isinstance(entry[1], str)
    return kind in (DIR, "s") and len(entry) == 1


def change_time(root: str, rel: str, entry: Entry | None) -> int:
    """When `rel` last changed (ns): a file's ctime, else (a folder, a link, a deletion) the ctime of the
    nearest existing folder on its way, which its creation or removal updated. ctime cannot be set by hand."""
    base = leslie_dir(root)
    if entry is not None and entry[0] == FILE:
        return int(entry[3])
    path = protected_path(root, rel)
    path = path if entry is not None else os.path.dirname(path)
    while True:
        try:
            return os.lstat(path).st_ctime_ns
        except OSError:
            if len(path) <= len(base):
                return time.time_ns()
            path = os.path.dirname(path)


# -- the manifest ---------------------------------------------------------------------------------------

def manifest_path(root: str) -> str:
    return os.path.join(guard_path(root), "manifest.json")


def load_json(path: str, limit: int) -> Any:
    """The JSON value of the guard's record `path`, None when there is none. CorruptStateError naming it when
    it cannot be read as one: a link, a FIFO or a folder, more than `limit` bytes, not JSON, or nested too
    deeply to decode (RecursionError). Every record of the guard is read here or by `load_json_lines`, and
    each caller handles that error as damage (the record set aside or ignored): never an internal error that
    would fail the check after every call."""
    try:
        data = fsio.read_regular(path, limit)
    except FileNotFoundError:
        return None
    except StorageError as exc:
        raise CorruptStateError(path, f"cannot be read ({exc.message})") from None
    return parse_json(path, data)


def parse_json(path: str, data: bytes) -> Any:
    """`data`, the record `path` or one of its lines, decoded; CorruptStateError when it is not JSON."""
    try:
        return json.loads(data)
    except RecursionError:  # `[` 100,000 times: the decoder's stack, not a ValueError
        raise CorruptStateError(path, "is nested too deeply to be read") from None
    except ValueError as exc:
        raise CorruptStateError(path, f"is not valid JSON ({exc})") from None


def load_json_lines(path: str, limit: int) -> tuple[list[Any], int]:
    """The values of the JSON Lines record `path` (notices, incidents), and how many of its lines could not
    be decoded: those are skipped. ([], 0) when there is none; CorruptStateError as `load_json` when the
    file itself cannot be read."""
    try:
        data = fsio.read_regular(path, limit)
    except FileNotFoundError:
        return [], 0
    except StorageError as exc:
        raise CorruptStateError(path, f"cannot be read ({exc.message})") from None
    values: list[Any] = []
    unreadable = 0
    for line in data.splitlines():
        if not line.strip():
            continue
        try:
            values.append(parse_json(path, line))
        except CorruptStateError:
            unreadable += 1
    return values, unreadable


def load_manifest(root: str, scanned: dict[str, Entry] | None = None) -> dict[str, Any] | None:
    """The manifest, None when there is none yet; CorruptStateError when it is not one leslie wrote: it
    cannot be read (`load_json`), it has another shape, or a key is not a path `scan` could have produced
    (`is_protected_rel`: a key `../.git/config` would make a restore write `.git/config`).

    `scanned` is what `scan` found just now: its paths are valid by construction, so only the manifest's
    other keys are checked one by one (two subset tests in C instead of 40,000 calls on the hook's path:
    3 ms against 40 at 10,000 threads).
    Only the fields leslie writes are kept: anything else in the file is dropped, never written back."""
    path = manifest_path(root)
    data = load_json(path, MANIFEST_CAP)
    if data is None:
        return None
    files = data.get("files") if isinstance(data, dict) else None
    digests = data.get("digests") if isinstance(data, dict) else None
    if not isinstance(data, dict) or data.get("version") != MANIFEST_VERSION or not isinstance(files, dict) \
            or not isinstance(digests, dict) or not all(isinstance(v, list) and v for v in files.values()) \
            or not all(isinstance(v, str) for v in digests.values()) \
            or not (data.get("head") is None or isinstance(data.get("head"), str)) \
            or type(data.get("copies", 0)) is not int or type(data.get("pending", False)) is not bool:
        raise CorruptStateError(path, "is not a manifest of the write guard")
    known = scanned.keys() if scanned is not None else set()
    if not (files.keys() <= known and digests.keys() <= known):  # subset tests: no set built in the common case
        bad = next((rel for keys in (files.keys() - known, digests.keys() - known) for rel in keys
                    if not is_protected_rel(rel)), None)
        if bad is not None:
            raise CorruptStateError(path, f"names {bad!r}, which is not a path the write guard protects")
    return {"version": MANIFEST_VERSION, "head": data.get("head"), "copies": data.get("copies", 0),
            "pending": data.get("pending", False), "files": files, "digests": digests}


def set_manifest_aside(root: str) -> None:
    """Rename a damaged manifest out of the way (kept for inspection)."""
    with contextlib.suppress(OSError):
        os.replace(manifest_path(root), f"{manifest_path(root)}.damaged-{time.time_ns()}")


def save_manifest(root: str, manifest: dict[str, Any]) -> None:
    """Rewrite the manifest (runtime state: not fsynced; a lost one is rebuilt by the next sweep)."""
    guard_dir(root)
    data = json.dumps(manifest, separators=(",", ":")).encode()
    atomic_write(manifest_path(root), data, durable=False)


# -- the watcher's mark (`leslie.guard.tripwire.watched_sweep`) ----------------------------------------------

MARK_FILE = "watch-mark"


def _manifest_signature(root: str) -> list[int] | None:
    try:
        st = os.lstat(manifest_path(root))
    except OSError:
        return None
    return [st.st_ino, st.st_size, st.st_mtime_ns]


def load_mark(root: str) -> list[Any] | None:
    """The watcher's mark the manifest is known to match, None unless `watch-mark` vouches for this very
    manifest (by inode, size and time: a manifest rewritten since, by anyone, is not vouched for)."""
    try:
        doc = load_json(os.path.join(guard_path(root), MARK_FILE), 4096)
    except CorruptStateError:
        return None
    signature = _manifest_signature(root)
    if not isinstance(doc, dict) or signature is None or doc.get("manifest") != signature:
        return None
    mark = doc.get("mark")
    return mark if isinstance(mark, list) else None


def save_mark(root: str, mark: list[Any]) -> None:
    """Record that the manifest, as it is now, matches the files as of the watcher's `mark`."""
    signature = _manifest_signature(root)
    if signature is None:
        forget_mark(root)
        return
    data = json.dumps({"mark": mark, "manifest": signature}).encode()
    atomic_write(os.path.join(guard_path(root), MARK_FILE), data, durable=False)


def forget_mark(root: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(os.path.join(guard_path(root), MARK_FILE))


# -- content copies -------------------------------------------------------------------------------------

def is_digest(value: object) -> bool:
    """`value` can name a copy: DIGEST_LENGTH lowercase hex digits, so `objects/<2>/<digest>` stays there."""
    return isinstance(value, str) and len(value) == DIGEST_LENGTH and _HEX.issuperset(value)


def valid_digest(value: object) -> bool:
    """`value` is what a manifest may hold for a file: a copy's digest, NOT_COPIED or NOT_RESTORABLE."""
    return value in (NOT_COPIED, NOT_RESTORABLE) or is_digest(value)


def _object_path(root: str, digest: str) -> str:
    if not is_digest(digest):  # checked where the name becomes a path, whatever checked it before
        raise CorruptStateError(manifest_path(root), f"names {digest!r} as a copy, which is not a copy's name")
    return os.path.join(guard_path(root), "objects", digest[:2], digest)


def read_regular(path: str, limit: int = MAX_COPY) -> bytes | None:
    """The bytes of `path` if it is a regular file (never through a link) of at most `limit` bytes."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > limit:
            return None
        chunks = []
        size = 0
        while True:
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                break
            size += len(chunk)
            if size > limit:  # grew while we read it
                return None
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def digest_of(data: bytes) -> str:
    import hashlib

    return hashlib.blake2b(data, digest_size=16).hexdigest()


def copy_content(root: str, rel: str) -> str:
    """Copy the file `rel` into the object store (once per content); its digest, or NOT_RESTORABLE."""
    data = read_regular(protected_path(root, rel))
    if data is None:
        return NOT_RESTORABLE
    digest = digest_of(data)
    target = _object_path(root, digest)
    try:
        if os.lstat(target).st_size == len(data):
            return digest  # the same content is already kept (a torn copy would fail its hash when read)
        os.unlink(target)
    except FileNotFoundError:
        pass
    # Written in place, not through a temp file: the name is the content's hash, so a torn write can only
    # produce a copy that `load_copy` refuses, and this runs for thousands of files on a first snapshot.
    os.makedirs(os.path.dirname(target), exist_ok=True)
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
    finally:
        os.close(fd)
    return digest


def load_copy(root: str, digest: str) -> bytes | None:
    """The content copied as `digest`, None when missing or damaged (it must still hash to its name), and for
    NOT_COPIED, NOT_RESTORABLE or anything else that is no copy's name (`is_digest`)."""
    if not is_digest(digest):
        return None
    data = read_regular(_object_path(root, digest), limit=MAX_COPY)
    return data if data is not None and digest_of(data) == digest else None


def prune_objects(root: str, manifest: dict[str, Any]) -> int:
    """Delete copies no manifest entry names any more; how many."""
    wanted = set(manifest["digests"].values())
    removed = 0
    base = os.path.join(guard_path(root), "objects")
    try:
        buckets = os.listdir(base)
    except OSError:
        return 0
    for bucket in buckets:
        folder = os.path.join(base, bucket)
        try:
            names = os.listdir(folder)
        except OSError:
            continue
        for name in names:
            if name not in wanted:
                try:
                    os.unlink(os.path.join(folder, name))
                    removed += 1
                except OSError:
                    pass
    return removed


# -- putting things back --------------------------------------------------------------------------------

def real_folders_to(root: str, rel: str, create: bool) -> bool:
    """True when every folder from `.leslie/` down to `rel`'s parent is a real folder (never a link);
    with `create`, missing ones are made (one at a time, each checked)."""
    protected_path(root, rel)  # no `..` climbs out of `.leslie/` on the way
    path = leslie_dir(root)
    for part in rel.split("/")[:-1]:
        path = os.path.join(path, part)
        try:
            mode = os.lstat(path).st_mode
        except FileNotFoundError:
            if not create:
                return False
            try:
                os.mkdir(path)
            except OSError:
                return False
            continue
        if not stat.S_ISDIR(mode):
            return False
    return True


def shown(root: str, path: str) -> str:
    """`path` as messages show it: from the root when inside the work tree (`.git/leslie/...`), else whole (the
    machine state of a linked work tree lies in the clone's git folder)."""
    rel = os.path.relpath(path, root)
    return path if rel.startswith(os.pardir) else rel.replace(os.sep, "/")


def restore_file(root: str, rel: str, data: bytes) -> Entry | None:
    """Write `data` back at `rel` (atomically, folders re-made); the new entry, None if a folder on the way
    is not a real folder. CorruptStateError when `rel` is not a protected path (`protected_path`)."""
    path = protected_path(root, rel)
    if not real_folders_to(root, rel, create=True):
        return None
    atomic_write(path, data)
    return _entry(path, os.lstat(path))


def restore_folder(root: str, rel: str) -> bool:
    """Re-make the folder `rel`; False if a folder on the way is not a real folder. CorruptStateError when
    `rel` is not a protected path (`protected_path`)."""
    path = protected_path(root, rel)
    if not real_folders_to(root, rel, create=True):
        return False
    with contextlib.suppress(FileExistsError):
        os.mkdir(path)
    return stat.S_ISDIR(os.lstat(path).st_mode)


# -- leslie's own writes, and git ------------------------------------------------------------------------

def _git_dir(root: str) -> str | None:
    dot_git = os.path.join(root, ".git")
    if os.path.isdir(dot_git):
        return dot_git
    text = (read_regular(dot_git, 4096) or b"").decode("utf-8", "replace").strip()
    if text.startswith("gitdir:"):
        return os.path.normpath(os.path.join(root, text[7:].strip()))
    return None


def git_head(root: str) -> str | None:
    """`<ref>=<commit>` (or the detached commit) of the repository's HEAD, read from files; None without git."""
    git_dir = _git_dir(root)
    if git_dir is None:
        return None
    head = (read_regular(os.path.join(git_dir, "HEAD"), 4096) or b"").decode("utf-8", "replace").strip()
    if not head.startswith("ref:"):
        return head or None
    ref = head[4:].strip()
    common = (read_regular(os.path.join(git_dir, "commondir"), 4096) or b"").decode("utf-8", "replace").strip()
    folders = [git_dir] + ([os.path.normpath(os.path.join(git_dir, common))] if common else [])
    for folder in folders:
        value = read_regular(os.path.join(folder, *ref.split("/")), 4096)
        if value is not None:
            return f"{ref}={value.decode('utf-8', 'replace').strip()}"
    for folder in folders:
        for line in (read_regular(os.path.join(folder, "packed-refs"), 1 << 24) or b"").splitlines():
            commit, _, name = line.decode("utf-8", "replace").partition(" ")
            if name.strip() == ref:
                return f"{ref}={commit}"
    return f"{ref}=(unborn)"


def git_clean_paths(root: str, rels: list[str]) -> set[str]:
    """Those of `rels` whose working-tree state matches git's HEAD and index (one `git status` call)."""
    import subprocess

    paths = [os.path.join(".leslie", *rel.split("/")) for rel in rels]
    try:
        proc = subprocess.run(["git", "status", "--porcelain=v1", "-z", "--no-renames", "--untracked-files=all",
                               "--", *paths], cwd=root, capture_output=True, timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        return set()
    if proc.returncode != 0:
        return set()
    dirty = set()
    for item in proc.stdout.split(b"\0"):
        path = item[3:].decode("utf-8", "replace")
        where = path.find(".leslie/")  # git names paths from its top folder, which may be above `root`
        if len(item) > 3 and where >= 0:
            dirty.add(path[where + len(".leslie/"):].rstrip("/"))
    return {rel for rel in rels if rel not in dirty and not any(d.startswith(rel + "/") for d in dirty)}
