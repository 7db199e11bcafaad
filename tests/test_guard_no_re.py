"""The write guard's common hook path imports no `re` (issue 18), with the same decisions as before.

The scanners that replaced regular expressions (leslie.guard.shell.scan, guard.paths.is_thread_id,
guard.shell.readonly.split_words) are compared with the expressions they replace, and with `shlex.split`,
on generated input; the guard's own tests (test_guard*.py, test_shell_readonly.py) pin the decisions.
"""

from __future__ import annotations

import re
import shlex

from hypothesis import given, settings
from hypothesis import strategies as st

from leslie.guard.paths import is_thread_id
from leslie.guard.shell import scan
from leslie.guard.shell.readonly import split_words

SETTINGS = settings(max_examples=600, deadline=None, derandomize=True)
# Characters every expression cares about, a few it does not, and markers and non-ASCII ones.
SHELLISH = st.text(st.sampled_from(list(" \t\n'\"\\$`*?[]{},;&|()<>~#=+-_aZz09xX7.é\x00\x03\x08\x09/")),
                   max_size=30)

PLAIN = re.compile(r"[^ \t\n'\"\\$`*?\[{},;&|()<>\x00-\x08~]+")
DQ_PLAIN = re.compile(r"[^\"\\$`\x00-\x08]+")
NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
ASSIGNMENT = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\+?=")
FAST_WORD = re.compile(r"[ \t]*([^ \t\n'\"\\$`*?\[{},;&|()<>\x00-\x08~#][^ \t\n'\"\\$`*?\[{},;&|()<>\x00-\x08~]*)"
                       r"(?=[ \t\n;&|)]|\Z)")
THREAD_ID = re.compile(r"thread-[a-z0-9][a-z0-9-]{0,47}\Z")


def _end(match: re.Match[str] | None, start: int) -> int:
    return match.end() if match else start


@SETTINGS
@given(SHELLISH, st.integers(0, 31))
def test_runs_names_and_words_match_the_old_expressions(s: str, i: int) -> None:
    i = min(i, len(s))
    assert scan.run_end(s, i, scan.PLAIN_STOP) == _end(PLAIN.match(s, i), i)
    assert scan.run_end(s, i, scan.DQ_STOP) == _end(DQ_PLAIN.match(s, i), i)
    assert scan.name_end(s, i) == _end(NAME.match(s, i), i)
    assert scan.is_name(s[i:]) == (NAME.fullmatch(s[i:]) is not None)
    old = ASSIGNMENT.match(s[i:])
    assert scan.assignment(s[i:]) == ((old.group(1), old.end()) if old else None)
    fast = FAST_WORD.match(s, i)
    assert scan.fast_word(s, i) == ((fast.group(1), fast.end()) if fast else None)


@SETTINGS
@given(st.text(st.sampled_from(list("0123456789abcdefABCDEFgxX'\\é")), max_size=10), st.integers(1, 8))
def test_digits_match_the_old_expressions(s: str, width: int) -> None:
    old = re.match(f"[0-9a-fA-F]{{1,{width}}}", s[:width])
    assert scan.digits(s[:width], scan.HEX, width) == (old.group() if old else "")
    octal = re.match("[0-7]{1,3}", s[:3])
    assert scan.digits(s[:3], scan.OCTAL, 3) == (octal.group() if octal else "")


@SETTINGS
@given(st.one_of(st.text(st.sampled_from(list("thread-abz09A_.é")), max_size=60),
                 st.text(st.sampled_from(list("az09-Aé_")), max_size=52).map(lambda t: "thread-" + t)))
def test_thread_ids_match_the_old_expression(name: str) -> None:
    assert is_thread_id(name) == (THREAD_ID.match(name) is not None)


@SETTINGS
@given(st.text(st.sampled_from(list(" \t'\"ab#;|&-=.é*?")), max_size=30))
def test_split_words_is_shlex_split(text: str) -> None:
    try:
        expected: list[str] | None = shlex.split(text)
    except ValueError:
        expected = None
    assert split_words(text) == expected
