"""model.py: ID patterns, random IDs, text cleaning, scope normalisation, thread/objective documents."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from leslie.errors import UsageError
from leslie.store.model import (
    MAX_INTENT_BYTES,
    MAX_TITLE_CHARS,
    OBJECTIVE_ID_RE,
    THREAD_ID_RE,
    Objective,
    ShapeError,
    Thread,
    check_xml_text,
    clean_text,
    clean_title,
    new_id,
    normalize_scope,
    objective_from_json,
    thread_from_json,
    utc_now,
    validate_objective_id,
    validate_thread_id,
)

# -- IDs ---------------------------------------------------------------------------------------------

GOOD_THREAD_IDS = [
    "thread-a",
    "thread-0",
    "thread-k3x9qa",
    "thread-a-b-c",
    "thread-a-",  # the pattern allows a trailing hyphen
    "thread-" + "a" * 48,  # the longest: one leading character and 47 more
    "thread-a" + "-" * 47,
]
BAD_THREAD_IDS = [
    "",
    "thread",
    "thread-",
    "thread--a",  # must start with [a-z0-9] after the prefix
    "thread-A",
    "Thread-abc",
    "thread-abc_d",
    "thread-abc.d",
    "thread-abc/d",
    "thread-ab c",
    "thread-" + "a" * 49,  # one too long
    "thread-abc\n",  # `$` would have matched before this newline
    "\nthread-abc",
    "thread-abc\x00",
    "thread-é",
    "obj-abc",
    " thread-abc",
]


@pytest.mark.parametrize("value", GOOD_THREAD_IDS)
def test_thread_id_accepted(value: str) -> None:
    assert validate_thread_id(value) == value


@pytest.mark.parametrize("value", BAD_THREAD_IDS)
def test_thread_id_rejected(value: str) -> None:
    with pytest.raises(UsageError, match="invalid thread ID"):
        validate_thread_id(value)


def test_thread_id_error_names_what() -> None:
    with pytest.raises(UsageError, match="invalid parent thread ID 'x'"):
        validate_thread_id("x", "parent thread ID")


@pytest.mark.parametrize("value", ["obj-a", "obj-default", "obj-" + "z" * 48, "obj-9-"])
def test_objective_id_accepted(value: str) -> None:
    assert validate_objective_id(value) == value


@pytest.mark.parametrize(
    "value", ["", "obj-", "obj--a", "obj-A", "obj-" + "z" * 49, "obj-a\n", "thread-abc", "objective-a"]
)
def test_objective_id_rejected(value: str) -> None:
    with pytest.raises(UsageError, match="invalid objective ID"):
        validate_objective_id(value)


def test_new_ids_match_the_pattern_and_spec_shape() -> None:
    for _ in range(300):
        tid, oid = new_id("thread"), new_id("obj")
        assert THREAD_ID_RE.match(tid) and len(tid) == len("thread-") + 6
        assert OBJECTIVE_ID_RE.match(oid) and len(oid) == len("obj-") + 6
        assert set(tid[len("thread-"):]) <= set("abcdefghijklmnopqrstuvwxyz0123456789")


def test_new_ids_are_random() -> None:
    assert len({new_id("thread") for _ in range(200)}) == 200


@given(st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-", min_size=1, max_size=60))
def test_thread_id_pattern_matches_its_definition(suffix: str) -> None:
    value = "thread-" + suffix
    expected = suffix[0] != "-" and len(suffix) <= 48
    assert bool(THREAD_ID_RE.match(value)) == expected


# -- text ---------------------------------------------------------------------------------------------


def test_title_newlines_fold_to_spaces() -> None:
    assert clean_title("Fix\nlogin\r\nbug\rnow") == "Fix login bug now"
    assert clean_title("  padded  \n  lines ") == "padded lines"


def test_title_limit_is_512_characters() -> None:
    assert clean_title("é" * MAX_TITLE_CHARS) == "é" * 512  # characters, not bytes
    with pytest.raises(UsageError, match="513 characters long; the limit is 512"):
        clean_title("x" * 513)


def test_title_empty_rejected() -> None:
    with pytest.raises(UsageError, match="title is empty"):
        clean_title(" \n ")


def test_text_crlf_becomes_lf() -> None:
    assert clean_text("a\r\nb\rc\n", "intent") == "a\nb\nc\n"


def test_text_limit_is_64_kib_of_utf8() -> None:
    assert len(clean_text("x" * MAX_INTENT_BYTES, "intent")) == 65536
    with pytest.raises(UsageError, match="intent is 65537 bytes long; the limit is 64 KiB"):
        clean_text("x" * 65537, "intent")
    with pytest.raises(UsageError, match="limit is 64 KiB"):
        clean_text("é" * 32769, "intent")  # 65538 bytes in only 32769 characters


def test_text_crlf_is_counted_after_conversion() -> None:
    # 128 KiB of CRLF is 64 KiB of LF once converted: accepted.
    assert clean_text("\r\n" * 65536, "intent", required=False) == "\n" * 65536


def test_required_text_empty_rejected() -> None:
    with pytest.raises(UsageError, match="intent is empty"):
        clean_text("  \n", "intent")
    assert clean_text("", "description", required=False) == ""


@pytest.mark.parametrize(
    "bad", ["\x00", "\x01", "\x08", "\x0b", "\x0c", "\x0e", "\x1f", "\ufffe", "\uffff", "\ud800", "\udfff"]
)
def test_text_xml_cannot_carry_is_rejected(bad: str) -> None:
    with pytest.raises(UsageError, match=f"U\\+{ord(bad):04X} at position 3"):
        check_xml_text("abc" + bad, "intent")
    with pytest.raises(UsageError):
        clean_title("abc" + bad)
    with pytest.raises(UsageError):
        clean_text("abc" + bad, "intent")


@pytest.mark.parametrize("good", ["\t", "\n", "\r", "\x7f", "\u00e9", "\ud7ff", "\ue000", "\ufffd", "\U0001f600"])
def test_text_xml_can_carry_is_accepted(good: str) -> None:
    check_xml_text("a" + good, "intent")


@given(st.text(max_size=200))
def test_cleaned_text_is_always_xml_safe(value: str) -> None:
    try:
        cleaned = clean_text(value, "intent")
    except UsageError:
        return
    check_xml_text(cleaned, "intent")
    assert "\r" not in cleaned


# -- scopes -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "canonical"),
    [
        ("plan.md", "plan.md"),
        ("design/api.md", "design/api.md"),
        ("./design//api.md", "design/api.md"),
        ("design/", "design"),
        ("artifacts/./x", "artifacts/x"),
        ("a b/ü.md", "a b/ü.md"),
    ],
)
def test_scope_normalised(raw: str, canonical: str) -> None:
    assert normalize_scope(raw) == canonical


@pytest.mark.parametrize(
    ("raw", "why"),
    [
        ("", "a scope is a path"),
        ("   ", "a scope is a path"),
        ("/etc/passwd", "must be relative"),
        ("C:/x", "must be relative"),
        ("../other/plan.md", "must not contain '..'"),
        ("design/../../x", "must not contain '..'"),
        ("design\\api.md", "forward slashes"),
        ("a\x00b", "control character"),
        ("a\nb", "control character"),
        ("a\x7fb", "control character"),
        (".git/config", ".git or .leslie"),
        ("design/.leslie/x", ".git or .leslie"),
        (".", "names the thread folder itself"),
        ("./", "names the thread folder itself"),
        ("a\ud800", "U\\+D800"),
        ("a\uffff", "U\\+FFFF"),
    ],
)
def test_scope_rejected(raw: str, why: str) -> None:
    with pytest.raises(UsageError, match=why):
        normalize_scope(raw)


@given(st.text(max_size=40))
def test_normalised_scope_is_canonical_and_safe(raw: str) -> None:
    try:
        scope = normalize_scope(raw)
    except UsageError:
        return
    assert normalize_scope(scope) == scope  # idempotent
    parts = scope.split("/")
    assert "" not in parts and "." not in parts and ".." not in parts
    assert not scope.startswith("/") and "\\" not in scope


# -- documents ----------------------------------------------------------------------------------------


def _thread_doc(**changes: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "created_at": "2026-11-22T03:00:00Z",
        "id": "thread-abc123",
        "intent": "Fix login bug",
        "objective": "obj-456",
        "references": {"thread-xyz789": ["plan.md", "design/api.md"], "thread-uvw000": []},
        "spawned_by": None,
        "status": "active",
        "title": "Fix login bug",
        "version": 1,
    }
    doc.update(changes)
    return doc


def test_thread_round_trip_sorts_scopes_and_keeps_unknown_fields() -> None:
    doc = _thread_doc(future_field={"nested": [1, 2]}, another="kept")
    thread = thread_from_json(doc)
    assert thread.references == {"thread-xyz789": ("design/api.md", "plan.md"), "thread-uvw000": ()}
    out = thread.to_json()
    assert out["future_field"] == {"nested": [1, 2]} and out["another"] == "kept"
    assert out["references"] == {"thread-uvw000": [], "thread-xyz789": ["design/api.md", "plan.md"]}
    assert list(out["references"]) == ["thread-uvw000", "thread-xyz789"]
    assert thread_from_json(out) == thread


def test_known_fields_win_over_extra() -> None:
    thread = Thread(id="thread-a", title="t", intent="i", objective=None, extra={"status": "stale"})
    assert thread.to_json()["status"] == "active"


@pytest.mark.parametrize(
    ("changes", "why"),
    [
        ({"id": 5}, "field 'id' has the wrong type"),
        ({"id": "nope"}, "not a thread ID"),
        ({"status": "bogus"}, "unknown value 'bogus'"),
        ({"references": []}, "field 'references' has the wrong type"),
        ({"references": {"bad": []}}, "not a thread ID"),
        ({"references": {"thread-x": "plan.md"}}, "not a list of paths"),
        ({"references": {"thread-x": [1]}}, "not a list of paths"),
        ({"title": None}, "field 'title' has the wrong type"),
        ({"version": True}, "field 'version' has the wrong type"),
        ({"objective": 3}, "field 'objective' has the wrong type"),
        # Valid JSON escapes, but text the commands refuse at input (regression: a lone surrogate in a title
        # made doctor --fix write an index that was not UTF-8, and every command then failed).
        ({"title": "a\ud800"}, "field 'title' holds U\\+D800"),
        ({"intent": "x\x01"}, "field 'intent' holds U\\+0001"),
        ({"references": {"thread-x": ["plan\uffff"]}}, "scope of reference 'thread-x'.*XML 1.0 cannot carry"),
        # Scopes and IDs from disk pass the rules of input (issue 11: a clone or a merge must not smuggle a
        # traversal into the context).
        ({"references": {"thread-x": ["../../../../etc/shadow"]}}, "scope of reference 'thread-x'.*'\\.\\.'"),
        ({"references": {"thread-x": ["/etc/shadow"]}}, "must be relative"),
        ({"references": {"thread-x": ["C:/x"]}}, "must be relative"),
        ({"references": {"thread-x": [".git/config"]}}, ".git or .leslie"),
        ({"references": {"thread-x": ["a\\b"]}}, "forward slashes"),
        ({"references": {"thread-x": [""]}}, "scope of reference 'thread-x'"),
        ({"objective": "../../etc"}, "field 'objective' is not a valid ID"),
        ({"spawned_by": "thread-../x"}, "field 'spawned_by' is not a valid ID"),
        ({"created_at": "\x1b[2J"}, "field 'created_at' holds U\\+001B"),
        ({"later": json.loads("[" * 70 + "]" * 70)}, "field 'later' nests deeper than 64 levels"),
    ],
)
def test_thread_shape_errors(changes: dict[str, Any], why: str) -> None:
    with pytest.raises(ShapeError, match=why):
        thread_from_json(_thread_doc(**changes))


def test_thread_missing_field_and_not_object() -> None:
    doc = _thread_doc()
    del doc["status"]
    with pytest.raises(ShapeError, match="missing field 'status'"):
        thread_from_json(doc)
    with pytest.raises(ShapeError, match="not a JSON object"):
        thread_from_json([doc])


def test_objective_round_trip() -> None:
    doc = {"created_at": "x", "id": "obj-a", "status": "done", "title": "T", "version": 1, "description": "D",
           "later": True}
    objective = objective_from_json(doc)
    assert objective == Objective("obj-a", "T", "done", "D", "x", 1, {"later": True})
    assert objective.to_json() == doc
    assert "description" not in Objective("obj-a", "T").to_json()


@pytest.mark.parametrize(
    ("changes", "why"),
    [({"status": "paused"}, "unknown value"), ({"id": "thread-a"}, "not an objective ID"),
     ({"description": 1}, "wrong type"), ({"title": "\udfff"}, "holds U\\+DFFF"),
     ({"description": "\x0b"}, "field 'description' holds U\\+000B")],
)
def test_objective_shape_errors(changes: dict[str, Any], why: str) -> None:
    doc = {"created_at": "x", "id": "obj-a", "status": "active", "title": "T", "version": 1, **changes}
    with pytest.raises(ShapeError, match=why):
        objective_from_json(doc)


def test_utc_now_format() -> None:
    import re

    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", utc_now())
