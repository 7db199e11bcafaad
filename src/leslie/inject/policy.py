"""The injection policy of SPEC §7.1: what is known about an agent session in, a decision out.

Pure: no I/O, no clock, no imports beyond the standard library's core, so it is exhaustively testable and
free on the hook's hot path. `leslie.inject.injector` gathers the facts and acts on the decision.

Reasons, in the order they are checked:

| reason      | when                                                                                     |
|-------------|------------------------------------------------------------------------------------------|
| `start`     | nothing injected yet in this session on this thread (every mode)                         |
| `compacted` | a compaction was observed since the last injection (smart, always)                       |
| `changed`   | the context's fingerprint differs from the last injected one (smart, always)             |
| `predicted` | on a user message: `reinject_every_rounds` rounds since the last injection, or the       |
|             | estimated context use since it reached `usage_threshold` of the window (smart, always)   |
| `always`    | mode `always`, on a user message, when none of the above applies                         |

Mode `start` injects only the first time. A session-start event (not a user message) never counts as a
round and never triggers `predicted` or `always`.

The estimate of context use since the last injection comes from, in order of preference: the agent's real
usage (`used`/`size`, e.g. ACP `usage_update`): predicted when it crossed the threshold since the last
injection; else the transcript's growth since the last injection at about 4 bytes a token; else
rounds x `tokens_per_round`. Those two are compared with `usage_threshold x context_window_tokens`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

# The one token estimator (UTF-8 bytes / 4, rounded up), shared with the context budget, `leslie stats` and the
# benchmarks; its module imports only `os` and `stat`, so the policy stays free on the hook's hot path.
from leslie.context.files import BYTES_PER_TOKEN, tokens_of

MODES = ("smart", "always", "start")
REASONS = ("start", "compacted", "changed", "predicted", "always")
__all__ = ["BYTES_PER_TOKEN", "MODES", "REASONS", "Facts", "Settings", "decide", "tokens_of"]


@dataclass(slots=True, kw_only=True)
class Settings:
    """The `[injection]` settings the policy uses (built from `config.InjectionSettings` values)."""

    mode: str
    reinject_every_rounds: int
    context_window_tokens: int
    tokens_per_round: int
    usage_threshold: float

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"unknown injection mode {self.mode!r}: expected smart, always or start")

    @classmethod
    def from_mapping(cls, values: dict[str, Any]) -> Settings:
        """Settings from a mapping such as `InjectionSettings()._asdict()` (extra keys are ignored)."""
        return cls(
            mode=str(values["mode"]),
            reinject_every_rounds=int(values["reinject_every_rounds"]),
            context_window_tokens=int(values["context_window_tokens"]),
            tokens_per_round=int(values["tokens_per_round"]),
            usage_threshold=float(values["usage_threshold"]),
        )

    @property
    def threshold_tokens(self) -> float:
        """Estimated tokens since the last injection at which a compaction is predicted."""
        return self.usage_threshold * self.context_window_tokens


class Facts(NamedTuple):
    """What the integration knows about the session at one event.

    - `first`: nothing was injected yet in this session on this thread.
    - `changed`: the context's fingerprint differs from the one last injected.
    - `compacted`: a compaction was observed (signal, marker or usage drop) since the last injection.
    - `message`: the event is a user message (a round), not a session start.
    - `rounds_since`: rounds completed since the last injection (the current message not counted).
    - `usage`, `usage_at_injection`: the agent's real `(used, size)` now and when last injected, if reported.
    - `transcript_bytes`, `transcript_bytes_at_injection`: the transcript's size now and then, if known.
    """

    first: bool = False
    changed: bool = False
    compacted: bool = False
    message: bool = True
    rounds_since: int = 0
    usage: tuple[int, int] | None = None
    usage_at_injection: tuple[int, int] | None = None
    transcript_bytes: int | None = None
    transcript_bytes_at_injection: int | None = None


def _over_threshold(used: int, size: int, threshold: float) -> bool:
    return size > 0 and used >= threshold * size


def estimate_since_injection(settings: Settings, facts: Facts) -> tuple[int, str]:
    """Estimated tokens added to the context since the last injection, and where the figure comes from.

    `usage` (real, reported by the agent: the tokens used now, minus those used at the last injection when
    the window did not shrink since), else `transcript` (growth of the transcript since the last injection,
    4 bytes a token; a transcript that shrank counts from zero), else `rounds` (rounds x tokens_per_round).
    """
    if facts.usage is not None:
        used = facts.usage[0]
        before = facts.usage_at_injection[0] if facts.usage_at_injection is not None else 0
        return (used - before if used >= before else used), "usage"
    if facts.transcript_bytes is not None:
        now = facts.transcript_bytes
        then = facts.transcript_bytes_at_injection
        grown = now - then if then is not None and now >= then else now
        return tokens_of(grown), "transcript"
    return facts.rounds_since * settings.tokens_per_round, "rounds"


def compaction_predicted(settings: Settings, facts: Facts) -> bool:
    """True when a compaction has probably happened (or is imminent) since the last injection."""
    every = settings.reinject_every_rounds
    if every > 0 and facts.rounds_since >= every:
        return True
    if facts.usage is not None:
        # Real usage: predicted once, when the window crossed the threshold since the last injection (an
        # injection made while already above it does not repeat on every message until the compaction).
        used, size = facts.usage
        if not _over_threshold(used, size, settings.usage_threshold):
            return False
        before = facts.usage_at_injection
        return before is None or not _over_threshold(before[0], before[1], settings.usage_threshold)
    tokens, _source = estimate_since_injection(settings, facts)
    return tokens >= settings.threshold_tokens


def decide(settings: Settings, facts: Facts) -> str | None:
    """The reason to inject the `<thread_context>` now (one of REASONS), or None to inject nothing."""
    if facts.first:
        return "start"
    if settings.mode == "start":
        return None
    if facts.compacted:
        return "compacted"
    if facts.changed:
        return "changed"
    if not facts.message:
        return None
    if compaction_predicted(settings, facts):
        return "predicted"
    return "always" if settings.mode == "always" else None
