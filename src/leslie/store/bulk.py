"""Bulk reads: the garbage collector kept out of the way while a read builds 100,000s of small objects.

Decoding the index at 100,000 threads (or reading every `thread.json`, as `doctor` does) allocates about a
million dicts, lists, sets and strings. CPython's cyclic collector runs every 700 allocations and each of its
older generations then traverses everything allocated so far: the read's cost grows faster than linearly and
about half of it is the collector looking for cycles that such data never has (docs/benchmarks.md, "Scale").
`paused_gc` turns the collector off for the read and, in a one-shot process (the `leslie` command: set by
`__main__`, but not for `board`, `watch` and `acp`, which serve until stopped), freezes what the read built,
so that later collections of the same process never traverse it. A long-running process (those commands, the
render server, a test run) only pauses: freezing there would keep whatever cyclic garbage exists at that
moment alive for good.

os-only imports (`gc` is built in): the hook path may decode an index.
"""

from __future__ import annotations

import gc

ONE_SHOT = False  # True in the `leslie` process itself (set by `leslie.__main__`): it exits after one command


class paused_gc:
    """A context manager: the cyclic garbage collector off inside, restored after (frozen data kept alive).

    Nests safely: only the outermost one re-enables a collector that was on.
    """

    def __init__(self) -> None:
        self._was_enabled = False

    def __enter__(self) -> None:
        self._was_enabled = gc.isenabled()
        gc.disable()

    def __exit__(self, *_exc: object) -> None:
        if ONE_SHOT:
            # Objects alive now move to the permanent generation: the collections the rest of this command
            # triggers traverse only what it allocates later (leslie's data holds no reference cycles).
            gc.freeze()
        if self._was_enabled:
            gc.enable()
