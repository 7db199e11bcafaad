"""benchmarks/bench_budget.py (issue 33) still runs and says what docs/context.md's table says, in short."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_budget.py"


def test_the_budget_benchmark_runs_and_real_content_is_what_it_inlines(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, str(BENCH), "--rounds", "3", "--budgets", "0,4000",
                           "--scenarios", "fresh,project"], capture_output=True, text=True, check=False,
                          cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stderr
    rows = {tuple(cells[1:3]): cells for line in proc.stdout.splitlines()
            if (cells := [c.strip() for c in line.split("|")]) and len(cells) > 9 and cells[2][:1].isdigit()}
    assert rows[("fresh", "4,000")][4] == "82 (82)"  # every fresh asset marked empty, none inlined
    assert rows[("fresh", "0")][4] == "0 (0)" and rows[("project", "0")][4] == "0 (0)"
    reads, empty = rows[("project", "4,000")][4].rstrip(")").split(" (")
    assert int(reads) > int(empty) > 0  # real files inlined whole, scaffold marked
    assert "(chosen)" in proc.stdout
