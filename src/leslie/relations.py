"""The index `.leslie/thread_relations.json`: built from the threads, kept by deltas, checked, merged."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from leslie.errors import CorruptStateError
from leslie.model import THREAD_ID_RE, Thread

INDEX_VERSION = "1.0"


@dataclass
class Index:
    """The decoded index: per-thread entries and the mirrored reference graph."""

    threads: dict[str, dict[str, Any]]
    references_to: dict[str, set[str]]
    referenced_by: dict[str, set[str]]

    @classmethod
    def empty(cls) -> Index:
        return cls({}, {}, {})

    def to_json(self) -> dict[str, Any]:
        """The document exactly in the SPEC §2 shape, lists sorted."""
        return {
            "relations": {
                tid: {
                    "referenced_by": sorted(self.referenced_by.get(tid, ())),
                    "references_to": sorted(self.references_to.get(tid, ())),
                }
                for tid in self.threads
            },
            "threads": self.threads,
            "version": INDEX_VERSION,
        }

    def put_thread(self, thread: Thread) -> None:
        """Add or update `thread`'s entry and outgoing edges; a tombstone is removed with all its edges.

        Edges to threads absent from the index are left out, as a rebuild would.
        """
        if thread.is_tombstone:
            self.drop_thread(thread.id)
            return
        entry = dict(self.threads.get(thread.id, {}))
        entry.update(objective=thread.objective, status=thread.status, title=thread.title)
        self.threads[thread.id] = entry
        self.referenced_by.setdefault(thread.id, set())
        wanted = {t for t in thread.references if t != thread.id and t in self.threads}
        current = self.references_to.setdefault(thread.id, set())
        for gone in current - wanted:
            self.referenced_by.get(gone, set()).discard(thread.id)
        for new in wanted - current:
            self.referenced_by.setdefault(new, set()).add(thread.id)
        self.references_to[thread.id] = wanted

    def drop_thread(self, thread_id: str) -> None:
        """Remove a thread's entry and every edge touching it."""
        self.threads.pop(thread_id, None)
        for target in self.references_to.pop(thread_id, set()):
            self.referenced_by.get(target, set()).discard(thread_id)
        for source in self.referenced_by.pop(thread_id, set()):
            self.references_to.get(source, set()).discard(thread_id)


def build_index(threads: Iterable[Thread]) -> Index:
    """Rebuild the index from `thread.json` documents: tombstones out, dangling and self edges dropped."""
    live = {t.id: t for t in threads if not t.is_tombstone}
    index = Index.empty()
    for thread_id in sorted(live):
        thread = live[thread_id]
        index.threads[thread_id] = {"objective": thread.objective, "status": thread.status, "title": thread.title}
        index.references_to[thread_id] = {t for t in thread.references if t != thread_id and t in live}
        index.referenced_by.setdefault(thread_id, set())
    for source, targets in index.references_to.items():
        for target in targets:
            index.referenced_by[target].add(source)
    return index


def _bad(path: Path, problem: str) -> CorruptStateError:
    return CorruptStateError(path, problem)


def index_from_json(data: Any, path: Path) -> Index:
    """Decode and shape-check an index document; any defect raises CorruptStateError naming `path`."""
    if not isinstance(data, dict) or set(data) != {"version", "threads", "relations"}:
        raise _bad(path, "is not an index (expected exactly the keys version, threads, relations)")
    if data["version"] != INDEX_VERSION:
        raise _bad(path, f"has unknown index version {data['version']!r}")
    threads, relations = data["threads"], data["relations"]
    if not isinstance(threads, dict) or not isinstance(relations, dict):
        raise _bad(path, "'threads' and 'relations' must be objects")
    index = Index.empty()
    for tid, entry in threads.items():
        if not THREAD_ID_RE.match(tid) or not isinstance(entry, dict):
            raise _bad(path, f"threads entry {tid!r} is malformed")
        for key in ("status", "title"):
            if not isinstance(entry.get(key), str):
                raise _bad(path, f"threads[{tid!r}].{key} is missing or not a string")
        index.threads[tid] = entry
    for tid, rel in relations.items():
        if tid not in threads or not isinstance(rel, dict):
            raise _bad(path, f"relations entry {tid!r} is malformed or has no threads entry")
        for key in ("references_to", "referenced_by"):
            value = rel.get(key)
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise _bad(path, f"relations[{tid!r}].{key} is not a list of thread IDs")
        index.references_to[tid] = set(rel["references_to"])
        index.referenced_by[tid] = set(rel["referenced_by"])
    return index


def invariant_problems(index: Index) -> list[str]:
    """Breaches of SPEC §2 invariants 1–3 within the index itself (4 needs the sources)."""
    problems = []
    for tid in sorted(index.threads):
        if tid not in index.references_to or tid not in index.referenced_by:
            problems.append(f"{tid} has no relations entry")
    for source in sorted(index.references_to):
        for target in sorted(index.references_to[source]):
            if target == source:
                problems.append(f"{source} references itself")
            elif target not in index.threads:
                problems.append(f"{source} references missing thread {target}")
            elif source not in index.referenced_by.get(target, set()):
                problems.append(f"{target}.referenced_by lacks {source} (mirror broken)")
    for target in sorted(index.referenced_by):
        for source in sorted(index.referenced_by[target]):
            if target not in index.references_to.get(source, set()):
                problems.append(f"{source}.references_to lacks {target} (mirror broken)")
    return problems


def format_relations(index: Index, fmt: str) -> str:
    """The reference graph as `json` (the index document), `mermaid` or `dot`."""
    if fmt == "json":
        from leslie._json import dumps_canonical

        return dumps_canonical(index.to_json()).decode("utf-8")
    edges = [(s, t) for s in sorted(index.references_to) for t in sorted(index.references_to[s])]
    if fmt == "mermaid":
        lines = ["graph LR"]
        lines += [f'  {tid.replace("-", "_")}["{tid}"]' for tid in sorted(index.threads)]
        lines += [f'  {s.replace("-", "_")} --> {t.replace("-", "_")}' for s, t in edges]
    else:
        lines = ["digraph leslie {"]
        lines += [f'  "{tid}";' for tid in sorted(index.threads)]
        lines += [f'  "{s}" -> "{t}";' for s, t in edges]
        lines.append("}")
    return "\n".join(lines) + "\n"
