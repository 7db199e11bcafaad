"""Three-way semantic merge of the index and of `thread.json` files: the core of the git merge driver.

git calls `leslie merge-relations %O %A %B` when both branches changed `.leslie/thread_relations.json`
(and, with `--kind thread`, a `thread.json`). Line-based merging of these files produces conflicts for
changes that do not conflict at all (two branches spawning threads touch neighbouring lines), so they are
merged as data instead:

- **threads**: the union of both sides; a thread present in the base but gone from one side was deleted
  there and stays deleted (deletion wins over a concurrent edit: the tombstone decides);
- **fields** of an entry: taken from the side that changed them; when both sides changed a field to
  different values the choice is deterministic and symmetric, so merging A into B and B into A give the
  same bytes: for `status` the later stage of a thread's life wins (deleted > archived > done > paused >
  active), for every other field the value whose canonical JSON sorts last;
- **edges** (`references_to` of each thread; references of a `thread.json`): a three-way set merge — an edge
  is kept when both sides have it, or when one side added it (absent from the base); an edge present in
  the base and removed by one side is removed;
- **order edges** (`after` of each thread, SPEC §14): the same three-way set merge, `before` mirroring it; two
  edges added on two branches may close a cycle, which `leslie doctor` then reports;
- then the invariants of SPEC §2 are enforced: no self-reference, no edge to a thread not in the result,
  `referenced_by` mirrors `references_to`.

Everything here is pure; reading, fallbacks and writing live in `merge_relations_files`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from leslie.errors import LeslieError, UsageError
from leslie.store.jsonio import StrictJSONError, dumps_canonical, loads_strict
from leslie.store.model import ShapeError, thread_from_json
from leslie.store.relations import Index, build_index, index_from_json

_ABSENT: Any = object()
# Later stages of a thread's life win a status conflict: closing (or deleting) a thread is a deliberate act
# that a concurrent edit on another branch should not silently undo.
STATUS_RANK = {"active": 0, "paused": 1, "done": 2, "archived": 3, "deleted": 4}


def _rank(key: str, value: Any) -> tuple[int, int, bytes]:
    if value is _ABSENT:
        return (0, 0, b"")
    if key == "status" and isinstance(value, str):
        return (1, STATUS_RANK.get(value, -1), value.encode("utf-8", "surrogatepass"))
    return (1, 0, dumps_canonical(value))


def pick(key: str, base: Any, ours: Any, theirs: Any) -> Any:
    """Three-way choice of one field: the side that changed it; both changed → the deterministic winner."""
    if ours == theirs:
        return ours
    if ours == base:
        return theirs
    if theirs == base:
        return ours
    return max(ours, theirs, key=lambda value: _rank(key, value))


def merge_fields(base: dict[str, Any] | None, ours: dict[str, Any], theirs: dict[str, Any],
                 skip: frozenset[str] = frozenset()) -> dict[str, Any]:
    """Merge two versions of a flat record key by key (a key removed on one side and untouched on the other
    stays removed)."""
    base = base or {}
    merged = {}
    for key in sorted((set(ours) | set(theirs)) - skip):
        value = pick(key, base.get(key, _ABSENT), ours.get(key, _ABSENT), theirs.get(key, _ABSENT))
        if value is not _ABSENT:
            merged[key] = value
    return merged


def merge_sets(base: set[str], ours: set[str], theirs: set[str]) -> set[str]:
    """Three-way set merge: kept by both, or added by one side; removed by one side → removed."""
    return (ours & theirs) | (ours - base) | (theirs - base)


def merge_indexes(base: Index, ours: Index, theirs: Index) -> Index:
    """Merge three indexes; the result always satisfies the SPEC §2 invariants 1–3."""
    result = Index.empty()
    for tid in sorted(set(ours.threads) | set(theirs.threads)):
        in_ours, in_theirs = tid in ours.threads, tid in theirs.threads
        if in_ours and in_theirs:
            result.threads[tid] = merge_fields(base.threads.get(tid), ours.threads[tid], theirs.threads[tid])
        elif tid in base.threads:
            continue  # deleted on one side: the deletion wins, even over an edit on the other side
        else:
            result.threads[tid] = dict((ours if in_ours else theirs).threads[tid])
    for tid in result.threads:
        edges = merge_sets(base.references_to.get(tid, set()), ours.references_to.get(tid, set()),
                           theirs.references_to.get(tid, set()))
        result.references_to[tid] = {t for t in edges if t != tid and t in result.threads}
        result.referenced_by[tid] = set()
        first = merge_sets(base.after.get(tid, set()), ours.after.get(tid, set()), theirs.after.get(tid, set()))
        if first := {t for t in first if t != tid and t in result.threads}:
            result.after[tid] = first
    for source, targets in result.references_to.items():
        for target in targets:
            result.referenced_by[target].add(source)
    for successor, predecessors in result.after.items():
        for predecessor in predecessors:
            result.before.setdefault(predecessor, set()).add(successor)
    return result


def decode_index(document: Any) -> Index | None:
    """The index held by a decoded JSON document, or None when it is not a well-formed index."""
    if document is None:
        return None
    try:
        return index_from_json(document, Path("index"))
    except LeslieError:
        return None


def merge_index_documents(base: Any, ours: Any, theirs: Any) -> Index:
    """Merge three decoded index documents (None or malformed: that version is unknown).

    An unknown base counts as empty (nothing was deleted); an unknown side counts as unchanged from the
    base, so the other side's changes still land; everything unknown gives an empty index.
    """
    base_index = decode_index(base) or Index.empty()
    ours_index = decode_index(ours) or base_index
    theirs_index = decode_index(theirs) or base_index
    return merge_indexes(base_index, ours_index, theirs_index)


def _merge_scope(base: list[str] | None, ours: list[str], theirs: list[str]) -> list[str]:
    if theirs in (ours, base):
        return ours
    if ours == base:
        return theirs
    # Both widened or narrowed the reference differently: keep the wider view (an empty scope is the
    # whole thread), the one that loses no access either side granted.
    if not ours or not theirs:
        return []
    return sorted(set(ours) | set(theirs))


def merge_thread_documents(base: Any, ours: Any, theirs: Any) -> dict[str, Any]:
    """Merge three `thread.json` documents (each must parse; `base` may be None for an add/add).

    Raises ShapeError when `ours` or `theirs` is not a valid thread: the source of truth is never guessed.
    """
    for name, side in (("ours", ours), ("theirs", theirs)):
        thread_from_json(side)  # ShapeError names what is wrong
        if not isinstance(side, dict):  # pragma: no cover - thread_from_json already refused it
            raise ShapeError(f"{name} is not a JSON object")
    try:
        thread_from_json(base)
        base_doc: dict[str, Any] = base
    except ShapeError:
        base_doc = {}
    merged = merge_fields(base_doc, ours, theirs, skip=frozenset({"references", "after"}))
    base_refs: dict[str, list[str]] = base_doc.get("references", {})
    ours_refs: dict[str, list[str]] = ours["references"]
    theirs_refs: dict[str, list[str]] = theirs["references"]
    references: dict[str, list[str]] = {}
    for target in merge_sets(set(base_refs), set(ours_refs), set(theirs_refs)):
        if target in ours_refs and target in theirs_refs:
            references[target] = _merge_scope(base_refs.get(target), ours_refs[target], theirs_refs[target])
        else:
            references[target] = list((ours_refs if target in ours_refs else theirs_refs)[target])
    if merged.get("status") == "deleted":
        references = {}  # a tombstone references nothing
    merged["references"] = {t: sorted(set(references[t])) for t in sorted(references) if t != merged.get("id")}
    # The order edges (SPEC §14) merge as a set, as the references do: an edge either side added is kept. Two
    # edges added apart can close a cycle; `doctor` reports it, and the threads on it are never ready.
    after = merge_sets(set(base_doc.get("after", ())), set(ours.get("after", ())), set(theirs.get("after", ())))
    after.discard(merged.get("id"))
    if after and merged.get("status") != "deleted":
        merged["after"] = sorted(after)
    thread_from_json(merged)
    return merged


# -- the driver: files in, file out ---------------------------------------------------------------------


@dataclass
class MergeOutcome:
    """What the driver did: whether %A now holds a clean result, and notes for stderr."""

    clean: bool
    notes: list[str] = field(default_factory=list)


def _decode_file(path: Path, label: str, notes: list[str], limit: int) -> Any:
    # git passes regular temp files; anything else (a link, a FIFO, a device, a file over the cap) is read
    # as nothing at all rather than followed, waited for or read without end.
    from leslie.store.fsio import read_regular

    try:
        data = read_regular(path, limit)
    except OSError as exc:
        notes.append(f"{label} version unreadable ({exc.strerror or exc}); treated as unknown")
        return None
    except LeslieError as exc:
        notes.append(f"{label} version unreadable ({exc.message}); treated as unknown")
        return None
    if not data.strip() and label == "base":
        return None  # git passes an empty base for an add/add merge
    try:
        return loads_strict(data)
    except StrictJSONError as exc:
        notes.append(f"{label} version {exc}; treated as unknown")
        return None


def _working_tree_index(worktree: Path | None, notes: list[str]) -> Index | None:
    """A rebuild from the `thread.json` files of the working tree, when there is one and it reads cleanly."""
    if worktree is None:
        return None
    from leslie.store.repository import Repository

    repo = Repository(worktree)
    if not repo.layout.threads_dir.is_dir():
        return None
    try:
        return build_index(repo.read_threads(repo.thread_ids()))
    except LeslieError as exc:
        notes.append(f"cannot rebuild from the working tree: {exc.message}")
        return None


def _check_result_path(ours: Path) -> None:
    """The result replaces OURS: git passes a regular temp file; anything else (a device such as
    /dev/null, a folder, a symlink) must never be replaced."""
    if ours.is_symlink() or (ours.exists() and not ours.is_file()):
        raise UsageError(f"{ours}: OURS must be a regular file (git passes one as %A)")


def merge_index_files(base: Path, ours: Path, theirs: Path, worktree: Path | None) -> MergeOutcome:
    """Merge three index files into `ours` (atomically); always clean, whatever the inputs hold.

    A corrupt or missing side is replaced by a rebuild from the working tree's `thread.json` files when
    possible (git runs drivers at the top of the working tree), else by the base.
    """
    from leslie.store.fsio import INDEX_CAP, atomic_write

    _check_result_path(ours)
    notes: list[str] = []
    docs = {label: _decode_file(path, label, notes, INDEX_CAP) for label, path in
            (("base", base), ("ours", ours), ("theirs", theirs))}
    indexes = {label: decode_index(doc) for label, doc in docs.items()}
    for label, doc in docs.items():
        if doc is not None and indexes[label] is None:
            notes.append(f"{label} version is not a well-formed index; treated as unknown")
    base_index = indexes["base"] or Index.empty()
    if indexes["ours"] is None or indexes["theirs"] is None:
        rebuilt = _working_tree_index(worktree, notes)
        if rebuilt is not None:
            notes.append("used a rebuild from the working tree's thread.json files for the unknown side")
        for label in ("ours", "theirs"):
            if indexes[label] is None:
                indexes[label] = rebuilt or base_index
    merged = merge_indexes(base_index, indexes["ours"] or base_index, indexes["theirs"] or base_index)
    atomic_write(ours, dumps_canonical(merged.to_json()))
    return MergeOutcome(True, notes)


def id_problem(docs: dict[str, Any], folder: str | None) -> str | None:
    """Why versions of one `thread.json` cannot be merged as the same thread, None when they can.

    Every version that is an object must carry the same `id`, and it must be `folder` (the thread's folder,
    from the path git names as %P) when known: a version whose id differs is another thread's file, and
    merging it would silently turn one thread into another.
    """
    ids = {label: doc.get("id") for label, doc in docs.items() if isinstance(doc, dict)}
    expected = folder if folder is not None else ids.get("ours", ids.get("theirs"))
    wrong = [f"{label} has id {value!r}" for label, value in ids.items() if value != expected]
    if not wrong:
        return None
    where = f"its folder is {folder}" if folder is not None else f"ours has id {expected!r}"
    return f"{', '.join(wrong)} but {where}"


def merge_thread_files(base: Path, ours: Path, theirs: Path, path: str | None = None) -> MergeOutcome:
    """Merge three `thread.json` files into `ours`; a side that does not parse, or whose id is not the one of
    its folder (`path`: the file's path in the tree, git's %P), leaves a conflict for a human."""
    from leslie.store.fsio import STATE_FILE_CAP, atomic_write

    _check_result_path(ours)
    notes: list[str] = []
    docs = {label: _decode_file(file, label, notes, STATE_FILE_CAP) for label, file in
            (("base", base), ("ours", ours), ("theirs", theirs))}
    folder = Path(path).parent.name if path else None
    problem = id_problem(docs, folder)
    if problem is not None:
        notes.append(f"refusing to merge {path or 'thread.json'}: {problem}; left as a conflict")
        return MergeOutcome(False, notes)
    try:
        merged = merge_thread_documents(docs["base"], docs["ours"], docs["theirs"])
    except ShapeError as exc:
        notes.append(f"cannot merge thread.json semantically ({exc}); left as a conflict")
        return MergeOutcome(False, notes)
    atomic_write(ours, dumps_canonical(merged))
    return MergeOutcome(True, notes)


def driver_worktree() -> Path | None:
    """The working tree git runs the driver in (its top level), if it holds `.leslie/`."""
    here = Path(os.getcwd())
    return here if (here / ".leslie").is_dir() else None
