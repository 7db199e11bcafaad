"""Shell words for the write guard: quote removal, expansions, and the *pattern* of the path a word names.

A word's `text` is what the shell would pass after removing quotes, with expansions kept as written
(`$HOME/x`), which is what `bash -c` or `eval` would read again. Its `pattern` is the path it names, with
markers for what is not literal: a value that cannot be known here (a command substitution, an unset
variable), a variable the analysis resolves (`$PWD`, `$HOME`, `~`), unquoted glob and brace characters.
Literal control characters that collide with a marker become UNKNOWN, so a marker always means what it says.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from leslie.guard.shell.syntax import Script

UNKNOWN = "\x00"  # a value that cannot be known here: matches anything, `/` included
VAR_OPEN, VAR_CLOSE = "\x01", "\x02"  # \x01NAME\x02: a variable the analysis resolves ($PWD, $HOME, ~user)
STAR, QUESTION, BRACKET = "\x03", "\x04", "\x05"  # unquoted glob characters
BRACE_OPEN, BRACE_COMMA, BRACE_CLOSE = "\x06", "\x07", "\x08"  # unquoted brace-expansion characters
MARKERS = "\x00\x01\x02\x03\x04\x05\x06\x07\x08"
GLOB_MARKERS = "\x00\x03\x04\x05"
MAX_DEPTH = 64  # nested subshells, substitutions and `bash -c` strings before the guard gives up reading
_TO_UNKNOWN = {ord(c): UNKNOWN for c in MARKERS}
# A run of plain text: no blank, quote, expansion, glob or brace character, operator, `~` or marker.
_PLAIN = re.compile(r"[^ \t\n'\"\\$`*?\[{},;&|()<>~\x00-\x08]+")
# Blanks, then a whole plain word that does not start a comment, followed by a blank, `;`, `&`, `|`, `)` or the
# end (not by `<`, `>` or `(`: a descriptor number, a function definition). Most arguments are read with it.
PLAIN_WORD = re.compile(
    r"[ \t]*+([^ \t\n'\"\\$`*?\[{},;&|()<>~\x00-\x08#][^ \t\n'\"\\$`*?\[{},;&|()<>~\x00-\x08]*+)(?=[ \t\n;&|)]|\Z)")
_DOUBLE_QUOTED = re.compile(r'[^"\\$`\x00-\x08]+')  # a run of literal text inside double quotes
SHELL_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
ASSIGNMENT = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\+?=")  # `NAME=` or `NAME+=` at the start of a word
_HEX = re.compile(r"[0-9a-fA-F]+")
_OCTAL = re.compile(r"[0-7]+")

_BREAK = frozenset(" \t\n;&|()<>")
_ANSI = {"a": "\a", "b": "\b", "e": "\x1b", "E": "\x1b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v",
         "\\": "\\", "'": "'", '"': '"', "?": "?"}
_SPECIAL = {"*": STAR, "?": QUESTION, "[": BRACKET, "{": BRACE_OPEN, ",": BRACE_COMMA, "}": BRACE_CLOSE, "~": "~"}


class ShellSyntaxError(ValueError):
    """The shell would refuse this command line (an unclosed quote or substitution)."""


class ShellTooComplex(ValueError):
    """Too deep or too long to read within the guard's bounds."""


class Word:
    """One shell word: `text` (quotes removed, expansions kept as written), `pattern` (the path it names, with
    markers), `subs` (command substitutions in it: they run), `plain` (no quoting or expansion at all)."""

    __slots__ = ("pattern", "plain", "subs", "text")

    def __init__(self, text: str, pattern: str, subs: list[Script], plain: bool) -> None:
        self.text = text
        self.pattern = pattern
        self.subs = subs
        self.plain = plain

    def __repr__(self) -> str:
        return f"Word({self.text!r})"


class Budget:
    """How much text all the parsers of one guard check may still read, and how deep they are nested."""

    __slots__ = ("chars", "depth")

    def __init__(self, chars: int) -> None:
        self.chars = chars
        self.depth = 0

    def spend(self, count: int) -> None:
        self.chars -= count
        if self.chars < 0:
            raise ShellTooComplex("the command line is too long to read in full")

    def enter(self) -> None:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise ShellTooComplex("the command line is nested too deeply to read")

    def leave(self) -> None:
        self.depth -= 1


class WordReader:
    """Reads words from `s` at `i`; `leslie.guard.shell.syntax` adds the grammar (and the substitutions in words)."""

    __slots__ = ("budget", "i", "n", "s")

    def __init__(self, text: str, budget: Budget) -> None:
        budget.spend(len(text))
        self.s = text
        self.i = 0
        self.n = len(text)
        self.budget = budget

    def _substitution(self, i: int) -> Script:
        """Parse `$( ... )` whose content starts at `i`; `self.i` ends after its `)`."""
        raise NotImplementedError

    def _nested(self, text: str) -> Script:
        """Parse a separate command line (the inside of backquotes)."""
        raise NotImplementedError

    def _nested_substitutions(self, text: str) -> list[Script]:
        """The command substitutions in `text` (an arithmetic expression, a here-document body)."""
        raise NotImplementedError

    def word(self) -> Word:
        """One word from `self.i`: quote removal, expansions, glob and brace markers."""
        s, n = self.s, self.n
        run = _PLAIN.match(s, self.i)
        if run and (run.end() >= n or s[run.end()] in _BREAK):  # the common case: a plain word
            self.i = run.end()
            return Word(run.group(), run.group(), [], True)
        text: list[str] = []
        pattern: list[str] = []
        subs: list[Script] = []
        start = self.i
        plain = not self._word_start(text, pattern, subs)  # plain: no quoting, escaping or expansion
        while self.i < n:
            run = _PLAIN.match(s, self.i)
            if run:
                text.append(run.group())
                pattern.append(run.group())
                self.i = run.end()
            elif s[self.i] in _BREAK:
                break
            elif self._word_part(text, pattern, subs):
                plain = False
        return Word("".join(text), "".join(pattern), subs, plain and self.i > start)

    def _word_start(self, text: list[str], pattern: list[str], subs: list[Script]) -> bool:
        """A leading `~`, `~user`, `~+`, `~-`, or a process substitution `<( )`, `>( )`; True if read."""
        s, n, start = self.s, self.n, self.i
        if s.startswith("~", start):
            end = start + 1
            while end < n and s[end] not in _BREAK and s[end] not in "/'\"\\$`":
                end += 1
            if end >= n or s[end] in _BREAK or s[end] == "/":
                name = s[start + 1:end]
                variable = {"": "HOME", "+": "PWD", "-": "OLDPWD"}.get(name, "~" + name)
                text.append(s[start:end])
                pattern.append(VAR_OPEN + variable + VAR_CLOSE)
                self.i = end
                return True
        if s[start:start + 1] in ("<", ">") and s.startswith("(", start + 1):
            subs.append(self._substitution(start + 2))  # its commands run
            text.append("/dev/fd/63")
            pattern.append(UNKNOWN)
            return True
        return False

    def _word_part(self, text: list[str], pattern: list[str], subs: list[Script]) -> bool:
        """One part of a word that is not plain text; True when it quotes, escapes or expands."""
        s, n = self.s, self.n
        c = s[self.i]
        if c in "?*+@!" and s.startswith("(", self.i + 1):  # an extglob group: any name
            end = self._balanced(self.i + 1)
            text.append(s[self.i:end])
            pattern.append(STAR)
            self.i = end
            return False
        if c == "\\":
            if self.i + 1 < n and s[self.i + 1] != "\n":
                literal = s[self.i + 1].translate(_TO_UNKNOWN)
                text.append(literal)
                pattern.append(literal)
            self.i += 2
        elif c == "'":
            end = s.find("'", self.i + 1)
            if end < 0:
                raise ShellSyntaxError("unclosed single quote")
            literal = s[self.i + 1:end]
            text.append(literal)
            pattern.append(literal.translate(_TO_UNKNOWN))
            self.i = end + 1
        elif c == '"':
            self.i += 1
            self.double_quoted(subs, closing='"', text=text, pattern=pattern)
        elif c == "$":
            self._dollar(text, pattern, subs)
        elif c == "`":
            self._backtick(text, pattern, subs)
        else:  # an unquoted glob or brace character, a tilde inside the word, or a control character
            text.append(c)
            pattern.append(_SPECIAL.get(c, UNKNOWN))
            self.i += 1
            return False
        return True

    def double_quoted(self, subs: list[Script], closing: str | None, text: list[str] | None = None,
                      pattern: list[str] | None = None) -> None:
        """Read a double-quoted string from `self.i` up to `closing` (None: the end of the text)."""
        s, n = self.s, self.n
        text = [] if text is None else text
        pattern = [] if pattern is None else pattern
        while self.i < n:
            run = _DOUBLE_QUOTED.match(s, self.i)
            if run:
                text.append(run.group())
                pattern.append(run.group())
                self.i = run.end()
                continue
            c = s[self.i]
            if c == '"' and closing == '"':
                self.i += 1
                return
            if c == "\\" and self.i + 1 < n and s[self.i + 1] in '$`"\\\n':
                if s[self.i + 1] != "\n":
                    text.append(s[self.i + 1])
                    pattern.append(s[self.i + 1])
                self.i += 2
            elif c == "$":
                self._dollar(text, pattern, subs, quoted=True)
            elif c == "`":
                self._backtick(text, pattern, subs)
            else:
                text.append(c if c in '"\\' else UNKNOWN)
                pattern.append(c if c in '"\\' else UNKNOWN)
                self.i += 1
        if closing is not None:
            raise ShellSyntaxError("unclosed double quote")

    def _dollar(self, text: list[str], pattern: list[str], subs: list[Script], quoted: bool = False) -> None:
        s, i = self.s, self.i
        nxt = s[i + 1] if i + 1 < self.n else ""
        if nxt == "'" and not quoted:
            end, literal = self._ansi_c(i + 2)
            text.append(literal)
            pattern.append(literal.translate(_TO_UNKNOWN))
            self.i = end
        elif nxt == '"' and not quoted:
            self.i += 2
            self.double_quoted(subs, closing='"', text=text, pattern=pattern)
        elif s.startswith("((", i + 1):
            end = self._balanced(i + 1)
            subs.extend(self._arithmetic(i + 1, end))
            text.append(s[i:end])
            pattern.append(UNKNOWN)
            self.i = end
        elif nxt == "(":
            subs.append(self._substitution(i + 2))
            text.append(s[i:self.i])
            pattern.append(UNKNOWN)
        elif nxt == "{":
            end = self._braced(i + 2, subs)
            inner = s[i + 2:end - 1]
            text.append(s[i:end])
            pattern.append(VAR_OPEN + inner + VAR_CLOSE if SHELL_NAME.fullmatch(inner) else UNKNOWN)
            self.i = end
        else:
            name = SHELL_NAME.match(s, i + 1)
            if name:
                text.append(s[i:name.end()])
                pattern.append(VAR_OPEN + name.group() + VAR_CLOSE)
                self.i = name.end()
            elif nxt and nxt in "0123456789@*#?$!-":
                text.append(s[i:i + 2])
                pattern.append(UNKNOWN)
                self.i = i + 2
            else:
                text.append("$")
                pattern.append("$")
                self.i = i + 1

    def _ansi_c(self, i: int) -> tuple[int, str]:
        """Decode `$'...'` from just after its quote: (index after the closing quote, the text)."""
        s, n = self.s, self.n
        out: list[str] = []
        while i < n:
            c = s[i]
            if c == "'":
                return i + 1, "".join(out)
            if c != "\\" or i + 1 >= n:
                out.append(c)
                i += 1
                continue
            e = s[i + 1]
            i += 2
            if e in _ANSI:
                out.append(_ANSI[e])
            elif e in "xuU":
                hexa = _HEX.match(s, i, i + {"x": 2, "u": 4, "U": 8}[e])  # at most 2, 4 or 8 digits
                if hexa:
                    out.append(chr(min(int(hexa.group(), 16), 0x10FFFF)))
                    i = hexa.end()
                else:
                    out.append("\\" + e)
            elif (octal := _OCTAL.match(s, i - 1, i + 2)) is not None:  # `e` and at most two more digits
                out.append(chr(int(octal.group(), 8) & 0xFF))
                i = octal.end()
            elif e == "c" and i < n:
                out.append(chr(ord(s[i]) & 0x1F))
                i += 1
            else:
                out.append("\\" + e)
        raise ShellSyntaxError("unclosed $'...' quote")

    def _balanced(self, i: int) -> int:
        """The index after the parenthesis that closes the one at `i` (quotes ignored: arithmetic, extglob)."""
        depth = 0
        s = self.s
        for j in range(i, self.n):
            if s[j] == "(":
                depth += 1
            elif s[j] == ")":
                depth -= 1
                if depth == 0:
                    return j + 1
        raise ShellSyntaxError("unclosed parenthesis")

    def _arithmetic(self, start: int, end: int) -> list[Script]:
        """The command substitutions inside an arithmetic expression `s[start:end]` (they run)."""
        inner = self.s[start:end]
        if "$(" not in inner and "`" not in inner:
            return []
        return self._nested_substitutions(inner[2:-2])

    def _braced(self, i: int, subs: list[Script]) -> int:
        """The index after the `}` closing a `${` whose content starts at `i`."""
        depth = 1
        s, n = self.s, self.n
        while i < n:
            c = s[i]
            if c == "\\":
                i += 2
            elif c == "'":
                end = s.find("'", i + 1)
                if end < 0:
                    raise ShellSyntaxError("unclosed single quote")
                i = end + 1
            elif c == '"':
                self.i = i + 1
                self.double_quoted(subs, closing='"')
                i = self.i
            elif c == "$" and s.startswith("(", i + 1) and not s.startswith("((", i + 1):
                subs.append(self._substitution(i + 2))
                i = self.i
            elif c == "`":
                self.i = i
                self._backtick([], [], subs)
                i = self.i
            elif c == "{":
                depth += 1
                i += 1
            elif c == "}":
                depth -= 1
                i += 1
                if depth == 0:
                    return i
            else:
                i += 1
        raise ShellSyntaxError("unclosed ${")

    def _backtick(self, text: list[str], pattern: list[str], subs: list[Script]) -> None:
        s = self.s
        i = self.i + 1
        inner: list[str] = []
        while i < self.n and s[i] != "`":
            if s[i] == "\\" and i + 1 < self.n and s[i + 1] in "$`\\":
                inner.append(s[i + 1])
                i += 2
            else:
                inner.append(s[i])
                i += 1
        if i >= self.n:
            raise ShellSyntaxError("unclosed backquote")
        subs.append(self._nested("".join(inner)))
        text.append(s[self.i:i + 1])
        pattern.append(UNKNOWN)
        self.i = i + 1
