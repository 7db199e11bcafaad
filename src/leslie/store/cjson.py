"""`loads` and `dumps` for the hook's hot path, without importing the `json` package.

`json` imports `re` (and with it `enum`, `functools` and `collections`): about three quarters of a bare
interpreter start, paid by every prompt of every agent (SPEC §10). The work itself is done by `_json`, the
C accelerator inside `json`; this module calls the same scanner and encoder directly, so a document that
parses or encodes gives exactly what `json.loads`/`json.dumps` give. Anything else (an error, bytes that are
not plain UTF-8, an interpreter without `_json` or with another signature for it) is handed to `json`
itself, which then returns the same value or raises its own exception with its own message.
"""

from __future__ import annotations

TYPE_CHECKING = False  # not `typing.TYPE_CHECKING`: importing typing costs milliseconds on the hook path
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

try:
    import _json
except ImportError:  # an interpreter without the accelerator: `json` does everything
    _json = None  # type: ignore[assignment]

_WHITESPACE = " \t\n\r"  # what `json.decoder.WHITESPACE` skips around a document
_CONSTANTS = {"-Infinity": float("-inf"), "Infinity": float("inf"), "NaN": float("nan")}


class _Decoder:
    """The attributes `_json.make_scanner` reads from a `json.JSONDecoder`, as `json.loads` sets them."""

    __slots__ = ("memo", "object_hook", "object_pairs_hook", "parse_constant", "parse_float", "parse_int",
                 "strict")

    def __init__(self, object_pairs_hook: Callable[[list[tuple[str, Any]]], Any] | None,
                 parse_constant: Callable[[str], Any] | None) -> None:
        self.strict = True
        self.object_hook = None
        self.object_pairs_hook = object_pairs_hook
        self.parse_float = float
        self.parse_int = int
        self.parse_constant = parse_constant or _CONSTANTS.__getitem__
        self.memo: dict[str, str] = {}


_scanners: dict[tuple[object, object], Any] = {}


def _scanner(object_pairs_hook: Any, parse_constant: Any) -> Any:
    key = (object_pairs_hook, parse_constant)
    scanner = _scanners.get(key)
    if scanner is None and _json is not None:
        try:
            scanner = _json.make_scanner(_Decoder(object_pairs_hook, parse_constant))  # type: ignore[arg-type]
        except Exception:  # another interpreter's `_json`: `json` will do
            return None
        _scanners[key] = scanner
    return scanner


def loads(data: str | bytes, *, object_pairs_hook: Callable[[list[tuple[str, Any]]], Any] | None = None,
          parse_constant: Callable[[str], Any] | None = None) -> Any:
    """`json.loads(data, object_pairs_hook=..., parse_constant=...)`, without importing `json` when `data`
    is a valid document (bytes: UTF-8 without a byte-order mark)."""
    text: str | None
    if isinstance(data, str):
        text = data
    else:
        try:
            text = bytes(data).decode("utf-8")
        except UnicodeDecodeError:  # `json` detects UTF-16/32 and keeps surrogates: let it
            text = None
    scanner = _scanner(object_pairs_hook, parse_constant) if text is not None else None
    if text is not None and scanner is not None and not text.startswith("\ufeff"):
        start = len(text) - len(text.lstrip(_WHITESPACE))
        try:
            value, end = scanner(text, start)
        # Not JSON (or a hook refused it): `json` says how, in its words. SystemError: the scanner reports a
        # syntax error with `json.decoder.JSONDecodeError`, looked up in `sys.modules` only, so before `json`
        # is imported that report fails ("returned NULL without setting an exception").
        except (StopIteration, ValueError, SystemError):
            pass
        else:
            if not text[end:].strip(_WHITESPACE):
                return value
    import json

    return json.loads(data, object_pairs_hook=object_pairs_hook, parse_constant=parse_constant)


class _Unencodable(Exception):
    pass


def _refuse(value: object) -> object:
    raise _Unencodable


def dumps(value: Any, *, ensure_ascii: bool = True, sort_keys: bool = False,
          separators: tuple[str, str] | None = None, allow_nan: bool = True,
          default: Callable[[Any], Any] | None = None) -> str:
    """`json.dumps(value, ensure_ascii=..., sort_keys=..., separators=..., allow_nan=..., default=...)` (no
    indent), without importing `json` when `value` encodes."""
    item_separator, key_separator = separators if separators is not None else (", ", ": ")
    if _json is not None:
        encode_string = _json.encode_basestring_ascii if ensure_ascii else _json.encode_basestring
        if isinstance(value, str):
            return str(encode_string(value))
        try:
            encoder = _json.make_encoder({}, default or _refuse, encode_string, None, key_separator, item_separator,
                                         sort_keys, False, allow_nan)
            return "".join(encoder(value, 0))
        except (_Unencodable, TypeError, ValueError, RecursionError):  # `json` raises its own error
            pass
    import json

    return json.dumps(value, ensure_ascii=ensure_ascii, sort_keys=sort_keys, separators=separators,
                      allow_nan=allow_nan, default=default)


# A string as a JSON string literal, non-ASCII kept: the C function itself (the canonical encoder of
# `leslie.store.jsonio` calls it for every key and string of the index).
encode_string: Callable[[str], str]
if _json is not None:
    encode_string = _json.encode_basestring
else:
    pass
