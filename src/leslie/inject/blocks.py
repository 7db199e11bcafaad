"""The block to inject for a thread: the one owner of its fingerprint, its cache and its rendering.

Every integration asks `block_to_inject` (through the injector); nothing renders any other way.

The common case, a message that injects nothing, must cost less than a second interpreter start (SPEC §10),
so this module never imports the repository model, Jinja2 or lxml on that path. Derived caches in this
work tree's machine state (`store.machine`; disposable: delete them at any time) make that possible:

- the *inputs key*: the stat signatures (mtime, size, inode) of every file the context's fingerprint reads
  (`leslie.context.block.context_fingerprint`): the thread's `thread.json`, its referenced threads'
  `thread.json` and scoped paths, `config.toml`, `.leslie/templates/` (and, when it holds files, the trust file:
  approving or revoking an override changes the block), the packaged template, and the leslie version. It
  is computed *before* anything is read, so a change racing with a computation can only make the key
  stale, never wrong. While it is unchanged the fingerprint is reused without being recomputed;
- `contexts/<thread>.json`: the last fingerprint and rendered block of a thread, shared by its
  sessions, so a new session or a re-injection after a compaction prints the cached block without importing
  Jinja2, lxml or the repository model. A block with context-command output is rendered at every injection:
  dynamic commands change it each time;
- `config-cache.json`: the `[injection]` and `[[context.commands]]` settings keyed by the stat of
  `config.toml`, so TOML is parsed only when it changes.

A hook runs in a child of the warm process (`leslie.server.warm`), which has Jinja2, lxml and the template
loaded already: a render costs the render, not the imports.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from typing import TYPE_CHECKING, Any

from leslie.context import TEMPLATES
from leslie.errors import CorruptStateError, NotFoundError
from leslie.store.bindings import live_roots
from leslie.store.files import INDEX_NAME
from leslie.store.fsio import LESLIE_DIR, atomic_write, read_regular
from leslie.store.jsonio import StrictJSONError, dumps_canonical, loads_strict
from leslie.store.machine import state_dir
from leslie.store.model import is_thread_id
from leslie.version import __version__

if TYPE_CHECKING:
    from leslie.context.block import CommandOutput
    from leslie.store.repository import Repository

Doc = dict[str, Any]

PACKAGED_TEMPLATE = os.path.join(TEMPLATES, "thread_context.xml.j2")


def contexts_dir(root: str) -> str:
    """The folder of the cached blocks, in this work tree's machine state (`store.machine`)."""
    return os.path.join(state_dir(root), "contexts")


def config_cache(root: str) -> str:
    """The cached settings of `config.toml`, in this work tree's machine state."""
    return os.path.join(state_dir(root), "config-cache.json")


class RepoHandle:
    """A repository root, with its `Repository` opened only when really needed (a message that injects
    nothing never reads the index)."""

    __slots__ = ("_repo", "root")

    def __init__(self, root: str, repo: Repository | None = None) -> None:
        self.root = root
        self._repo = repo

    def repo(self) -> Repository:
        """The `Repository` at this root (imported and opened on first use)."""
        if self._repo is None:
            from pathlib import Path

            from leslie.store.repository import Repository

            self._repo = Repository(Path(self.root))
        return self._repo

    @classmethod
    def of(cls, repo: Repository) -> RepoHandle:
        """A handle on an opened repository."""
        return cls(str(repo.root), repo)


# -- the derived caches ---------------------------------------------------------------------------------

def _signature(path: str) -> list[int] | None:
    try:
        st = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    return [st.st_mtime_ns, st.st_size, st.st_ino]


def read_cache(path: str) -> Doc | None:
    """A derived cache document, None when it is missing or unreadable (caches are disposable; a link in its
    place is reported by `write_cache`, which the miss leads to)."""
    try:
        data = loads_strict(read_regular(path))
    except (OSError, StrictJSONError, CorruptStateError):
        return None
    return data if isinstance(data, dict) else None


def write_cache(path: str, doc: Doc) -> None:
    """Write a derived cache document; a failure only makes the next call slower, but a symbolic link in its
    place (or in its folders) is corrupt state: CorruptStateError, never a write through it."""
    with contextlib.suppress(OSError):  # a cache that cannot be written is only a slower next time
        atomic_write(path, dumps_canonical(doc), durable=False)


DEFAULT_ASSETS = [["plan", "plan.md", "file"], ["progress", "progress.md", "file"], ["design", "design", "folder"],
                  ["artifact", "artifacts", "folder"]]  # as `leslie.store.config.DEFAULT_ASSET_TYPES`
_last_referenced: dict[tuple[str, str], dict[str, list[list[object]]]] = {}  # by inputs_key, for injections


def asset_types(doc: Doc | None) -> list[list[str]]:
    """`[name, path, kind]` of each configured asset type, from a settings document (`settings_doc`)."""
    assets = doc.get("assets") if isinstance(doc, dict) else None
    if isinstance(assets, list) and all(isinstance(a, list) and len(a) == 3 and all(isinstance(t, str) for t in a)
                                        for a in assets):
        return assets
    return DEFAULT_ASSETS


def asset_paths(doc: Doc | None) -> list[str]:
    """The in-scope paths of a whole reference: every asset type's path (folders end with `/`)."""
    return [path + "/" if kind == "folder" else path for _name, path, kind in asset_types(doc)]


def own_paths(doc: Doc | None) -> list[str]:
    """The own files level 1 inlines: the `plan`, then the `progress` file type (as `leslie.context.block`)."""
    types = asset_types(doc)
    return [path for wanted in ("plan", "progress") for name, path, kind in types
            if name == wanted and kind == "file"]


def referenced_now(root: str, thread_id: str, doc: Doc | None) -> dict[str, list[list[object]]]:
    """The referenced in-scope files' signatures as the last `inputs_key` of this process found them."""
    found = _last_referenced.get((root, thread_id))
    if found is None:
        inputs_key(root, thread_id, asset_paths(doc))
        found = _last_referenced.get((root, thread_id), {})
    return found


def inputs_key(root: str, thread_id: str, assets: list[str] | None = None) -> str:
    """A digest of the stat signatures of everything `context_fingerprint` reads; NotFoundError for a missing
    or deleted thread.

    `assets`: the in-scope paths of a whole reference (`asset_paths`; the default asset types if None); every
    referenced in-scope file is stat'ed (`leslie.context.files.referenced_sigs`), never read.
    """
    thread_dir = os.path.join(root, LESLIE_DIR, "threads", thread_id)
    thread_file = os.path.join(thread_dir, "thread.json")
    own = _signature(thread_file)
    if own is None:
        raise NotFoundError(f"no such thread: {thread_id}")
    try:  # a regular file of bounded size, strict JSON, its own id: as the repository reads it
        data = loads_strict(read_regular(thread_file))
    except FileNotFoundError:
        data = None
    except StrictJSONError as exc:
        raise CorruptStateError(thread_file, str(exc)) from None
    if isinstance(data, dict) and data.get("id") != thread_id:
        raise CorruptStateError(thread_file, f"its id {data.get('id')!r} does not match its folder")
    if isinstance(data, dict) and data.get("status") == "deleted":
        raise NotFoundError(f"thread {thread_id} is deleted")
    references = data.get("references") if isinstance(data, dict) else None
    refs: list[object] = []
    if isinstance(references, dict):
        elsewhere = live_roots(root) if references else {}  # threads bound to another worktree (store.bindings)
        for target, scope in sorted(references.items()):
            if not isinstance(target, str) or not is_thread_id(target):
                continue
            live = elsewhere.get(target)  # bound to another worktree: its files there
            target_dir = f"{live or root}/{LESLIE_DIR}/threads/{target}"  # f-strings: this runs per reference
            folders = [os.path.isdir(f"{target_dir}/{p}") for p in scope if isinstance(p, str)] \
                if isinstance(scope, list) else []
            refs.append([target, _signature(f"{target_dir}/thread.json"), folders, live])
    templates_dir = os.path.join(root, LESLIE_DIR, "templates")
    try:
        templates: list[object] = [[n, _signature(os.path.join(templates_dir, n))]
                                   for n in sorted(os.listdir(templates_dir))]
    except (FileNotFoundError, NotADirectoryError):
        templates = []
    if templates:  # whether an override is used depends on its approval: the trust file's signature too
        from leslie.context.trust import trust_file

        templates.append(["trust", _signature(trust_file())])
    from leslie.context.files import referenced_sigs

    referenced = referenced_sigs(root, references, assets if assets is not None else asset_paths(None))
    _last_referenced[(root, thread_id)] = referenced
    # The index's signature (one stat): the order around the thread (SPEC §14: what it waits for, what waits on
    # it, their titles and statuses) is read from it, and another thread's edit can change that.
    parts = [__version__, _signature(PACKAGED_TEMPLATE), own, data is not None,
             _signature(os.path.join(root, LESLIE_DIR, "config.toml")), templates, refs, referenced,
             _signature(os.path.join(root, LESLIE_DIR, INDEX_NAME))]
    # A digest, not the text: with 50 references the text is ~20 KB, which every prompt would otherwise
    # escape into the session state and parse back out of it.
    return "b2-" + hashlib.blake2b(json.dumps(parts, separators=(",", ":")).encode("utf-8", "surrogatepass"),
                            digest_size=20).hexdigest()


# The `[injection]` values a settings document must hold, and their types (`inject.policy.Settings`).
_INJECTION_TYPES: dict[str, type | tuple[type, ...]] = {
    "mode": str, "reinject_every_rounds": int, "context_window_tokens": int, "tokens_per_round": int,
    "usage_threshold": (int, float)}


def usable_settings(doc: object) -> bool:
    """Whether a cached settings document (in a session's state or `config-cache.json`) has the shape its
    readers take for granted; a damaged or hand-edited one is parsed again from `config.toml` instead."""
    if not isinstance(doc, dict) or not isinstance(doc.get("commands", []), list):
        return False
    injection, claims = doc.get("injection"), doc.get("claims")
    return isinstance(injection, dict) and all(
        isinstance(injection.get(key), kind) and not isinstance(injection.get(key), bool)
        for key, kind in _INJECTION_TYPES.items()) and (
        isinstance(claims, dict) and type(claims.get("ttl_seconds")) is int and claims["ttl_seconds"] >= 1
        and type(claims.get("auto")) is bool)  # a cache an older leslie wrote has none: parsed again


def settings_doc(handle: RepoHandle, state: Doc | None = None) -> Doc:
    """`{"injection": {...}, "commands": [...], "claims": {...}, ...}` from `config.toml`, parsed only when the
    file changed."""
    config_path = os.path.join(handle.root, LESLIE_DIR, "config.toml")
    key = json.dumps(_signature(config_path))
    if state is not None and state.get("config_key") == key and usable_settings(state.get("config")):
        cached: Doc = state["config"]
        return cached
    cache_path = config_cache(handle.root)
    cache = read_cache(cache_path)
    if cache is not None and cache.get("key") == key and usable_settings(cache.get("config")):
        doc: Doc = cache["config"]
    else:
        doc = parse_settings(handle.root, key)
    if state is not None:
        state["config_key"] = key
        state["config"] = doc
    return doc


def parse_settings(root: str, key: str) -> Doc:
    """Parse `config.toml` in this process and cache the settings under `key` (its stat, taken before)."""
    from pathlib import Path

    from leslie.store.config import load_config

    config = load_config(Path(root, LESLIE_DIR, "config.toml"))  # not `repo.config`: a proxy must see edits
    doc = {"injection": config.injection._asdict(), "commands": [c._asdict() for c in config.commands],
           "assets": [[a.name, a.path, a.kind] for a in config.asset_types], "budget_tokens": config.budget_tokens,
           "claims": config.claims._asdict()}
    write_cache(config_cache(root), {"key": key, "config": doc})
    return doc


def current_fingerprint(handle: RepoHandle, thread_id: str, state: Doc | None = None) -> str:
    """The context's fingerprint, recomputed only when the inputs key changed."""
    key = inputs_key(handle.root, thread_id, asset_paths(state.get("config") if state is not None else None))
    if state is not None and state.get("inputs_key") == key and isinstance(state.get("fingerprint"), str):
        known: str = state["fingerprint"]
        return known
    cache_path = os.path.join(contexts_dir(handle.root), thread_id + ".json")
    cache = read_cache(cache_path)
    if cache is not None and cache.get("key") == key and isinstance(cache.get("fingerprint"), str):
        fingerprint: str = cache["fingerprint"]
    else:
        from leslie.context.block import context_fingerprint

        fingerprint = context_fingerprint(handle.repo(), thread_id)
        fresh: Doc = {"key": key, "fingerprint": fingerprint}
        if cache is not None and cache.get("fingerprint") == fingerprint and isinstance(cache.get("xml"), str):
            fresh["xml"] = cache["xml"]  # same context: the rendered block is still good
        write_cache(cache_path, fresh)
    if state is not None:
        state["inputs_key"] = key
        state["fingerprint"] = fingerprint
    return fingerprint


def refresh(repo: Repository, thread_id: str) -> str:
    """Render the thread's block (without commands) into the cache now, and return it (`leslie watch`)."""
    handle = RepoHandle.of(repo)
    assets = [a.display_path for a in repo.config.asset_types]
    return render_into_cache(handle, thread_id, inputs_key(handle.root, thread_id, assets))[0]


# -- rendering ------------------------------------------------------------------------------------------

def render_into_cache(handle: RepoHandle, thread_id: str, key: str, warnings: list[str] | None = None,
                      fingerprint: str | None = None) -> tuple[str, str]:
    """Render the thread's block (without commands) in this process, cache it under `key`: (xml, fingerprint).
    `fingerprint`: the context's, when the caller took it before (`current_fingerprint`), else taken here.

    The render's notes (an ignored template override) go to `warnings` and into the cache entry, so every
    injection of that block repeats them.
    """
    from leslie.context.block import own_files_key, render_fingerprinted

    repo = handle.repo()
    notes: list[str] = []
    own = own_files_key(repo, thread_id)  # taken before reading, like `key`: a race only makes it stale
    # Fingerprinted before rendering (`render_fingerprinted`): if the state changes meanwhile, the entry's
    # fingerprint is older than its text and never matches the newer state, so it is never reused as current.
    text, fingerprint = render_fingerprinted(repo, thread_id, warnings=notes, fingerprint=fingerprint)
    write_cache(os.path.join(contexts_dir(handle.root), thread_id + ".json"),
                 {"key": key, "fingerprint": fingerprint, "xml": text, "warnings": notes, "own": own})
    if warnings is not None:
        warnings.extend(notes)
    return text, fingerprint


def _command_outputs(handle: RepoHandle, state: Doc, commands: list[Doc],
                     warnings: list[str]) -> list[CommandOutput]:
    from leslie.context import commands as cc
    from leslie.context import trust

    try:
        trusted = trust.is_trusted(handle.root, commands)
    except CorruptStateError as exc:
        warnings.append(f"context commands skipped: {exc.message}")
        return []
    if not trusted:
        warnings.append(f"context commands skipped: {len(commands)} command(s) in .leslie/config.toml are not "
                        "approved on this machine (review them, then run `leslie trust`)")
        return []
    digest = trust.command_list_hash(commands)
    frozen = state.get("static_commands")
    static_done = isinstance(frozen, dict) and frozen.get("hash") == digest
    to_run = [c for c in commands if c.get("dynamic") or not static_done]
    fresh = iter(cc.run_commands(handle.root, to_run))
    kept = iter(cc.outputs_from_json(frozen.get("outputs")) if static_done and isinstance(frozen, dict) else [])
    outputs = []
    for command in commands:
        source = fresh if command.get("dynamic") or not static_done else kept
        output = next(source, None)
        if output is not None:
            outputs.append(output)
    if not static_done:  # static commands ran once, now: their output is frozen for the session
        static = [o for o, c in zip(outputs, commands, strict=False) if not c.get("dynamic")]
        state["static_commands"] = {"hash": digest, "outputs": cc.outputs_to_json(static)}
    return outputs


def block_to_inject(handle: RepoHandle, thread_id: str, fingerprint: str, state: Doc, doc: Doc,
                    warnings: list[str], changed: list[str] | None = None) -> tuple[str, str]:
    """The block to inject and its fingerprint: from the thread's cache when it matches (the context's
    fingerprint, and the stat of the own files it inlines), else rendered; with the context commands' output
    when they are configured and approved, or with `changed` markers (one session's), always rendered."""
    from leslie.context.files import own_key

    commands = [c for c in doc.get("commands", []) if isinstance(c, dict)]
    outputs = _command_outputs(handle, state, commands, warnings) if commands else []
    if outputs or changed:
        from leslie.context.block import render_fingerprinted

        return render_fingerprinted(handle.repo(), thread_id, commands=outputs, warnings=warnings,
                                    changed=changed or (), cache=not changed, fingerprint=fingerprint)
    own = own_key(handle.root, thread_id, own_paths(doc))
    cache = read_cache(os.path.join(contexts_dir(handle.root), thread_id + ".json"))
    if (cache is not None and cache.get("fingerprint") == fingerprint and isinstance(cache.get("xml"), str)
            and cache.get("own") == own):
        notes = cache.get("warnings")
        if isinstance(notes, list):
            warnings.extend(n for n in notes if isinstance(n, str))
        return cache["xml"], fingerprint
    key = str(state.get("inputs_key") or inputs_key(handle.root, thread_id))
    return render_into_cache(handle, thread_id, key, warnings, fingerprint)
