"""Strict, deterministic JSON: the only encoder and decoder for leslie's state files."""

from __future__ import annotations

import json
from json.encoder import encode_basestring

# Not `from typing import ...` at run time: the hook's hot path imports this module, and typing costs
# milliseconds there.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

CONFLICT_MARKERS = ("<<<<<<<", "=======", ">>>>>>>", "|||||||")


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
        return json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=_reject_constant)
    except json.JSONDecodeError as exc:
        raise StrictJSONError(f"invalid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})") from None


_encode_scalar = json.JSONEncoder(ensure_ascii=False, allow_nan=False).encode


def _encode(value: Any, indent: str, out: list[str]) -> None:
    # Same bytes as json.dumps(indent=2, sort_keys=True, ensure_ascii=False), about 3x faster: the stdlib
    # falls back to its pure-Python encoder whenever `indent` is set, and the index of 10,000 threads is
    # written on every mutation.
    if isinstance(value, dict):
        if not value:
            out.append("{}")
            return
        inner = indent + "  "
        out.append("{\n")
        for i, key in enumerate(sorted(value)):
            if i:
                out.append(",\n")
            out.append(inner)
            out.append(encode_basestring(key))
            out.append(": ")
            _encode(value[key], inner, out)
        out.append("\n" + indent + "}")
    elif isinstance(value, list | tuple):
        if not value:
            out.append("[]")
            return
        inner = indent + "  "
        out.append("[\n")
        for i, item in enumerate(value):
            if i:
                out.append(",\n")
            out.append(inner)
            _encode(item, inner, out)
        out.append("\n" + indent + "]")
    elif isinstance(value, str):
        out.append(encode_basestring(value))
    else:
        out.append(_encode_scalar(value))


def dumps_canonical(value: Any) -> bytes:
    """Encode as UTF-8, 2-space indent, sorted keys, non-ASCII kept, one trailing newline."""
    out: list[str] = []
    _encode(value, "", out)
    out.append("\n")
    return "".join(out).encode("utf-8", "surrogatepass")


def encode_canonical(value: Any, indent: str = "") -> str:
    """`value` as canonical JSON text nested at `indent`, no trailing newline: a fragment of a larger
    document, exactly as `dumps_canonical` lays it out there (used to splice one entry into the index)."""
    out: list[str] = []
    _encode(value, indent, out)
    return "".join(out)
