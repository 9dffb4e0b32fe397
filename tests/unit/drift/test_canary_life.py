"""A canary over its life, through the collector's queries: the two versions are compared over
the same minutes (from the canary's first run), an improving canary is never rolled back, and
evidence once strong enough stays so at later looks (the test state is the stored runs)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from collector.drift import sequential
from collector.drift.evaluate import evaluate_drift
from collector.drift.sides import sides
from evaluators.base import Verdict
from tests.support.canary import TRAVEL, canary
from tests.support.store import NOW, RunStore


def ramp(store: RunStore, version: str, minutes: range) -> None:
    """One run a minute `minutes` ago, latency doubling over the hour (slowest now)."""
    for ago in minutes:
        store.run(
            ["search_flights"],
            version=version,
            ago=timedelta(minutes=ago),
            duration_ms=1000.0 * (2.0 - ago / 60.0),
        )


def test_a_canary_that_starts_mid_window_during_a_ramp_is_not_rolled_back(
    store: RunStore,
) -> None:
    # production over the whole hour, the canary only over its last 40 minutes: over the
    # same window the canary looks slower, over the same minutes it is not
    ramp(store, "1.4.0", range(1, 60))
    ramp(store, "1.5.0", range(1, 40))
    for anytime in (True, False):
        rule = canary(metrics=["latency"], sequential=anytime, min_samples=15)
        [outcome] = evaluate_drift(store.cursor, TRAVEL, rule, NOW)
        assert outcome.verdict == Verdict.PASS, outcome.message
        assert outcome.baseline_n == outcome.current_n == 39
        assert outcome.window_start == NOW - timedelta(minutes=39)


def test_the_sides_of_a_canary_start_at_its_first_run() -> None:
    first = NOW - timedelta(minutes=20)
    target = ("travel-desk", "travel-agent", "1.5.0")
    baseline, current = sides(canary(), target, NOW, first)
    assert baseline.start == current.start == first
    per_look = canary(sequential=False)
    baseline, current = sides(per_look, target, NOW, NOW - timedelta(hours=5))
    assert baseline.start == current.start == NOW - timedelta(hours=1)


def test_a_canary_whose_pass_rate_improves_is_never_rolled_back(store: RunStore) -> None:
    # production passes 2 runs in 3; one candidate passes them all, another 1 in 3
    for i in range(60):
        ago = timedelta(minutes=1 + i)
        store.run(version="1.4.0", ago=ago, verdict="fail" if i % 3 == 0 else "pass")
        store.run(version="1.5.0", ago=ago + timedelta(seconds=20), verdict="pass")
        store.run(
            version="1.5.1",
            ago=ago + timedelta(seconds=40),
            verdict="pass" if i % 3 == 0 else "fail",
        )
    outcomes = evaluate_drift(store.cursor, TRAVEL, canary(metrics=["pass_rate"]), NOW)
    improved, worse = sorted(outcomes, key=lambda o: o.target)
    assert (improved.target[2], improved.verdict) == ("1.5.0", Verdict.PASS)
    assert improved.p_value == 1.0
    assert "anytime one-sided p" in improved.message
    assert (worse.target[2], worse.verdict) == ("1.5.1", Verdict.FAIL)


def test_evidence_found_at_one_look_holds_at_the_next(store: RunStore) -> None:
    # the canary calls a new tool for its first 40 minutes, then behaves: the running maximum
    # of the e-process keeps the evidence, and a later look still fails it
    for i in range(60):
        ago = timedelta(minutes=1 + i)
        store.run(["search_flights"], version="1.4.0", ago=ago)
        tools = ["search_flights", "reserve_seat_v2"] if i >= 20 else ["search_flights"]
        store.run(tools, version="1.5.0", ago=ago)
    rule = canary(current={"last": "2h"})
    early = evaluate_drift(store.cursor, TRAVEL, rule, NOW - timedelta(minutes=20))
    late = evaluate_drift(store.cursor, TRAVEL, rule, NOW)
    assert [o.verdict for o in early + late] == [Verdict.FAIL, Verdict.FAIL]
    assert late[0].p_value is not None and early[0].p_value is not None
    assert late[0].p_value <= early[0].p_value


def test_runs_one_round_closed_together_are_compared_in_the_order_they_ended(
    store: RunStore,
) -> None:
    # the versions take turns, but one assembler round closes all their runs at once, and every
    # production trace id sorts before every canary's: by trace id, the runs would be one
    # version's then the other's, a single block of them, too little to judge
    for i in range(20):
        ago = timedelta(minutes=1 + i, seconds=30)
        store.run(["search_flights"], version="1.4.0", ago=ago, trace_id=f"{i:032x}")
        store.run(
            ["search_flights", "reserve_seat_v2"],
            version="1.5.0",
            ago=ago - timedelta(seconds=30),
            trace_id=f"f{i:031x}",
        )
    store.cursor.execute("UPDATE trajectories SET closed_at = ?", [NOW])
    [outcome] = evaluate_drift(store.cursor, TRAVEL, canary(), NOW)
    assert (outcome.verdict, outcome.baseline_n, outcome.current_n) == (Verdict.FAIL, 19, 20)


def test_without_correction_each_test_of_a_canary_is_judged_alone(store: RunStore) -> None:
    for i in range(40):
        store.run(["search_flights"], version="1.4.0", ago=timedelta(minutes=1 + i))
        store.run(["search_flights", "hold_seat"], version="1.5.0", ago=timedelta(minutes=1 + i))
    rule = canary(metrics=["tool_choice", "steps", "error_rate"])
    held = {o.metric: o for o in evaluate_drift(store.cursor, TRAVEL, rule, NOW)}
    alone = {
        o.metric: o
        for o in evaluate_drift(
            store.cursor,
            TRAVEL,
            canary(metrics=rule.metrics, correction="none"),
            NOW,
        )
    }
    assert alone["tool_choice"].p_value is not None and held["tool_choice"].p_value is not None
    assert alone["tool_choice"].p_value < held["tool_choice"].p_value
    assert "weighted-Holm-adjusted" in held["tool_choice"].message


def test_a_metric_shares_its_weight_between_its_tests_and_a_named_rule_keeps_its_own() -> None:
    names = ["pass_rate", "pass_rate:support/approval", "pass_rate:support/budget", "latency"]
    tests = dict.fromkeys([*names, "tool_choice:search", "tool_choice:fetch", "steps"], 0.5)
    rule = canary(metrics=["pass_rate", "latency", "tool_choice"])
    assert sequential.family(rule, tests) == pytest.approx(
        {
            "pass_rate": 4 / 3,
            "pass_rate:support/approval": 4 / 3,
            "pass_rate:support/budget": 4 / 3,
            "latency": 1.0,
            "tool_choice:search": 0.5,
            "tool_choice:fetch": 0.5,
        }
    )
    named = canary(metrics=rule.metrics, weights={"pass_rate:support/approval": 16.0})
    weights = sequential.family(named, tests)
    assert weights["pass_rate:support/approval"] == 16.0
    assert weights["pass_rate"] == weights["pass_rate:support/budget"] == 2.0
