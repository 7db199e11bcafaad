"""Hand-written scanners for the shell reader, in place of regular expressions.

Importing `re` (and the `enum` it pulls in) costs about a quarter of a bare interpreter start, more than
the guard's own work on a common tool call; these few runs of characters are all the reader needed it for.
Each function names the expression it replaces; tests/test_guard_no_re.py checks them against it on
generated input.
"""

from __future__ import annotations

# What ends a plain (unquoted, unexpanded) word, and what ends a run inside double quotes: the shell's
# metacharacters, quotes, expansions, glob and brace characters, and the guard's own markers \x00-\x08.
_MARKERS = "\x00\x01\x02\x03\x04\x05\x06\x07\x08"
PLAIN_STOP = frozenset(" \t\n'\"\\$`*?[{},;&|()<>~" + _MARKERS)
DQ_STOP = frozenset('"\\$`' + _MARKERS)
_NAME_START = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_")
_NAME_CHARS = _NAME_START | frozenset("0123456789")
HEX = frozenset("0123456789abcdefABCDEF")
OCTAL = frozenset("01234567")


def run_end(s: str, i: int, stop: frozenset[str]) -> int:
    """Where the run of characters of `s` not in `stop` that starts at `i` ends (`i` when it is empty).

    `[^...]+` matched at `i`: PLAIN_STOP for `[^ \\t\\n'"\\\\$`*?\\[{},;&|()<>\\x00-\\x08~]+`, DQ_STOP for
    `[^"\\\\$`\\x00-\\x08]+`.
    """
    n = len(s)
    while i < n and s[i] not in stop:
        i += 1
    return i


def name_end(s: str, i: int) -> int:
    """Where the shell name (`[A-Za-z_][A-Za-z0-9_]*`) at `i` ends; `i` when there is none."""
    n = len(s)
    if i >= n or s[i] not in _NAME_START:
        return i
    i += 1
    while i < n and s[i] in _NAME_CHARS:
        i += 1
    return i


def is_name(s: str) -> bool:
    """`[A-Za-z_][A-Za-z0-9_]*` matches all of `s`."""
    return bool(s) and name_end(s, 0) == len(s)


def assignment(s: str) -> tuple[str, int] | None:
    """`NAME=` or `NAME+=` at the start of `s`: (NAME, the index after `=`), else None.

    `([A-Za-z_][A-Za-z0-9_]*)\\+?=` matched at 0.
    """
    end = name_end(s, 0)
    if end == 0:
        return None
    at = end + 1 if s.startswith("+", end) else end
    return (s[:end], at + 1) if s.startswith("=", at) else None


def digits(s: str, allowed: frozenset[str], most: int) -> str:
    """The leading characters of `s` in `allowed`, at most `most` of them (`[0-9a-fA-F]{1,N}` and the like,
    with "" where the expression does not match)."""
    end = 0
    limit = min(most, len(s))
    while end < limit and s[end] in allowed:
        end += 1
    return s[:end]


_WORD_FIRST_STOP = PLAIN_STOP | {"#"}
_WORD_FOLLOW = frozenset(" \t\n;&|)")


def fast_word(s: str, i: int) -> tuple[str, int] | None:
    """A plain word after blanks from `i`, ending where a plain word ends: (the word, the index after it).

    `[ \\t]*([^<PLAIN_STOP>#][^<PLAIN_STOP>]*)(?=[ \\t\\n;&|)]|\\Z)` matched at `i`: the first character may
    not start a comment, and the word must be followed by a blank, `;`, `&`, `|`, `)` or the end (not by
    `<`, `>` or `(`: a descriptor number or a function definition).
    """
    n = len(s)
    while i < n and s[i] in " \t":
        i += 1
    if i >= n or s[i] in _WORD_FIRST_STOP:
        return None
    end = run_end(s, i + 1, PLAIN_STOP)
    if end < n and s[end] not in _WORD_FOLLOW:
        return None
    return s[i:end], end
