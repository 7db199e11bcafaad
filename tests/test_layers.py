"""The package's layers (docs/design.md, "The house"): the import-linter contracts in pyproject.toml hold."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_imports_go_only_downward_and_never_in_circles() -> None:
    proc = subprocess.run([sys.executable, "-c", "import sys; from importlinter.cli import lint_imports_command; "
                           "sys.argv = ['lint-imports', '--no-cache']; lint_imports_command()"],
                          check=False, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "0 broken" in proc.stdout
