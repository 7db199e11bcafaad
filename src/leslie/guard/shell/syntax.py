"""Shell syntax for the write guard: one linear pass over a bash command line, into a small tree.

It reads what decides where a command writes: words with their quoting (`'...'`, `"..."`, `$'...'`,
backslashes), expansions (`$VAR`, `${VAR}`, `~`, `$(...)`, backticks, `<(...)`), unquoted glob and brace
characters, redirections with their file descriptors, here-documents (whose bodies are data, read past),
lists (`;`, `&`, `&&`, `||`, newlines), pipelines, subshells, groups `{ }`, `if`, `while`/`until`/`for`
loops, `case`, `[[ ]]`, `(( ))`, function definitions (their body is read as commands). A keyword out of
place is read past: the parser is lenient, it never stops reading at what it does not expect.

It never runs anything. A part it cannot know (a command substitution's output, an unset variable) becomes
a marker in the word's *pattern*, never a guess. Syntax the shell itself would reject (an unclosed quote)
raises `ShellSyntaxError`; more nesting than `MAX_DEPTH`, or more text than a caller's budget, raises
`ShellTooComplex`: the guard then decides without reading (see `leslie.guard.rules`).
"""

from __future__ import annotations

from leslie.guard.shell.words import PLAIN_WORD, Budget, ShellSyntaxError, Word, WordReader

_OPERATORS = (";;&", ";;", ";&", ";", "&&", "&>>", "&>", "&", "||", "|&", "|", "(", ")", "<<<", "<<-", "<<", "<>",
              "<&", "<", ">>", ">|", ">&", ">")
REDIRECTIONS = frozenset({"<<<", "<<-", "<<", "<>", "<&", "<", ">>", ">|", ">&", ">", "&>>", "&>"})
_COMPOUND = frozenset({"{", "if", "while", "until", "for", "select", "case", "[[", "function"})
_PREFIXES = frozenset({"!", "coproc"})
_STRAY = frozenset({"then", "else", "elif", "fi", "do", "done", "}", "esac"})  # out of place: read past


class Redirect:
    """`fd op target`; a here-document or here-string keeps its `body` (text) and the substitutions in it."""

    __slots__ = ("body", "body_subs", "delimiter", "fd", "op", "strip_tabs", "target")

    def __init__(self, op: str, fd: str | None, target: Word | None) -> None:
        self.op = op
        self.fd = fd
        self.target = target
        self.body: str | None = None
        self.body_subs: list[Script] = []
        self.delimiter: Word | None = None
        self.strip_tabs = op == "<<-"


class Command:
    """One command of a pipeline, with its redirections. `kind`:

    - "simple": `words`; `inert` when the words run nothing themselves (`[[ ]]`, `(( ))`, the words of
      `for ... in`, the subject of `case`): only the substitutions in them run;
    - "subshell" `( list )` and "group" `{ list; }`: `clauses` [(None, list)];
    - "if": `clauses` [(condition, body), ..., (None, else-body)];
    - "loop" (`while`, `until`, `for`, `select`): `clauses` [(condition or None, body)]; a `for` keeps its
      header in `words` (NAME, `in`, WORDS);
    - "case": `clauses` [(None, branch), ...].
    """

    __slots__ = ("clauses", "inert", "kind", "redirects", "words")

    def __init__(self, kind: str = "simple") -> None:
        self.kind = kind
        self.inert = False
        self.words: list[Word] = []
        self.redirects: list[Redirect] = []
        self.clauses: list[tuple[Script | None, Script]] = []


class Pipeline:
    """Commands joined by `|` or `|&`."""

    __slots__ = ("commands",)

    def __init__(self, commands: list[Command]) -> None:
        self.commands = commands


class AndOr:
    """Pipelines joined by `&&` and `||`: `ops[i]` joins `pipelines[i]` and `pipelines[i + 1]`."""

    __slots__ = ("ops", "pipelines")

    def __init__(self, pipelines: list[Pipeline], ops: list[str]) -> None:
        self.pipelines = pipelines
        self.ops = ops


class Script:
    """A list: each and-or list with its terminator (`;`, `&`, a newline or "" at the end)."""

    __slots__ = ("items",)

    def __init__(self, items: list[tuple[AndOr, str]]) -> None:
        self.items = items


def parse(text: str, budget: Budget) -> Script:
    """The tree of one command line (or script)."""
    return _Parser(text, budget).script(frozenset())


def parse_substitutions(text: str, budget: Budget) -> list[Script]:
    """The command substitutions in `text` read as the body of an unquoted here-document (they run)."""
    parser = _Parser(text, budget)
    subs: list[Script] = []
    parser.double_quoted(subs, closing=None)
    return subs


class _Parser(WordReader):
    __slots__ = ("peeked", "pending")

    def __init__(self, text: str, budget: Budget) -> None:
        super().__init__(text, budget)
        self.pending: list[Redirect] = []  # here-documents whose bodies start after the next newline
        self.peeked: tuple[str, object] | None = None

    # -- tokens: ("word", Word) | ("op", str) | ("fd", str) | ("nl", "") | ("eof", "") ---------------------
    def peek(self) -> tuple[str, object]:
        if self.peeked is None:
            self.peeked = self._lex()
        return self.peeked

    def next(self) -> tuple[str, object]:
        token = self.peek()
        self.peeked = None
        return token

    def _lex(self) -> tuple[str, object]:
        s, n = self.s, self.n
        while self.i < n:
            c = s[self.i]
            if c in " \t":
                self.i += 1
            elif c == "\\" and s.startswith("\n", self.i + 1):
                self.i += 2
            elif c == "#":  # a comment only where a word would start
                end = s.find("\n", self.i)
                self.i = n if end < 0 else end
            else:
                break
        if self.i >= n:
            return ("eof", "")
        c = s[self.i]
        if c == "\n":
            self.i += 1
            self._read_heredocs()
            return ("nl", "")
        if c in "<>" and s.startswith("(", self.i + 1):
            return ("word", self.word())  # process substitution
        if c in ";&|()<>":
            for op in _OPERATORS:
                if s.startswith(op, self.i):
                    self.i += len(op)
                    return ("op", op)
        start = self.i
        word = self.word()
        if self.i < n and s[self.i] in "<>" and word.plain and (
                word.text.isdigit() or (word.text.startswith("{") and word.text.endswith("}"))):
            return ("fd", word.text)
        if self.i == start:  # nothing readable here: step over it rather than loop
            self.i += 1
        return ("word", word)

    def _read_heredocs(self) -> None:
        s = self.s
        for redirect in self.pending:
            delimiter = redirect.delimiter.text if redirect.delimiter is not None else ""
            lines: list[str] = []
            while self.i < self.n:
                end = s.find("\n", self.i)
                end = self.n if end < 0 else end
                line = s[self.i:end]
                self.i = min(end + 1, self.n)
                if (line.lstrip("\t") if redirect.strip_tabs else line) == delimiter:
                    break
                lines.append(line)
            body = "\n".join(lines) + ("\n" if lines else "")
            redirect.body = body
            if redirect.delimiter is not None and redirect.delimiter.plain and ("$" in body or "`" in body):
                redirect.body_subs = parse_substitutions(body, self.budget)
        self.pending = []

    def _substitution(self, i: int) -> Script:
        """Parse `$( ... )` (or `<( ... )`) whose content starts at `i`; `self.i` ends after the `)`."""
        self.budget.enter()
        saved_peek, saved_pending = self.peeked, self.pending
        self.peeked, self.pending = None, []
        self.i = i
        script = self.script(frozenset({")"}))
        kind, value = self.next()
        if (kind, value) != ("op", ")"):
            raise ShellSyntaxError("unclosed $(")
        self.peeked, self.pending = saved_peek, saved_pending + self.pending
        self.budget.leave()
        return script

    def _nested(self, text: str) -> Script:
        self.budget.enter()
        script = parse(text, self.budget)
        self.budget.leave()
        return script

    def _nested_substitutions(self, text: str) -> list[Script]:
        return parse_substitutions(text, self.budget)

    # -- the grammar ----------------------------------------------------------------------------------
    def _closes(self, token: tuple[str, object], closers: frozenset[str]) -> bool:
        kind, value = token
        if kind == "op":
            return value in closers
        return kind == "word" and isinstance(value, Word) and value.plain and value.text in closers

    def script(self, closers: frozenset[str]) -> Script:
        """Lists up to the end of the text or one of `closers` (an operator, or a word at command position)."""
        items: list[tuple[AndOr, str]] = []
        while True:
            token = self.peek()
            kind, value = token
            if kind == "eof" or self._closes(token, closers):
                break
            if kind == "nl" or (kind == "op" and value in (";", "&", ")", ";;", ";&", ";;&", "|", "||", "&&", "|&")):
                self.next()  # an empty statement, or a stray closer the shell would reject: read on
                continue
            before = self.i
            andor = self._and_or(closers)
            if self.i == before and self.peeked == token:  # nothing read: step over the token, never loop
                self.next()
            kind, value = self.peek()
            terminator = ""
            if kind == "nl" or (kind == "op" and value in (";", "&")):
                self.next()
                terminator = "\n" if kind == "nl" else str(value)
            items.append((andor, terminator))
        return Script(items)

    def _and_or(self, closers: frozenset[str]) -> AndOr:
        pipelines = [self._pipeline(closers)]
        ops: list[str] = []
        while True:
            kind, value = self.peek()
            if kind != "op" or value not in ("&&", "||"):
                return AndOr(pipelines, ops)
            self.next()
            while self.peek()[0] == "nl":
                self.next()
            ops.append(str(value))
            pipelines.append(self._pipeline(closers))

    def _pipeline(self, closers: frozenset[str]) -> Pipeline:
        commands = [self._command(closers)]
        while True:
            kind, value = self.peek()
            if kind != "op" or value not in ("|", "|&"):
                return Pipeline(commands)
            self.next()
            while self.peek()[0] == "nl":
                self.next()
            commands.append(self._command(closers))

    def _command(self, closers: frozenset[str]) -> Command:
        command = Command()
        while True:
            token = self.peek()
            kind, value = token
            if self._closes(token, closers):
                return command
            keyword = value.text if kind == "word" and isinstance(value, Word) and value.plain else None
            if keyword in _PREFIXES or keyword in _STRAY:  # `!`, or a keyword out of place: read past it
                self.next()
                continue
            break
        if (kind, value) == ("op", "("):
            self.next()
            if self.s.startswith("(", self.i):  # `(( arithmetic ))`: `>` there is a comparison
                start, self.i = self.i - 1, self._balanced(self.i - 1)
                command.inert = True
                command.words.append(Word("((", "((", self._arithmetic(start, self.i), False))
                return command
            command.kind = "subshell"
            command.clauses.append((None, self._nested_list(frozenset({")"}), ")")))
        elif keyword in _COMPOUND:
            self.next()
            self._compound(command, keyword)
            if keyword == "function":
                return command
        self._words_and_redirects(command)
        return command

    def _nested_list(self, closers: frozenset[str], closer: str | None) -> Script:
        """A list up to one of `closers`, then `closer` consumed (when it is there)."""
        self.budget.enter()
        script = self.script(closers)
        self.budget.leave()
        if closer is not None and self._closes(self.peek(), frozenset({closer})):
            self.next()
        return script

    def _compound(self, command: Command, keyword: str) -> None:
        """The rest of a compound command after its first keyword."""
        if keyword == "{":
            command.kind = "group"
            command.clauses.append((None, self._nested_list(frozenset({"}"}), "}")))
        elif keyword == "if":
            command.kind = "if"
            while True:
                condition = self._nested_list(frozenset({"then"}), "then")
                body = self._nested_list(frozenset({"elif", "else", "fi"}), None)
                command.clauses.append((condition, body))
                kind, value = self.next()
                word = value.text if isinstance(value, Word) else ""
                if word == "else":
                    command.clauses.append((None, self._nested_list(frozenset({"fi"}), "fi")))
                if word != "elif":
                    return
        elif keyword in ("while", "until"):
            command.kind = "loop"
            condition = self._nested_list(frozenset({"do"}), "do")
            command.clauses.append((condition, self._nested_list(frozenset({"done"}), "done")))
        elif keyword in ("for", "select"):
            self._for(command)
        elif keyword == "case":
            self._case(command)
        elif keyword == "[[":  # a test: `<`, `>`, `&&` inside are comparisons, not redirections or lists
            command.inert = True
            while True:
                kind, value = self.next()
                if kind == "eof" or (kind == "word" and isinstance(value, Word) and value.text == "]]"):
                    return
                if kind == "word" and isinstance(value, Word):
                    command.words.append(value)
        elif keyword == "function" and self.peek()[0] == "word":
            self.next()  # its name; the body follows as a command

    def _for(self, command: Command) -> None:
        """`for NAME [in WORDS]; do LIST; done` or `for (( ...; ...; ... )); do LIST; done`: the loop's
        `words` are its header (NAME, `in`, WORDS), read by the analysis for the values NAME takes."""
        command.kind = "loop"
        if self.peek() == ("op", "("):
            self.next()
            start, self.i = self.i - 1, self._balanced(self.i - 1)
            command.words.append(Word("((", "((", self._arithmetic(start, self.i), False))
        while self.peek()[0] == "word" and not self._closes(self.peek(), frozenset({"do"})):
            value = self.next()[1]
            if isinstance(value, Word):
                command.words.append(value)
        while self.peek()[0] == "nl" or self.peek() in (("op", ";"), ("op", "&")):
            self.next()
        if self._closes(self.peek(), frozenset({"do"})):
            self.next()
        command.clauses.append((None, self._nested_list(frozenset({"done"}), "done")))

    def _case(self, command: Command) -> None:
        command.kind = "case"
        subject = Command()
        subject.inert = True
        while self.peek()[0] == "word":  # the subject and `in`
            kind, value = self.next()
            if isinstance(value, Word) and value.plain and value.text == "in":
                break
            if isinstance(value, Word):
                subject.words.append(value)
        command.clauses.append((None, Script([(AndOr([Pipeline([subject])], []), "")])))
        items = frozenset({";;", ";&", ";;&", "esac"})
        while True:
            kind, value = self.peek()
            if kind == "eof":
                return
            if kind == "nl" or (kind == "op" and value in (";;", ";&", ";;&", ";")):
                self.next()
                continue
            if kind == "word" and isinstance(value, Word) and value.plain and value.text == "esac":
                self.next()
                return
            if (kind, value) == ("op", "("):
                self.next()
            while True:  # the patterns, up to `)`
                kind, value = self.next()
                if kind == "eof" or (kind, value) == ("op", ")"):
                    break
            command.clauses.append((None, self._nested_list(items, None)))

    def _words_and_redirects(self, command: Command) -> None:
        fd: str | None = None
        while True:
            takes_words = not command.inert and command.kind == "simple"
            if self.peeked is None and takes_words and not self.pending:
                # A plain word after blanks (words.PLAIN_WORD), read in one step: most arguments look like this.
                fast = PLAIN_WORD.match(self.s, self.i)
                if fast is not None:
                    self.i = fast.end()
                    command.words.append(Word(fast.group(1), fast.group(1), [], True))
                    continue
            kind, value = self.peek()
            if kind == "word" and isinstance(value, Word):
                if not takes_words:
                    return
                self.next()
                command.words.append(value)
            elif kind == "fd":
                self.next()
                fd = str(value)
            elif kind == "op" and value in REDIRECTIONS:
                self.next()
                self._redirect(command, str(value), fd)
                fd = None
            elif kind == "op" and value == "(" and len(command.words) == 1 and command.kind == "simple":
                self.next()  # NAME ( ): a function definition; its body follows as commands
                if self.peek() == ("op", ")"):
                    self.next()
                command.words = []
                return
            else:
                return

    def _redirect(self, command: Command, op: str, fd: str | None) -> None:
        kind, value = self.peek()
        target = value if kind == "word" and isinstance(value, Word) else None
        if target is not None:
            self.next()
        redirect = Redirect(op, fd, target)
        if op in ("<<", "<<-"):
            redirect.delimiter = target
            redirect.target = None
            self.pending.append(redirect)
        elif op == "<<<" and target is not None:
            redirect.body = target.text + "\n"
        command.redirects.append(redirect)
