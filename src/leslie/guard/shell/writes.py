"""Where a shell command visibly writes: the paths, each resolved in every directory it may run in.

`write_targets` walks the tree of `leslie.guard.shell.syntax` as bash would run it, without running anything:

- the working directory is a *set* of directories it may be: `cd x` that may fail (`x` does not exist yet,
  `cd x || true`, `cd x; ...`) keeps both; `cd -`, `pushd`/`popd` follow the directory stack; subshells,
  pipeline stages, `&` and `$( )` keep their changes to themselves; `&&`, `||` and `exit` are followed;
- words are expanded where their value is known (`$PWD`, `${PWD}`, `$OLDPWD`, `$HOME`, `~`, `~user`,
  variables assigned earlier on the line, brace expansion); anything else is a marker the guard reads as
  "unknown" (a glob, a variable, a command's output);
- wrappers are stripped with their options (`sudo -u bob`, `nice -n 5`, `timeout -s KILL 5`, `env -C dir`,
  `xargs -I{}`...); `bash -lc '...'`, `eval "..."`, a script fed to a shell (here-document, here-string,
  `echo ... | sh`) and `trap '...'` are read as the commands they run;
- each command's own writes come from `leslie.guard.shell.commands` (redirections are read here).

The result is a list of `Target`s (`WRITE`: the path is created or changed, or a folder is written into;
`REMOVE`: the path and everything below it may be deleted or replaced; `GIT`: a git pathspec, which the
guard treats as `REMOVE` except that a pathspec holding all of `.leslie/` asks git what would change;
`SWEEP`: files anywhere below the path are changed, `find . -name '*.md' -delete`) and `TreeCheck`s (a git
command that rewrites the whole working tree).
"""

from __future__ import annotations

import os

from leslie.guard.paths import normalize
from leslie.guard.shell.calls import (
    MAX_DIRS,
    NO_INPUT,
    UNKNOWN_DIR,
    WRITE,
    Call,
    Input,
    State,
    Target,
    TreeCheck,
    below,
    find_starts,
    merge,
)
from leslie.guard.shell.syntax import AndOr, Command, Script, parse
from leslie.guard.shell.words import (
    ASSIGNMENT,
    BRACE_CLOSE,
    BRACE_COMMA,
    BRACE_OPEN,
    STAR,
    UNKNOWN,
    VAR_CLOSE,
    VAR_OPEN,
    Budget,
    Word,
)
from leslie.guard.shell.wrappers import strip_wrappers

MAX_EXPANSIONS = 64  # values of one word (variables times brace alternatives)
_SHELLS = frozenset({"sh", "bash", "zsh", "dash", "ksh", "mksh", "ash", "fish", "yash", "posh"})
_DECLARE = frozenset({"export", "declare", "typeset", "local", "readonly"})


def write_targets(command: str, cwd: str, budget: Budget, home: str | None = None) -> tuple[list[Target],
                                                                                               list[TreeCheck]]:
    """The paths `command` visibly writes when run in `cwd`, and the git commands that rewrite a tree."""
    walker = Walker(budget, home if home is not None else os.environ.get("HOME", "/"))
    walker.script(parse(command, budget), State((cwd,)))
    return walker.targets, walker.trees


class Walker:
    """Runs a parsed command line in imagination, collecting what it writes."""

    def __init__(self, budget: Budget, home: str) -> None:
        self.budget = budget
        self.home = home
        self.targets: list[Target] = []
        self.trees: list[TreeCheck] = []

    # -- lists ----------------------------------------------------------------------------------------
    def script(self, script: Script, state: State) -> State:
        for andor, terminator in script.items:
            if terminator == "&":
                self.and_or(andor, state.copy())  # in the background: a subshell
            else:
                state = self.and_or(andor, state)
        return state

    def nested(self, text: str, state: State) -> State:
        """Read `text` as a script (a `bash -c` string, `eval`, a here-document fed to a shell)."""
        self.budget.enter()
        try:
            return self.script(parse(text, self.budget), state)
        finally:
            self.budget.leave()

    def and_or(self, andor: AndOr, state: State) -> State:
        ok, fail = self.pipeline(andor.pipelines[0].commands, state)
        for op, pipeline in zip(andor.ops, andor.pipelines[1:], strict=True):
            start = ok if op == "&&" else fail
            if start is None:
                continue
            ok2, fail2 = self.pipeline(pipeline.commands, start)
            ok, fail = (ok2, merge(fail, fail2)) if op == "&&" else (merge(ok, ok2), fail2)
        return merge(ok, fail) or state

    def pipeline(self, commands: list[Command], state: State) -> tuple[State | None, State | None]:
        if len(commands) == 1:
            return self.command(commands[0], state, NO_INPUT)
        previous = NO_INPUT
        for command in commands:  # each stage is a subshell
            self.command(command, state.copy(), previous)
            previous = _stdout(command)
        return state, state

    # -- one command ----------------------------------------------------------------------------------
    def command(self, command: Command, state: State, piped: Input) -> tuple[State | None, State | None]:
        stdin = piped
        for word in command.words:
            self.substitutions(word, state)
        for redirect in command.redirects:
            if redirect.target is not None:
                self.substitutions(redirect.target, state)
            for sub in redirect.body_subs:
                self.script(sub, state.copy())
            if redirect.body is not None:
                stdin = Input(redirect.body)
            elif redirect.op in ("<", "<&", "<>") and (redirect.fd or "0") == "0":
                stdin = Input(file=redirect.target if redirect.op == "<" else None)
            if redirect.target is not None and _writes(redirect.op, redirect.target):
                self.write(redirect.target, state)
        if command.kind != "simple":
            return self.compound(command, state)
        if command.inert or not command.words:
            return state, state
        return self.simple(command.words, state, stdin)

    def compound(self, command: Command, state: State) -> tuple[State | None, State | None]:
        """`( )` keeps its changes; `{ }` runs here; `if` and loops may take any of their paths."""
        if command.kind == "subshell":
            self.script(command.clauses[0][1], state.copy())
            return state, state
        if command.kind == "group":
            after = self.script(command.clauses[0][1], state)
            return after, after
        results: list[State] = []
        if command.kind == "if":
            here = state
            for condition, body in command.clauses:
                if condition is not None:
                    here = self.script(condition, here.copy())
                results.append(self.script(body, here.copy()))
            if command.clauses[-1][0] is not None:  # no `else`: the conditions may all fail
                results.append(here)
        elif command.kind == "loop":  # the body may run no time, once, or again after itself
            condition, body = command.clauses[0]
            here = self.script(condition, state.copy()) if condition is not None else state.copy()
            header = command.words
            if len(header) >= 2 and ASSIGNMENT.match(header[0].text + "=") and header[1].text == "in":
                values = [v for word in header[2:] for v in self.expand(word, state)]
                here.variables[header[0].text] = tuple(values[:MAX_EXPANSIONS]) or ("",)
            elif header and header[0].text != "((":
                here.variables[header[0].text] = (UNKNOWN,)  # `for NAME; do`: the arguments
            again = self.script(body, here.copy())
            results += [here, self.script(condition, again) if condition is not None else again]
        else:  # case: any one branch, or none
            results.append(state)
            for _none, branch in command.clauses:
                results.append(self.script(branch, state.copy()))
        merged: State | None = None
        for result in results:
            merged = merge(merged, result)
        return merged, merged

    def substitutions(self, word: Word, state: State) -> None:
        for sub in word.subs:
            self.budget.enter()
            self.script(sub, state.copy())
            self.budget.leave()

    def simple(self, words: list[Word], state: State, stdin: Input) -> tuple[State | None, State | None]:
        """A simple command: assignments, wrappers, then the command itself."""
        index = 0
        while index < len(words) and ASSIGNMENT.match(words[index].text):
            index += 1
        if index == len(words):  # only assignments: they stay for the rest of the line
            for word in words:
                self.assign(word, state)
            return state, state
        unwrapped = strip_wrappers(words[index:])
        for log in unwrapped.logs:
            self.write(log, state)
        if unwrapped.split is not None:
            self.nested(unwrapped.split, state.copy())
        here = state
        if unwrapped.chdir is not None:  # for this command only
            here = State(self.directories(unwrapped.chdir, state), state.old, state.stack, dict(state.variables))
        if unwrapped.xargs is not None:
            for extended in _xargs(unwrapped.words, unwrapped.xargs, stdin.items):
                self.run(extended, here.copy(), NO_INPUT)
            return state, state
        if here is not state:
            self.run(unwrapped.words, here, stdin)
            return state, state
        return self.run(unwrapped.words, state, stdin)

    def run(self, words: list[Word], state: State, stdin: Input) -> tuple[State | None, State | None]:
        """The command `words` (wrappers removed) in `state`."""
        if not words:
            return state, state
        name = os.path.basename(words[0].text)
        args = words[1:]
        if name in ("cd", "pushd", "popd"):
            return self.change_directory(name, args, state)
        if name in ("exit", "return", "logout"):
            return None, None
        if name in _DECLARE:
            for word in args:
                if ASSIGNMENT.match(word.text):
                    self.assign(word, state)
            return state, state
        if name == "eval":
            after = self.nested(" ".join(w.text for w in args), state)
            return after, after
        if name in _SHELLS:
            self.shell(args, state, stdin.text)
        elif name in ("trap", "su", "runuser"):
            script = _option_value(args, "-c") if name != "trap" else (args[0].text if args else None)
            if script is not None:
                self.nested(script, state.copy())
        else:
            from leslie.guard.shell.commands import HANDLERS

            handler = HANDLERS.get(name)
            if handler is not None:
                handler(Call(self, state, stdin), name, args)
        return state, state

    def assign(self, word: Word, state: State) -> None:
        match = ASSIGNMENT.match(word.text)
        if match is None:
            return
        name, end = match.group(1), match.end()
        value = Word(word.text[end:], word.pattern[end:], [], False)
        if value.pattern.startswith("~") and (len(value.pattern) == 1 or value.pattern[1] == "/"):
            value.pattern = VAR_OPEN + "HOME" + VAR_CLOSE + value.pattern[1:]
        if word.text[end - 2] == "+":  # NAME+=value: anything
            state.variables[name] = (UNKNOWN,)
        else:
            state.variables[name] = tuple(self.expand(value, state, braces=False))

    # -- wrappers and shells --------------------------------------------------------------------------
    def shell(self, args: list[Word], state: State, stdin: str | None) -> None:
        """`bash [options] -c STRING`, or a shell reading its script from stdin."""
        command_mode = False
        i = 0
        while i < len(args):
            text = args[i].text
            if text in ("--", "-"):
                i += 1
                break
            if text.startswith("--"):
                i += 2 if text in ("--rcfile", "--init-file") else 1
                continue
            if not text.startswith(("-", "+")) or len(text) < 2:
                break
            letters = text[1:]
            command_mode = command_mode or "c" in letters
            i += 1
            if "o" in letters or "O" in letters:
                i += 1  # -o pipefail
        if command_mode:
            if i < len(args):
                self.nested(args[i].text, state.copy())
        elif i >= len(args) and stdin is not None:
            self.nested(stdin, state.copy())

    def change_directory(self, name: str, args: list[Word], state: State) -> tuple[State | None, State | None]:
        operands = [w for w in args if not (w.text.startswith("-") and w.text != "-")]
        if name == "popd":
            if not state.stack:
                return state, state
            return State(state.stack[0], state.dirs, state.stack[1:], state.variables), state
        if name == "pushd" and not operands:
            if not state.stack:
                return state, state
            return State(state.stack[0], state.dirs, (state.dirs, *state.stack[1:]), state.variables), state
        if not operands:
            dirs: tuple[str, ...] = (state.variables.get("HOME", (self.home,))[0],)
        elif operands[0].text == "-":
            dirs = state.old or state.dirs
        elif name == "pushd" and operands[0].text[:1] in "+-":
            dirs = (UNKNOWN_DIR,)
        else:
            dirs = self.directories(operands[0], state)
        stack = (state.dirs, *state.stack) if name == "pushd" else state.stack
        moved = State(dirs, state.dirs, stack, state.variables)
        if all(_exists(d) for d in dirs):
            return moved, None  # it will succeed: the old directory is gone from the possibilities
        return moved, state

    # -- paths ----------------------------------------------------------------------------------------
    def expand(self, word: Word, state: State, braces: bool = True) -> list[str]:
        """The patterns `word` may stand for: known variables substituted, braces expanded."""
        values = [word.pattern]
        if VAR_OPEN in word.pattern:
            values = self._variables(word.pattern, state)
        if braces and any(BRACE_OPEN in v for v in values):
            values = [alt for v in values for alt in _braces(v)][:MAX_EXPANSIONS]
        return [v.replace(BRACE_OPEN, "{").replace(BRACE_COMMA, ",").replace(BRACE_CLOSE, "}") for v in values]

    def _variables(self, pattern: str, state: State) -> list[str]:
        results = [""]
        for index, part in enumerate(pattern.split(VAR_OPEN)):
            if index == 0:
                results = [part]
                continue
            name, _, rest = part.partition(VAR_CLOSE)
            values: tuple[str, ...]
            if name == "PWD":
                values = state.dirs
            elif name == "OLDPWD":
                values = state.old or (UNKNOWN,)
            elif name in state.variables:
                values = state.variables[name]
            elif name == "HOME":
                values = (self.home,)
            elif name.startswith("~"):
                expanded = os.path.expanduser(name)
                values = (expanded,) if expanded != name else (UNKNOWN,)
            else:
                values = (UNKNOWN,)
            results = [r + v + rest for r in results for v in values][:MAX_EXPANSIONS]
        return results

    def directories(self, word: Word, state: State) -> tuple[str, ...]:
        """The directories a `cd`-like operand may lead to, from every directory the shell may be in."""
        found = tuple(dict.fromkeys(normalize(p) for p in self.absolute(word, state)))
        return found if len(found) <= MAX_DIRS else (*found[:MAX_DIRS - 1], UNKNOWN_DIR)

    def absolute(self, word: Word, state: State) -> list[str]:
        """Every absolute pattern `word` may name, joined to every directory it may be relative to."""
        paths: list[str] = []
        for pattern in self.expand(word, state):
            if pattern.startswith("/"):
                paths.append(pattern)
            elif pattern.startswith(UNKNOWN):
                paths.append("/" + pattern)
            else:
                paths.extend(d.rstrip("/") + "/" + pattern for d in state.dirs)
        return paths

    def write(self, word: Word, state: State, kind: str = WRITE) -> None:
        """Record that `word` (a path) is written."""
        for path in self.absolute(word, state):
            self.targets.append(Target(kind, path, word.text))

    def write_dirs(self, dirs: tuple[str, ...], shown: str) -> None:
        """Record that a command writes into the directories `dirs` (files it names itself: `curl -O`)."""
        for directory in dirs:
            self.targets.append(Target(WRITE, directory, shown))


def _option_value(args: list[Word], option: str) -> str | None:
    for i, word in enumerate(args[:-1]):
        if word.text == option:
            return args[i + 1].text
    return None


def _writes(op: str, target: Word) -> bool:
    if op in (">", ">>", ">|", "&>", "&>>", "<>"):
        return True
    return op == ">&" and not (target.text.isdigit() or target.text == "-")


def _stdout(command: Command) -> Input:
    """What a pipeline stage visibly prints, for the next: `echo`/`printf` words, the here-document `cat`
    prints, the paths `find` prints (below its start paths)."""
    if command.kind != "simple" or not command.words:
        return NO_INPUT
    name = command.words[0].text
    if name in ("echo", "printf"):
        words = [w for w in command.words[1:] if w.text not in ("-n", "-e", "-E")]
        return Input(" ".join(w.text for w in words) + "\n", words)
    if name == "cat" and len(command.words) == 1:
        bodies = [r.body for r in command.redirects if r.body is not None]
        return Input(bodies[-1]) if bodies else NO_INPUT
    if name == "find":
        return Input(items=[below(start) for start in find_starts(command.words[1:])])
    return NO_INPUT


def _xargs(words: list[Word], replace: str, items: list[Word] | None) -> list[list[Word]]:
    """The commands `xargs` runs: `words` with the items it reads (when visible) appended, or put in place
    of the `-I` replacement string, one command per item."""
    if not items or not words:
        return [words]
    if not replace:
        return [words + items[:MAX_EXPANSIONS]]
    marked = replace.translate({ord("{"): BRACE_OPEN, ord("}"): BRACE_CLOSE, ord(","): BRACE_COMMA})
    return [[Word(w.text.replace(replace, item.text),
                  w.pattern.replace(replace, item.pattern).replace(marked, item.pattern), w.subs, False)
             if replace in w.text else w for w in words] for item in items[:MAX_DIRS]]


def _exists(directory: str) -> bool:
    return not any(c in directory for c in "\x00\x03\x04\x05") and os.path.isdir(directory)


def _braces(pattern: str, depth: int = 0) -> list[str]:
    """Brace expansion of the unquoted `{a,b}` groups in `pattern` (a `{1..9}` sequence becomes a glob)."""
    start = pattern.find(BRACE_OPEN)
    while start >= 0:
        level, commas, end = 0, [], -1
        for j in range(start, len(pattern)):
            c = pattern[j]
            if c == BRACE_OPEN:
                level += 1
            elif c == BRACE_CLOSE:
                level -= 1
                if level == 0:
                    end = j
                    break
            elif c == BRACE_COMMA and level == 1:
                commas.append(j)
        if end < 0:
            return [pattern]
        head, body, tail = pattern[:start], pattern[start + 1:end], pattern[end + 1:]
        if commas and depth < 8:
            cuts = [start, *commas, end]
            alternatives = [pattern[cuts[k] + 1:cuts[k + 1]] for k in range(len(cuts) - 1)]
            out: list[str] = []
            for alternative in alternatives:
                out.extend(_braces(head + alternative + tail, depth + 1))
                if len(out) >= MAX_EXPANSIONS:
                    break
            return out[:MAX_EXPANSIONS]
        if ".." in body:
            return _braces(head + STAR + tail, depth + 1)
        start = pattern.find(BRACE_OPEN, end + 1)
    return [pattern]

