"""The one precedence of decisions, and how results add up to a trajectory verdict."""

from __future__ import annotations

import pytest

from evaluators.base import Decision, Result, Severity, Verdict, overall_verdict, strongest


@pytest.mark.parametrize(
    ("decisions", "expected"),
    [
        ([], Decision.PASS),
        ([Decision.REVIEW, Decision.PASS], Decision.REVIEW),
        ([Decision.FAIL, Decision.REVIEW], Decision.FAIL),
        ([Decision.DOWNGRADE, Decision.FAIL], Decision.DOWNGRADE),
        ([Decision.QUARANTINE, Decision.DOWNGRADE], Decision.QUARANTINE),
        ([Decision.ROLLBACK, Decision.QUARANTINE], Decision.ROLLBACK),
        ([Decision.REVIEW, Decision.DISABLE, Decision.ROLLBACK], Decision.DISABLE),
    ],
)
def test_strongest_decision_wins(decisions: list[Decision], expected: Decision) -> None:
    assert strongest(decisions) == expected


def result(verdict: Verdict, requested: Decision | None = None) -> Result:
    return Result(
        "p", "1", "r", "presence", verdict, Severity.HIGH, "x", "m", requested_decision=requested
    )


@pytest.mark.parametrize(
    ("results", "expected"),
    [
        ([result(Verdict.PASS), result(Verdict.NOT_APPLICABLE)], Verdict.PASS),
        ([result(Verdict.PASS), result(Verdict.REVIEW, Decision.REVIEW)], Verdict.REVIEW),
        ([result(Verdict.FAIL, Decision.REVIEW)], Verdict.REVIEW),
        ([result(Verdict.FAIL, Decision.FAIL), result(Verdict.REVIEW)], Verdict.FAIL),
        ([result(Verdict.FAIL, Decision.QUARANTINE)], Verdict.FAIL),
    ],
)
def test_overall_verdict(results: list[Result], expected: Verdict) -> None:
    assert overall_verdict(results) == expected
