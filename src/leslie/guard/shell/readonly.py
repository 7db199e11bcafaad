"""Shell commands that cannot write a file: the write guard's second line need not watch them.

The second line stats every protected file at both ends of a shell call (0.3-0.6 s a hook at 10,000
threads, docs/benchmarks.md), so it skips the calls that provably change nothing: a line made only of
programs from a short list of readers, joined by `|`, `&&`, `||` or `;`, with no redirection, no expansion
(`$`, backticks), no subshell or grouping, no here-document, and none of the options with which those programs
do write or run something else (`git diff --output`, `git -c`, `--ext-diff`, `find -delete`/`-exec`...).
Anything else, or anything this reader is unsure of, is watched as before. Deliberately conservative: a
command wrongly called read-only would go unwatched, one wrongly called a writer only costs time.
"""

from __future__ import annotations

import shlex

# Not here on purpose: `uniq IN OUT`, `tree -o`, `file -C`, `sed` (`w`), `awk` (`>`, `system`), `rg --pre`.
READERS = frozenset({"ls", "cat", "head", "tail", "wc", "pwd", "echo", "printf", "true", "grep", "egrep",
                     "fgrep", "stat", "du", "df", "which", "basename", "dirname", "realpath", "readlink", "sort",
                     "cut", "tr", "nl", "diff", "cmp", "md5sum", "sha256sum", "find", "git", "test", "[", "env"})
GIT_READERS = frozenset({"status", "log", "show", "diff", "rev-parse", "branch", "ls-files", "blame",
                         "describe", "shortlog"})
_UNSAFE_TEXT = ("$", "`", ">", "<", "(", ")", "{", "}", "\n", "\r", "\\")
_FIND_ACTIONS = ("-delete", "-exec", "-execdir", "-ok", "-okdir", "-fprint", "-fprint0", "-fprintf", "-fls")
_GIT_WRITING_OPTIONS = ("--output", "-o", "--ext-diff", "-c", "--exec-path", "--git-dir", "--work-tree",
                        "--config-env", "--textconv")
MAX_LENGTH = 4096


def read_only(command: str) -> bool:
    """True only when `command` certainly writes no file (see the module docstring)."""
    if not command.strip() or len(command) > MAX_LENGTH or any(ch in command for ch in _UNSAFE_TEXT):
        return False
    for separator in ("&&", "||", ";", "|"):
        command = command.replace(separator, "\0")
    try:
        commands = [shlex.split(part) for part in command.split("\0")]
    except ValueError:  # an unclosed quote
        return False
    return all(words and _reads_only(words) for words in commands)


def _reads_only(words: list[str]) -> bool:
    name, args = words[0], words[1:]
    if name not in READERS or any(a.startswith("-") and "=" in a and a.split("=")[0] in ("--output",)
                                  for a in args):
        return False
    if name == "env":
        return not args  # `env CMD` runs CMD
    if name == "find":
        return not any(a in _FIND_ACTIONS for a in args)
    if name == "sort":
        return not any(a == "-o" or a.startswith(("-o", "--output")) for a in args)
    if name == "git":
        sub = [a for a in args if not a.startswith("-")]
        return (bool(sub) and sub[0] in GIT_READERS and not any(a.startswith(_GIT_WRITING_OPTIONS) for a in args)
                and not (sub[0] == "branch" and len(sub) > 1))
    return True
