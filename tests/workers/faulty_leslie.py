"""Run the leslie CLI with one step of the write path failing, as a full disk or a bad sector would.

    python faulty_leslie.py STEP ERRNO NTH -- LESLIE_ARGS...

STEP is one of `open` (creating the temp file), `write`, `fsync` (of the temp file), `replace`, `fsync_dir`;
ERRNO a name such as ENOSPC, EIO or EACCES, or SIGKILL to kill the process right there (a crash at an exact
point of the write path); NTH which matching call under `.leslie/` fails (1 = the first), so every atomic
write of a multi-file transaction can be hit in turn. The patched `os` functions are the
real ones except for that one call; then `leslie.__main__.main` runs as the `leslie` executable would.
Prints `fault-injected: STEP #NTH` to stderr when the fault fired, so a test can tell it did.
"""

from __future__ import annotations

import errno
import os
import signal
import sys
from typing import Any

STEPS = ("open", "write", "fsync", "replace", "fsync_dir")
TEMP_SUFFIX = ".leslie-tmp"


def install(step: str, code: int, nth: int) -> None:
    """Patch `os` so that the `nth` call of `step` on a file under `.leslie/` raises OSError(code)."""
    if step not in STEPS:
        raise SystemExit(f"unknown step {step!r}; expected one of {', '.join(STEPS)}")
    seen = dict.fromkeys(STEPS, 0)
    watched: dict[int, str] = {}  # descriptors of temp files and folders under .leslie/
    real_open, real_close, real_write = os.open, os.close, os.write
    real_fsync, real_replace = os.fsync, os.replace

    def strike(name: str) -> None:
        if name != step:
            return
        seen[name] += 1
        if seen[name] == nth:
            sys.stderr.write(f"fault-injected: {step} #{nth}\n")
            if code < 0:
                sys.stderr.flush()
                os.kill(os.getpid(), signal.SIGKILL)
            raise OSError(code, os.strerror(code))

    def ours(path: str) -> bool:
        """Under `.leslie/`, or in the machine state of a git work tree (`.git/leslie/`)."""
        return ".leslie" in path or f"{os.sep}.git{os.sep}leslie" in path

    def is_temp(path: str) -> bool:
        return ours(path) and path.endswith(TEMP_SUFFIX)

    def open_(path: Any, flags: int, mode: int = 0o777, *, dir_fd: int | None = None) -> int:
        text = os.fsdecode(os.fspath(path))
        if is_temp(text) and flags & os.O_CREAT:
            strike("open")
        fd = real_open(path, flags, mode, dir_fd=dir_fd)
        if is_temp(text) or (ours(text) and os.path.isdir(text)):
            watched[fd] = text
        return fd

    def close_(fd: int) -> None:
        watched.pop(fd, None)
        real_close(fd)

    def write_(fd: int, data: Any) -> int:
        if fd in watched and is_temp(watched[fd]):
            strike("write")
        return real_write(fd, data)

    def fsync_(fd: Any) -> None:
        number = fd if isinstance(fd, int) else fd.fileno()
        if number in watched:
            strike("fsync" if is_temp(watched[number]) else "fsync_dir")
        real_fsync(fd)

    def replace_(src: Any, dst: Any, **kwargs: Any) -> None:
        if ours(os.fsdecode(os.fspath(dst))):
            strike("replace")
        real_replace(src, dst, **kwargs)

    os.open = open_  # type: ignore[assignment]
    os.close = close_
    os.write = write_
    os.fsync = fsync_
    os.replace = replace_


def main() -> int:
    """Install the fault, then run leslie with the arguments after `--`."""
    step, code_name, nth = sys.argv[1], sys.argv[2], int(sys.argv[3])
    if sys.argv[4] != "--":
        raise SystemExit("usage: faulty_leslie.py STEP ERRNO NTH -- LESLIE_ARGS...")
    install(step, -1 if code_name == "SIGKILL" else getattr(errno, code_name), nth)
    from leslie.__main__ import main as leslie_main

    return leslie_main(sys.argv[5:])


if __name__ == "__main__":
    sys.exit(main())
