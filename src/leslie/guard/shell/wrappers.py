"""Wrapper commands for the write guard: `sudo -u bob CMD`, `nice -n 5 CMD`, `timeout -s KILL 5 CMD`,
`env -u VAR -C DIR CMD`, `stdbuf -o0 CMD`, `ionice -c 3 CMD`, `xargs -I{} CMD`, `command -p CMD`, `exec -a
NAME CMD`... each with the options that take a value, so the command after them is found."""

from __future__ import annotations

import os

from leslie.guard.shell.words import ASSIGNMENT, Word

# wrapper: (short options that take a value, long options that take a value, positional arguments before
# the command). Options must come before the command: these all stop reading options at the first operand.
_WRAPPERS: dict[str, tuple[str, frozenset[str], int]] = {
    "sudo": ("ugUCDhprtTRc", frozenset({"--user", "--group", "--other-user", "--close-from", "--chdir", "--host",
                                         "--prompt", "--role", "--type", "--command-timeout", "--chroot",
                                         "--login-class"}), 0),
    "doas": ("uC", frozenset(), 0),
    "env": ("uCS", frozenset({"--unset", "--chdir", "--split-string", "--default-signal", "--ignore-signal",
                              "--block-signal"}), 0),
    "nice": ("n", frozenset({"--adjustment"}), 0),
    "timeout": ("sk", frozenset({"--signal", "--kill-after"}), 1),
    "stdbuf": ("ioe", frozenset({"--input", "--output", "--error"}), 0),
    "ionice": ("cnpPu", frozenset({"--class", "--classdata", "--pid", "--pgid", "--uid"}), 0),
    "xargs": ("ILnPsdEa", frozenset({"--replace", "--max-lines", "--max-args", "--max-procs", "--max-chars",
                                       "--delimiter", "--eof", "--arg-file", "--process-slot-var"}), 0),
    "exec": ("a", frozenset(), 0),
    "command": ("", frozenset(), 0),
    "builtin": ("", frozenset(), 0),
    "nohup": ("", frozenset(), 0),
    "time": ("fo", frozenset({"--format", "--output"}), 0),
    "setsid": ("", frozenset(), 0),
    "chronic": ("", frozenset(), 0),
    "unbuffer": ("", frozenset(), 0),
    "nocorrect": ("", frozenset(), 0),
    "noglob": ("", frozenset(), 0),
    "busybox": ("", frozenset(), 0),
    "taskset": ("", frozenset(), 1),
    "chrt": ("", frozenset(), 1),
    "caffeinate": ("tw", frozenset(), 0),
}



class Unwrapped:
    """A command with its wrappers taken off: `words` (the command), `chdir` (a directory a wrapper runs it
    in: `env -C`, `sudo -D`), `split` (a command line `env -S` splits), `logs` (files a wrapper writes:
    `time -o`), `xargs` (None, or the replacement string of `xargs -I`, "" without one)."""

    __slots__ = ("chdir", "logs", "split", "words", "xargs")

    def __init__(self, words: list[Word]) -> None:
        self.words = words
        self.chdir: Word | None = None
        self.split: str | None = None
        self.logs: list[Word] = []
        self.xargs: str | None = None


def strip_wrappers(words: list[Word]) -> Unwrapped:
    """`words` without the wrappers in front of the command, and what those wrappers add."""
    result = Unwrapped(words)
    while words:
        name = os.path.basename(words[0].text)
        if name not in _WRAPPERS:
            break
        if name == "command" and any(w.text in ("-v", "-V") for w in words[1:2]):
            words = []  # only looks the command up
            break
        if name == "xargs":
            result.xargs = result.xargs or ""
        short, long, positional = _WRAPPERS[name]
        i = 1
        while i < len(words):
            text = words[i].text
            if text == "--":
                i += 1
                break
            if name == "env" and ASSIGNMENT.match(text):
                i += 1
                continue
            if not text.startswith("-") or text == "-":
                break
            option, value, i = _take_option(words, i, short, long)
            _wrapper_option(result, name, option, value)
        words = words[i + positional:]
    result.words = words
    return result


def _wrapper_option(result: Unwrapped, name: str, option: str, value: Word | None) -> None:
    if name == "xargs" and (option in ("-I", "--replace") or option.startswith("-i")):
        replace = value.text if option == "-I" and value is not None else option[2:] if option.startswith("-i") else ""
        result.xargs = replace or "{}"
    if value is None:
        return
    if option in ("-C", "--chdir", "-D") and name in ("env", "sudo"):
        result.chdir = value
    elif option in ("-S", "--split-string") and name == "env":
        result.split = value.text
    elif option in ("-o", "--output") and name == "time":
        result.logs.append(value)


def _take_option(words: list[Word], i: int, short: str, long: frozenset[str]) -> tuple[str, Word | None, int]:
    """(option, its value or None, index after it) for the option at `words[i]`."""
    text = words[i].text
    if text.startswith("--"):
        key, eq, _value = text.partition("=")
        if eq:
            return key, Word(text[len(key) + 1:], words[i].pattern[len(key) + 1:], [], False), i + 1
        if key in long and i + 1 < len(words):
            return key, words[i + 1], i + 2
        return key, None, i + 1
    for k in range(1, len(text)):
        if text[k] in short:
            if k + 1 < len(text):
                return "-" + text[k], Word(text[k + 1:], words[i].pattern[k + 1:], [], False), i + 1
            if i + 1 < len(words):
                return "-" + text[k], words[i + 1], i + 2
            return "-" + text[k], None, i + 1
    return text, None, i + 1
