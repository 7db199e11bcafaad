"""Threads, objectives, references and their validation rules (pure: no I/O)."""

from __future__ import annotations

import re
import secrets
import time
from dataclasses import dataclass, field
from typing import Any

from leslie.errors import OBJECTIVE_ID_RULE, THREAD_ID_RULE, UsageError
from leslie.store.jsonio import MAX_DEPTH, too_deep

# `\Z`, not `$`: `$` also matches before a trailing newline, which let "thread-abc\n" through as an ID.
THREAD_ID_RE = re.compile(r"^thread-[a-z0-9][a-z0-9-]{0,47}\Z")
OBJECTIVE_ID_RE = re.compile(r"^obj-[a-z0-9][a-z0-9-]{0,47}\Z")
ID_ALPHABET = "abcdefghijklmnopqrstuvwxyz0123456789"

THREAD_STATUSES = ("active", "paused", "done", "archived", "deleted")
SETTABLE_THREAD_STATUSES = ("active", "paused", "done", "archived")
OBJECTIVE_STATUSES = ("active", "done", "archived")
TOMBSTONE = "deleted"

MAX_TITLE_CHARS = 512
MAX_INTENT_BYTES = 64 * 1024

# Characters XML 1.0 cannot carry: C0 controls but TAB/LF/CR, surrogates, U+FFFE and U+FFFF.
NOT_XML_CHAR = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
_CONTROL_CHAR = re.compile("[\x00-\x1f\x7f]")
_DRIVE = re.compile("^[A-Za-z]:")  # a Windows drive: `C:plan.md` is not relative


def new_id(prefix: str) -> str:
    """A random ID: `prefix-` and 6 characters of [a-z0-9] (the caller checks for collisions)."""
    return f"{prefix}-" + "".join(secrets.choice(ID_ALPHABET) for _ in range(6))


def is_thread_id(value: str) -> bool:
    """Whether `value` is a well-formed thread ID (`thread-` and 1-48 of [a-z0-9-], not starting with `-`)."""
    return THREAD_ID_RE.match(value) is not None


def validate_thread_id(value: str, what: str = "thread ID") -> str:
    """Return `value` if it is a well-formed thread ID, else raise UsageError."""
    if not THREAD_ID_RE.match(value):
        raise UsageError(f"invalid {what} {value!r}: {THREAD_ID_RULE}")
    return value


def validate_objective_id(value: str) -> str:
    """Return `value` if it is a well-formed objective ID, else raise UsageError."""
    if not OBJECTIVE_ID_RE.match(value):
        raise UsageError(f"invalid objective ID {value!r}: {OBJECTIVE_ID_RULE}")
    return value


def check_xml_text(value: str, what: str) -> None:
    """Reject text that XML 1.0 cannot carry, naming the field and the first bad character."""
    bad = NOT_XML_CHAR.search(value)
    if bad:
        raise UsageError(
            f"{what} contains U+{ord(bad.group()):04X} at position {bad.start()}, "
            "which XML 1.0 cannot carry"
        )


def clean_title(value: str, what: str = "title") -> str:
    """Fold newlines to spaces, strip, and enforce XML-safety and the 512-character limit."""
    check_xml_text(value, what)
    folded = " ".join(part.strip() for part in value.replace("\r\n", "\n").replace("\r", "\n").split("\n"))
    folded = folded.strip()
    if not folded:
        raise UsageError(f"{what} is empty")
    if len(folded) > MAX_TITLE_CHARS:
        raise UsageError(f"{what} is {len(folded)} characters long; the limit is {MAX_TITLE_CHARS}")
    return folded


def clean_text(value: str, what: str, *, max_bytes: int = MAX_INTENT_BYTES, required: bool = True) -> str:
    """Multi-line text: CRLF and CR become LF; XML-safe; at most `max_bytes` of UTF-8."""
    check_xml_text(value, what)
    text = value.replace("\r\n", "\n").replace("\r", "\n")
    if required and not text.strip():
        raise UsageError(f"{what} is empty")
    size = len(text.encode("utf-8"))
    if size > max_bytes:
        raise UsageError(f"{what} is {size} bytes long; the limit is {max_bytes // 1024} KiB")
    return text


_FORBIDDEN_COMPONENTS = {".git", ".leslie"}


def normalize_scope(value: str) -> str:
    """Validate a scope path (relative to the target thread's folder) and return its canonical form.

    Canonical: POSIX, no `.` components, no trailing slash. Rejected: empty, absolute, `..`,
    backslashes, NUL or control characters, and any `.git` / `.leslie` component.
    """
    if _CONTROL_CHAR.search(value):
        raise UsageError(f"invalid scope {value!r}: contains a control character")
    check_xml_text(value, "scope")
    if not value.strip():
        raise UsageError("invalid scope '': a scope is a path inside the target thread, e.g. plan.md")
    if "\\" in value:
        raise UsageError(f"invalid scope {value!r}: use forward slashes")
    if value.startswith("/") or _DRIVE.match(value):
        raise UsageError(f"invalid scope {value!r}: must be relative to the target thread's folder")
    parts = [part for part in value.split("/") if part not in ("", ".")]
    if not parts:
        raise UsageError(f"invalid scope {value!r}: names the thread folder itself (omit --scope for all)")
    if ".." in parts:
        raise UsageError(f"invalid scope {value!r}: must not contain '..'")
    if _FORBIDDEN_COMPONENTS.intersection(parts):
        raise UsageError(f"invalid scope {value!r}: must not point into .git or .leslie internals")
    return "/".join(parts)


def utc_now() -> str:
    """The current time as `YYYY-MM-DDTHH:MM:SSZ` (`time`, not `datetime`: 2 ms less to import on every read)."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


@dataclass(frozen=True, slots=True)  # slots: 100,000 of them in `doctor` at scale
class Thread:
    """A thread's metadata, as stored in its `thread.json` (the source of truth)."""

    id: str
    title: str
    intent: str
    objective: str | None
    status: str = "active"
    references: dict[str, tuple[str, ...]] = field(default_factory=dict)
    spawned_by: str | None = None
    created_at: str = ""
    version: int = 1
    extra: dict[str, Any] = field(default_factory=dict)
    after: tuple[str, ...] = ()  # the threads this one comes after (SPEC §14), sorted

    @property
    def is_tombstone(self) -> bool:
        return self.status == TOMBSTONE

    def to_json(self) -> dict[str, Any]:
        """The `thread.json` document; fields unknown to this version are kept."""
        data = dict(self.extra)
        data.update(
            created_at=self.created_at,
            id=self.id,
            intent=self.intent,
            objective=self.objective,
            references={target: sorted(scope) for target, scope in sorted(self.references.items())},
            spawned_by=self.spawned_by,
            status=self.status,
            title=self.title,
            version=self.version,
        )
        if self.after:  # present only when not empty: a thread without order keeps its exact shape
            data["after"] = sorted(self.after)
        return data


@dataclass(frozen=True)
class Objective:
    """An objective, as stored in its `objective.json`."""

    id: str
    title: str
    status: str = "active"
    description: str | None = None
    created_at: str = ""
    version: int = 1
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """The `objective.json` document; fields unknown to this version are kept."""
        data = dict(self.extra)
        data.update(created_at=self.created_at, id=self.id, status=self.status, title=self.title,
                    version=self.version)
        if self.description is not None:
            data["description"] = self.description
        return data


class ShapeError(ValueError):
    """A state document has a wrong field or type; the message names it."""


def _field(data: dict[str, Any], name: str, kind: type | tuple[type, ...], *, optional: bool = False) -> Any:
    if name not in data:
        if optional:
            return None
        raise ShapeError(f"missing field {name!r}")
    value = data[name]
    if value is None and optional:
        return None
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is int):
        raise ShapeError(f"field {name!r} has the wrong type ({type(value).__name__})")
    return value


def _text(data: dict[str, Any], name: str, *, optional: bool = False) -> Any:
    """A string field that must also be text XML 1.0 can carry: a hand edit (a `\\ud800` or `\\u0001`
    escape is valid JSON) must not smuggle in what the commands refuse at input."""
    value = _field(data, name, str, optional=optional)
    bad = NOT_XML_CHAR.search(value) if value else None
    if bad:
        raise ShapeError(f"field {name!r} holds U+{ord(bad.group()):04X}, which XML 1.0 cannot carry")
    return value


_THREAD_FIELDS = {"after", "created_at", "id", "intent", "objective", "references", "spawned_by", "status",
                  "title", "version"}


def thread_from_json(data: Any) -> Thread:
    """Parse a `thread.json` document, raising ShapeError on a wrong field or type."""
    if not isinstance(data, dict):
        raise ShapeError("is not a JSON object")
    thread_id = _field(data, "id", str)
    if not THREAD_ID_RE.match(thread_id):
        raise ShapeError(f"field 'id' is not a thread ID ({thread_id!r})")
    status = _field(data, "status", str)
    if status not in THREAD_STATUSES:
        raise ShapeError(f"field 'status' has unknown value {status!r}")
    raw_refs = _field(data, "references", dict)
    references: dict[str, tuple[str, ...]] = {}
    for target, scope in raw_refs.items():
        if not THREAD_ID_RE.match(target):
            raise ShapeError(f"reference key {target!r} is not a thread ID")
        if not isinstance(scope, list) or not all(isinstance(item, str) for item in scope):
            raise ShapeError(f"scope of reference {target!r} is not a list of paths")
        references[target] = tuple(sorted({_stored_scope(target, item) for item in scope}))
    raw_after = _field(data, "after", list, optional=True) or []
    for predecessor in raw_after:
        if not isinstance(predecessor, str) or not THREAD_ID_RE.match(predecessor):
            raise ShapeError(f"field 'after' holds {predecessor!r}, which is not a thread ID")
    return Thread(
        id=thread_id,
        title=_text(data, "title"),
        intent=_text(data, "intent", optional=True) or "",
        objective=_id_field(data, "objective", OBJECTIVE_ID_RE),
        status=status,
        references=references,
        spawned_by=_id_field(data, "spawned_by", THREAD_ID_RE),
        created_at=_text(data, "created_at", optional=True) or "",
        version=_field(data, "version", int, optional=True) or 1,
        extra=_extra(data, _THREAD_FIELDS),
        after=tuple(sorted(set(raw_after))),
    )


def _stored_scope(target: str, value: str) -> str:
    """A scope as read from disk, checked with the rules of `normalize_scope`: a hand edit, a merge or a
    clone must not smuggle in `../../etc/shadow`, an absolute path or `.git/config` (SPEC §11)."""
    try:
        return normalize_scope(value)
    except UsageError as exc:
        raise ShapeError(f"scope of reference {target!r}: {exc}") from None


def _id_field(data: dict[str, Any], name: str, pattern: re.Pattern[str]) -> Any:
    """An optional field that must be an ID matching `pattern` (it names a folder leslie opens)."""
    value = _field(data, name, str, optional=True)
    if value is not None and not pattern.match(value):
        raise ShapeError(f"field {name!r} is not a valid ID ({value!r})")
    return value


def _extra(data: dict[str, Any], known: set[str]) -> dict[str, Any]:
    """Fields unknown to this version, kept as they are, but never nested deeper than strict reads allow
    (a file over 1 MiB skips that check in `loads_strict`, and a deep value would exhaust the writer)."""
    extra = {key: value for key, value in data.items() if key not in known}
    for key, value in extra.items():
        if too_deep(value, MAX_DEPTH - 1):
            raise ShapeError(f"field {key!r} nests deeper than {MAX_DEPTH} levels")
    return extra


_OBJECTIVE_FIELDS = {"created_at", "id", "status", "title", "version", "description"}


def objective_from_json(data: Any) -> Objective:
    """Parse an `objective.json` document, raising ShapeError on a wrong field or type."""
    if not isinstance(data, dict):
        raise ShapeError("is not a JSON object")
    objective_id = _field(data, "id", str)
    if not OBJECTIVE_ID_RE.match(objective_id):
        raise ShapeError(f"field 'id' is not an objective ID ({objective_id!r})")
    status = _field(data, "status", str)
    if status not in OBJECTIVE_STATUSES:
        raise ShapeError(f"field 'status' has unknown value {status!r}")
    return Objective(
        id=objective_id,
        title=_text(data, "title"),
        status=status,
        description=_text(data, "description", optional=True),
        created_at=_text(data, "created_at", optional=True) or "",
        version=_field(data, "version", int, optional=True) or 1,
        extra=_extra(data, _OBJECTIVE_FIELDS),
    )
