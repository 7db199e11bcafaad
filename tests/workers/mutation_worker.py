"""A concurrency worker: a seeded sequence of mutations on threads it owns; records what it expects.

    python mutation_worker.py ROOT RESULT.json WORKER OPS [--via api|cli] [--seed N] [--targets ID,ID,...]

Ownership keeps workers out of each other's way on purpose: a worker spawns its own threads
(`thread-w<W>-<i>`) and only ever edits references and titles of those, so the expected end state of
every thread it created is known exactly. The shared `--targets` threads are referenced by everyone,
which makes every worker rewrite the same `referenced_by` lists in the index: the contention the lock
must serialise. The result file holds the threads created, the final edges of each, the titles, the
number of mutations acknowledged, and the wall time of the loop.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

LESLIE = str(Path(sys.executable).with_name("leslie"))


class Driver:
    """Runs one mutation through the Python API or through the `leslie` executable."""

    def __init__(self, root: Path, via: str) -> None:
        self.root = root
        self.via = via
        if via == "api":
            from leslie.store.repository import Repository

            self.repo = Repository(root)

    def _cli(self, *args: str) -> None:
        env = {**os.environ, "LESLIE_ROOT": str(self.root)}
        proc = subprocess.run([LESLIE, *args], capture_output=True, text=True, env=env, check=False)
        if proc.returncode != 0:
            raise RuntimeError(f"leslie {' '.join(args)} exited {proc.returncode}: {proc.stderr.strip()}")

    def spawn(self, thread_id: str, title: str, refs: list[str]) -> None:
        if self.via == "cli":
            self._cli("spawn", "--id", thread_id, "--intent", f"Work of {thread_id}", "--title", title,
                      *[arg for ref in refs for arg in ("--ref", ref)])
            return
        from leslie.ops.threads import RefSpec, spawn

        spawn(self.repo, f"Work of {thread_id}", title=title, thread_id=thread_id,
              refs=[RefSpec(ref) for ref in refs])

    def reference(self, source: str, target: str) -> None:
        if self.via == "cli":
            self._cli("reference", "--thread", source, "--target", target)
            return
        from leslie.ops.threads import reference

        reference(self.repo, source, target)

    def unreference(self, source: str, target: str) -> None:
        if self.via == "cli":
            self._cli("unreference", "--thread", source, "--target", target)
            return
        from leslie.ops.threads import unreference

        unreference(self.repo, source, target)

    def retitle(self, thread_id: str, title: str) -> None:
        if self.via == "cli":
            self._cli("retitle", thread_id, title)
            return
        from leslie.ops.threads import retitle

        retitle(self.repo, thread_id, title)


def run(driver: Driver, worker: int, ops: int, seed: int, targets: list[str]) -> dict[str, object]:
    """Do `ops` mutations and return what the end state must show for this worker's threads."""
    rng = random.Random(seed * 1000 + worker)
    own: list[str] = []
    edges: dict[str, set[str]] = {}
    titles: dict[str, str] = {}
    started = time.perf_counter()
    for i in range(ops):
        roll = rng.random()
        if not own or roll < 0.2:
            thread_id = f"thread-w{worker}-{i}"
            refs = [rng.choice(targets)] if targets else []
            title = f"worker {worker} thread {i}"
            driver.spawn(thread_id, title, refs)
            own.append(thread_id)
            edges[thread_id] = set(refs)
            titles[thread_id] = title
        elif roll < 0.55:
            source = rng.choice(own)
            choices = [t for t in targets + own if t != source]
            if not choices:
                continue
            target = rng.choice(choices)
            driver.reference(source, target)
            edges[source].add(target)
        elif roll < 0.8:
            candidates = [t for t in own if edges[t]]
            if not candidates:
                source = rng.choice(own)
                title = f"worker {worker} retitled at {i}"
                driver.retitle(source, title)
                titles[source] = title
                continue
            source = rng.choice(candidates)
            target = rng.choice(sorted(edges[source]))
            driver.unreference(source, target)
            edges[source].discard(target)
        else:
            source = rng.choice(own)
            title = f"worker {worker} retitled at {i}"
            driver.retitle(source, title)
            titles[source] = title
    elapsed = time.perf_counter() - started
    return {
        "worker": worker,
        "mutations": ops,
        "elapsed": elapsed,
        "threads": own,
        "edges": {source: sorted(targets_) for source, targets_ in edges.items()},
        "titles": titles,
    }


def main() -> int:
    """Parse arguments, run the loop, write the result file."""
    parser = argparse.ArgumentParser()
    parser.add_argument("root", type=Path)
    parser.add_argument("result", type=Path)
    parser.add_argument("worker", type=int)
    parser.add_argument("ops", type=int)
    parser.add_argument("--via", choices=("api", "cli"), default="api")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--targets", default="")
    args = parser.parse_args()
    targets = [t for t in args.targets.split(",") if t]
    result = run(Driver(args.root, args.via), args.worker, args.ops, args.seed, targets)
    args.result.write_text(json.dumps(result, indent=1, sort_keys=True), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
