"""`leslie.store.cjson` gives exactly what `json` gives: values, text, and errors (type and message)."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from leslie.store import cjson

scalars = st.none() | st.booleans() | st.integers() | st.floats() | st.text()
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner,
                                                                                           max_size=4), max_leaves=20)
OPTIONS = [{}, {"ensure_ascii": False}, {"sort_keys": True, "separators": (",", ":")},
           {"allow_nan": False, "ensure_ascii": False, "sort_keys": True}]


def outcome(function: Any, *args: Any, **kwargs: Any) -> Any:
    try:
        result = function(*args, **kwargs)
    except Exception as exc:  # the same error, in type and words
        return type(exc), str(exc)
    return ("nan",) if isinstance(result, float) and math.isnan(result) else repr(result)


@settings(max_examples=300)
@given(values)
def test_dumps_is_json_dumps(value: Any) -> None:
    for options in OPTIONS:
        assert outcome(cjson.dumps, value, **options) == outcome(json.dumps, value, **options)


@settings(max_examples=300)
@given(values)
def test_loads_reads_back_what_json_wrote(value: Any) -> None:
    text = json.dumps(value, ensure_ascii=False)
    assert outcome(cjson.loads, text) == outcome(json.loads, text)
    assert outcome(cjson.loads, text.encode("utf-8", "surrogatepass")) == outcome(
        json.loads, text.encode("utf-8", "surrogatepass"))


@settings(max_examples=500)
@given(st.text(alphabet=' \t\n\r{}[]":,.-+0123456789eEtruefalsnNIiy\\u\ufeff\u00e9', max_size=30))
def test_loads_fails_as_json_fails(text: str) -> None:
    assert outcome(cjson.loads, text) == outcome(json.loads, text)


@pytest.mark.parametrize("data", [b"\xef\xbb\xbf{}", b"\xff\xfe{\x00}\x00", b'"\xed\xa0\x80"', b"", b"[1] [2]"])
def test_bytes_json_would_decode_otherwise_are_handed_to_it(data: bytes) -> None:
    assert outcome(cjson.loads, data) == outcome(json.loads, data)


def test_hooks_see_the_same_pairs_and_constants() -> None:
    def pairs(items: list[tuple[str, Any]]) -> list[tuple[str, Any]]:
        return items

    def constant(name: str) -> str:
        raise ValueError(f"refused {name}")

    text = '{"a": 1, "a": {"b": NaN}}'
    assert outcome(cjson.loads, text, object_pairs_hook=pairs) == outcome(json.loads, text, object_pairs_hook=pairs)
    assert outcome(cjson.loads, text, parse_constant=constant) == outcome(json.loads, text, parse_constant=constant)


def test_unencodable_values_raise_json_s_own_error() -> None:
    assert outcome(cjson.dumps, {"x": object()}) == outcome(json.dumps, {"x": object()})
    assert cjson.dumps({"x": object()}, default=lambda o: "obj") == '{"x": "obj"}'
    looped: list[Any] = []
    looped.append(looped)
    assert outcome(cjson.dumps, looped) == outcome(json.dumps, looped)


def test_errors_before_json_is_imported_are_json_s_errors() -> None:
    """The scanner looks `json.decoder` up in `sys.modules` to report a syntax error: in a hook's process,
    where nothing imported `json`, a truncated file must still be a JSONDecodeError, not a SystemError."""
    code = ("import sys\nfrom leslie.store import cjson\nassert 'json' not in sys.modules\n"
            "for text in ('{\"a\": ', '[1,', '{\"a\" 1}', '\"x'):\n"
            "    try:\n        cjson.loads(text)\n    except ValueError as exc:\n"
            "        print(type(exc).__name__, exc.msg, exc.pos)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    expected = ""
    for text in ('{"a": ', "[1,", '{"a" 1}', '"x'):
        try:
            json.loads(text)
        except json.JSONDecodeError as exc:
            expected += f"JSONDecodeError {exc.msg} {exc.pos}\n"
    assert out == expected
