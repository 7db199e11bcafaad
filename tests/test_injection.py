"""injection.py: the pure policy of SPEC §7.1, exhaustively over its decision table."""

from __future__ import annotations

import itertools

import pytest

from leslie.inject.policy import (
    MODES,
    REASONS,
    Facts,
    Settings,
    compaction_predicted,
    decide,
    estimate_since_injection,
    tokens_of,
)
from leslie.store.config import InjectionSettings


def settings(**changes: object) -> Settings:
    values = InjectionSettings()._asdict() | changes
    return Settings.from_mapping(values)


# -- the decision table -------------------------------------------------------------------------------------
def expected(mode: str, first: bool, compacted: bool, changed: bool, message: bool, predicted: bool) -> str | None:
    """SPEC §7.1, written out as the table reads (independently of the implementation's order of checks)."""
    if first:
        return "start"  # every mode injects the first time
    if mode == "start":
        return None  # "start": the first message only
    if compacted:
        return "compacted"
    if changed:
        return "changed"
    if not message:
        return None  # a session start is not a round: nothing is predicted, "always" means every *message*
    if predicted:
        return "predicted"
    return "always" if mode == "always" else None


# How a compaction comes to be predicted: not at all, by the round count, or by each token estimate.
PREDICTIONS = {
    "none": {"rounds_since": 3},
    "rounds": {"rounds_since": 20},
    "usage": {"rounds_since": 3, "usage": (185_000, 200_000), "usage_at_injection": (20_000, 200_000)},
    "transcript": {"rounds_since": 3, "transcript_bytes": 4 * 190_000, "transcript_bytes_at_injection": 1_000},
    "token_rounds": {"rounds_since": 19},  # 19 x 10,000 tokens >= 0.9 x 200,000 (with tokens_per_round 10,000)
}


@pytest.mark.parametrize(("mode", "first", "compacted", "changed", "message", "prediction"), list(
    itertools.product(MODES, [False, True], [False, True], [False, True], [False, True], PREDICTIONS)))
def test_decision_table(mode: str, first: bool, compacted: bool, changed: bool, message: bool,
                        prediction: str) -> None:
    policy = settings(mode=mode, tokens_per_round=10_000 if prediction == "token_rounds" else 4_000)
    facts = Facts(first=first, compacted=compacted, changed=changed, message=message, **PREDICTIONS[prediction])
    want = expected(mode, first, compacted, changed, message, predicted=prediction != "none")
    assert decide(policy, facts) == want
    assert want is None or want in REASONS


# -- the estimate of context use since the last injection -----------------------------------------------------
def test_real_usage_is_preferred_over_the_transcript_and_the_rounds() -> None:
    facts = Facts(rounds_since=100, usage=(30_000, 200_000), usage_at_injection=(10_000, 200_000),
                  transcript_bytes=10**9, transcript_bytes_at_injection=0)
    assert estimate_since_injection(settings(), facts) == (20_000, "usage")
    assert not compaction_predicted(settings(reinject_every_rounds=0), facts)


def test_real_usage_predicts_once_when_the_threshold_is_crossed() -> None:
    policy = settings(reinject_every_rounds=0)
    below = Facts(rounds_since=5, usage=(179_999, 200_000), usage_at_injection=(5_000, 200_000))
    crossed = Facts(rounds_since=5, usage=(180_000, 200_000), usage_at_injection=(5_000, 200_000))
    never_injected_with_usage = Facts(rounds_since=5, usage=(190_000, 200_000))
    injected_while_above = Facts(rounds_since=5, usage=(195_000, 200_000), usage_at_injection=(185_000, 200_000))
    assert decide(policy, below) is None
    assert decide(policy, crossed) == "predicted"
    assert decide(policy, never_injected_with_usage) == "predicted"
    assert decide(policy, injected_while_above) is None  # not again on every message until the compaction


def test_real_usage_threshold_is_a_fraction_of_the_reported_window() -> None:
    policy = settings(reinject_every_rounds=0, context_window_tokens=1_000_000, usage_threshold=0.5)
    assert decide(policy, Facts(rounds_since=1, usage=(60_000, 100_000))) == "predicted"
    assert decide(policy, Facts(rounds_since=1, usage=(40_000, 100_000))) is None


def test_transcript_growth_counts_four_bytes_a_token() -> None:
    policy = settings(reinject_every_rounds=0, context_window_tokens=1_000, usage_threshold=0.5)
    grown = Facts(rounds_since=1, transcript_bytes=10_000 + 2_000, transcript_bytes_at_injection=10_000)
    short = Facts(rounds_since=1, transcript_bytes=10_000 + 1_996, transcript_bytes_at_injection=10_000)
    assert estimate_since_injection(policy, grown) == (500, "transcript")
    assert decide(policy, grown) == "predicted"
    assert decide(policy, short) is None


def test_a_transcript_that_shrank_counts_from_zero() -> None:
    facts = Facts(rounds_since=1, transcript_bytes=400, transcript_bytes_at_injection=10_000)
    assert estimate_since_injection(settings(), facts) == (100, "transcript")


def test_without_usage_or_transcript_rounds_times_tokens_per_round() -> None:
    policy = settings(reinject_every_rounds=0, tokens_per_round=4_000)  # threshold 180,000 tokens
    assert estimate_since_injection(policy, Facts(rounds_since=44)) == (176_000, "rounds")
    assert decide(policy, Facts(rounds_since=44)) is None
    assert decide(policy, Facts(rounds_since=45)) == "predicted"


@pytest.mark.parametrize(("every", "rounds", "want"), [(20, 19, None), (20, 20, "predicted"), (20, 21, "predicted"),
                                                       (1, 1, "predicted"), (0, 40, None)])
def test_round_count_heuristic(every: int, rounds: int, want: str | None) -> None:
    policy = settings(reinject_every_rounds=every, tokens_per_round=1)  # tokens never reach the threshold
    assert decide(policy, Facts(rounds_since=rounds)) == want


def test_session_start_never_predicts() -> None:
    facts = Facts(rounds_since=500, message=False, usage=(199_000, 200_000))
    for mode in MODES:
        assert decide(settings(mode=mode), facts) is None


# -- settings ---------------------------------------------------------------------------------------------------
def test_settings_follow_the_config_defaults() -> None:
    policy = settings()
    defaults = InjectionSettings()
    assert (policy.mode, policy.reinject_every_rounds, policy.context_window_tokens, policy.tokens_per_round,
            policy.usage_threshold) == (defaults.mode, defaults.reinject_every_rounds,
                                        defaults.context_window_tokens, defaults.tokens_per_round,
                                        defaults.usage_threshold)
    assert policy.threshold_tokens == pytest.approx(180_000)
    assert "smart" in repr(policy)


def test_unknown_mode_is_rejected() -> None:
    with pytest.raises(ValueError, match="sometimes"):
        settings(mode="sometimes")


@pytest.mark.parametrize(("size", "tokens"), [(0, 0), (1, 1), (4, 1), (5, 2), (4000, 1000), (-3, 0)])
def test_tokens_of(size: int, tokens: int) -> None:
    assert tokens_of(size) == tokens


def test_facts_repr_names_every_field() -> None:
    text = repr(Facts(first=True, rounds_since=2))
    assert "first=True" in text and "rounds_since=2" in text and "usage=None" in text

