"""A worker that loops mutations through the API and acknowledges each one, to be SIGKILLed at random.

    python crash_worker.py ROOT ACK_LOG SEED

The operations are a deterministic plan (`plan(seed, n)`), each one valid in the state the previous ones
leave, so the test can compute the expected state after any number of them. After each call returns the
worker appends its number to ACK_LOG and fsyncs it: an acknowledged operation must survive any kill. On
start the worker resumes after the last acknowledged operation; every operation is idempotent (a spawn
whose thread already exists is skipped), so redoing the one that was in flight at the kill is harmless.
"""

from __future__ import annotations

import os
import random
import sys
from pathlib import Path
from typing import Any

Op = tuple[Any, ...]
State = dict[str, dict[str, Any]]


def plan(seed: int, count: int) -> list[Op]:
    """`count` operations, each valid after the ones before it (spawn, ref, unref, retitle, status)."""
    rng = random.Random(seed)
    state: State = {}
    ops: list[Op] = []
    for k in range(count):
        roll = rng.random()
        ids = sorted(state)
        if len(ids) < 3 or roll < 0.15:
            thread_id = f"thread-c{k}"
            refs = sorted(set(rng.sample(ids, min(len(ids), rng.randint(0, 2)))))
            op: Op = ("spawn", thread_id, f"crash thread {k}", refs)
        elif roll < 0.5:
            source, target = rng.sample(ids, 2)
            op = ("ref", source, target)
        elif roll < 0.7:
            with_refs = [t for t in ids if state[t]["refs"]]
            if with_refs:
                source = rng.choice(with_refs)
                op = ("unref", source, rng.choice(sorted(state[source]["refs"])))
            else:
                op = ("retitle", rng.choice(ids), f"retitled at {k}")
        elif roll < 0.85:
            op = ("retitle", rng.choice(ids), f"retitled at {k}")
        else:
            op = ("status", rng.choice(ids), rng.choice(["active", "paused", "done", "archived"]))
        apply(state, op)
        ops.append(op)
    return ops


def apply(state: State, op: Op) -> None:
    """The model: what `op` does to the state (thread ID -> title, status, set of referenced IDs)."""
    kind = op[0]
    if kind == "spawn":
        state[op[1]] = {"title": op[2], "status": "active", "refs": set(op[3])}
    elif kind == "ref":
        state[op[1]]["refs"].add(op[2])
    elif kind == "unref":
        state[op[1]]["refs"].discard(op[2])
    elif kind == "retitle":
        state[op[1]]["title"] = op[2]
    elif kind == "status":
        state[op[1]]["status"] = op[2]


def expected_state(ops: list[Op], count: int) -> State:
    """The model state after the first `count` operations."""
    state: State = {}
    for op in ops[:count]:
        apply(state, op)
    return state


def execute(repo: Any, op: Op) -> None:
    """Run `op` through the Python API, idempotently."""
    from leslie.ops import threads

    kind = op[0]
    if kind == "spawn":
        if repo.layout.thread_file(op[1]).exists():
            return  # done before the last kill, not acknowledged
        threads.spawn(repo, f"Intent of {op[1]}", title=op[2], thread_id=op[1],
                      refs=[threads.RefSpec(t) for t in op[3]], objective="obj-crash")
    elif kind == "ref":
        threads.reference(repo, op[1], op[2])
    elif kind == "unref":
        threads.unreference(repo, op[1], op[2])
    elif kind == "retitle":
        threads.retitle(repo, op[1], op[2])
    elif kind == "status":
        threads.set_status(repo, op[1], op[2])


PLAN_LENGTH = 5000


def main() -> int:
    """Resume after the last acknowledged operation and run the plan until killed (or it ends)."""
    from leslie.store.repository import Repository

    root, ack_log, seed = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
    repo = Repository(root)
    ops = plan(seed, PLAN_LENGTH)
    try:
        done = len(ack_log.read_text(encoding="utf-8").splitlines())
    except FileNotFoundError:
        done = 0
    fd = os.open(ack_log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    for k in range(done, len(ops)):
        execute(repo, ops[k])
        os.write(fd, f"{k}\n".encode())
        os.fsync(fd)
    return 0


if __name__ == "__main__":
    sys.exit(main())
