"""Gemini CLI 0.61.0 with hooks: leslie has no `leslie hook gemini` yet (issue 15), so these checks wait for it.

Gemini behind `leslie acp` is checked in test_acp.py. What these will check, once issue 15 lands, is what the
other clients' files check: the block once at start, nothing on an unchanged turn, once after a change, once
after compression, a write into the referenced thread denied (write_file, run_shell_command), the own plan
written.
"""

from __future__ import annotations

import pytest

pytestmark = [pytest.mark.gemini, pytest.mark.skip(reason="issue 15: leslie has no Gemini CLI hook yet")]

CHECKS = ["block_once_at_start", "nothing_on_an_unchanged_turn", "once_more_after_a_change",
          "once_after_compression", "once_after_clear", "file_tool_write_into_the_referenced_thread_denied",
          "shell_write_into_the_referenced_thread_denied", "write_into_the_own_plan_allowed"]


@pytest.mark.parametrize("check", CHECKS)
def test_gemini_hooks(check: str) -> None:
    """One placeholder per check, so the report lists what is still to prove."""
