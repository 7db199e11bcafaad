"""Names people can type: a unique prefix of a thread or objective ID, resolved to the full ID.

Every command that takes a thread or objective ID (an argument or an option) passes what it was given through
`resolve_thread_id` / `resolve_objective_id` before anything else, so `leslie show 8lg`, `leslie show
thread-8lg` and `leslie show thread-8lgk2m` name the same thread. The rules:

- an exact full ID (`thread-8lgk2m`, or the random part `8lgk2m` of one) always wins, even when it is also
  the prefix of a longer ID;
- otherwise the live threads (objectives) whose ID starts with `thread-` + the prefix are the candidates:
  one is the answer, several are a `UsageError` (exit 2) listing them with their titles, none is the
  usual `NotFoundError` (exit 3), or, for text shaped like a full ID, the text itself, so the command
  reports it exactly as before;
- a deleted thread (a tombstone) is a candidate only when no live thread matches, so that `show` and `rm`
  can say "deleted" instead of "no such thread".

Stored IDs are always the full ones: callers write what this returns, never what was typed. The candidates
come from the folder listing (`.leslie/threads/`), the source of truth, not from the index: listing names
is cheaper than decoding a large index, and a full ID costs a single `lstat`.
"""

from __future__ import annotations

import os

from leslie.errors import OBJECTIVE_ID_RULE, THREAD_ID_RULE, LeslieError, NotFoundError, UsageError

_KINDS = {  # kind: (ID prefix, folder under .leslie, the file that makes a folder an entry, the noun)
    "thread": ("thread-", "threads", "thread.json", "thread"),
    "objective": ("obj-", "objectives", "objective.json", "objective"),
}
_ID_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789-")
MAX_ID_CHARS = 48  # the part after the prefix: [a-z0-9][a-z0-9-]{0,47}
SHOWN_CANDIDATES = 10
SHOWN_TITLE_CHARS = 60


def resolve_thread_id(root: str | os.PathLike[str], text: str, what: str = "thread ID") -> str:
    """The full ID of the thread `text` names in the repository at `root` (see the module docstring)."""
    return _resolve(root, "thread", text, what)


def resolve_objective_id(root: str | os.PathLike[str], text: str, what: str = "objective ID") -> str:
    """The full ID of the objective `text` names in the repository at `root` (see the module docstring)."""
    return _resolve(root, "objective", text, what)


def is_id_text(text: str, kind: str) -> bool:
    """Whether `text` could name a `kind` ("thread" or "objective") as an ID or the prefix of one."""
    head = _KINDS[kind][0]
    return _well_formed(text[len(head):] if text.startswith(head) else text)


def _well_formed(rest: str) -> bool:
    """Whether `rest` (an ID without its `thread-`/`obj-` prefix) is a well-formed random part or prefix."""
    return 0 < len(rest) <= MAX_ID_CHARS and rest[0] != "-" and all(c in _ID_CHARS for c in rest)


def _resolve(root: str | os.PathLike[str], kind: str, text: str, what: str) -> str:
    head, folder_name, marker, noun = _KINDS[kind]
    if any(text.startswith(other[0]) for other in _KINDS.values() if other[0] != head):
        return text  # a thread ID given for an objective (or the reverse): the command's check says so
    rest = text[len(head):] if text.startswith(head) else text
    if not _well_formed(rest):
        if text.startswith(head) or not text:
            return text  # not an ID nor a prefix of one: the command's own check rejects it, as before
        rule = THREAD_ID_RULE if kind == "thread" else OBJECTIVE_ID_RULE
        raise UsageError(f"invalid {what} {text!r}: {rule} (or a prefix of one)")
    full = head + rest
    folder = os.path.join(os.fspath(root), ".leslie", folder_name)
    if os.path.lexists(os.path.join(folder, full)):
        return full  # an exact ID wins, even when it is also the prefix of a longer one
    try:
        names = [name for name in os.listdir(folder) if name.startswith(full)]
    except OSError:  # no folder yet (no thread ever spawned), or one that cannot be listed
        names = []
    candidates = [(name, _summary(os.path.join(folder, name, marker))) for name in sorted(names)
                  if os.path.lexists(os.path.join(folder, name, marker))]
    live = [(name, title) for name, (title, deleted) in candidates if not deleted]
    chosen = live or [(name, title) for name, (title, _deleted) in candidates]
    if len(chosen) == 1:
        return chosen[0][0]
    if not chosen:
        if text.startswith(head):
            return text  # a full-ID-shaped name that matches nothing: the command says "no such ..." itself
        raise NotFoundError(f"no such {noun}: {text}" + (_objectives_known(folder) if kind == "objective" else ""))
    raise UsageError(_ambiguous(text, what, noun, chosen))


def _ambiguous(text: str, what: str, noun: str, chosen: list[tuple[str, str]]) -> str:
    """The message for a prefix that names several IDs: each candidate on its own line with its title."""
    width = max(len(name) for name, _title in chosen[:SHOWN_CANDIDATES])
    lines = [f"ambiguous {what} {text!r}: it is the start of {len(chosen)} {noun}s; type more of the ID:"]
    lines += [f"  {name.ljust(width)}  {title}" for name, title in chosen[:SHOWN_CANDIDATES]]
    if len(chosen) > SHOWN_CANDIDATES:
        lines.append(f"  ... and {len(chosen) - SHOWN_CANDIDATES} more {noun}s")
    return "\n".join(lines)


def _objectives_known(folder: str) -> str:
    """The objectives there are, for a message about one that is not (threads may be thousands: not them)."""
    try:
        names = sorted(name for name in os.listdir(folder) if name.startswith("obj-"))
    except OSError:
        names = []
    if not names:
        return " (there are no objectives yet)"
    shown = ", ".join(f"{name} “{_summary(os.path.join(folder, name, 'objective.json'))[0]}”"
                      for name in names[:SHOWN_CANDIDATES])
    more = f" and {len(names) - SHOWN_CANDIDATES} more" if len(names) > SHOWN_CANDIDATES else ""
    return f" (the objectives: {shown}{more})"


def _summary(path: str) -> tuple[str, bool]:
    """(title, is a tombstone) of a candidate's state file; a file that cannot be read shows as such.

    Read with the hardened reader (no links, size cap): the repository may be hostile, and what is read
    here is only shown in a message, never trusted. A title is cut short and stripped of control characters.
    """
    import json

    from leslie.store.fsio import read_regular

    try:
        data = json.loads(read_regular(path))
    except (OSError, ValueError, LeslieError):  # a link, a FIFO, a huge or malformed file: shown, not read
        return "(unreadable)", False
    title = data.get("title") if isinstance(data, dict) else None
    deleted = isinstance(data, dict) and data.get("status") == "deleted"
    if not isinstance(title, str):
        return "(no title)", deleted
    return shown_title(title), deleted


def shown_title(title: str, limit: int = SHOWN_TITLE_CHARS) -> str:
    """A title as an error message shows it: control characters out (a hostile file may hold escape
    sequences), cut to `limit` characters with "…"."""
    title = "".join(c if c.isprintable() else " " for c in title).strip()
    if len(title) > limit:
        title = title[: limit - 1].rstrip() + "…"
    return title


def short_id(full_id: str) -> str:
    """The part of an ID after `thread-` / `obj-`: what a person reads and types (`thread-8lg2xq` → `8lg2xq`)."""
    return full_id.split("-", 1)[1] if "-" in full_id else full_id
