"""_json.py: the strict decoder and the canonical encoder of every state file."""

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
