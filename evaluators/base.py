"""Closed vocabularies (verdicts, severities, decisions), the Result type, and one precedence."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum


class Verdict(StrEnum):
    PASS = "pass"
    FAIL = "fail"
    REVIEW = "review"
    NOT_APPLICABLE = "not_applicable"


class Severity(StrEnum):
    INFO = "info"
    LOW = "low"
    MEDIUM = "medium"
    HIGH = "high"
    CRITICAL = "critical"


class Decision(StrEnum):
    PASS = "PASS"
    REVIEW = "REVIEW"
    FAIL = "FAIL"
    DOWNGRADE = "DOWNGRADE"
    QUARANTINE = "QUARANTINE"
    ROLLBACK = "ROLLBACK"
    DISABLE = "DISABLE"


# The one precedence, strongest first: when several apply, the strongest is shown and all
# reasons are kept. Everything else (strength numbers, SQL ordering, help text) derives from it.
DECISION_PRECEDENCE: tuple[Decision, ...] = (
    Decision.DISABLE,
    Decision.ROLLBACK,
    Decision.QUARANTINE,
    Decision.DOWNGRADE,
    Decision.FAIL,
    Decision.REVIEW,
    Decision.PASS,
)
DECISION_STRENGTH = {d: i for i, d in enumerate(DECISION_PRECEDENCE)}  # 0 is the strongest


def precedence_text(separator: str = " > ") -> str:
    """The precedence as people read it: `DISABLE > ROLLBACK > ... > PASS`."""
    return separator.join(d.value for d in DECISION_PRECEDENCE)


def strongest(decisions: list[Decision]) -> Decision:
    return min(decisions, key=DECISION_STRENGTH.__getitem__, default=Decision.PASS)


@dataclass(frozen=True)
class Finding:
    """What one evaluator concluded: the verdict and the steps that prove it."""

    verdict: Verdict
    message: str
    evidence: tuple[str, ...] = ()
    score: float | None = None
    reason: str | None = None  # overrides the rule's reason code (e.g. trace_incomplete)
    traces: tuple[str, ...] = ()  # a session rule's evidence runs (turns)


@dataclass(frozen=True)
class Result:
    """One rule's verdict on one trajectory, ready to store."""

    pack: str
    pack_version: str
    rule_id: str
    rule_type: str
    verdict: Verdict
    severity: Severity
    reason: str
    message: str
    evidence: tuple[str, ...] = field(default=())
    score: float | None = None
    requested_decision: Decision | None = None
    traces: tuple[str, ...] = ()  # a session result's evidence runs
    audit: bool = False  # a pass or fail the pack's review.audit sends to a person to check


def overall_verdict(results: list[Result]) -> Verdict:
    """FAIL if a failed rule asks for more than a review, REVIEW if any asks for a review (or
    could not decide), else PASS."""
    if any(
        r.verdict == Verdict.FAIL and r.requested_decision not in (None, Decision.REVIEW)
        for r in results
    ):
        return Verdict.FAIL
    if any(r.verdict in (Verdict.FAIL, Verdict.REVIEW) for r in results):
        return Verdict.REVIEW
    return Verdict.PASS
