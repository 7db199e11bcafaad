"""What the board shows, read from `.leslie/`: cards grouped by objective, one thread's page, its sessions.

Everything here only reads. Every value comes from a repository that may be hostile; it is returned as
plain text (the templates escape it) or, for Markdown, as sanitized HTML (`leslie.board.markdown`).
A corrupt thread does not take the board down: it becomes a problem line naming the file.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Any

from leslie.context.files import read_text, scope_listing
from leslie.context.scaffold import comment_lines, without_lines
from leslie.errors import LeslieError, NotFoundError
from leslie.ops.claims import holder, live_claims
from leslie.store.fsio import read_regular
from leslie.store.model import THREAD_ID_RE, Objective, Thread
from leslie.store.repository import Repository
from leslie.store.sessions import list_sessions

PAGE_FILES_BYTES = 4 * 1024 * 1024  # the text of a thread's files one page shows: past it, files are listed only
PROGRESS_TAIL = 16 * 1024  # bytes of progress.md read for a card's latest entry: entries are appended
INTENT_CHARS = 280  # characters of the intent a card shows
STATUS_ORDER = {"active": 0, "paused": 1, "done": 2, "archived": 3}
NO_OBJECTIVE = "(no objective)"


@dataclass(frozen=True)
class Card:
    """One thread as the board shows it."""

    id: str
    title: str
    status: str
    intent: str
    objective: str | None
    latest: str  # the latest progress entry (plain text), or ""
    references: int
    referrers: int
    sessions: int = 0
    held_by: str = ""  # "AGENT session ID" of a live claim (SPEC §13), or ""
    order: str = ""  # an active thread in the order (SPEC §14): "ready", or "blocked: waits for IDS"; else ""


@dataclass
class Group:
    """An objective (or the threads without one) and its cards."""

    id: str | None
    title: str
    status: str
    cards: list[Card] = field(default_factory=list)

    @property
    def counts(self) -> dict[str, int]:
        """Cards by status."""
        found: dict[str, int] = {}
        for card in self.cards:
            found[card.status] = found.get(card.status, 0) + 1
        return found


@dataclass(frozen=True)
class Board:
    """The whole board: groups, every live thread (for the graph) and the problems met while reading."""

    groups: list[Group]
    threads: dict[str, Thread]
    problems: list[str]


def latest_entry(text: str) -> str:
    """The last `## ` section of a progress file (entries are appended, newest last), without its heading
    markup; the last paragraph when the file has no such heading; "" for a template with no entry yet."""
    lines = text.splitlines()
    start = None
    for number, line in enumerate(lines):
        if line.startswith("## "):
            start = number
    if start is None:
        body = [ln for ln in lines if ln.strip() and not ln.startswith("#") and not ln.lstrip().startswith("<!--")
                and not ln.rstrip().endswith("-->")]
        return "\n".join(body[-6:]).strip()
    heading = lines[start][3:].strip()
    return (heading + "\n" + "\n".join(_items(lines[start + 1:]))).strip()


def _items(lines: list[str]) -> list[str]:
    """Lines of Markdown text with each wrapped list item or paragraph joined back into one line."""
    items: list[str] = []
    joining = False
    for line in lines:
        text = line.strip()
        if not text:
            joining = False
            continue
        if joining and items and not re.match(r"([-*+]|\d+[.)])\s", text):
            items[-1] += " " + text
        else:
            items.append(text)
        joining = True
    return items


def _signature(folder: str, name: str) -> tuple[int, ...] | None:
    """What says a file is unchanged: the folder's and the file's own lstat (a folder swapped for a link, or
    a file replaced, changes it); None when either is missing."""
    try:
        outer = os.lstat(folder)
        inner = os.lstat(os.path.join(folder, name))
    except (OSError, ValueError):
        return None
    return (outer.st_ino, outer.st_mode, inner.st_ino, inner.st_mode, inner.st_size, inner.st_mtime_ns,
            inner.st_ctime_ns)


class Reads:
    """Threads and latest progress entries already read, kept by the stat signature of their files.

    The board re-reads the repository on every page and after every change; with 1,000 threads the strict
    reads cost half a second, the `lstat`s that prove nothing changed a few milliseconds. A file whose
    signature changed is read again, strictly, as any command would. Safe to share between the server's
    worker threads (each entry is replaced whole).
    """

    def __init__(self) -> None:
        self._threads: dict[str, tuple[tuple[int, ...], Thread]] = {}
        self._latest: dict[str, tuple[tuple[int, ...], str]] = {}

    def thread(self, repo: Repository, thread_id: str) -> Thread:
        """`repo.read_thread(thread_id)`, from memory when its file did not change."""
        folder = str(repo.layout.thread_dir(thread_id))
        sig = _signature(folder, "thread.json")
        kept = self._threads.get(folder)
        if sig is not None and kept is not None and kept[0] == sig:
            return kept[1]
        thread = repo.read_thread(thread_id)
        if sig is not None:
            self._threads[folder] = (sig, thread)
        return thread

    def latest(self, repo: Repository, thread_id: str) -> str:
        """The latest entry of the thread's progress.md ("" when there is none, or it cannot be read)."""
        folder = str(repo.layout.thread_dir(thread_id))
        sig = _signature(folder, "progress.md")
        if sig is None:
            return ""
        kept = self._latest.get(folder)
        if kept is not None and kept[0] == sig:
            return kept[1]
        try:
            data = read_regular(os.path.join(folder, "progress.md"), PROGRESS_TAIL, tail=True)
        except (OSError, LeslieError):
            return ""
        text = latest_entry(data.decode("utf-8", "replace"))
        self._latest[folder] = (sig, text)
        return text


def _short(text: str, limit: int) -> str:
    """At most `limit` characters, runs of spaces folded (line breaks kept: a progress entry is a list)."""
    text = "\n".join(" ".join(line.split()) for line in text.splitlines() if line.strip())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def read_threads(repo: Repository, problems: list[str], reads: Reads | None = None) -> dict[str, Thread]:
    """Every live thread (tombstones left out); a corrupt one adds a problem instead."""
    reads = reads if reads is not None else Reads()
    threads: dict[str, Thread] = {}
    for thread_id in repo.thread_ids():
        try:
            thread = reads.thread(repo, thread_id)
        except LeslieError as exc:
            problems.append(exc.message)
            continue
        if not thread.is_tombstone:
            threads[thread_id] = thread
    return threads


def _objectives(repo: Repository, problems: list[str]) -> list[Objective]:
    try:
        return repo.objectives()
    except LeslieError as exc:
        problems.append(exc.message)
        return []


def sessions_by_thread(repo: Repository) -> dict[str, list[dict[str, Any]]]:
    """The agent sessions of the repository (`leslie sessions`), by thread, newest activity first."""
    found: dict[str, list[dict[str, Any]]] = {}
    for row in reversed(list_sessions(str(repo.root))):
        if isinstance(row.get("thread"), str):
            found.setdefault(row["thread"], []).append(row)
    return found


def _order(thread: Thread, threads: dict[str, Thread], successors: set[str]) -> str:
    """Where an active thread stands in the order (SPEC §14): "ready", "blocked: waits for ...", or "" for a
    thread that is not active or takes no part in the order. Claims are shown apart (`held_by`)."""
    first = [t for t in thread.after if t in threads and t != thread.id]
    if thread.status != "active" or not (first or thread.id in successors):
        return ""
    waits = sorted(t for t in first if threads[t].status != "done")
    return "blocked: waits for " + ", ".join(waits) if waits else "ready"


def read_board(repo: Repository, reads: Reads | None = None) -> Board:
    """The board: one group per objective (then the threads without one), cards by status then title."""
    reads = reads if reads is not None else Reads()
    problems: list[str] = []
    threads = read_threads(repo, problems, reads)
    referrers: dict[str, int] = {}
    for thread in threads.values():
        for target in thread.references:
            if target in threads and target != thread.id:
                referrers[target] = referrers.get(target, 0) + 1
    sessions = sessions_by_thread(repo)
    holders = {held.claim.thread: f"{held.claim.agent} session {held.claim.session}" for held in live_claims(repo)}
    groups = {o.id: Group(o.id, o.title, o.status) for o in _objectives(repo, problems)}
    loose = Group(None, NO_OBJECTIVE, "")
    successors = {first for thread in threads.values() for first in thread.after if first in threads}
    for thread in threads.values():
        card = Card(id=thread.id, title=thread.title, status=thread.status, intent=_short(thread.intent, INTENT_CHARS),
                    objective=thread.objective, latest=_short(reads.latest(repo, thread.id), INTENT_CHARS),
                    references=sum(1 for t in thread.references if t in threads and t != thread.id),
                    referrers=referrers.get(thread.id, 0), sessions=len(sessions.get(thread.id, ())),
                    held_by=holders.get(thread.id, ""), order=_order(thread, threads, successors))
        group = groups.get(thread.objective) if thread.objective is not None else loose
        if group is None:  # an objective the thread names but that is not on disk
            group = groups.setdefault(thread.objective or "", Group(thread.objective, thread.objective or "", "?"))
        group.cards.append(card)
    ordered = [*groups.values(), loose]
    for group in ordered:
        group.cards.sort(key=lambda c: (STATUS_ORDER.get(c.status, 9), c.title.casefold(), c.id))
    return Board([g for g in ordered if g.cards or g.id is not None], threads, problems)


@dataclass(frozen=True)
class AssetFile:
    """One file of a thread's assets: its path in the thread's folder, and its text or why it is not shown."""

    path: str
    text: str | None
    skipped: str | None
    markdown: bool


@dataclass(frozen=True)
class Link:
    """A reference seen from one side: the other thread, its title and status, and the scope paths."""

    id: str
    title: str
    status: str
    scope: tuple[str, ...]


@dataclass(frozen=True)
class ThreadPage:
    """Everything one thread's page shows (the block is rendered separately: it may fail on its own)."""

    thread: Thread
    objective_title: str | None
    files: list[AssetFile]
    references: list[Link]
    referrers: list[Link]
    sessions: list[dict[str, Any]]
    holder: dict[str, Any] | None = None  # the live claim (`ops.claims.Holder.to_json`), or None


def known_thread(repo: Repository, thread_id: str) -> bool:
    """True only for the ID of a live thread of the index: the one check between a URL and a folder."""
    if not THREAD_ID_RE.match(thread_id):
        return False
    try:
        return repo.read_index().has_thread(thread_id)
    except LeslieError:
        return False


def asset_files(repo: Repository, thread_id: str) -> list[AssetFile]:
    """The files of the thread's configured assets (plan, progress, design/, ...): never through a link,
    at most `context.files.MAX_SCOPE_FILES` per asset, text only (the size cap of inlined content), and once
    PAGE_FILES_BYTES of text are read, the rest by name only (256 files of 256 KiB would be a 64 MB page)."""
    folder = str(repo.layout.thread_dir(thread_id))
    paths = [a.path for a in repo.config.asset_types]
    found: list[AssetFile] = []
    read = 0
    for files, _is_dir in scope_listing(folder, paths):
        for rel, _mtime, _size in files:
            markdown = rel.lower().endswith((".md", ".markdown"))
            if read >= PAGE_FILES_BYTES:
                found.append(AssetFile(rel, None, f"the page already shows {PAGE_FILES_BYTES >> 20} MB of files",
                                       markdown))
                continue
            text, skipped = read_text(os.path.join(folder, rel))
            read += len(text) if text is not None else 0
            if text is not None:  # an old scaffold's instruction comment is for agents (now in AGENTS.md)
                text = without_lines(text, comment_lines(rel, text))
            found.append(AssetFile(rel, text, skipped, markdown))
    return found


def thread_page(repo: Repository, thread_id: str, reads: Reads | None = None) -> ThreadPage:
    """One thread's page; NotFoundError unless `thread_id` is a live thread of the index."""
    if not known_thread(repo, thread_id):
        raise NotFoundError(f"no such thread: {thread_id}")
    thread = repo.read_live_thread(thread_id)
    problems: list[str] = []
    threads = read_threads(repo, problems, reads)
    objective_title = repo.objective_title(thread.objective)

    def link(other: str, scope: tuple[str, ...]) -> Link:
        target = threads.get(other)
        return Link(other, target.title if target else "(missing)", target.status if target else "?", scope)

    references = [link(t, s) for t, s in sorted(thread.references.items()) if t != thread_id]
    referrers = [link(t.id, t.references[thread_id]) for t in threads.values()
                 if thread_id in t.references and t.id != thread_id]
    held = holder(repo, thread_id)
    return ThreadPage(thread, objective_title, asset_files(repo, thread_id), references, referrers,
                      sessions_by_thread(repo).get(thread_id, []), None if held is None else held.to_json())
