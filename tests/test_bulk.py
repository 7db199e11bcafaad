"""store/bulk.py: the garbage collector paused around bulk reads, frozen only in a one-shot process."""

from __future__ import annotations

import gc
import subprocess
import sys

from leslie.store import bulk
from leslie.store.bulk import paused_gc


def test_paused_gc_turns_the_collector_off_inside_and_restores_it() -> None:
    assert gc.isenabled()
    with paused_gc():
        assert not gc.isenabled()
        with paused_gc():  # nested: the inner one must not turn it back on
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()
    gc.disable()
    try:
        with paused_gc():
            pass
        assert not gc.isenabled()  # it was off before: it stays off
    finally:
        gc.enable()


def test_paused_gc_freezes_only_in_a_one_shot_process() -> None:
    assert not bulk.ONE_SHOT  # a test run is a long-running process: it only pauses
    before = gc.get_freeze_count()
    with paused_gc():
        kept = [{"a": [i]} for i in range(1000)]
    assert gc.get_freeze_count() == before and kept
    code = ("import gc\nfrom leslie.store import bulk\nbulk.ONE_SHOT = True\n"
            "with bulk.paused_gc():\n    kept = [{'a': [i]} for i in range(1000)]\n"
            "print(gc.get_freeze_count() >= 3000, gc.isenabled())\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["True", "True"]
