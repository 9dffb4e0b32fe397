"""Reliability from the store: attempts per case, pass@k and pass^k as brute force counts them,
and the rule's verdict per target."""

from __future__ import annotations

from datetime import timedelta
from itertools import combinations
from typing import Any

import pytest

from collector.drift.reliability import (
    TargetReliability,
    by_target,
    case_runs,
    evaluate_reliability,
    judge_target,
    report,
)
from collector.drift.sides import Side
from evaluators.base import Verdict
from evaluators.rulepack import Selector
from evaluators.window import ReliabilityRule
from tests.support.store import NOW, RunStore

OK = ["search_flights", "verify_booking"]
BAD = ["search_flights"]
# case -> its attempts, oldest first: True passes
CASES = {
    "lis-osl": [True, True, True, True],
    "lis-ber": [True, False, True, False, False],
    "lis-mad": [False, True, False],
}


def attempts(store: RunStore, cases: dict[str, list[bool]] = CASES, **run: Any) -> dict:
    """Store every attempt; case -> [(trace id, passed)] oldest first."""
    stored: dict[str, list[tuple[str, bool]]] = {}
    minute = 100
    for case, outcomes in cases.items():
        for passed in outcomes:
            minute -= 1
            trace_id = store.run(
                OK if passed else BAD,
                case=case,
                verdict="pass" if passed else "fail",
                ago=timedelta(minutes=minute),
                **run,
            )
            stored.setdefault(case, []).append((trace_id, passed))
    return stored


def brute_force(outcomes: list[bool], k: int) -> tuple[float, float]:
    """pass@k and pass^k as the share of all k-subsets of the attempts with any / every pass."""
    draws = list(combinations(outcomes, k))
    return sum(any(d) for d in draws) / len(draws), sum(all(d) for d in draws) / len(draws)


def test_attempts_are_counted_per_case_with_failures_newest_first(store: RunStore) -> None:
    stored = attempts(store)
    store.run(OK)  # a run without a case is no attempt of anything
    cases = {c.case_id: c for c in case_runs(store.cursor, Side())}
    assert {name: (c.n, c.c) for name, c in cases.items()} == {
        "lis-osl": (4, 4),
        "lis-ber": (5, 2),
        "lis-mad": (3, 1),
    }
    failed = [trace_id for trace_id, passed in reversed(stored["lis-ber"]) if not passed]
    assert cases["lis-ber"].failed == failed
    assert cases["lis-ber"].trajectory_consistency == pytest.approx(3 / 5)
    assert cases["lis-osl"].consistency == 1.0


@pytest.mark.parametrize("k", [1, 2, 3])
def test_pass_at_k_and_pass_hat_k_match_brute_force(store: RunStore, k: int) -> None:
    attempts(store)
    for case in case_runs(store.cursor, Side()):
        at, hat = brute_force(CASES[case.case_id], k)
        assert case.pass_at(k) == pytest.approx(at)
        assert case.pass_hat(k) == pytest.approx(hat)
    [target] = by_target(case_runs(store.cursor, Side()))
    expected = [brute_force(outcomes, k) for outcomes in CASES.values()]
    assert target.pass_at(k) == pytest.approx(sum(a for a, _ in expected) / len(CASES))
    assert target.pass_hat(k) == pytest.approx(sum(h for _, h in expected) / len(CASES))


def test_a_case_with_fewer_than_k_attempts_has_no_pass_at_k(store: RunStore) -> None:
    attempts(store)
    cases = {c.case_id: c for c in case_runs(store.cursor, Side())}
    assert cases["lis-mad"].pass_at(4) is None
    assert cases["lis-osl"].pass_at(4) == 1.0


def test_with_a_rule_an_attempt_passes_when_that_rule_passed(store: RunStore) -> None:
    rule = "travel/verifies-the-booking"
    for verdict in ("pass", "fail", "not_applicable"):
        store.result(store.run(OK, case="lis-osl", verdict="fail"), rule, verdict)
    [case] = case_runs(store.cursor, Side(), rule)
    assert (case.n, case.c) == (2, 1)  # the not-applicable attempt is left out


def test_the_report_gives_each_case_and_each_target_its_gap(store: RunStore) -> None:
    attempts(store)
    out = report(case_runs(store.cursor, Side()), [2])
    ber = next(row for row in out["cases"] if row["case"] == "lis-ber")
    at, hat = brute_force(CASES["lis-ber"], 2)
    assert (ber["n"], ber["c"]) == (5, 2)
    assert ber["gap@2"] == pytest.approx(at - hat)
    [target] = out["targets"]
    assert (target["cases"], target["n"], target["c"]) == (3, 12, 7)


def rule(**fields: Any) -> ReliabilityRule:
    return ReliabilityRule.model_validate(
        {"id": "r", "type": "reliability", "reason": "unreliable", **fields}
    )


def test_a_target_under_the_minimum_fails_with_its_worst_cases_failures_first(
    store: RunStore,
) -> None:
    stored = attempts(store)
    [(outcome, found)] = evaluate_reliability(
        store.cursor, Selector(service="travel-desk"), rule(metric="pass_hat_k", k=2, min=0.5), NOW
    )
    assert (outcome.metric, outcome.verdict) == ("pass_hat_k@2", Verdict.FAIL)
    hats = [brute_force(outcomes, 2)[1] for outcomes in CASES.values()]
    assert outcome.score == pytest.approx(sum(hats) / len(hats))
    worst = [t for t, passed in reversed(stored["lis-mad"]) if not passed]  # 1 of 3 passes
    assert list(outcome.evidence[: len(worst)]) == worst
    assert isinstance(found, TargetReliability) and len(found.cases) == 3


def test_a_target_at_the_minimum_passes(store: RunStore) -> None:
    attempts(store)
    [(outcome, _)] = evaluate_reliability(
        store.cursor, Selector(), rule(metric="pass_at_k", k=3, min=0.9), NOW
    )
    assert outcome.verdict == Verdict.PASS  # every case passes at least once in 3 attempts
    assert outcome.evidence == ()


def test_too_few_cases_with_k_attempts_is_a_review(store: RunStore) -> None:
    attempts(store)
    found = TargetReliability(("travel-desk", "travel-agent", "1.4.0"))
    found.cases = case_runs(store.cursor, Side())
    outcome = judge_target(rule(metric="pass_at_k", k=5, min=0.5, min_cases=2), found, NOW, NOW, 10)
    assert (outcome.verdict, outcome.reason) == (Verdict.REVIEW, "insufficient_samples")
    assert "1 case(s) with at least 5 attempts (need 2)" in outcome.message
