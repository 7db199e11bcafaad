"""The `<thread_context>` block (SPEC §5): what it holds, how it renders, and a cheap fingerprint of it.

Importing this module must stay cheap: the hook imports it on every prompt, but only renders (Jinja2 +
lxml) when the fingerprint says the context changed. Jinja2 and lxml are imported inside `render_context`.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Collection, Mapping, Sequence
from contextlib import suppress
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from leslie.context import TEMPLATES, template_data
from leslie.context.files import own_key, referenced_sigs, scope_files
from leslie.context.loading import LEVEL_OWN, LEVEL_REFS, Candidate, Inline, Loaded, fill
from leslie.context.scaffold import ASSET_TEMPLATES
from leslie.errors import CorruptStateError, NotFoundError, UsageError
from leslie.store.bindings import live_roots
from leslie.store.files import INDEX_NAME, Layout, read_bytes
from leslie.store.fsio import LESLIE_DIR, atomic_write, refuse_links
from leslie.store.model import NOT_XML_CHAR, Thread, validate_thread_id
from leslie.store.repository import Repository
from leslie.version import __version__

if TYPE_CHECKING:
    from leslie.store.relations import Index

TEMPLATE_NAME = "thread_context.xml.j2"
RELATIONS_FILE = f"{LESLIE_DIR}/{INDEX_NAME}"
FORMATS = ("xml", "json")
CACHE_DIR = "contexts"
_PACKAGED_TEMPLATE = os.path.join(TEMPLATES, TEMPLATE_NAME)



@template_data
class CommandOutput(NamedTuple):
    """Output of one `[[context.commands]]` entry (filled by the injection helper)."""

    name: str
    exit_code: int | None  # None when it timed out or could not start
    output: str  # already size-capped by the caller
    error: str | None = None  # e.g. "timed out after 5 s"


@template_data
class FileContent(NamedTuple):
    """A file below a folder asset whose content the budget inlined."""

    path: str
    inline: Inline
    changed: bool = False


@template_data
class Asset(NamedTuple):
    """One asset as the agent sees it: its type and its path from the repo root (folders end with `/`), and
    what progressive loading added: its inlined content (a file) or inlined files (a folder), why a file was
    not inlined (`binary`, `too large`, `unreadable`), whether it holds only leslie's scaffold (`empty`: never
    inlined), whether it changed since the session last saw it."""

    type: str
    path: str
    inline: Inline | None = None
    files: tuple[FileContent, ...] = ()
    skipped: str | None = None
    changed: bool = False
    empty: bool = False

    def to_json(self) -> dict[str, Any]:
        """The asset in `--format json`: type and path, plus whatever loading added."""
        doc: dict[str, Any] = {"type": self.type, "path": self.path}
        if self.inline is not None:
            doc["content"] = _inline_json(self.inline)
        if self.files:
            doc["files"] = [{"path": f.path, "content": _inline_json(f.inline), "changed": f.changed}
                            for f in self.files]
        if self.skipped is not None:
            doc["not_inlined"] = self.skipped
        if self.empty:
            doc["empty"] = True
        if self.changed:
            doc["changed"] = True
        return doc


def _inline_json(inline: Inline) -> dict[str, Any]:
    return {"text": inline.text, "lines": inline.lines, "total_lines": inline.total_lines,
            "omitted_bytes": inline.omitted_bytes, "omitted": inline.omitted(), "tokens": inline.tokens}


@template_data
class RefContext(NamedTuple):
    """One direct reference: the target thread and the assets in scope (`scoped` False: the whole thread)."""

    thread: str
    title: str
    status: str
    scoped: bool
    assets: tuple[Asset, ...]
    worktree: str | None = None  # the root of the other worktree it is read from (SPEC §13), if any


class OrderContext(NamedTuple):
    """A thread in the order around the block's thread (SPEC §14): one it waits for, or one waiting on it."""

    thread: str
    title: str
    status: str

    def to_json(self) -> dict[str, str]:
        return {"thread": self.thread, "title": self.title, "status": self.status}


def order_context(repo: Repository) -> Callable[[str], tuple[tuple[OrderContext, ...], tuple[OrderContext, ...]]]:
    """A reader of the order around a thread, from the index alone (one entry of it, not the whole index):
    (the threads it comes after that are not done, the threads that come after it), each sorted by ID. An index
    that cannot be read (conflict markers mid-merge, a hand edit) shows no order: the block never needed the
    index before order existed, and must not fail for it now (`leslie doctor` reports the index)."""
    from leslie.errors import LeslieError

    index: Index | None
    try:
        index = repo.read_index(record=False)  # a read: `context` writes nothing under .leslie/ for it
    except LeslieError:
        index = None

    def around(thread_id: str) -> tuple[tuple[OrderContext, ...], tuple[OrderContext, ...]]:
        if index is None:
            return (), ()
        first, then = index.order(thread_id)

        def shown(ids: set[str], skip_done: bool) -> tuple[OrderContext, ...]:
            found = []
            for other in sorted(ids):
                entry = index.entry(other)
                if entry is None or (skip_done and entry.get("status") == "done"):
                    continue
                found.append(OrderContext(other, str(entry.get("title", "")), str(entry.get("status", ""))))
            return tuple(found)

        return shown(first, True), shown(then, False)

    return around


class ThreadContext(NamedTuple):
    """Everything the block says, in render order; the template and the JSON form both come from this."""

    thread: str
    objective: str
    relations_file: str
    title: str
    intent: str
    status: str
    assets: tuple[Asset, ...]
    refs: tuple[RefContext, ...]
    commands: tuple[CommandOutput, ...]
    objective_title: str | None = None
    budget_tokens: int = 0
    tokens: tuple[tuple[str, int], ...] = ()  # inlined tokens per level (own, refs)
    after: tuple[OrderContext, ...] = ()  # what the thread still waits for (SPEC §14)
    before: tuple[OrderContext, ...] = ()  # what waits on it

    @property
    def inlined_tokens(self) -> int:
        """Tokens of all inlined text (at most `budget_tokens`)."""
        return sum(count for _level, count in self.tokens)

    def to_json(self) -> dict[str, Any]:
        """The `--format json` document: the same information as the XML."""
        return {
            "thread": self.thread,
            "objective": self.objective,
            "objective_title": self.objective_title,
            "relations_file": self.relations_file,
            "title": self.title,
            "intent": self.intent,
            "status": self.status,
            "budget_tokens": self.budget_tokens,
            "tokens": dict(self.tokens),
            "assets": [a.to_json() for a in self.assets],
            "refs": [
                {"thread": r.thread, "title": r.title, "status": r.status, "scoped": r.scoped,
                 "assets": [a.to_json() for a in r.assets], **({"worktree": r.worktree} if r.worktree else {})}
                for r in self.refs
            ],
            "commands": [
                {"name": c.name, "exit": c.exit_code, "output": c.output, "error": c.error}
                for c in self.commands
            ],
            # only when the thread has order edges: a block without order keeps its exact shape
            **({"after": [a.to_json() for a in self.after]} if self.after else {}),
            **({"before": [b.to_json() for b in self.before]} if self.before else {}),
        }


def _carriable(text: str) -> str:
    """Command output is machine text, not user input, so it is not rejected but made carriable: characters
    XML 1.0 cannot hold (terminal escapes, NUL, lone surrogates, U+FFFE/U+FFFF) become U+FFFD."""
    return NOT_XML_CHAR.sub("\ufffd", text)


def _folder_prefix(thread_id: str) -> str:
    return f"{LESLIE_DIR}/threads/{thread_id}/"


def _read_target(repo: Repository, target: str, reads: Mapping[str, bytes] | None = None) -> Thread | None:
    """A referenced thread, or None when it is missing or deleted (such targets never appear); from the bytes
    the fingerprint just read (`reads`), when it did."""
    raw = reads.get(target) if reads is not None else None
    try:
        thread = repo.read_thread(target) if raw is None else repo.parse_thread(target, raw)
    except NotFoundError:
        return None
    return None if thread.is_tombstone else thread


def _scoped_assets(repo: Repository, target: str, scope: Sequence[str]) -> tuple[Asset, ...]:
    config = repo.config
    folders = {asset.path for asset in config.asset_types if asset.kind == "folder"}
    prefix = _folder_prefix(target)
    assets = []
    for path in sorted(scope):
        is_folder = path in folders or os.path.isdir(repo.layout.thread_dir(target) / path)
        assets.append(Asset(config.asset_type_of(path), prefix + path + ("/" if is_folder else "")))
    return tuple(assets)


def _objective_title(repo: Repository, objective: str | None) -> str | None:
    if not objective:
        return None
    try:
        return repo.read_objective(objective).title
    except NotFoundError:
        return None


def _ref_scope(repo: Repository, target: str, scope: Sequence[str]) -> tuple[Asset, ...]:
    if scope:
        return _scoped_assets(repo, target, scope)
    return tuple(Asset(a.name, _folder_prefix(target) + a.display_path) for a in repo.config.asset_types)


def _own_candidates(repo: Repository, thread_id: str, thread: Thread | None = None) -> list[Candidate]:
    """Level 1: the own plan (cut from its start), then the own progress (its newest entries: from its end)."""
    chosen = []
    for wanted in ("plan", "progress"):
        for asset in repo.config.asset_types:
            if asset.name == wanted and asset.kind == "file":
                path = _folder_prefix(thread_id) + asset.path
                chosen.append(Candidate(path, str(repo.root / path), LEVEL_OWN, wanted == "progress",
                                        _template_of(asset.path), _filled_with(thread)))
    return chosen


def _filled_with(thread: Thread | None) -> tuple[str, str, str] | None:
    """What spawn filled the thread's asset templates with (its title may have changed since)."""
    return None if thread is None else (thread.title, thread.id, thread.intent)


def _template_of(rel: str) -> str | None:
    """The asset template spawn writes at `rel` (a path in the thread's folder), if any."""
    return rel if rel in ASSET_TEMPLATES else None


def _asset_overrides(repo: Repository) -> dict[str, str]:
    """The repository's own asset templates (`.leslie/templates/plan.md`, ...), read as spawn reads them: a
    regular UTF-8 file of bounded size, never through a link. Read only when a block inlines content."""
    from leslie.context.trust import read_override

    found = {}
    for name in ASSET_TEMPLATES:
        override = read_override(repo.layout.templates_dir, name)
        if override is not None and override.text is not None:
            found[name] = override.text
    return found


def _with_content(asset: Asset, loaded: Loaded, changed: Collection[str]) -> Asset:
    if asset.path.endswith("/"):
        files = tuple(FileContent(path, inline, path in changed) for path, inline in sorted(loaded.inlines.items())
                      if path.startswith(asset.path))
        return Asset(asset.type, asset.path, files=files, changed=asset.path in changed)
    return Asset(asset.type, asset.path, loaded.inlines.get(asset.path), skipped=loaded.skipped.get(asset.path),
                 changed=asset.path in changed, empty=asset.path in loaded.empty)


def build_context(repo: Repository, thread_id: str, commands: Sequence[CommandOutput] = (), *,
                  budget: int | None = None, changed: Collection[str] = (),
                  reads: Mapping[str, bytes] | None = None) -> ThreadContext:
    """Gather what the block of `thread_id` says; NotFoundError for a missing or deleted thread.

    `budget`: tokens of file content to inline (default: `[context] budget_tokens`; 0: paths only).
    `changed`: paths (from the repository root) of referenced assets to mark `changed="true"`.
    `reads`: referenced threads' `thread.json` bytes already read (by `context_fingerprint`), by ID.
    """
    validate_thread_id(thread_id)
    thread = repo.read_live_thread(thread_id)
    config = repo.config
    budget = config.budget_tokens if budget is None else budget
    own_prefix = _folder_prefix(thread_id)
    refs: list[tuple[RefContext, list[list[tuple[str, int, int]]]]] = []
    filled: dict[str, tuple[str, str, str] | None] = {}
    elsewhere = live_roots(repo.root) if thread.references else {}  # threads bound to another worktree
    for target, scope in sorted(thread.references.items()):
        if target == thread_id:
            continue  # a self-reference is invalid state (doctor reports it); never shown
        live = elsewhere.get(target)  # bound to another worktree: shown as it is there now
        source = repo if live is None else Repository(Path(live))
        other = _read_target(source, target, reads if live is None else None)
        if other is None:
            continue
        assets = _ref_scope(source, target, scope)
        files = scope_files(str(source.layout.thread_dir(target)),
                            [a.path[len(_folder_prefix(target)):] for a in assets]) if budget > 0 else []
        refs.append((RefContext(target, other.title, other.status, bool(scope), assets, live), files))
        filled[target] = _filled_with(other)
    waits_for, waited_on = order_context(repo)(thread_id)
    loaded = Loaded(budget, {}, {}, {LEVEL_OWN: 0, LEVEL_REFS: 0})
    if budget > 0:
        candidates = _own_candidates(repo, thread_id, thread)
        level2 = sorted(((-mtime, ref.thread, rel) for ref, per_asset in refs for asset_files in per_asset
                         for rel, mtime, _size in asset_files))
        bases = {ref.thread: Path(ref.worktree) if ref.worktree else repo.root for ref, _ in refs}
        seen = {c.path for c in candidates}
        for _neg, target, rel in level2:
            path = _folder_prefix(target) + rel
            if path not in seen:  # a file in two scope paths is inlined once
                seen.add(path)
                candidates.append(Candidate(path, str(bases[target] / path), LEVEL_REFS,
                                            config.asset_type_of(rel) == "progress", _template_of(rel),
                                            filled[target]))
        loaded = fill(candidates, budget, _asset_overrides(repo) if repo.layout.templates_dir.is_dir() else None)
    return ThreadContext(
        thread=thread_id,
        objective=thread.objective or "",
        relations_file=RELATIONS_FILE,
        title=thread.title,
        intent=thread.intent,
        status=thread.status,
        assets=tuple(_with_content(Asset(a.name, own_prefix + a.display_path), loaded, ()) for a in config.asset_types),
        refs=tuple(RefContext(ref.thread, ref.title, ref.status, ref.scoped,
                              tuple(_with_content(a, loaded, changed) for a in ref.assets), ref.worktree)
                   for ref, _ in refs),
        commands=tuple(
            CommandOutput(_carriable(c.name), c.exit_code, _carriable(c.output.replace("\r\n", "\n")),
                          None if c.error is None else _carriable(c.error))
            for c in commands
        ),
        objective_title=_objective_title(repo, thread.objective),
        budget_tokens=budget,
        tokens=tuple(sorted(loaded.tokens.items())),
        after=waits_for,
        before=waited_on,
    )


def _check_block(text: str, label: str, thread_id: str) -> None:
    from leslie.context.render import parse_xml

    root = parse_xml(text, label)
    if root.tag != "thread_context" or root.get("thread") != thread_id or root.get("objective") is None:
        raise UsageError(
            f"template {label} must render a <thread_context> root with thread={thread_id!r} and objective "
            "attributes"
        )


def _commands_key(commands: Sequence[CommandOutput]) -> str:
    digest = hashlib.sha256()
    for command in commands:
        for value in (command.name, str(command.exit_code), command.output, str(command.error)):
            data = value.encode("utf-8", "surrogatepass")
            digest.update(b"%d:" % len(data) + data)
    return digest.hexdigest()


def _cache_path(repo: Repository, thread_id: str, with_commands: bool) -> Path:
    # Two slots per thread: the plain block (spawn, `leslie context`) and the one with command output (hooks).
    return repo.layout.state_dir / CACHE_DIR / (thread_id + (".commands.xml" if with_commands else ".xml"))


def _local_identity(folder: Path) -> str:
    """The cache folder's device and inode: part of every cache key, so a cache entry committed by a hostile
    repository (whose key it could compute from the repository's content) never matches on a user's clone,
    where git created the folder with an inode nobody could predict. Its block would otherwise be injected."""
    try:
        info = os.lstat(folder)
    except OSError:
        return "none"
    return f"{info.st_dev:x}.{info.st_ino:x}"


def _cached(path: Path, key: str) -> str | None:
    try:
        data = read_bytes(path)
    except (OSError, CorruptStateError):  # disposable: a link in its place is refused by the write that follows
        return None
    header, _, text = data.partition(b"\n")
    if header.decode("ascii", "replace") != key:
        return None
    try:
        return text.decode("utf-8")
    except UnicodeDecodeError:
        return None


def render_context(repo: Repository, thread_id: str, *, fmt: str = "xml",
                   commands: Sequence[CommandOutput] = (), cache: bool = True,
                   warnings: list[str] | None = None, budget: int | None = None,
                   changed: Collection[str] = (), fingerprint: str | None = None,
                   reads: Mapping[str, bytes] | None = None) -> str:
    """The `<thread_context>` block (xml, validated with lxml) or the same information as JSON (fmt='json').

    Raises NotFoundError for a missing/deleted thread, UsageError (exit 2) naming the template for an
    approved template override that fails or renders malformed XML. The text ends with one newline. An
    override that is not approved is ignored with one note in `warnings` (see `leslie.context.render.render_template`).

    A validated XML block is kept in `.leslie/state/contexts/` under its fingerprint (and the commands'
    digest), so rendering an unchanged context again costs a few file reads instead of importing Jinja2 and
    lxml; `cache=False` always renders. `budget` overrides `[context] budget_tokens` (a preview);
    `changed` lists referenced asset paths to mark `changed="true"` (see `build_context`); either renders
    without the cache. `fingerprint`: the context's, when the caller just took it (see `render_fingerprinted`).
    """
    if fmt not in FORMATS:
        raise UsageError(f"unknown format {fmt!r}: expected xml or json")
    if fmt == "json":
        from leslie.store.jsonio import dumps_canonical

        return dumps_canonical(build_context(repo, thread_id, commands, budget=budget,
                                             changed=changed).to_json()).decode("utf-8")
    key = path = None
    if cache and budget is None and not changed:
        path = _cache_path(repo, thread_id, bool(commands))
        own = hashlib.sha256(own_files_key(repo, thread_id).encode()).hexdigest()[:16]
        if fingerprint is None:
            fingerprint = context_fingerprint(repo, thread_id)
        key = f"{fingerprint}-{own}-{_commands_key(commands)}"
        hit = _cached(path, f"{key}-{_local_identity(path.parent)}")
        if hit is not None:
            from leslie.context.render import override_notes

            # The fingerprint holds the approval decision, so the note matches the cached block.
            _extend(warnings, override_notes(TEMPLATE_NAME, repo.root))
            return hit
    text = _render_xml(repo, build_context(repo, thread_id, commands, budget=budget, changed=changed, reads=reads),
                       warnings)
    if key is not None and path is not None:
        # A cache that cannot be written (read-only checkout) only costs speed; not durable: it is rebuilt
        # when lost, so it skips the fsyncs. A link in its place is corrupt state, reported (never followed).
        with suppress(OSError):
            refuse_links(path.parent)
            path.parent.mkdir(parents=True, exist_ok=True)  # first, so the key holds its identity
            atomic_write(path, f"{key}-{_local_identity(path.parent)}\n{text}".encode(), durable=False)
    return text


def render_fingerprinted(repo: Repository, thread_id: str, *, commands: Sequence[CommandOutput] = (),
                        warnings: list[str] | None = None, changed: Collection[str] = (),
                        cache: bool = True, fingerprint: str | None = None) -> tuple[str, str]:
    """The XML block and the fingerprint of the state it was rendered from, the fingerprint computed once
    (or `fingerprint`, one the caller computed before calling).

    Taken before rendering: a change in the middle can only make the pair look older than its text (the
    policy then injects once more), never newer (a cache entry whose text is older than its fingerprint
    would be reused as current).
    """
    reads: dict[str, bytes] = {}  # the referenced threads' thread.json, read once for both
    if fingerprint is None:
        fingerprint = context_fingerprint(repo, thread_id, reads)
    text = render_context(repo, thread_id, commands=commands, warnings=warnings, changed=changed, cache=cache,
                          fingerprint=fingerprint, reads=reads)
    return text, fingerprint


def _extend(warnings: list[str] | None, notes: list[str]) -> None:
    if warnings is not None:
        warnings.extend(notes)
    elif notes:
        from leslie.context.render import report_notes

        report_notes(notes, None)


def _render_xml(repo: Repository, data: ThreadContext, warnings: list[str] | None) -> str:
    from leslie.context.render import render_template

    variables = {
        "thread": data.thread, "objective": data.objective, "relations_file": data.relations_file,
        "title": data.title, "intent": data.intent, "status": data.status,
        "objective_title": data.objective_title, "budget_tokens": data.budget_tokens,
        "inlined_tokens": data.inlined_tokens, "assets": data.assets, "refs": data.refs, "commands": data.commands,
        "after": data.after, "before": data.before,
    }
    text, label = render_template(TEMPLATE_NAME, variables, root=repo.root, warnings=warnings)
    _check_block(text, label, data.thread)
    return text if text.endswith("\n") else text + "\n"


def _file_digest_part(path: os.PathLike[str] | str) -> bytes:
    # Read as every state file is (a regular file of bounded size, never through a link): a `config.toml`
    # linked to /dev/zero ends in CorruptStateError naming it, not in a hook that allocates without end.
    try:
        return read_bytes(Path(path))
    except FileNotFoundError:
        return b"\0missing"
    except CorruptStateError:
        if os.path.isdir(path) and not os.path.islink(path):
            return b"\0folder"
        raise


def _templates_part(repo: Repository) -> list[tuple[str, bytes]]:
    """Each override's content digest, and whether it is approved (so approving or revoking changes the
    fingerprint); the trust file is read only when there is an override."""
    from leslie.context import trust

    overrides = trust.template_overrides(repo.layout.templates_dir)
    if not overrides:
        return []
    try:
        approved = trust.approved_templates(repo.root)
    except CorruptStateError:
        approved = {}
    parts = []
    for override in overrides:
        parts.append(("template:" + override.name, (override.sha256 or f"\0{override.problem}").encode()))
        parts.append(("approved:" + override.name, b"1" if override.verdict(approved) is None else b"0"))
    return parts


def context_fingerprint(repo: Repository, thread_id: str, reads: dict[str, bytes] | None = None) -> str:
    """A cheap hex digest of everything the rendered block depends on, without importing Jinja2 or lxml.

    Covers the thread's `thread.json` bytes, each referenced thread's `thread.json` (existence, status,
    title) and, for scoped paths, whether each is a folder on disk; `config.toml`; every template override in
    `.leslie/templates/` (an override and anything it includes) and whether the user approved it; the leslie
    version and the packaged template. Same state, same digest; any change that changes the rendered XML
    changes it. Command outputs are not part of it.
    Raises NotFoundError for a missing or deleted thread, like `render_context`. `reads` collects the
    referenced threads' `thread.json` bytes (for `build_context`).
    """
    validate_thread_id(thread_id)
    thread = repo.read_live_thread(thread_id)
    layout = repo.layout
    digest = hashlib.sha256()

    def part(label: str, data: bytes) -> None:
        # Length-prefixed, so two different sequences of parts can never hash the same.
        digest.update(f"{label}:{len(data)}:".encode())
        digest.update(data)

    part("version", __version__.encode())
    # The packaged template too, not just the version: an edited template in a development install must not
    # be served from a cache filled by the old one.
    part("packaged", _file_digest_part(_PACKAGED_TEMPLATE))
    part("thread", read_bytes(layout.thread_file(thread_id)))
    part("config", _file_digest_part(layout.config_path))
    for label, data in _templates_part(repo):
        part(label, data)
    elsewhere = live_roots(repo.root) if thread.references else {}
    for target, scope in sorted(thread.references.items()):
        live = elsewhere.get(target)  # bound to another worktree: read there (store.bindings)
        target_layout = layout if live is None else Layout(Path(live))
        data = _file_digest_part(target_layout.thread_file(target))
        part("ref:" + target, data)
        if live is not None:
            part("live:" + target, live.encode("utf-8", "surrogateescape"))
        elif reads is not None and not data.startswith(b"\0"):  # not a missing file's or a folder's marker
            reads[target] = data
        for path in scope:
            is_dir = os.path.isdir(target_layout.thread_dir(target) / path)
            part("scope:" + path, b"d" if is_dir else b"f")
    # The stat signatures (never the contents) of every referenced in-scope file: a change in one is a
    # context change for the policy (reason `changed`), and the content a block inlined is never stale.
    # (os-only and unvalidated, as the hook's inputs key: the references were just read and validated above)
    assets = [a.display_path for a in repo.config.asset_types]
    part("files", json.dumps(referenced_sigs(str(repo.root), thread.references, assets),
                             separators=(",", ":")).encode())
    waits_for, waited_on = order_context(repo)(thread_id)
    if waits_for or waited_on:  # a thread without order keeps the digest it had before order existed
        part("order", json.dumps([[o.to_json() for o in waits_for], [o.to_json() for o in waited_on]],
                                 sort_keys=True, ensure_ascii=False).encode("utf-8", "surrogatepass"))
    return digest.hexdigest()


def own_files_key(repo: Repository, thread_id: str) -> str:
    """Stat signatures of the own files level 1 inlines (plan, progress): part of a cached block's key, not of
    the fingerprint, so an agent updating its own progress does not make the policy re-inject."""
    prefix = _folder_prefix(thread_id)
    return own_key(str(repo.root), thread_id, [c.path[len(prefix):] for c in _own_candidates(repo, thread_id)])


def context_output(repo: Repository, thread_id: str, *, fmt: str = "xml", message: str | None = None,
                   commands: Sequence[CommandOutput] = (), warnings: list[str] | None = None,
                   budget: int | None = None) -> str:
    """What `leslie context` prints: the block, then a blank line and the message when one is given.

    In JSON the message is a `"message"` key of the same document. The text ends with one newline.
    """
    if fmt not in FORMATS:
        raise UsageError(f"unknown format {fmt!r}: expected xml or json")
    if fmt == "json":
        from leslie.store.jsonio import dumps_canonical

        document = build_context(repo, thread_id, commands, budget=budget).to_json()
        if message is not None:
            document["message"] = message
        return dumps_canonical(document).decode("utf-8")
    block = render_context(repo, thread_id, commands=commands, warnings=warnings, budget=budget)
    if not message:
        return block
    return block + "\n" + message + ("" if message.endswith("\n") else "\n")
