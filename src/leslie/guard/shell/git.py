"""git commands that write the working tree, for the write guard's command table.

Pathspecs (`git checkout -- PATH`, `git restore`, `git rm`, `git stash push -- PATH`, `git clean PATH`)
are GIT targets: judged as removals, except that a pathspec holding the whole `.leslie/` (`.`, the
repository) asks git what would change (see `leslie.guard.git_rules`), as do the whole-tree commands without a
pathspec (`git stash`, `git reset --hard`, `git checkout -f`, `git clean`). `-C DIR` is followed.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from leslie.guard.shell.calls import GIT, REMOVE, Call
from leslie.guard.shell.options import getopt, has, literal_word, tail, values
from leslie.guard.shell.words import Word

_PATCH_FILE = re.compile(r"^(?:\+\+\+|---) +(\S+)", re.MULTILINE)


def patch_headers(call: Call, text: str | None, strip: int | None) -> None:
    """The files a unified diff in `text` patches (`+++`/`---` lines, `strip` leading parts removed; None:
    every possible strip), relative to where `call` runs."""
    if not text:
        return
    paths = [m.group(1) for m in _PATCH_FILE.finditer(text) if m.group(1) != "/dev/null"]
    for path in paths:
        parts = path.split("/")
        for cut in ([strip] if strip is not None else range(len(parts))):
            kept = "/".join(parts[cut:])
            if kept:
                call.write(literal_word(kept))


def git(call: Call, _name: str, args: list[Word]) -> None:
    """git commands that write the working tree: pathspecs are GIT targets; none, a whole-tree check."""
    i = 0
    while i < len(args) and args[i].text.startswith("-"):
        text = args[i].text
        if text == "-C" and i + 1 < len(args):
            call = call.inside(args[i + 1])
            i += 2
        elif text in ("-c", "--git-dir", "--work-tree", "--namespace", "--config-env") and i + 1 < len(args):
            i += 2
        else:
            i += 1
    if i >= len(args):
        return
    sub, rest = args[i].text, args[i + 1:]
    handler = _GIT.get(sub)
    if handler is not None:
        shown = " ".join(["git", *(w.text for w in args)])
        handler(call, shown if len(shown) <= 80 else shown[:77] + "...", rest)


def _pathspecs(call: Call, words: list[Word], kind: str = GIT) -> None:
    """git pathspecs, magic included: `:/path` (from the top), `:(glob)path`; exclusions write nothing."""
    for word in words:
        text = word.text
        if text.startswith((":!", ":^", ":(exclude)", ":(top,exclude)")):
            continue
        if text.startswith(":/"):  # relative to the top of the working tree
            call.at_top().write(tail(word, 2) if len(text) > 2 else literal_word("."), kind)
        elif text.startswith(":(") and text.find(")") > 0:
            call.write(tail(word, text.find(")") + 1), kind)
        else:
            call.write(word, kind)


def _git_checkout(call: Call, shown: str, args: list[Word]) -> None:
    operands, options = getopt(args, "bBt", frozenset({"--orphan", "--conflict", "--pathspec-from-file"}))
    dashdash = any(w.text == "--" for w in args)
    paths = operands[1:] if values(options, "-b", "-B", "--orphan") and not dashdash else operands
    if paths:
        _pathspecs(call, paths)
    elif has(options, "-f", "--force"):
        call.tree(shown)


def _git_switch(call: Call, shown: str, args: list[Word]) -> None:
    _operands, options = getopt(args, "cC", frozenset({"--orphan", "--conflict"}))
    if has(options, "-f", "--force", "--discard-changes"):
        call.tree(shown)


def _git_restore(call: Call, _shown: str, args: list[Word]) -> None:
    operands, options = getopt(args, "s", frozenset({"--source", "--conflict", "--pathspec-from-file"}))
    if has(options, "-S", "--staged") and not has(options, "-W", "--worktree"):
        return  # only the index
    _pathspecs(call, operands)


def _git_rm(call: Call, _shown: str, args: list[Word]) -> None:
    operands, options = getopt(args, "", frozenset({"--pathspec-from-file"}))
    if not has(options, "--cached"):
        _pathspecs(call, operands, REMOVE)


def _git_mv(call: Call, _shown: str, args: list[Word]) -> None:
    operands, _ = getopt(args)
    for word in operands[:-1]:
        call.write(word, REMOVE)
    for word in operands[-1:]:
        call.write(word)


def _git_stash(call: Call, shown: str, args: list[Word]) -> None:
    sub = args[0].text if args and not args[0].text.startswith("-") else "push"
    rest = args[1:] if args and not args[0].text.startswith("-") else args
    if sub not in ("push", "save"):
        return  # list, show, pop, apply...: nothing visible to check here
    operands, options = getopt(rest, "m", frozenset({"--message", "--pathspec-from-file"}))
    if operands and sub == "push":
        _pathspecs(call, operands)
    else:
        call.tree(shown, untracked=has(options, "-u", "--include-untracked", "-a", "--all"),
                  ignored=has(options, "-a", "--all"))


def _git_reset(call: Call, shown: str, args: list[Word]) -> None:
    if any(w.text == "--hard" for w in args):
        call.tree(shown)


def _git_clean(call: Call, shown: str, args: list[Word]) -> None:
    operands, options = getopt(args, "e", frozenset({"--exclude"}))
    if has(options, "-n", "--dry-run"):
        return
    kept = ["-d"] if has(options, "-d") else []
    kept += [flag for flag in ("-x", "-X") if has(options, flag)]
    for pattern in values(options, "-e", "--exclude"):
        kept += ["-e", pattern.text]
    if operands:
        _pathspecs(call, operands, REMOVE)
    call.tree(shown, clean=kept + ["--"] + [w.text for w in operands])


def _git_apply(call: Call, _shown: str, args: list[Word]) -> None:
    _operands, options = getopt(args, "p", frozenset({"--directory", "--exclude", "--include"}))
    if has(options, "--check", "--stat", "--numstat", "--summary", "--cached"):
        return
    strip = next((v.text for v in values(options, "-p")), "1")
    operands = getopt(args, "p", frozenset({"--directory", "--exclude", "--include"}))[0]
    for text in [call.read(word) for word in operands] or [call.input_text()]:
        patch_headers(call.at_top(), text, int(strip) if strip.isdigit() else 1)


def _git_clone(call: Call, _shown: str, args: list[Word]) -> None:
    operands, _ = getopt(args, "bocujn", frozenset({"--branch", "--origin", "--config", "--depth", "--reference",
                                                     "--separate-git-dir", "--upload-pack", "--template",
                                                     "--jobs", "--filter"}))
    for word in operands[1:2]:
        call.write(word)


def _git_worktree(call: Call, _shown: str, args: list[Word]) -> None:
    if not args:
        return
    operands, _ = getopt(args[1:], "bB", frozenset({"--reason"}))
    if args[0].text == "add" and operands:
        call.write(operands[0])
    elif args[0].text == "remove" and operands:
        call.write(operands[0], REMOVE)


def _git_init(call: Call, _shown: str, args: list[Word]) -> None:
    operands, _ = getopt(args, "b", frozenset({"--template", "--separate-git-dir", "--initial-branch"}))
    for word in operands[:1]:
        call.write(word)


_GIT: dict[str, Callable[[Call, str, list[Word]], None]] = {
    "checkout": _git_checkout, "switch": _git_switch, "restore": _git_restore, "rm": _git_rm, "mv": _git_mv,
    "stash": _git_stash, "reset": _git_reset, "clean": _git_clean, "apply": _git_apply, "clone": _git_clone,
    "worktree": _git_worktree, "init": _git_init,
}
