"""Command-line options as tools read them (GNU getopt), for the write guard's command table."""

from __future__ import annotations

from leslie.guard.shell.words import Word


def getopt(args: list[Word], short: str = "", long: frozenset[str] = frozenset(), *,
           permute: bool = True) -> tuple[list[Word], list[tuple[str, Word | None]]]:
    """Operands and options `(name, value)` of a GNU-style command line. `short`: letters that take a value
    (attached `-ofile` or the next argument); `long`: long options that take the next argument (`--x=v`
    always works). `permute`: options may follow operands (GNU); otherwise the first operand ends them."""
    operands: list[Word] = []
    options: list[tuple[str, Word | None]] = []
    i = 0
    while i < len(args):
        word = args[i]
        text = word.text
        i += 1
        if text == "--":
            operands.extend(args[i:])
            break
        if not text.startswith("-") or text == "-":
            operands.append(word)
            if not permute:
                operands.extend(args[i:])
                break
            continue
        if text.startswith("--"):
            key, eq, _ = text.partition("=")
            if eq:
                options.append((key, tail(word, len(key) + 1)))
            elif key in long and i < len(args):
                options.append((key, args[i]))
                i += 1
            else:
                options.append((key, None))
            continue
        for k in range(1, len(text)):
            letter = "-" + text[k]
            if text[k] in short:
                if k + 1 < len(text):
                    options.append((letter, tail(word, k + 1)))
                elif i < len(args):
                    options.append((letter, args[i]))
                    i += 1
                else:
                    options.append((letter, None))
                break
            options.append((letter, None))
    return operands, options


def tail(word: Word, start: int) -> Word:
    """The part of `word` after its first `start` characters (an option's attached value)."""
    return Word(word.text[start:], word.pattern[start:], [], False)


def values(options: list[tuple[str, Word | None]], *names: str) -> list[Word]:
    """The values given to any of the options `names`."""
    return [value for name, value in options if name in names and value is not None]


def folders(options: list[tuple[str, Word | None]], *names: str) -> list[Word | None]:
    """The folders given by these options, or [None] (the current folder) when none is."""
    found: list[Word | None] = list(values(options, *names))
    return found or [None]


def has(options: list[tuple[str, Word | None]], *names: str) -> bool:
    """True when any of the options `names` is given."""
    return any(name in names for name, _ in options)


def literal_word(text: str) -> Word:
    """A word that is exactly `text` (no quoting, no expansion)."""
    return Word(text, text, [], True)
