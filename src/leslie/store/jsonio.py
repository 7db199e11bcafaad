"""Strict, deterministic JSON: the only encoder and decoder for leslie's state files."""

from __future__ import annotations

import json
import re
from typing import Any

CONFLICT_MARKERS = ("<<<<<<<", "=======", ">>>>>>>", "|||||||")
# leslie's own files nest at most 4 levels (index → relations → thread → list); 64 leaves room for extra
# fields that newer versions may add, and refuses a hostile file built to exhaust the stack.
MAX_DEPTH = 64
DEPTH_CHECKED_BYTES = 1 << 20
# A `\uD800`-`\uDFFF` escape, or what looks like one (`\\uD800` is an escaped backslash): the value decides.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


class StrictJSONError(ValueError):
    """The text is not strict JSON; the message says why."""


def _reject_constant(name: str) -> Any:
    raise StrictJSONError(f"non-standard number {name}")


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise StrictJSONError(f"duplicate key {key!r}")
        result[key] = value
    return result


def loads_strict(data: bytes) -> Any:
    """Decode UTF-8 JSON, refusing a BOM, conflict markers, duplicate keys, NaN/Infinity and truncation."""
    if data.startswith(b"\xef\xbb\xbf"):
        raise StrictJSONError("starts with a byte-order mark")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise StrictJSONError(f"not valid UTF-8 ({exc.reason} at byte {exc.start})") from None
    # Lines as git writes them (split on "\n" only: `str.splitlines` would also break at U+2028 or U+0085,
    # which a title may hold); the substring test first keeps this off the profile of a 3 MB index.
    if any(marker in text for marker in CONFLICT_MARKERS):
        for line in text.split("\n"):
            if line.startswith(CONFLICT_MARKERS):
                raise StrictJSONError("holds git conflict markers")
    if not text.strip():
        raise StrictJSONError("is empty")
    try:
        value = json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=_reject_constant)
    except StrictJSONError:
        raise
    except RecursionError:
        raise StrictJSONError("nests arrays or objects too deeply") from None
    except ValueError as exc:  # json.JSONDecodeError, or an integer over Python's 4,300-digit limit
        if hasattr(exc, "lineno"):
            raise StrictJSONError(f"invalid JSON ({getattr(exc, 'msg', exc)} at line {exc.lineno} column "
                                  f"{getattr(exc, 'colno', '?')})") from None
        raise StrictJSONError(f"invalid JSON ({exc})") from None
    if _SURROGATE_ESCAPE.search(text):
        _refuse_lone_surrogates(value)
    # The walk costs about twice the parse, so it is made for files of up to 1 MiB (thread.json, objective.json,
    # session state): an index is larger, and its decoder accepts only its fixed shape of scalars.
    # A document cannot nest deeper than it has brackets (a bracket in a string only over-counts): a
    # `thread.json` has about ten, so the walk is skipped for it (`doctor` parses 100,000 of them).
    if (len(data) <= DEPTH_CHECKED_BYTES and text.count("[") + text.count("{") > MAX_DEPTH
            and _depth_over(value, MAX_DEPTH)):
        raise StrictJSONError(f"nests arrays or objects deeper than {MAX_DEPTH} levels")
    return value


def _refuse_lone_surrogates(value: Any) -> None:
    # A `\ud800` escape decodes to a lone surrogate, which no UTF-8 file can hold: a later write of the same
    # text would produce invalid bytes. Paired escapes (an emoji written as two escapes) are fine.
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                raise StrictJSONError("holds a lone surrogate escape (not a Unicode character)") from None
        elif isinstance(item, dict):
            stack.extend(item)
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)


def too_deep(value: Any, limit: int = MAX_DEPTH) -> bool:
    """True when `value` nests dicts/lists deeper than `limit` levels (for values kept from big files)."""
    return _depth_over(value, limit)


def _depth_over(value: Any, limit: int) -> bool:
    """True when `value` nests dicts/lists deeper than `limit` (iterative: no recursion to blow)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            if depth > limit:
                return True
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return False


def dumps_canonical(value: Any) -> bytes:
    """Encode as UTF-8, 2-space indent, sorted keys, non-ASCII kept, one trailing newline."""
    return (encode_canonical(value) + "\n").encode("utf-8", "surrogatepass")


def encode_canonical(value: Any, indent: str = "") -> str:
    """`value` as canonical JSON text nested at `indent`, no trailing newline: a fragment of a larger
    document, exactly as `dumps_canonical` lays it out there (used to splice one entry into the index)."""
    text = json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False, allow_nan=False)
    # Every newline of the text is layout (a string's newline is escaped): each line moves in by `indent`.
    return text.replace("\n", "\n" + indent) if indent else text
