"""Thread operations: spawn, reference, unreference, set-status, rm, switch, and reads for list/show."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from leslie.errors import NotFoundError, StorageError, UsageError
from leslie.ops.objectives import resolve_objective
from leslie.store.files import IndexLock, acquire_index_lock
from leslie.store.fsio import atomic_write
from leslie.store.model import (
    SETTABLE_THREAD_STATUSES,
    Thread,
    clean_text,
    clean_title,
    new_id,
    normalize_scope,
    utc_now,
    validate_objective_id,
    validate_thread_id,
)
from leslie.store.names import resolve_thread_id
from leslie.store.repository import Repository

if TYPE_CHECKING:
    from leslie.store.relations import Index

DEFAULT_TITLE_CHARS = 80


@dataclass(frozen=True)
class RefSpec:
    """A requested reference: a target thread and scope paths (empty: the whole thread)."""

    target: str
    scope: tuple[str, ...] = ()

    @classmethod
    def parse(cls, text: str, what: str = "referenced thread ID") -> RefSpec:
        """Parse `ID` or `ID:SCOPE`, the one way a reference is written (`--ref`, `reference`, `unreference`)."""
        target, sep, scope = text.partition(":")  # an ID never holds a colon: the first one ends it
        validate_thread_id(target, what)
        return cls(target, (normalize_scope(scope),) if sep else ())

    def with_scope(self, scope: Sequence[str]) -> RefSpec:
        """This reference with `--scope` paths added to those written after its colon."""
        return RefSpec(self.target, self.scope + tuple(normalize_scope(path) for path in scope))


def target_spec(texts: Sequence[str], scope: Sequence[str] = (), repo: Repository | None = None) -> RefSpec:
    """The one target of `reference`/`unreference`: `ID` or `ID:SCOPE`, as an argument or `--target`, plus any
    `--scope` paths (both spellings are accepted, so `spawn --ref` and `reference` read alike). With `repo`,
    the ID may be a unique prefix of one (`leslie.store.names`)."""
    if not texts:
        raise UsageError("no target: give ID or ID:SCOPE (or --target ID)")
    if len(texts) > 1:
        raise UsageError(f"give the target once, as ID[:SCOPE] or --target, not both ({', '.join(texts)})")
    return _ref(texts[0], "target thread ID", repo).with_scope(scope)


def spawn_refs(texts: Sequence[str], scope: Sequence[str] = (), repo: Repository | None = None) -> list[RefSpec]:
    """The references of `spawn --ref ID[:SCOPE]...`; `--scope` paths go to the one `--ref` (several: refused,
    since which one they belong to would be a guess). With `repo`, an ID may be a unique prefix of one."""
    refs = [_ref(text, "referenced thread ID", repo) for text in texts]
    if scope:
        if len(refs) != 1:
            raise UsageError("--scope needs exactly one --ref; with several, write each as --ref ID:SCOPE")
        refs = [refs[0].with_scope(scope)]
    return refs


def _ref(text: str, what: str, repo: Repository | None) -> RefSpec:
    """`RefSpec.parse` of `ID` or `ID:SCOPE` as a person types it: with `repo`, the ID named in full first."""
    if repo is not None:
        target, sep, scope = text.partition(":")
        text = resolve_thread_id(repo.root, target, what) + sep + scope
    return RefSpec.parse(text, what)


@dataclass(frozen=True)
class Outcome:
    """What a mutation did: the thread as now stored, whether anything changed, and warnings to show."""

    thread: Thread
    changed: bool = True
    warnings: tuple[str, ...] = ()
    detail: dict[str, list[str]] = field(default_factory=dict)


def _scope_warnings(repo: Repository, target: str, scope: Iterable[str]) -> list[str]:
    """Check each scope path on disk: escaping the repo through a symlink is an error, absence a warning."""
    root = repo.root.resolve()
    thread_dir = repo.layout.thread_dir(target)
    warnings = []
    for path in scope:
        resolved = (thread_dir / path).resolve()
        inside_leslie = resolved.is_relative_to(root / ".leslie")
        if (not resolved.is_relative_to(root) or resolved.is_relative_to(root / ".git")
                or (inside_leslie and not resolved.is_relative_to(thread_dir.resolve()))):
            raise UsageError(f"invalid scope {path!r}: leads outside the thread through a symlink")
        if not os.path.lexists(thread_dir / path):
            warnings.append(f"warning: {target} has no {path} yet; the reference will cover it once it exists")
    return warnings


def _merge_reference(current: tuple[str, ...] | None, scope: Sequence[str]) -> tuple[str, ...]:
    """Combine an existing reference with a requested one: no scope widens to the whole thread."""
    if not scope or current == ():
        return ()
    return tuple(sorted(set(current or ()) | set(scope)))


def _asset_sources(repo: Repository) -> tuple[dict[str, str], list[str]]:
    """The `plan.md`/`progress.md` templates for a new thread, and notes about overrides not used.

    An override in `.leslie/templates/` is a `string.Template` text: it runs nothing, so it needs no approval
    (unlike the Jinja templates, see `leslie.context.trust`), but it comes with the repository: it is read as a
    regular file of at most `TEMPLATE_CAP` bytes, never through a link, never from a FIFO, and before the
    index lock is taken. One that cannot be read so (or is not UTF-8) is ignored with a note.
    """
    from leslie.context.scaffold import packaged_template
    from leslie.context.trust import TEMPLATE_CAP
    from leslie.errors import CorruptStateError
    from leslie.store.fsio import read_regular
    from leslie.terminal import visible

    sources, notes = {}, []
    for name in ("plan.md", "progress.md"):
        path = repo.layout.templates_dir / name
        try:
            sources[name] = read_regular(path, TEMPLATE_CAP).decode("utf-8")
            continue
        except FileNotFoundError:
            pass
        except CorruptStateError as exc:
            notes.append(f"warning: template {visible(repo.layout.relative(path))} ignored: {exc.problem}; "
                         "the packaged one is used")
        except (StorageError, UnicodeDecodeError) as exc:
            reason = "is not UTF-8 text" if isinstance(exc, UnicodeDecodeError) else str(exc)
            notes.append(f"warning: template {visible(repo.layout.relative(path))} ignored: {reason}; "
                         "the packaged one is used")
        sources[name] = packaged_template(name)
    return sources, notes


def _asset_text(raw: str, thread: Thread) -> bytes:
    from leslie.context.scaffold import render

    return render(raw, thread.title, thread.id, thread.intent).encode("utf-8")


def spawn(
    repo: Repository,
    intent: str,
    *,
    title: str | None = None,
    objective: str | None = None,
    refs: Sequence[RefSpec] = (),
    parent: str | None = None,
    thread_id: str | None = None,
    after: Sequence[str] = (),
) -> Outcome:
    """Create an active thread with its `plan.md` and `progress.md`, its references, the threads it comes after
    (SPEC §14: a new thread closes no cycle, nothing comes after it yet), and its index entry."""
    intent = clean_text(intent, "intent")
    title = clean_title(title) if title is not None else clean_title(_default_title(intent), "intent")
    if thread_id is not None:
        validate_thread_id(thread_id)
    if objective is not None:
        validate_objective_id(objective)
    if parent is not None:
        validate_thread_id(parent, "parent thread ID")
    references: dict[str, tuple[str, ...]] = {}
    for ref in refs:
        if thread_id is not None and ref.target == thread_id:
            raise UsageError(f"a thread cannot reference itself ({ref.target})")
        references[ref.target] = _merge_reference(references.get(ref.target), ref.scope)
    predecessors = _spawn_after(thread_id, after)

    sources, notes = _asset_sources(repo)  # before the lock: a repository's file is never read under it
    with acquire_index_lock(repo.layout) as lock:
        index = repo.read_index()
        if thread_id is None:
            thread_id = new_id("thread")
            while repo.thread_exists(thread_id):
                thread_id = new_id("thread")
        elif repo.thread_exists(thread_id):
            raise UsageError(f"thread {thread_id} already exists")
        if parent is not None:
            parent_thread = repo.read_live_thread(parent)
        warnings: list[str] = list(notes)
        for target, scope in references.items():
            repo.read_live_thread(target)
            warnings += _scope_warnings(repo, target, scope)
        for predecessor in predecessors:
            repo.read_live_thread(predecessor)  # exit 3 for a missing or deleted one
        objective_id, created = resolve_objective(
            repo, lock, objective, parent_thread.objective if parent is not None else None
        )
        thread = Thread(
            id=thread_id, title=title, intent=intent, objective=objective_id, references=references,
            spawned_by=parent, created_at=utc_now(), after=predecessors,
        )
        folder = repo.layout.thread_dir(thread_id)
        try:
            # thread.json first: a crash after it leaves a thread (assets are optional, the index is derived);
            # a crash before it leaves at most an empty folder with a temp file, which `doctor --fix` removes.
            repo.write_thread(lock, thread)
            for name in ("plan.md", "progress.md"):
                atomic_write(folder / name, _asset_text(sources[name], thread))
            index.put_thread(thread)
            repo.write_index(lock, index)
        except BaseException:
            # A failed spawn (disk full while writing the index, say) must leave `.leslie/` as it was.
            import shutil

            shutil.rmtree(folder, ignore_errors=True)
            if created:
                shutil.rmtree(repo.layout.objective_file(objective_id).parent, ignore_errors=True)
            raise
    if created:
        warnings.append(f"note: created objective {objective_id} for threads spawned without one")
    return Outcome(thread, warnings=tuple(warnings))


def _spawn_after(thread_id: str | None, predecessors: Sequence[str]) -> tuple[str, ...]:
    """The `--after` IDs of a spawn (SPEC §14, `ops.order`), checked before the lock: well-formed, never the new
    thread itself."""
    for predecessor in predecessors:
        validate_thread_id(predecessor, "predecessor thread ID")
        if predecessor == thread_id:
            raise UsageError(f"a thread cannot come after itself ({thread_id} → {thread_id})")
    return tuple(sorted(set(predecessors)))


def _default_title(intent: str) -> str:
    first = intent.strip().splitlines()[0].strip() if intent.strip() else intent
    return first if len(first) <= DEFAULT_TITLE_CHARS else first[: DEFAULT_TITLE_CHARS - 1].rstrip() + "…"


def _update(repo: Repository, thread_id: str, change: Callable[[Thread], Thread]) -> Outcome:
    """Apply `change` to a live thread in one locked transaction: thread.json, then the index."""
    with acquire_index_lock(repo.layout) as lock:
        index = repo.read_index()
        thread = repo.read_live_thread(thread_id)
        updated = change(thread)
        if updated == thread:
            return Outcome(thread, changed=False)
        commit_thread(repo, lock, index, thread, updated)
    return Outcome(updated)


def commit_thread(repo: Repository, lock: IndexLock, index: Index, thread: Thread, updated: Thread) -> None:
    """Write `updated` (which was `thread`), then the index with it, under `lock`: thread.json first, and put
    back as it was when the index cannot follow."""
    repo.write_thread(lock, updated)
    try:
        index.put_thread(updated)
        repo.write_index(lock, index)
    except BaseException:
        repo.write_thread(lock, thread)
        raise


def reference(repo: Repository, source: str, target: str, scope: Sequence[str] = ()) -> Outcome:
    """Add a read-only reference from `source` to `target` (or add scope paths to an existing one)."""
    validate_thread_id(source)
    validate_thread_id(target, "target thread ID")
    paths = [normalize_scope(path) for path in scope]
    if source == target:
        raise UsageError(f"a thread cannot reference itself ({source})")
    warnings: list[str] = []

    def add(thread: Thread) -> Thread:
        repo.read_live_thread(target)
        warnings.extend(_scope_warnings(repo, target, paths))
        merged = _merge_reference(thread.references.get(target), paths)
        return replace(thread, references={**thread.references, target: merged})

    outcome = _update(repo, source, add)
    return replace(outcome, warnings=tuple(warnings))


def unreference(repo: Repository, source: str, target: str, scope: Sequence[str] = ()) -> Outcome:
    """Remove a reference, or only some of its scope paths (removing the last path removes it)."""
    validate_thread_id(source)
    validate_thread_id(target, "target thread ID")
    paths = [normalize_scope(path) for path in scope]

    def drop(thread: Thread) -> Thread:
        references = dict(thread.references)
        current = references.get(target)
        if current is None:
            if not repo.thread_exists(target):
                raise NotFoundError(f"no such thread: {target}")
            return thread
        if not paths:
            del references[target]
        elif current == ():
            raise UsageError(
                f"{source} references all of {target}; to narrow it, unreference it and reference the "
                "paths you want"
            )
        elif remaining := tuple(p for p in current if p not in paths):
            references[target] = remaining
        else:
            del references[target]
        return replace(thread, references=references)

    return _update(repo, source, drop)


def set_status(repo: Repository, thread_id: str, status: str) -> Outcome:
    """Set a thread's status to active, paused, done or archived (`rm` deletes)."""
    validate_thread_id(thread_id)
    if status not in SETTABLE_THREAD_STATUSES:
        hint = " (use `leslie rm` to delete)" if status == "deleted" else ""
        raise UsageError(
            f"unknown status {status!r}: expected one of {', '.join(SETTABLE_THREAD_STATUSES)}{hint}"
        )
    outcome = _update(repo, thread_id, lambda thread: replace(thread, status=status))
    if status == "done":
        from leslie.ops.claims import end_claim

        end_claim(repo, thread_id)  # a done thread has no claim (SPEC §13)
    return outcome


def retitle(repo: Repository, thread_id: str, title: str) -> Outcome:
    """Change a thread's title."""
    validate_thread_id(thread_id)
    title = clean_title(title)
    return _update(repo, thread_id, lambda thread: replace(thread, title=title))


UNCHANGED = object()  # `edit`: the objective stays as it is


def edit(
    repo: Repository,
    thread_id: str,
    *,
    title: str | None = None,
    intent: str | None = None,
    objective: str | object | None = UNCHANGED,
    expected: Thread | None = None,
) -> Outcome:
    """Change a thread's title, intent and objective (None: no objective) in one transaction.

    Everything is validated before the lock; the objective must exist. `expected` is the thread as it was
    shown in an editor: if it changed meanwhile, the edit is refused rather than undo another's change.
    """
    validate_thread_id(thread_id)
    new_title = clean_title(title) if title is not None else None
    new_intent = clean_text(intent, "intent") if intent is not None else None
    if isinstance(objective, str):
        validate_objective_id(objective)

    def change(thread: Thread) -> Thread:
        if expected is not None and thread != expected:
            raise UsageError(f"thread {thread_id} changed while it was being edited: edit it again")
        updated = thread
        if new_title is not None:
            updated = replace(updated, title=new_title)
        if new_intent is not None:
            updated = replace(updated, intent=new_intent)
        if objective is None or isinstance(objective, str):
            if isinstance(objective, str) and objective != thread.objective:
                repo.read_objective(objective)  # it must exist (exit 3), whatever its status
            updated = replace(updated, objective=objective)
        return updated

    return _update(repo, thread_id, change)


def remove(repo: Repository, thread_id: str, *, force: bool = False, dry_run: bool = False) -> Outcome:
    """Delete a thread, leaving a `deleted` tombstone `thread.json` so merges cannot resurrect it.

    Refused while other threads reference it, unless `force`, which removes those references too.
    `detail` lists `referenced_by` (edges removed or blocking) and `files` (assets deleted).
    """
    validate_thread_id(thread_id)
    with acquire_index_lock(repo.layout) as lock:
        index = repo.read_index()
        thread = repo.read_live_thread(thread_id)
        referrers = sorted(index.referrers(thread_id))
        folder = repo.layout.thread_dir(thread_id)
        files = sorted(
            p.relative_to(repo.root).as_posix() + ("/" if p.is_dir() else "")
            for p in folder.iterdir() if p.name != "thread.json"
        )
        detail = {"referenced_by": referrers, "files": files}
        if referrers and not force:
            raise UsageError(
                f"thread {thread_id} is referenced by {', '.join(referrers)}; "
                "unreference it there first, or use --force to remove those references too"
            )
        # deleted_at dates the tombstone for `leslie gc` (the mtime alone is reset by every checkout)
        tombstone = replace(thread, status="deleted", references={}, extra={**thread.extra, "deleted_at": utc_now()})
        if dry_run:
            return Outcome(tombstone, changed=False, detail=detail)
        originals = [repo.read_thread(source) for source in referrers]
        written: list[Thread] = []
        try:
            for other in originals:
                updated = replace(other, references={t: s for t, s in other.references.items() if t != thread_id})
                repo.write_thread(lock, updated)
                written.append(other)
                index.put_thread(updated)
            repo.write_thread(lock, tombstone)
            written.append(thread)
            index.drop_thread(thread_id)
            repo.write_index(lock, index)
        except BaseException:
            for original in written:  # the index could not follow: put the sources back as they were
                repo.write_thread(lock, original)
            raise
        import shutil

        for path in folder.iterdir():
            if path.name == "thread.json":
                continue
            try:
                if path.is_dir() and not path.is_symlink():
                    shutil.rmtree(path)
                else:
                    path.unlink()
            except OSError as exc:
                raise StorageError(f"thread {thread_id} is deleted, but {path} could not be removed: {exc}") from None
    from leslie.ops.claims import end_claim

    end_claim(repo, thread_id)  # a deleted thread has no claim (SPEC §13)
    return Outcome(tombstone, detail=detail)


def switch(repo: Repository, thread_id: str) -> Thread:
    """Record `thread_id` as the current thread of this working tree."""
    validate_thread_id(thread_id)
    with acquire_index_lock(repo.layout) as lock:
        thread = repo.read_live_thread(thread_id)
        repo.record_current_thread(lock, thread_id)
    return thread


def current_thread_id(repo: Repository, explicit: str | None = None) -> str:
    """The current thread: `explicit` (an ID or a unique prefix of one), else `LESLIE_THREAD`, else the one
    recorded by `switch`."""
    if explicit is not None:  # even an empty --thread is checked, not silently replaced by the fallbacks
        return validate_thread_id(resolve_thread_id(repo.root, explicit))
    chosen = os.environ.get("LESLIE_THREAD") or repo.recorded_current_thread()
    if not chosen:
        raise UsageError("no current thread: pass --thread ID, set LESLIE_THREAD, or run `leslie switch ID`")
    return validate_thread_id(chosen)


@dataclass(frozen=True)
class CurrentThread:
    """The current thread and where it was chosen: `LESLIE_THREAD` or `switch`."""

    thread: Thread
    source: str


def current_thread(repo: Repository) -> CurrentThread | None:
    """The thread `leslie switch` alone reports: `LESLIE_THREAD`, else the one recorded; None when neither is set.

    A current thread that no longer exists, or is deleted, is NotFoundError naming where it came from.
    """
    from_env = os.environ.get("LESLIE_THREAD")
    chosen, source = (from_env, "LESLIE_THREAD") if from_env else (repo.recorded_current_thread(), "switch")
    if not chosen:
        return None
    validate_thread_id(chosen)
    try:
        return CurrentThread(repo.read_live_thread(chosen), source)
    except NotFoundError as exc:
        raise NotFoundError(f"the current thread (from {source}) is gone: {exc.message}") from None


def thread_folder(repo: Repository, thread_id: str) -> Path:
    return repo.layout.thread_dir(thread_id)
