"""What each common command visibly writes, given its arguments (wrappers and redirections are handled by
`leslie.guard.shell.writes`, which calls `HANDLERS[name](call, name, args)`).

Each handler reads the command's options the way the tool does (GNU getopt: `-abc` clusters, `-ovalue`,
`--long=value`, `--`) and reports the paths it writes (`call.write(word, kind)`), the folder it writes files
into (`call.write(None)` for the current one), commands it runs (`find -exec`), and git commands that rewrite
the working tree (`call.tree`). A command missing here writes nothing the guard can see.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable

from leslie.guard.paths import patch_header_paths
from leslie.guard.shell.calls import REMOVE, SWEEP, WRITE, Call, below, find_starts
from leslie.guard.shell.git import git, patch_headers
from leslie.guard.shell.options import folders, getopt, has, literal_word, tail, values
from leslie.guard.shell.words import BRACKET, QUESTION, STAR, UNKNOWN, Word


# -- files and folders --------------------------------------------------------------------------------
def _all_operands(kind: str, short: str = "", long: frozenset[str] = frozenset()) -> Callable[[Call, str,
                                                                                               list[Word]], None]:
    def handler(call: Call, _name: str, args: list[Word]) -> None:
        operands, _options = getopt(args, short, long)
        for word in operands:
            call.write(word, kind)
    return handler


def _mkdir(call: Call, _name: str, args: list[Word]) -> None:
    operands, _ = getopt(args, "mZ", frozenset({"--mode"}))
    for word in operands:
        call.write(word)


def _shred(call: Call, _name: str, args: list[Word]) -> None:
    operands, options = getopt(args, "ns", frozenset({"--iterations", "--size", "--random-source"}))
    for word in operands:
        call.write(word, REMOVE if has(options, "-u", "--remove") else WRITE)


def _modes(call: Call, name: str, args: list[Word]) -> None:
    """chmod/chown/chgrp/chattr: every operand after the mode or owner (`chmod -w f`: `-w` is a mode)."""
    flags = {"-R", "-c", "-f", "-v", "-h", "-H", "-L", "-P", "--"}
    operands = [w for w in args if w.text not in flags and not w.text.startswith("--")]
    reference = any(w.text.startswith("--reference") for w in args)
    for word in operands if reference else operands[1:]:
        call.write(word)


def _dd(call: Call, _name: str, args: list[Word]) -> None:
    for word in args:
        if word.text.startswith("of="):
            call.write(tail(word, 3))


def _copy(call: Call, name: str, args: list[Word]) -> None:
    """cp, mv, install, ln, scp, rsync: the destination (`-t DIR` or the last operand); mv's sources too."""
    short = {"cp": "St", "mv": "St", "ln": "St", "install": "mogSt", "scp": "cFiJlopPSDX",
             "rsync": "efBTM"}.get(name, "")
    long = frozenset({"--suffix", "--target-directory", "--mode", "--owner", "--group", "--strip-program",
                      "--exclude", "--include", "--filter", "--rsh", "--rsync-path", "--temp-dir",
                      "--partial-dir", "--backup-dir", "--chmod", "--chown", "--compare-dest", "--copy-dest",
                      "--link-dest", "--log-file", "--password-file", "--files-from", "--exclude-from",
                      "--include-from", "--max-size", "--min-size", "--timeout", "--bwlimit", "--port"})
    operands, options = getopt(args, short, long)
    if name in ("scp", "rsync"):
        operands = [w for w in operands if not _remote(w.text)]  # host:path is on another machine
    deletes = name == "rsync" and any(o.startswith("--del") for o, _ in options)
    targets = values(options, "-t", "--target-directory")
    if name == "install" and has(options, "-d", "--directory"):
        for word in operands:
            call.write(word)
        return
    sources = operands if targets else operands[:-1]
    if not targets and len(operands) >= 2:
        targets = [operands[-1]]
    elif not targets and name == "ln" and operands:
        call.write(None)  # `ln -s /x/y`: the link is made in the current folder
    for word in targets:
        call.write(word, REMOVE if deletes else WRITE)
        if not has(options, "-T", "--no-target-directory"):
            for source in sources:  # into a folder, each source keeps its name there
                named = _into(word, source, contents=name == "rsync")
                if named is not None:
                    call.write(named)
    if name == "mv" or (name == "rsync" and has(options, "--remove-source-files")):
        for word in sources:
            call.write(word, REMOVE if name == "mv" else WRITE)


def _into(folder: Word, source: Word, *, contents: bool) -> Word | None:
    """`folder/name-of-source`: where `cp source folder/` puts it (None for `.`, `..`, and for an rsync
    source ending in `/`, which copies its contents)."""
    if contents and source.text.endswith("/"):
        return None
    name = source.pattern.rstrip("/").rsplit("/", 1)[-1]
    if name in ("", ".", ".."):
        return None
    return Word(folder.text.rstrip("/") + "/" + source.text.rstrip("/").rsplit("/", 1)[-1],
                folder.pattern.rstrip("/") + "/" + name, [], False)


def _remote(text: str) -> bool:
    head = text.split("/", 1)[0]
    return ":" in head and not text.startswith("/")


def _named_outputs(short: str, long: frozenset[str], outputs: tuple[str, ...]) -> Callable[[Call, str,
                                                                                            list[Word]], None]:
    """A command whose only writes are option values (`sort -o FILE`)."""
    def handler(call: Call, _name: str, args: list[Word]) -> None:
        _operands, options = getopt(args, short, long)
        for word in values(options, *outputs):
            if word.text != "-":
                call.write(word)
    return handler


def _nth_operand(index: int, short: str = "") -> Callable[[Call, str, list[Word]], None]:
    def handler(call: Call, _name: str, args: list[Word]) -> None:
        operands, _ = getopt(args, short)
        if len(operands) > index:
            call.write(operands[index])
    return handler


def _compress(call: Call, _name: str, args: list[Word]) -> None:
    operands, options = getopt(args, "SoTbBDpLM", frozenset({"--suffix", "--output"}))
    if has(options, "-c", "--stdout", "--to-stdout", "-l", "--list", "-t", "--test"):
        return
    for word in values(options, "-o", "--output"):
        call.write(word)
    for word in operands:
        call.write(word)


def _sed(call: Call, _name: str, args: list[Word]) -> None:
    """`sed -i` edits its files in place (`-i.bak`, `-ni`, `--in-place`); `-n`, `-E`, `-s` do not write."""
    in_place, scripted = False, False
    operands: list[Word] = []
    i = 0
    while i < len(args):
        text = args[i].text
        i += 1
        if text == "--":
            operands.extend(args[i:])
            break
        if text.startswith("--"):
            in_place = in_place or text.startswith("--in-place")
            if text in ("--expression", "--file", "--line-length"):
                scripted, i = scripted or text != "--line-length", i + 1
            scripted = scripted or text.startswith(("--expression=", "--file="))
        elif text.startswith("-") and text != "-":
            for k in range(1, len(text)):
                if text[k] == "i":
                    in_place = True
                    break
                if text[k] in "efl":
                    scripted = scripted or text[k] != "l"
                    i += 0 if k + 1 < len(text) else 1
                    break
        else:
            operands.append(args[i - 1])
    if in_place:
        for word in operands if scripted else operands[1:]:
            call.write(word)


def _perl(call: Call, _name: str, args: list[Word]) -> None:
    """`perl -i` / `-pi -e` edit in place; `-I lib`, `-Mstrict`, `-mX`, `-e CODE` do not."""
    in_place, scripted = False, False
    operands: list[Word] = []
    i = 0
    while i < len(args):
        text = args[i].text
        i += 1
        if text == "--" or not text.startswith("-") or text == "-":
            operands.extend(args[i - (0 if text == "--" else 1):])
            break
        k = 1
        while k < len(text):
            letter = text[k]
            if letter == "i":
                in_place = True
                break
            if letter in "IMmdDxCF":  # the rest of the cluster is this option's value
                if k + 1 == len(text) and letter == "I":
                    i += 1
                break
            if letter in "eE":
                scripted = True
                i += 0 if k + 1 < len(text) else 1
                break
            if letter in "l0":
                k += 1
                while k < len(text) and (text[k].isdigit() or (letter == "0" and text[k] in "xXabcdefABCDEF")):
                    k += 1
                continue
            k += 1
    if in_place:
        for word in operands if scripted else operands[1:]:
            call.write(word)


def _awk(call: Call, _name: str, args: list[Word]) -> None:
    """gawk `-i inplace` edits its files."""
    operands, options = getopt(args, "fvFilE", frozenset({"--file", "--assign", "--field-separator", "--include",
                                                          "--load", "--exec"}))
    if not any(v.text == "inplace" for v in values(options, "-i", "--include")):
        return
    for word in operands if has(options, "-f", "--file", "-E", "--exec") else operands[1:]:
        call.write(word)


def _tar(call: Call, _name: str, args: list[Word]) -> None:
    """tar: extraction writes into `-C DIR` (or here); create, append, update write the `-f` archive."""
    if args and not args[0].text.startswith("-"):  # old style: `tar xzf a.tgz` -> -x -z -f a.tgz
        letters = args[0].text
        pending = iter(args[1:])
        rest = list(args[1:])
        expanded: list[Word] = []
        for letter in letters:
            expanded.append(literal_word("-" + letter))
            if letter in "fCTXbHKLNVgFI":
                value = next(pending, None)
                if value is not None:
                    expanded.append(value)
                    rest.remove(value)
        args = expanded + rest
    _operands, options = getopt(args, "fCTXbHKLNVgFI", frozenset({
        "--file", "--directory", "--files-from", "--exclude-from", "--exclude", "--use-compress-program",
        "--transform", "--owner", "--group", "--mode", "--mtime", "--newer", "--after-date", "--label",
        "--format", "--blocking-factor", "--to-command", "--listed-incremental", "--info-script",
        "--tape-length", "--record-size", "--suffix", "--xform", "--strip-components"}))
    names = {name for name, _ in options}
    if names & {"-x", "--extract", "--get"}:
        if names & {"-O", "--to-stdout", "--to-command"}:
            return
        for directory in folders(options, "-C", "--directory"):
            call.write(directory)
    elif names & {"-c", "--create", "-r", "--append", "-u", "--update", "-A", "--catenate", "--concatenate",
                  "--delete"}:
        for archive in values(options, "-f", "--file"):
            if archive.text != "-":
                call.write(archive)


def _unzip(call: Call, _name: str, args: list[Word]) -> None:
    _operands, options = getopt(args, "dxPIO")
    if has(options, "-l", "-t", "-v", "-Z", "-p", "-z", "-c"):
        return
    for directory in folders(options, "-d"):
        call.write(directory)


def _7z(call: Call, _name: str, args: list[Word]) -> None:
    if not args:
        return
    mode = args[0].text
    outputs: list[Word | None] = [tail(w, 2) for w in args[1:] if w.text.startswith("-o")]
    if mode in ("x", "e"):
        for directory in outputs or [None]:
            call.write(directory)
    elif mode in ("a", "u", "d", "rn"):
        operands = [w for w in args[1:] if not w.text.startswith("-")]
        if operands:
            call.write(operands[0])


def _cpio(call: Call, _name: str, args: list[Word]) -> None:
    operands, options = getopt(args, "DFOIEHMRCs", frozenset({"--directory", "--file", "--pattern-file",
                                                             "--format", "--message", "--owner", "--io-size"}))
    names = {name for name, _ in options}
    if names & {"-i", "--extract"}:
        if not names & {"-t", "--list"}:
            for directory in folders(options, "-D", "--directory"):
                call.write(directory)
    elif names & {"-p", "--pass-through"}:
        for word in operands[:1]:
            call.write(word)
    elif names & {"-o", "--create"}:
        for word in values(options, "-O", "-F", "--file"):
            call.write(word)


def _patch(call: Call, _name: str, args: list[Word]) -> None:
    """patch writes the files its patch names, relative to `-d DIR` or here; `-o FILE`, `-r FILE` too."""
    operands, options = getopt(args, "odirpDFBYzVg", frozenset({
        "--output", "--directory", "--input", "--reject-file", "--strip", "--ifdef", "--fuzz", "--prefix",
        "--basename-prefix", "--suffix", "--version-control", "--get"}))
    if has(options, "--dry-run", "-C", "--check"):
        return
    here = call.inside(folders(options, "-d", "--directory")[-1])
    for word in values(options, "-o", "--output", "-r", "--reject-file"):
        if word.text != "-":
            call.write(word)
    if operands and not values(options, "-o", "--output"):
        here.write(operands[0])
    here.write(None)
    strip = next((v.text for v in values(options, "-p", "--strip")), None)
    patches = [call.read(word) for word in values(options, "-i", "--input")] or [call.input_text()]
    if len(operands) > 1:
        patches.append(call.read(operands[1]))  # patch [ORIGINAL [PATCHFILE]]
    for text in patches:
        patch_headers(here, text, int(strip) if strip and strip.isdigit() else None)


def _apply_patch(call: Call, _name: str, args: list[Word]) -> None:
    """Codex's `apply_patch`: `*** Add/Update/Delete File:` and `*** Move to:` lines, in an argument or stdin."""
    for text in [w.text for w in args] + [call.input_text() or ""]:
        for path in patch_header_paths(text):
            call.write(literal_word(path))


def _curl(call: Call, _name: str, args: list[Word]) -> None:
    _operands, options = getopt(args, "AbcCdDeEFHKmoPQrtTuUwxXyYz", frozenset({
        "--output", "--output-dir", "--dump-header", "--cookie-jar", "--trace", "--trace-ascii", "--stderr",
        "--etag-save", "--hsts", "--alt-svc", "--libcurl", "--data", "--data-binary", "--data-raw",
        "--data-urlencode", "--header", "--user", "--request", "--url", "--form", "--upload-file", "--cookie",
        "--config", "--user-agent", "--referer", "--proxy", "--max-time", "--connect-timeout", "--write-out",
        "--range", "--cert", "--key", "--cacert", "--resolve", "--retry", "--limit-rate"}))
    for word in values(options, "-o", "--output", "-D", "--dump-header", "-c", "--cookie-jar", "--trace",
                        "--trace-ascii", "--stderr", "--etag-save", "--hsts", "--alt-svc", "--libcurl"):
        if word.text != "-":
            call.write(word)
    if has(options, "-O", "--remote-name", "--remote-name-all", "-J", "--remote-header-name"):
        for directory in folders(options, "--output-dir"):
            call.write(directory)


def _wget(call: Call, _name: str, args: list[Word]) -> None:
    _operands, options = getopt(args, "OoaPieBtTwQUlARDIXn", frozenset({
        "--output-document", "--output-file", "--append-output", "--directory-prefix", "--input-file",
        "--execute", "--base", "--tries", "--timeout", "--wait", "--quota", "--user-agent", "--level",
        "--accept", "--reject", "--domains", "--include-directories", "--exclude-directories", "--header",
        "--user", "--password"}))
    for word in values(options, "-o", "--output-file", "-a", "--append-output"):
        call.write(word)
    documents = [w for w in values(options, "-O", "--output-document") if w.text != "-"]
    for word in documents:
        call.write(word)
    if not values(options, "-O", "--output-document") and not has(options, "--spider"):
        for directory in folders(options, "-P", "--directory-prefix"):
            call.write(directory)


def _python(call: Call, _name: str, args: list[Word]) -> None:
    """`python -m zipfile -e ZIP DIR`, `-m tarfile -e TAR [DIR]`, and their `-c ARCHIVE FILES...`."""
    texts = [w.text for w in args]
    if "-m" not in texts:
        return
    at = texts.index("-m")
    module, rest = texts[at + 1:at + 2], args[at + 2:]
    if module not in (["zipfile"], ["tarfile"]) or len(rest) < 2:
        return
    if rest[0].text in ("-e", "--extract"):
        call.write(rest[2] if len(rest) > 2 else None)
    elif rest[0].text in ("-c", "--create"):
        call.write(rest[1])


def _find(call: Call, _name: str, args: list[Word]) -> None:
    """find: `-delete` and `-exec CMD {}` act on what it finds below its start paths, and on what `-path`
    patterns name; `-fprint FILE` writes FILE. From a folder holding a repository's `.leslie/` with no
    filter, or a `-name` that leslie's own files match (`find . -name '*.md' -delete`), it sweeps every
    thread's folder: SWEEP."""
    starts = find_starts(args)
    i = next((k for k, w in enumerate(args) if w.text.startswith(("-", "(", "!", ")")) and w.text not in (
        "-H", "-L", "-P")), len(args))
    paths: list[Word] = []
    names: list[str] = []
    acts = False
    while i < len(args):
        text = args[i].text
        i += 1
        if text in ("-path", "-ipath", "-wholename", "-iwholename") and i < len(args):
            paths.append(_glob(args[i]))
        elif text in ("-name", "-iname") and i < len(args):
            names.append(args[i].text)
        elif text == "-delete":
            acts = True
        elif text in ("-fprint", "-fprint0", "-fls", "-fprintf") and i < len(args):
            call.write(args[i])
            i += 2 if text == "-fprintf" else 1
        elif text in ("-exec", "-execdir", "-ok", "-okdir"):
            end = i
            while end < len(args) and args[end].text not in (";", "+"):
                end += 1
            acts = _find_exec(call, starts, args[i:end]) or acts
            i = end + 1
    if acts:
        sweeps = not paths and (not names or any(_matches_leslie_file(n) for n in names))
        for word in starts + paths:
            call.write(word, SWEEP if sweeps and word in starts else WRITE)


def _find_exec(call: Call, starts: list[Word], inner: list[Word]) -> bool:
    """Analyse `-exec CMD ... {}` for each start path; True when CMD writes what it is given."""
    before = len(call.walker.targets)
    for start in starts:
        found = below(start)
        words = [found if "{}" in w.text else w for w in inner]
        if words:
            call.run(words)
    return any(UNKNOWN in target.path for target in call.walker.targets[before:])


def _glob(word: Word) -> Word:
    """`word` (a quoted `find -path` pattern) with its glob characters made glob markers."""
    return Word(word.text, word.pattern.translate({ord("*"): STAR, ord("?"): QUESTION, ord("["): BRACKET}),
                [], False)


def _matches_leslie_file(pattern: str) -> bool:
    return any(fnmatch.fnmatchcase(name, pattern) for name in ("plan.md", "progress.md", "thread.json",
                                                               "objective.json", "config.toml"))


def _watch(call: Call, _name: str, args: list[Word]) -> None:
    """watch runs its command line with `sh -c` (or directly with `-x`)."""
    operands, options = getopt(args, "nq", frozenset({"--interval", "--equexit"}), permute=False)
    if has(options, "-x", "--exec"):
        call.run(operands)
    elif operands:
        call.script(" ".join(w.text for w in operands))


def _mktemp(call: Call, _name: str, args: list[Word]) -> None:
    """mktemp TEMPLATE: the template's folder (relative to `-p DIR` when given) gets a new file."""
    operands, options = getopt(args, "pt", frozenset({"--suffix"}))
    here = call.inside(folders(options, "-p", "--tmpdir")[-1])
    for word in operands:
        here.write(word)


def _flock(call: Call, _name: str, args: list[Word]) -> None:
    operands, options = getopt(args, "wEc", frozenset({"--timeout", "--conflict-exit-code", "--command"}),
                               permute=False)
    if operands:
        call.write(operands[0])  # the lock file is created
    for script in values(options, "-c", "--command"):
        call.script(script.text)
    if len(operands) > 1:
        call.run(operands[1:])


HANDLERS: dict[str, Callable[[Call, str, list[Word]], None]] = {
    "tee": _all_operands(WRITE, "", frozenset()),
    "touch": _all_operands(WRITE, "drt", frozenset({"--date", "--reference", "--time"})),
    "truncate": _all_operands(WRITE, "sr", frozenset({"--size", "--reference"})),
    "mkfifo": _all_operands(WRITE, "mZ", frozenset({"--mode"})),
    "fallocate": _all_operands(WRITE, "lo", frozenset({"--length", "--offset"})),
    "rename": _all_operands(WRITE), "prename": _all_operands(WRITE), "sponge": _all_operands(WRITE, "", frozenset()),
    "rm": _all_operands(REMOVE), "rmdir": _all_operands(REMOVE), "unlink": _all_operands(REMOVE),
    "mkdir": _mkdir, "shred": _shred, "dd": _dd,
    "chmod": _modes, "chown": _modes, "chgrp": _modes, "chattr": _modes,
    "cp": _copy, "mv": _copy, "install": _copy, "ln": _copy, "scp": _copy, "rsync": _copy,
    "sort": _named_outputs("kStTo", frozenset({"--key", "--buffer-size", "--field-separator",
                                               "--temporary-directory", "--output", "--files0-from"}),
                           ("-o", "--output")),
    "uniq": _nth_operand(1, "fsw"), "split": _nth_operand(1, "abClnt"),
    "csplit": _named_outputs("fbn", frozenset({"--prefix"}), ("-f", "--prefix")),
    "gzip": _compress, "gunzip": _compress, "bzip2": _compress, "bunzip2": _compress, "xz": _compress,
    "unxz": _compress, "lzma": _compress, "zstd": _compress, "unzstd": _compress, "lz4": _compress,
    "pigz": _compress, "compress": _compress, "uncompress": _compress, "brotli": _compress,
    "zip": _nth_operand(0, "bntxiO"), "7z": _7z, "7za": _7z, "7zr": _7z,
    "sed": _sed, "gsed": _sed, "perl": _perl, "awk": _awk, "gawk": _awk,
    "tar": _tar, "gtar": _tar, "bsdtar": _tar, "unzip": _unzip, "cpio": _cpio, "patch": _patch,
    "apply_patch": _apply_patch, "applypatch": _apply_patch,
    "curl": _curl, "wget": _wget, "find": _find, "mktemp": _mktemp, "flock": _flock,
    "python": _python, "python3": _python, "git": git, "watch": _watch,
    "ed": _all_operands(WRITE, "p", frozenset({"--prompt"})), "ex": _all_operands(WRITE, "c", frozenset()),
}


