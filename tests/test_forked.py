"""`store.forked`: work shared with a forked child gives exactly what the work gives here, whatever happens."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Sequence

import pytest

from leslie.store import forked
from leslie.store.forked import split_map, start

PARENT = os.getpid()


def squares(items: Sequence[int]) -> list[int]:
    return [i * i for i in items]


def where(items: Sequence[int]) -> list[int]:
    """Each item paired with the process that computed it: tells a fork from no fork."""
    return [os.getpid() for _ in items]


def test_split_map_equals_the_work_done_here() -> None:
    items = list(range(10_001))
    assert split_map(squares, items, minimum=2) == squares(items)
    assert split_map(squares, [], minimum=0) == []
    assert split_map(squares, [3], minimum=1) == [9]


def slow_here(items: Sequence[int]) -> list[int]:
    """`where`, pausing in this process only: the child surely takes pieces meanwhile."""
    if os.getpid() == PARENT:
        time.sleep(0.02)
    return where(items)


def test_both_take_pieces_in_turn_and_only_at_scale() -> None:
    pids = split_map(slow_here, list(range(400)), minimum=2, pieces=40)
    pieces = [pids[i * 10:(i + 1) * 10] for i in range(40)]
    assert all(len(set(piece)) == 1 for piece in pieces)  # a piece is done by one process, in order
    child = {piece[0] for piece in pieces} - {PARENT}
    assert len(child) == 1
    # The child, never pausing, takes most pieces while this process sleeps on each of its own (it would
    # have to start 0.4 s late to take fewer).
    assert sum(piece[0] != PARENT for piece in pieces) >= 20
    assert split_map(where, list(range(10)), minimum=11) == [PARENT] * 10
    assert set(split_map(slow_here, list(range(forked.SPLIT_FROM)))) != {PARENT}  # the default threshold
    assert split_map(where, list(range(10)), minimum=2, pieces=1) == [PARENT] * 10  # one piece: no child


def test_first_runs_once_here_before_this_process_takes_a_piece() -> None:
    """`first` runs in this process, once, shared or not; shared, the child works meanwhile: while `first`
    sleeps, the child takes pieces that this process would otherwise have done."""
    calls: list[tuple[int, int]] = []
    done_here: list[int] = []

    def work(items: Sequence[int]) -> list[int]:
        if os.getpid() == PARENT:
            done_here.extend(items)
        return where(items)

    def first() -> None:
        calls.append((os.getpid(), len(done_here)))
        time.sleep(0.2)

    pids = split_map(work, list(range(400)), minimum=2, pieces=40, first=first)
    assert calls == [(PARENT, 0)]
    assert pids.count(PARENT) < 200  # the child took most pieces while `first` slept
    for minimum, pieces in ((401, 40), (2, 1)):  # not shared (too few items, one piece): still called once
        calls.clear()
        done_here.clear()
        assert split_map(work, list(range(400)), minimum=minimum, pieces=pieces, first=first) == [PARENT] * 400
        assert calls == [(PARENT, 0)]


def crashes_in_child(items: Sequence[int]) -> list[int]:
    if os.getpid() != PARENT:
        os._exit(3)
    return slow_squares(items)


def raises_in_child(items: Sequence[int]) -> list[int]:
    if os.getpid() != PARENT:
        raise RuntimeError("child only")
    return slow_squares(items)


def lies_in_child(items: Sequence[int]) -> list[str] | list[int]:
    if os.getpid() != PARENT:
        return "not a list"  # type: ignore[return-value]
    return slow_squares(items)


def slow_squares(items: Sequence[int]) -> list[int]:
    time.sleep(0.002)  # the child surely takes pieces (and fails them) meanwhile
    return squares(items)


@pytest.mark.parametrize("work", [crashes_in_child, raises_in_child, lies_in_child])
def test_a_failed_child_leaves_the_work_to_this_process(work: object) -> None:
    items = list(range(5000))
    assert split_map(work, items, minimum=2) == squares(items)  # type: ignore[arg-type]


def test_no_fork_while_another_thread_runs() -> None:
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    try:
        assert split_map(where, list(range(10)), minimum=2) == [PARENT] * 10
    finally:
        stop.set()
        other.join()


def test_an_abandoned_job_is_killed_and_reaped() -> None:
    def slow(items: Sequence[int]) -> list[int]:
        if os.getpid() != PARENT:
            threading.Event().wait(60)
        return list(items)

    job = start(slow, list(range(10)), minimum=1)
    pid = job._pid
    assert pid is not None
    job.close()
    with pytest.raises(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)  # already reaped
    job.close()  # twice: nothing left to do


def test_a_job_not_started_computes_at_its_result() -> None:
    with start(where, [1, 2], minimum=3) as job:
        assert job.result() == [PARENT, PARENT]
