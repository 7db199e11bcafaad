"""Benchmark `leslie board`: how long its pages take on the demo repository and on a 1,000-thread one.

    python benchmarks/bench_board.py                 # demo + 1,000 threads, 7 requests per page
    python benchmarks/bench_board.py --sizes 1000 5000 --repeats 11
    python benchmarks/bench_board.py --browser       # also a real page load in headless chromium

Each repository is served by the real `leslie board --no-open` process. A figure is the median wall time of
one HTTP GET (server work and transfer) after one warm-up request; with `--browser`, the median time until
chromium fires the page's `load` event (HTML, style, script, layout). Issue 16 asks for under a second.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _timing import LESLIE, machine_summary
from bench_core import bench_thread_id, make_repo

BUDGET_MS = 1000.0
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]


def start_board(root: Path) -> tuple[subprocess.Popen[str], str, str]:
    """A running `leslie board` on a free port, its address (`http://127.0.0.1:PORT/`) and its token."""
    process = subprocess.Popen([LESLIE, "board", "--no-open", "--root", str(root)], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    assert process.stdout is not None
    line = process.stdout.readline()
    match = re.search(r"(http://\S+/)\?token=(\S+)", line)
    if match is None:
        process.kill()
        raise SystemExit(f"leslie board did not start: {line!r} {process.stderr.read() if process.stderr else ''}")
    return process, match.group(1), match.group(2)


def time_get(url: str, repeats: int) -> tuple[float, int]:
    """Median milliseconds of a GET of `url` after one warm-up, and the size of the page."""
    with urllib.request.urlopen(url) as response:
        size = len(response.read())
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        with urllib.request.urlopen(url) as response:
            response.read()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times), size


def time_browser(url: str, repeats: int) -> float:
    """Median milliseconds until chromium's `load` event for `url` (one warm-up first)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as driver:
        browser = driver.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page()
        page.goto(url)
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            page.goto(url, wait_until="load")
            times.append((time.perf_counter() - start) * 1000)
        browser.close()
    return statistics.median(times)


def build(kind: str, workdir: Path) -> tuple[Path, str]:
    """A repository to serve, and a thread of it to open."""
    root = workdir / kind
    if kind == "demo":
        subprocess.run([LESLIE, "demo", "--keep", str(root)], check=True, capture_output=True)
        thread = sorted(os.listdir(root / ".leslie" / "threads"))[0]
        return root, thread
    size = int(kind)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    make_repo(root, size)
    return root, bench_thread_id(size - 1)


def main(argv: list[str] | None = None) -> int:
    """Measure, print a Markdown table, exit 1 when a page misses the budget."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="*", default=[1000])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--browser", action="store_true", help="also time a page load in headless chromium")
    args = parser.parse_args(argv)
    workdir = Path(tempfile.mkdtemp(prefix="leslie-bench-board-"))
    rows = []
    try:
        for kind in ["demo", *(str(s) for s in args.sizes)]:
            root, thread = build(kind, workdir)
            process, url, token = start_board(root)
            try:
                for page in ("", "graph", f"thread/{thread}"):
                    ms, size = time_get(f"{url}{page}?token={token}", args.repeats)
                    shown = None
                    if args.browser and os.path.exists(CHROMIUM):
                        shown = time_browser(f"{url}{page}?token={token}", args.repeats)
                    rows.append((kind, "/" + page, ms, size, shown))
            finally:
                process.terminate()
                process.wait(timeout=10)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    print(machine_summary())
    print()
    print("| repository | page | GET (median) | size | chromium load (median) |")
    print("|---|---|---:|---:|---:|")
    slow = False
    for kind, page, ms, size, shown in rows:
        label = "demo" if kind == "demo" else f"{int(kind):,} threads"
        browser = "" if shown is None else f"{shown:.0f} ms"
        print(f"| {label} | `{page}` | {ms:.0f} ms | {size / 1024:.0f} KiB | {browser} |")
        slow = slow or ms > BUDGET_MS or (shown is not None and shown > BUDGET_MS)
    return 1 if slow else 0


if __name__ == "__main__":
    raise SystemExit(main())
