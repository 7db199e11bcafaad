"""store/jsonio.py: the strict decoder and the canonical encoder of every state file."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from leslie.store.jsonio import StrictJSONError, dumps_canonical, loads_strict

# Every JSON value leslie can write: finite numbers, any text without lone surrogates, nested containers.
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda children: st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=8), children, max_size=5),
    max_leaves=30,
)


@settings(max_examples=300)
@given(json_values)
def test_canonical_bytes_equal_the_stdlib_encoding(value: Any) -> None:
    expected = (json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode("utf-8")
    assert dumps_canonical(value) == expected


@settings(max_examples=200)
@given(json_values)
def test_canonical_bytes_round_trip(value: Any) -> None:
    data = dumps_canonical(value)
    assert loads_strict(data) == value
    assert dumps_canonical(loads_strict(data)) == data  # the same state always gives the same bytes


def test_canonical_shape() -> None:
    data = dumps_canonical({"b": [], "a": {"é": "ü\n\"", "z": None}, "c": {}})
    assert data == '{\n  "a": {\n    "z": null,\n    "é": "ü\\n\\""\n  },\n  "b": [],\n  "c": {}\n}\n'.encode()
    assert data.endswith(b"}\n") and not data.endswith(b"\n\n")


def test_canonical_refuses_nan() -> None:
    with pytest.raises(ValueError, match="not JSON compliant"):
        dumps_canonical({"x": float("nan")})


def test_tuples_encode_as_lists() -> None:
    assert dumps_canonical(("a", "b")) == dumps_canonical(["a", "b"])


@pytest.mark.parametrize(
    ("data", "why"),
    [
        (b'{"a": 1, "a": 2}', "duplicate key 'a'"),
        (b'{"x": {"a": 1, "a": 1}}', "duplicate key 'a'"),
        (b'{"a": NaN}', "non-standard number NaN"),
        (b'{"a": Infinity}', "non-standard number Infinity"),
        (b'{"a": -Infinity}', "non-standard number -Infinity"),
        (b'\xef\xbb\xbf{"a": 1}', "byte-order mark"),
        (b'{"a": [1, 2', "invalid JSON"),
        (b'{"a": 1}}', "invalid JSON"),
        (b'{"a": 1}\n<<<<<<< HEAD\n', "conflict markers"),
        (b'<<<<<<< ours\n{"a": 1}\n=======\n{"a": 2}\n>>>>>>> theirs\n', "conflict markers"),
        (b'{"a":\n||||||| base\n1}', "conflict markers"),
        (b'{"a": "\xff"}', "not valid UTF-8"),
        (b'{"a": "\xed\xa0\x80"}', "not valid UTF-8"),  # an encoded lone surrogate
        (b"", "is empty"),
        (b"  \n", "is empty"),
        (b"{'a': 1}", "invalid JSON"),
    ],
)
def test_strict_rejects(data: bytes, why: str) -> None:
    with pytest.raises(StrictJSONError, match=why):
        loads_strict(data)


def test_strict_error_is_a_value_error() -> None:
    assert issubclass(StrictJSONError, ValueError)


def test_strict_accepts_markers_inside_strings() -> None:
    # Only a line that starts with a marker is a conflict; the text inside a value is data.
    assert loads_strict(b'{"a": "<<<<<<< not a conflict"}') == {"a": "<<<<<<< not a conflict"}


@given(json_values)
def test_truncated_canonical_documents_are_rejected(value: Any) -> None:
    data = dumps_canonical({"k": value})
    # Every strict prefix of a canonical object is either empty or invalid: a torn write never parses.
    for cut in range(len(data) - 2):
        with pytest.raises(StrictJSONError):
            loads_strict(data[:cut])


# -- behaviour kept from test_cjson.py (the decoder and encoder are the standard library's `json` now) -------
@settings(max_examples=300)
@given(json_values)
def test_strict_reads_back_what_json_wrote_escaped_or_not(value: Any) -> None:
    for ensure_ascii in (True, False):
        assert loads_strict(json.dumps(value, ensure_ascii=ensure_ascii).encode("utf-8")) == value


@settings(max_examples=500)
@given(st.text(alphabet=' \t\n\r{}[]":,.-+0123456789eEtruefalsnNIiy\\u\ufeff\u00e9', max_size=30))
def test_strict_gives_json_s_value_or_a_strict_error(text: str) -> None:
    try:
        value = loads_strict(text.encode("utf-8", "surrogatepass"))
    except StrictJSONError:
        return
    assert value == json.loads(text)


@pytest.mark.parametrize("text", ['{"a": ', "[1,", '{"a" 1}', '"x'])
def test_strict_errors_say_where(text: str) -> None:
    with pytest.raises(json.JSONDecodeError) as expected:
        json.loads(text)
    where = f"{expected.value.msg} at line {expected.value.lineno} column {expected.value.colno}"
    with pytest.raises(StrictJSONError, match=f"^invalid JSON \\({where}\\)$"):
        loads_strict(text.encode())


def test_lone_surrogate_escapes_are_refused_and_pairs_kept() -> None:
    with pytest.raises(StrictJSONError, match="lone surrogate"):
        loads_strict(b'{"a": ["\\udc00"]}')
    assert loads_strict(b'"\\ud83d\\ude00"') == "\U0001f600"
    assert loads_strict(b'"\\\\ud800"') == "\\ud800"  # an escaped backslash, then text


def test_canonical_refuses_what_json_cannot_encode() -> None:
    with pytest.raises(TypeError, match="not JSON serializable"):
        dumps_canonical({"x": object()})
