"""The index digest: what `list`, `status` and `objective list` need from the index, without decoding it.

At 10,000 threads the index is a 4 MB pretty-printed JSON document (40 MB at 100,000); decoding it in full is
most of what those commands cost. The digest `.leslie/state/index-digest` holds, per thread, exactly the
fields they read (ID, title, status, objective, created_at, intent, the sorted references both ways), and
whether SPEC §2 invariants 1-3 hold, in columns (one list per field: a few large objects instead of a million
small ones). It is private, local and derived (`.leslie/state/` is git-ignored): any reader that finds it
missing or stale decodes the index as before and writes a new one.

It is keyed by the index file's **signature** (st_dev, st_ino, st_size, st_mtime_ns, st_ctime_ns): every
write of the index is a fresh file renamed into place (`atomic_write`), so its inode and times change with
every write, and a digest of an older index is never taken for the current one (docs/design.md, "Reads at
scale").

It is **untrusted input** (docs/security.md): a hostile repository can commit a file there anyway. It is read
through `read_regular` (no link, no FIFO, capped) and decoded with `marshal` only after a keyed BLAKE2b MAC
over the bytes checks out; the key is a per-user secret beside leslie's trust store
(`$XDG_CONFIG_HOME/leslie/digest.key`) that no checkout can read, so only bytes this user's leslie wrote
reach `marshal` (which may crash the interpreter on crafted input). Anything else — a bad MAC, a foreign
format, a stale signature, a truncated file — is ignored and rebuilt, silently.
"""

from __future__ import annotations

import marshal
import os
from typing import Any

from leslie.errors import LeslieError
from leslie.store.fsio import TEMP_SUFFIX, atomic_write, read_regular

DIGEST_NAME = "index-digest"
KEY_NAME = "digest.key"
_MAGIC = b"leslie-index-digest 1\n"  # the format: a new layout of the payload gets a new number
_MAC_SIZE = 32
_KEY_SIZE = 32
DIGEST_CAP = 128 * 1024 * 1024  # about 300 bytes a thread: far above 100,000 threads, far below the index cap
_FIELDS = 8  # ids, titles, statuses, objectives, created, intents, references_to, referenced_by


class Digest:
    """The index's entries in columns (row i of every list is thread `ids[i]`, IDs ascending).

    `created` and `intents` hold None for an entry written by a leslie older than those keys; `references_to`
    and `referenced_by` hold each thread's IDs sorted and joined by commas ("" for none).
    """

    __slots__ = ("created", "ids", "intents", "invariants_hold", "objectives", "referenced_by", "references_to",
                 "statuses", "titles")

    def __init__(self, columns: list[list[Any]], invariants_hold: bool) -> None:
        (self.ids, self.titles, self.statuses, self.objectives, self.created, self.intents, self.references_to,
         self.referenced_by) = columns
        self.invariants_hold = invariants_hold

    def columns(self) -> list[list[Any]]:
        return [self.ids, self.titles, self.statuses, self.objectives, self.created, self.intents,
                self.references_to, self.referenced_by]

    def thread_counts(self) -> dict[str, int]:
        """How many threads each objective has."""
        counts: dict[str, int] = {}
        get = counts.get
        for objective in self.objectives:
            if objective is not None:
                counts[objective] = get(objective, 0) + 1
        return counts


def signature(index_path: str) -> tuple[int, int, int, int, int] | None:
    """The index file's identity and version as the file system keeps them; None when it is not a plain file."""
    try:
        info = os.lstat(index_path)
    except OSError:
        return None
    if (info.st_mode & 0o170000) != 0o100000:  # a link or anything but a regular file: no digest of it
        return None
    return (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)


def digest_of(index: Any) -> Digest:
    """The digest of a decoded `store.relations.Index` (its threads in ID order)."""
    from leslie.store.bulk import paused_gc
    from leslie.store.relations import invariant_problems

    with paused_gc():
        threads, references_to, referenced_by = index.threads, index.references_to, index.referenced_by
        ids = sorted(threads)
        entries = [threads[tid] for tid in ids]
        none: set[str] = set()
        columns: list[list[Any]] = [
            ids,
            [entry.get("title", "") for entry in entries],
            [entry.get("status", "") for entry in entries],
            [entry.get("objective") for entry in entries],
            [entry["created_at"] if "created_at" in entry and "intent" in entry else None for entry in entries],
            [entry["intent"] if "created_at" in entry and "intent" in entry else None for entry in entries],
            [",".join(sorted(references_to.get(tid, none))) for tid in ids],
            [",".join(sorted(referenced_by.get(tid, none))) for tid in ids],
        ]
        return Digest(columns, not invariant_problems(index))


def _key_path() -> str:
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return os.path.join(base, "leslie", KEY_NAME)


def _key(create: bool) -> bytes | None:
    """This user's digest key (created on first use when `create`), None when there is none to be had."""
    path = _key_path()
    try:
        key = read_regular(path, _KEY_SIZE)
    except FileNotFoundError:
        if not create:
            return None
        try:
            os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        except FileExistsError:  # another leslie made it meanwhile: use that one
            return _key(False)
        except OSError:
            return None
        try:
            key = os.urandom(_KEY_SIZE)
            os.write(fd, key)
        except OSError:
            return None
        finally:
            os.close(fd)
        return key
    except (OSError, LeslieError):
        return None
    return key if len(key) == _KEY_SIZE else None


def _mac(key: bytes, payload: bytes | memoryview) -> bytes:
    try:
        from _blake2 import blake2b  # built in: not `hashlib`, whose OpenSSL import costs milliseconds
    except ImportError:  # pragma: no cover - a Python built without it
        from hashlib import blake2b
    return blake2b(payload, key=key, digest_size=_MAC_SIZE, person=b"leslie-digest").digest()


def load(state_dir: str, index_signature: tuple[int, ...]) -> Digest | None:
    """The digest in `state_dir` if this user's leslie wrote it for the index of `index_signature`, else None.

    Never raises: whatever the file is (missing, a link, a FIFO, huge, truncated, forged, of an older index),
    the answer is None and the caller decodes the index.
    """
    key = _key(False)
    if key is None:
        return None
    try:
        data = read_regular(os.path.join(state_dir, DIGEST_NAME), DIGEST_CAP)
    except (OSError, LeslieError):
        return None
    head = len(_MAGIC) + _MAC_SIZE
    if len(data) <= head or not data.startswith(_MAGIC):
        return None
    payload = memoryview(data)[head:]
    # A plain comparison, not a constant-time one: the file is checked once, locally; nobody can time many
    # guesses against it.
    if _mac(key, payload) != data[len(_MAGIC):head]:
        return None
    try:
        # Safe only because the MAC proves this user's leslie wrote these bytes (see the module's docstring).
        decoded = marshal.loads(payload)
    except (ValueError, EOFError, TypeError):
        return None
    if (not isinstance(decoded, tuple) or len(decoded) != 3 or decoded[0] != tuple(index_signature)
            or not isinstance(decoded[2], list) or len(decoded[2]) != _FIELDS):
        return None
    return Digest(decoded[2], bool(decoded[1]))


def store(state_dir: str, index_signature: tuple[int, ...], digest: Digest) -> None:
    """Write `digest` for the index of `index_signature`; any failure is silent and changes nothing else.

    Not durable (no fsync): a digest lost in a crash is rebuilt by the next reader. Never under the index
    lock: readers write it, and a reader must not wait for writers.
    """
    key = _key(True)
    if key is None:
        return
    try:
        payload = marshal.dumps((tuple(index_signature), digest.invariants_hold, digest.columns()))
        atomic_write(os.path.join(state_dir, DIGEST_NAME), _MAGIC + _mac(key, payload) + payload, durable=False)
    except (OSError, LeslieError, ValueError):
        return


def is_leftover(name: str) -> bool:
    """Whether `name` (in `.leslie/state/`) is the digest or a temp file of one (`doctor` knows both)."""
    return name == DIGEST_NAME or (name.startswith(f".{DIGEST_NAME}.") and name.endswith(TEMP_SUFFIX))


def read_digest(repo: Any) -> Digest:
    """The digest of `repo`'s index (a `store.repository.Repository`): the stored one when it is current, else
    made from the index (decoded as `repo.read_index()` does, with the same errors) and stored for the next
    reader — unless the index changed while it was read, or is missing (rebuilt from the threads)."""
    index_path = os.fspath(repo.layout.index_path)
    state_dir = os.fspath(repo.layout.state_dir)
    before = signature(index_path)
    if before is not None:
        found = load(state_dir, before)
        if found is not None:
            return found
    digest = digest_of(repo.read_index())
    if before is not None and signature(index_path) == before:
        store(state_dir, before, digest)
    return digest
