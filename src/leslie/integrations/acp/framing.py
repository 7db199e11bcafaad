"""The bytes on the pipes: reads, whole writes, and lines cut from a stream, with the cap on a line's length.

ACP is newline-delimited: the relay reads a message only when it holds the whole line. Neither side is trusted
to end its lines (docs/security.md, "The ACP proxy"): a line over `MAX_LINE` is never held whole, it is given
back in pieces to forward unread, as they come.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

from leslie.integrations.acp.stderr import warn

READ_SIZE = 1 << 18  # one read from a pipe; lines may be any length, they are reassembled up to MAX_LINE
# The longest line the relay holds to read it; a longer one is forwarded in pieces as it comes, unread. A
# prompt's text past 4 MB is past every model's window (1M tokens); what makes a real one longer is images in
# base64 (5 MB each, Anthropic's limit), which leslie need not read, and such a prompt goes without its block.
# The bound on memory: about twice this per direction for the line itself (the pieces held, then joined),
# plus what reading a line below it takes (its decoded text, and MAX_BRACKETS).
MAX_LINE = 16 << 20


class LineSplitter:
    """Cuts a byte stream into lines (each keeping its `\\n`); a line may span any number of reads.

    A line longer than `limit` is never held whole: what was held of it, and the rest of it as it comes, is
    given back in pieces to forward unread (with one line on stderr naming `side`), so a relay thread holds at
    most `limit` bytes of a line, however long the line and whether or not it ever ends.
    """

    def __init__(self, side: str, consequence: str = "", limit: int = MAX_LINE) -> None:
        self._side = side
        self._consequence = f" ({consequence})" if consequence else ""
        self._limit = limit
        self._partial: list[bytes] = []
        self._held = 0
        self._overlong = False  # in the middle of a line over the limit

    def feed(self, data: bytes) -> list[tuple[bytes, bool]]:
        """What `data` completes, in order: `(line, True)`, a whole line to read, or `(piece, False)`, bytes of
        a line over the limit to forward unread."""
        pieces: list[tuple[bytes, bool]] = []
        start = 0
        while start < len(data):
            end = data.find(b"\n", start)
            stop = len(data) if end < 0 else end + 1
            piece = data[start:stop]
            start = stop
            if self._overlong:
                pieces.append((piece, False))
            elif self._held + len(piece) > self._limit:
                self._overlong = True
                warn(f"warning: a line from the {self._side} is over {self._limit >> 20} MiB: it is forwarded"
                     f" unread{self._consequence}")
                pieces.extend((held, False) for held in self._partial)
                pieces.append((piece, False))
                self._partial, self._held = [], 0
            elif end < 0:
                self._partial.append(piece)
                self._held += len(piece)
            else:
                if self._partial:
                    self._partial.append(piece)
                    piece = b"".join(self._partial)
                    self._partial, self._held = [], 0
                pieces.append((piece, True))
            if end >= 0:
                self._overlong = False
        return pieces

    def rest(self) -> bytes:
        """What followed the last newline (the stream ended without one), when it was held."""
        rest, self._partial, self._held = b"".join(self._partial), [], 0
        return rest


def reads(fd: int) -> Iterator[bytes]:
    """Chunks read from `fd` until end of file (or until it fails, which ends the stream the same way)."""
    while True:
        try:
            data = os.read(fd, READ_SIZE)
        except OSError:
            return
        if not data:
            return
        yield data


def write_all(fd: int, data: bytes) -> None:
    """All of `data` to `fd`, however many writes a pipe takes."""
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]
