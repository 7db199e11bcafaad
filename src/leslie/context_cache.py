"""The block an injection sends: served from the thread's cache, or rendered (with context commands).

`state/contexts/<thread>.json` holds the last fingerprint and rendered block of a thread, shared by its
sessions, so a new session or a re-injection after a compaction prints the cached block without importing
Jinja2, lxml or the repository model (see `leslie.injector` for the inputs key that guards it). A block with
context-command output is rendered at every injection: dynamic commands change it each time.

Imported by `leslie.injector` only when it injects.
"""

from __future__ import annotations

import os

from leslie.errors import CorruptStateError
from leslie.injector import CONTEXTS_DIR, RepoHandle, inputs_key, read_cache, served_block, write_cache

TYPE_CHECKING = False  # not `typing.TYPE_CHECKING`: importing typing costs milliseconds on the hook path
if TYPE_CHECKING:
    from typing import Any

    from leslie.context import CommandOutput
    from leslie.repository import Repository

    Doc = dict[str, Any]


def refresh(repo: Repository, thread_id: str) -> str:
    """Render the thread's block (without commands) into the cache now, and return it."""
    handle = RepoHandle(str(repo.root), repo)
    key = inputs_key(handle.root, thread_id)
    return render_into_cache(handle, thread_id, key)[0]


def render_into_cache(handle: RepoHandle, thread_id: str, key: str,
                      warnings: list[str] | None = None) -> tuple[str, str]:
    """Render the thread's block (without commands) in this process, cache it under `key`: (xml, fingerprint).

    The render's notes (an ignored template override) go to `warnings` and into the cache entry, so every
    injection of that block repeats them.
    """
    from leslie.context import context_fingerprint, render_context

    repo = handle.repo()
    notes: list[str] = []
    text = render_context(repo, thread_id, warnings=notes)
    # Fingerprinted after rendering: if the state changed meanwhile, the text matches the newer digest, and
    # the older key (taken before both) no longer matches the files, so the entry is never reused wrongly.
    fingerprint = context_fingerprint(repo, thread_id)
    write_cache(os.path.join(handle.root, CONTEXTS_DIR, thread_id + ".json"),
                 {"key": key, "fingerprint": fingerprint, "xml": text, "warnings": notes})
    if warnings is not None:
        warnings.extend(notes)
    return text, fingerprint


def _command_outputs(handle: RepoHandle, state: Doc, commands: list[Doc],
                     warnings: list[str]) -> list[CommandOutput]:
    from leslie import context_commands as cc
    from leslie import trust

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
                    warnings: list[str]) -> tuple[str, str]:
    """The block to inject and its fingerprint: from the thread's cache when it matches, else rendered;
    with the context commands' output when they are configured and approved (then always rendered)."""
    commands = [c for c in doc.get("commands", []) if isinstance(c, dict)]
    outputs = _command_outputs(handle, state, commands, warnings) if commands else []
    if outputs:
        from leslie.context import context_fingerprint, render_context

        repo = handle.repo()
        text = render_context(repo, thread_id, commands=outputs, warnings=warnings)
        return text, context_fingerprint(repo, thread_id)
    cache = read_cache(os.path.join(handle.root, CONTEXTS_DIR, thread_id + ".json"))
    if cache is not None and cache.get("fingerprint") == fingerprint and isinstance(cache.get("xml"), str):
        notes = cache.get("warnings")
        if isinstance(notes, list):
            warnings.extend(n for n in notes if isinstance(n, str))
        return cache["xml"], fingerprint
    key = str(state.get("inputs_key") or inputs_key(handle.root, thread_id))
    served = served_block(handle, thread_id, key)
    if served is not None:
        warnings.extend(served[2])
        return served[0], served[1]
    return render_into_cache(handle, thread_id, key, warnings)
