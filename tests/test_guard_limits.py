"""The write guard's bounds: a size cap, time linear in the command's length, and failing closed."""

from __future__ import annotations

import time

import pytest

from leslie.guard import rules as guard
from leslie.guard.paths import Verdict
from leslie.guard.shell import writes as shell_writes
from leslie.ops.threads import spawn
from leslie.store.repository import Repository

OWN = "thread-own"
OTHER = "thread-other"
O = f".leslie/threads/{OTHER}"  # noqa: E741
M = f".leslie/threads/{OWN}"


@pytest.fixture
def root(repo: Repository) -> str:
    spawn(repo, "Own work", thread_id=OWN)
    spawn(repo, "Someone else's", thread_id=OTHER)
    return str(repo.root)


def timed(root: str, command: str) -> tuple[Verdict, float]:
    start = time.perf_counter()
    verdict = guard.check_bash(root, OWN, command, root)
    return verdict, time.perf_counter() - start


def test_past_the_size_cap_a_mention_of_another_thread_is_denied_unread(root: str) -> None:
    filler = "echo " + "a" * guard.SHELL_SIZE_CAP
    verdict, _ = timed(root, f"{filler}; cat {O}/plan.md")
    assert verdict.decision == "deny" and "KiB" in verdict.reason
    assert timed(root, f"{filler}; cat .leslie/config.toml")[0].decision == "deny"
    assert timed(root, f"{filler}; rm -rf .LES''LIE")[0].decision == "deny"
    assert timed(root, f"{filler} > {M}/artifacts/big.txt")[0].decision is None
    assert timed(root, filler)[0].decision is None
    assert timed(root, f"{filler} > {M}/thread.json")[0].decision == "deny"


def test_ten_megabytes_in_well_under_a_second(root: str) -> None:
    """Measured on the development machine: ~0.05 s for each (the bound here is generous for slow CI)."""
    huge = "echo " + "word " * (2 * 1024 * 1024)
    for command in (f"{huge} > {O}/plan.md", f"{huge} > {M}/plan.md", huge + "#" * 100):
        _verdict, seconds = timed(root, command)
        assert seconds < 5, seconds
    assert timed(root, f"{huge} > {O}/plan.md")[0].decision == "deny"


def test_just_under_the_cap_the_analysis_stays_fast(root: str) -> None:
    """A command under the cap is parsed in full, in time linear in its length (many targets, quotes,
    nesting); ~0.3 s measured for the worst of these."""
    unit = f"touch '{M}/a' \"$PWD/b\" c$(echo d) {M}/e{{1,2}}; "
    command = unit * (guard.SHELL_SIZE_CAP // len(unit) - 1)
    verdict, seconds = timed(root, command)
    assert verdict.decision is None and seconds < 5, seconds
    verdict, seconds = timed(root, command + f"rm {O}/plan.md")
    assert verdict.decision == "deny" and seconds < 5, seconds
    nested = "bash -c " + "\"$(" * 2000 + "echo" + ")\"" * 2000
    verdict, seconds = timed(root, nested)
    assert seconds < 5, seconds


def test_too_deep_to_read_fails_closed_only_near_leslie(root: str) -> None:
    deep = "( " * 5000 + f"echo x > {M}/plan.md" + " )" * 5000
    verdict = guard.check_bash(root, OWN, deep, root)
    assert verdict.decision == "deny" and "denied to be safe" in verdict.reason
    assert guard.check_bash(root, OWN, "( " * 5000 + "make" + " )" * 5000, root).decision is None
    assert guard.check_bash(root, OWN, f"(( $(rm {O}/plan.md) > 1 ))", root).decision == "deny"  # it runs


def test_an_unreadable_command_near_leslie_is_denied(root: str) -> None:
    assert guard.check_bash(root, OWN, f"echo 'unbalanced > {O}/plan.md", root).decision == "deny"
    assert guard.check_bash(root, OWN, "echo $(unclosed", root).decision is None


def test_any_internal_error_fails_closed(root: str, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*_args: object, **_kwargs: object) -> None:
        raise RuntimeError("a bug in the analysis")

    monkeypatch.setattr(shell_writes, "write_targets", broken)
    verdict = guard.check_bash(root, OWN, f"echo x > {M}/plan.md", root)
    assert verdict.decision == "deny" and "RuntimeError" in verdict.reason and "denied to be safe" in verdict.reason
    assert guard.check_bash(root, OWN, "make test", root).decision is None
    assert guard.check_bash(root, OWN, "echo x > plan.md", f"{root}/{O}").decision == "deny"
