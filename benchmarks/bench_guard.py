"""What the write guard's second line costs per shell tool call (`leslie.guard.tripwire`, docs/benchmarks.md).

    python benchmarks/bench_guard.py                    # 100 and 10,000 threads, 9 runs each
    python benchmarks/bench_guard.py --sizes 100,10000,30000 --repeats 15 --markdown

Each repository has N threads of 3 files (thread.json, plan.md, progress.md), built fast as in
bench_core.py. Then, through the real `leslie hook claude-code` executable with Claude Code's payloads:

- **first snapshot**: the first `PreToolUse` of a `Bash` call in the repository, which scans every protected
  file and copies its content into the guard's folder (`.git/leslie/guard/`) (once per repository; big ones take several
  calls, each copying for at most 2 s);
- **PreToolUse** and **PostToolUse** of a `Bash` call that changed nothing under `.leslie/` (the common
  case: a stat of every protected file, the manifest read, nothing written), each run interleaved with one
  bare interpreter start;
- **PostToolUse that restores**: the call appended a line to another thread's plan.md; the hook finds it,
  quarantines the changed version, restores the copy, rewrites the manifest and answers `block`;
- and, in this process, where the time of a sweep goes: the scan (`os.scandir` + lstat), reading the
  manifest, comparing.

Each case twice: **sweep** (`LESLIE_WARM=0`: every command in its own process, so no watcher, and every
watched hook stats every protected file) and **watcher** (the warm process on, in a runtime folder of the
benchmark's own, its watcher process's inotify watches set up and the manifest's mark written before the
runs: `leslie.guard.watcher`, run by `leslie.server.watcher`).

Medians of whole processes, like every figure of SPEC §10, and their ratio to `python -c pass`.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _timing import BARE, LESLIE, machine_summary, measured_env, run_once
from bench_core import bench_thread_id, compile_bytecode, make_repo

from leslie.guard import snapshots, tripwire
from leslie.store import mutations

OWN_INDEX = 1  # the session works on this thread; thread 0's plan.md is the one it overwrites


def payload(root: Path, event: str, call: str) -> bytes:
    doc = {"session_id": "bench", "transcript_path": None, "cwd": str(root), "permission_mode": "default",
           "hook_event_name": event, "tool_name": "Bash", "tool_use_id": call,
           "tool_input": {"command": "make test", "description": "run the tests"}}
    if event == "PostToolUse":
        doc["tool_response"] = {"stdout": "ok", "stderr": "", "interrupted": False, "isImage": False}
    return json.dumps(doc).encode()


def hook(root: Path, event: str, call: str, env: dict[str, str]) -> float:
    return run_once([LESLIE, "hook", "claude-code"], cwd=root, env=env, stdin=payload(root, event, call))


def in_process(root: Path, repeats: int) -> dict[str, float]:
    """Median milliseconds of the parts of one sweep that changed nothing."""
    parts: dict[str, list[float]] = {"scan": [], "manifest read": [], "compare": [], "whole sweep": []}
    for _ in range(repeats):
        start = time.perf_counter()
        current = snapshots.scan(str(root))
        scanned = time.perf_counter()
        manifest = snapshots.load_manifest(str(root), current)
        loaded = time.perf_counter()
        assert manifest is not None
        changed = manifest["files"] != current
        compared = time.perf_counter()
        with tripwire.index_lock(str(root)):
            tripwire.sweep(str(root))
        swept = time.perf_counter()
        assert not changed
        parts["scan"].append(scanned - start)
        parts["manifest read"].append(loaded - scanned)
        parts["compare"].append(compared - loaded)
        parts["whole sweep"].append(swept - compared)
    return {k: statistics.median(v) * 1000 for k, v in parts.items()}


def bench_calls(root: Path, env: dict[str, str], repeats: int) -> dict[str, float]:
    """Median milliseconds of a bare start, and of the hooks of quiet and of restoring shell calls."""
    bare: list[float] = []
    pre: list[float] = []
    post: list[float] = []
    restore: list[float] = []
    target = root / ".leslie" / "threads" / bench_thread_id(0) / "plan.md"
    mode = "watched" if env.get("LESLIE_WARM") != "0" else "swept"
    for i in range(repeats):
        bare.append(run_once(BARE))
        pre.append(hook(root, "PreToolUse", f"{mode}-quiet-{i}", env))
        post.append(hook(root, "PostToolUse", f"{mode}-quiet-{i}", env))
        hook(root, "PreToolUse", f"{mode}-write-{i}", env)
        with target.open("a", encoding="utf-8") as handle:
            handle.write("hijacked\n")
        restore.append(hook(root, "PostToolUse", f"{mode}-write-{i}", env))
        assert "hijacked" not in target.read_text(), "the PostToolUse did not restore the file"
    return {"bare_ms": statistics.median(bare) * 1000, "pre_ms": statistics.median(pre) * 1000,
            "post_ms": statistics.median(post) * 1000, "restore_ms": statistics.median(restore) * 1000}


def settle_watcher(root: Path, env: dict[str, str]) -> int:
    """Quiet calls until the server's watcher has vouched for the manifest (its mark is written); how many."""
    mark = Path(mutations.guard_dir(str(root))) / snapshots.MARK_FILE
    for calls in range(1, 200):
        hook(root, "PreToolUse", f"settle-{calls}", env)
        hook(root, "PostToolUse", f"settle-{calls}", env)
        if mark.exists():
            return calls
        time.sleep(0.1)
    raise RuntimeError("the watcher never wrote its mark")


def bench_size(size: int, repeats: int, workdir: Path) -> list[dict[str, object]]:
    root = workdir / f"repo-{size}"
    make_repo(root, size)
    env = measured_env(LESLIE_THREAD=bench_thread_id(OWN_INDEX), LESLIE_WARM="0")
    manifest = Path(mutations.guard_dir(str(root))) / "manifest.json"
    first: list[float] = []
    while True:  # the first snapshot: as many calls as the copy budget needs
        first.append(hook(root, "PreToolUse", "first", env))
        hook(root, "PostToolUse", "first", env)
        if not json.loads(manifest.read_text())["pending"]:
            break
    common = {"threads": size, "files": len(snapshots.scan(str(root))),
              "manifest_kib": manifest.stat().st_size / 1024, "first_ms": [round(t * 1000) for t in first]}
    swept = {**common, "mode": "sweep", **bench_calls(root, env, repeats),
             "parts_ms": in_process(root, max(3, repeats // 2))}
    runtime = Path(tempfile.mkdtemp(prefix="lbg-", dir="/tmp"))  # short: a socket path is at most 108 bytes
    watch_env = measured_env(LESLIE_THREAD=bench_thread_id(OWN_INDEX), XDG_RUNTIME_DIR=str(runtime))
    try:
        settled = settle_watcher(root, watch_env)
        watched = {**common, "mode": f"watcher (set up in {settled} calls)", **bench_calls(root, watch_env, repeats)}
    finally:
        subprocess.run([LESLIE, "warm", "stop"], env={**watch_env, "LESLIE_WARM": "0"}, capture_output=True,
                       check=False)
        shutil.rmtree(runtime, ignore_errors=True)
    return [swept, watched]


def render(rows: list[dict[str, object]], markdown: bool) -> str:
    head = ["threads", "protected entries", "mode", "PreToolUse ms (x bare)", "PostToolUse ms (x bare)",
            "PostToolUse restoring ms", "bare ms", "first snapshot (ms, per call)",
            "sweep in-process: scan / manifest read / compare / whole"]
    lines = []
    if markdown:
        lines += ["| " + " | ".join(head) + " |", "|" + "---:|" * len(head)]
    for row in rows:
        parts = row.get("parts_ms")
        bare = float(row["bare_ms"])  # type: ignore[arg-type]
        pre, post = float(row["pre_ms"]), float(row["post_ms"])  # type: ignore[arg-type]
        cells = [f"{row['threads']:,}", f"{row['files']:,}", str(row["mode"]),
                 f"{pre:.0f} ({pre / bare:.2f} x)", f"{post:.0f} ({post / bare:.2f} x)",
                 f"{row['restore_ms']:.0f}", f"{bare:.0f}",
                 " + ".join(str(t) for t in row["first_ms"]),  # type: ignore[attr-defined]
                 " / ".join(f"{parts[k]:.0f}" for k in ("scan", "manifest read", "compare", "whole sweep"))
                 if isinstance(parts, dict) else ""]
        lines.append(("| " + " | ".join(cells) + " |") if markdown else "  ".join(
            f"{h}: {c}" for h, c in zip(head, cells, strict=True)))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100,10000")
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args(argv)
    compile_bytecode()
    print(machine_summary())
    workdir = Path(tempfile.mkdtemp(prefix="leslie-bench-guard-"))
    try:
        rows = [row for size in args.sizes.split(",") for row in bench_size(int(size), args.repeats, workdir)]
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    print(render(rows, args.markdown))
    return 0


if __name__ == "__main__":
    sys.exit(main())
