"""`leslie find`'s private cache: what each searched file held when it was last read, kept by its signature.

A cache file lives in `find/` of the work tree's machine state (`store.machine`; local, rebuilt when lost):
`threads` and `titles`, the live thread IDs (by shard) and their titles of one index file, and `00`..`3f`, one
shard of thread records each (the thread's shard is a hash of its ID, so a changed thread rewrites 1/64 of the
cache). A thread record holds
the signature (inode, size, mtime and ctime in ns) of its folder and subfolders, its thread.json and each
searched file, with the casefolded text of each file, joined into the shard's text section. `leslie find`
trusts a record only while every signature still matches (`ops/find_scan.py`); the cache only ever narrows
which files are read again, and every hit comes from the file itself.

**The cache is untrusted input** (docs/security.md): outside git it lives in `.leslie/state/find/`, which a
hostile folder may bring.
Each file carries a keyed BLAKE2b MAC (the key is this user's, `$XDG_STATE_HOME/leslie/cache.key`, created
on first use, mode 0600, never in a repository) over its header and records, bound to the repository's path
and the interpreter's version. Only a file whose MAC verifies is decoded with `marshal` (fast, but it can
crash the interpreter on crafted bytes), so only bytes this user's leslie wrote are ever unmarshalled; any
other file is ignored as if absent. Files are read with the capped, no-follow, regular-file reader. The MAC
covers the text section's length, not its bytes (hashing 250 MB at 100,000 threads would cost a quarter of a
second): a cache file is only ever replaced whole (atomic writes, a git checkout), so pairing a forged text
with this user's records needs those records' bytes and write access here, which is more than editing the
thread files themselves.
"""

from __future__ import annotations

import contextlib
import marshal
import os
import stat
import struct
import sys
import zlib
from typing import Any

from leslie.errors import LeslieError
from leslie.store.fsio import atomic_write, refuse_links
from leslie.store.machine import state_dir

try:  # the C modules behind `hashlib.blake2b` and `hmac.compare_digest`: hashlib loads OpenSSL (~3 ms)
    from _blake2 import blake2b
    from _operator import _compare_digest as compare_digest
except ImportError:  # pragma: no cover (another interpreter)
    from hashlib import blake2b
    from hmac import compare_digest  # type: ignore[no-redef]

MAGIC = b"LESLIE-FIND-CACHE\n"
FORMAT = b"6"  # bump when the records' shape changes: an older file then fails its MAC and is rebuilt
SHARDS = 64  # about 1,600 threads (4 MB) a shard at 100,000 threads; few files to open at 1,000
SHARD_CAP = 256 * 1024 * 1024  # a cache file larger than this is ignored (and not written)
KEY_BYTES = 32
_MAC_BYTES = 32
_HEADER = len(MAGIC) + _MAC_BYTES + 16  # magic, MAC, two 8-byte lengths (records, text)
# A signature whose ctime is this close to the run that took it is stored as never matching: a file changed
# again within the file system's timestamp granularity would keep its ctime (as git's "racily clean").
RACY_NS = 1_000_000_000

# A signature packed (inode, size, mtime, ctime): one bytes object per shard holds them all, compared in C.
SIGNATURE = struct.Struct("<Qqqq")


def cache_dir(leslie_dir: str) -> str:
    """The folder of `find`'s cache files, in the work tree's machine state (`store.machine`)."""
    return os.path.join(state_dir(os.path.dirname(leslie_dir)), "find")


def shard_of(thread_id: str) -> int:
    """The shard (0..SHARDS-1) that holds `thread_id`'s record: a stable hash of the ID."""
    return zlib.crc32(thread_id.encode("utf-8", "surrogatepass")) % SHARDS


def by_shard(thread_ids: tuple[str, ...]) -> tuple[tuple[str, ...], ...]:
    """`thread_ids` grouped by shard (SHARDS groups, each in the given order)."""
    groups: list[list[str]] = [[] for _ in range(SHARDS)]
    for thread_id in thread_ids:
        groups[shard_of(thread_id)].append(thread_id)
    return tuple(map(tuple, groups))


def signature(st: os.stat_result, limit_ns: int) -> bytes:
    """What a record keeps of `st` to know the entry unchanged: ctime -1 (never matches) when too recent."""
    ctime = st.st_ctime_ns
    return SIGNATURE.pack(st.st_ino, st.st_size, st.st_mtime_ns, ctime if ctime < limit_ns else -1)


def _key_path() -> str | None:
    base = os.environ.get("XDG_STATE_HOME")
    if not base:
        home = os.path.expanduser("~")
        if home == "~":
            return None
        base = os.path.join(home, ".local", "state")
    return os.path.join(base, "leslie", "cache.key")


def user_key() -> bytes | None:
    """This user's cache key: read, or created once (0600, linked into place whole); None when unusable."""
    path = _key_path()
    if path is None:
        return None
    for _attempt in range(2):
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except FileNotFoundError:
            if not _create_key(path):
                return None
            continue
        except OSError:
            return None
        try:
            info = os.fstat(fd)
            # Another user's key, or one others may read, is no secret: the cache is not used at all.
            if (not stat.S_ISREG(info.st_mode) or info.st_uid != os.geteuid() or info.st_mode & 0o077
                    or info.st_size != KEY_BYTES):
                return None
            key = os.read(fd, KEY_BYTES + 1)
        except OSError:
            return None
        finally:
            os.close(fd)
        return key if len(key) == KEY_BYTES else None
    return None


def _create_key(path: str) -> bool:
    """Write a fresh key beside `path` and link it into place (a reader never sees a partial key)."""
    folder = os.path.dirname(path)
    temp = f"{path}.{os.urandom(4).hex()}.tmp"
    try:
        os.makedirs(folder, mode=0o700, exist_ok=True)
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            os.write(fd, os.urandom(KEY_BYTES))
        finally:
            os.close(fd)
        with contextlib.suppress(FileExistsError):  # another leslie made one meanwhile: that one is used
            os.link(temp, path)
        return True
    except OSError:
        return False
    finally:
        try:  # noqa: SIM105
            os.unlink(temp)
        except OSError:
            pass


def _read_exactly(fd: int, size: int) -> bytes | None:
    chunks, total = [], 0
    while total < size:
        chunk = os.read(fd, size - total)
        if not chunk:
            return None
        chunks.append(chunk)
        total += len(chunk)
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def _read_sections(path: str) -> tuple[bytes, bytes, bytes, bytes] | None:
    """A cache file's (MAC, lengths, records, text), each read into a buffer of its own (at 100,000 threads
    the shards hold 250 MB of text: one copy, not two); None when it is not a whole cache file.

    Opened as every repository file is read: no link followed (the file or its folders up to `.leslie`), no
    FIFO waited on, nothing over `SHARD_CAP` read.
    """
    refuse_links(path)
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or not _HEADER <= info.st_size <= SHARD_CAP:
            return None
        head = _read_exactly(fd, _HEADER)
        if head is None or not head.startswith(MAGIC):
            return None
        mac, lengths = head[len(MAGIC):len(MAGIC) + _MAC_BYTES], head[len(MAGIC) + _MAC_BYTES:]
        size, text_size = int.from_bytes(lengths[:8], "big"), int.from_bytes(lengths[8:], "big")
        if _HEADER + size + text_size != info.st_size:
            return None
        records, text = _read_exactly(fd, size), _read_exactly(fd, text_size)
        if records is None or text is None or os.read(fd, 1):  # shorter or longer than it says: not whole
            return None
        return mac, lengths, records, text
    finally:
        os.close(fd)


class Cache:
    """The cache files of one repository, with this user's key (None: the cache is neither read nor written)."""

    def __init__(self, leslie_dir: str, root: str) -> None:
        self.folder = cache_dir(leslie_dir)
        self.key = user_key()
        # The MAC binds a file to this repository and this interpreter (marshal's format is per version).
        self._context = b"\0".join((MAGIC, FORMAT, os.fsencode(os.path.realpath(root)),
                                   sys.version.encode(), str(marshal.version).encode()))

    def _mac(self, name: str, lengths: bytes, records: bytes) -> bytes:
        assert self.key is not None
        mac = blake2b(key=self.key, digest_size=_MAC_BYTES)
        mac.update(self._context + b"\0" + name.encode() + b"\0" + lengths)
        mac.update(records)
        return mac.digest()

    def load(self, name: str) -> tuple[Any, bytes] | None:
        """(records, text) of cache file `name` when it is this user's and whole; None otherwise."""
        if self.key is None:
            return None
        try:
            sections = _read_sections(os.path.join(self.folder, name))
        except (OSError, LeslieError):  # missing, a link, unreadable: no cache
            return None
        if sections is None:  # a FIFO, too big, not whole, not a cache file
            return None
        mac, lengths, records, text = sections
        if not compare_digest(mac, self._mac(name, lengths, records)):
            return None  # not written by this user's leslie for this repository: never unmarshalled
        try:
            decoded = marshal.loads(records)
        except (ValueError, EOFError, TypeError):  # cannot happen for bytes we wrote; no cache then
            return None
        return decoded, text

    def save(self, name: str, records: Any, text: bytes) -> None:
        """Write cache file `name` atomically; any failure (read-only repository, a link) is silent."""
        if self.key is None:
            return
        try:
            encoded = marshal.dumps(records)
            if _HEADER + len(encoded) + len(text) > SHARD_CAP:
                return
            lengths = len(encoded).to_bytes(8, "big") + len(text).to_bytes(8, "big")
            data = b"".join((MAGIC, self._mac(name, lengths, encoded), lengths, encoded, text))
            atomic_write(os.path.join(self.folder, name), data, durable=False)
        except (OSError, LeslieError, ValueError):
            pass
