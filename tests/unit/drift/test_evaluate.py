"""Drift rules over a store: a shifted tool mix fails with a low p-value and its runs as
evidence; the same mix passes; too few runs is a review; the baseline is never its own target."""

from __future__ import annotations

from datetime import timedelta

import pytest

from collector.drift.evaluate import corrected, evaluate_drift, find_targets
from collector.drift.sides import sides
from evaluators.base import Verdict
from evaluators.drift import Comparison
from evaluators.window import DriftRule
from tests.support.canary import RUNS, TRAVEL, A, B, canary, send
from tests.support.store import NOW, RunStore


def test_a_shifted_tool_mix_fails_with_a_low_p_value_and_the_new_runs_as_evidence(
    store: RunStore,
) -> None:
    send(store, "1.4.0", A)
    b_runs = send(store, "1.5.0", B)
    [outcome] = evaluate_drift(store.cursor, TRAVEL, canary(), NOW)
    assert outcome.target == ("travel-desk", "travel-agent", "1.5.0")
    assert (outcome.metric, outcome.verdict) == ("tool_choice", Verdict.FAIL)
    assert outcome.p_value is not None and outcome.p_value < 0.01
    assert (outcome.baseline_n, outcome.current_n) == (RUNS, RUNS)
    assert outcome.evidence and set(outcome.evidence) <= b_runs
    assert "new: reserve_seat_v2" in outcome.message
    assert "no longer always: hold_seat" in outcome.message


def test_the_same_tool_mix_passes(store: RunStore) -> None:
    send(store, "1.4.0", A)
    send(store, "1.5.0", A)
    [outcome] = evaluate_drift(store.cursor, TRAVEL, canary(), NOW)
    assert outcome.verdict == Verdict.PASS
    assert outcome.p_value is not None and outcome.p_value >= 0.01
    assert outcome.evidence == ()


def test_too_few_runs_on_a_side_is_a_review_not_a_pass(store: RunStore) -> None:
    send(store, "1.4.0", A, runs=5)
    send(store, "1.5.0", B, runs=5)
    [outcome] = evaluate_drift(store.cursor, TRAVEL, canary(), NOW)
    assert outcome.verdict == Verdict.REVIEW
    assert outcome.message.startswith("fewer than 15 samples on a side")


def test_longer_runs_fail_the_steps_metric(store: RunStore) -> None:
    for i in range(RUNS):
        store.run(A, version="1.4.0", steps=4 + i % 2)
        store.run(A, version="1.5.0", steps=12 + i % 3)
    [outcome] = evaluate_drift(store.cursor, TRAVEL, canary(metrics=["steps"]), NOW)
    assert (outcome.metric, outcome.verdict) == ("steps", Verdict.FAIL)
    assert outcome.effect_size == 1.0  # KS D: every candidate run is longer than every baseline


def test_only_candidates_inside_the_window_are_targets(store: RunStore) -> None:
    store.run(version="1.4.0")
    store.run(version="1.5.0")
    store.run(version="1.5.1", ago=timedelta(hours=2))  # before the current window
    store.run(version="1.5.2", service="other-desk")  # outside the selector
    start, end = NOW - timedelta(hours=1), NOW
    assert find_targets(store.cursor, TRAVEL, start, end, "1.5.*") == [
        ("travel-desk", "travel-agent", "1.5.0")
    ]
    assert len(find_targets(store.cursor, TRAVEL, start, end)) == 2


def test_the_baseline_version_is_not_compared_with_itself() -> None:
    assert sides(canary(), ("travel-desk", "travel-agent", "1.4.2"), NOW) is None
    baseline, current = sides(canary(), ("travel-desk", "travel-agent", "1.5.0"), NOW)
    assert baseline.description == "service.version 1.4.* over the same window"
    assert (baseline.start, baseline.end) == (current.start, current.end)


def test_a_previous_window_baseline_ends_where_the_current_one_starts() -> None:
    rule = DriftRule.model_validate(
        {
            "id": "r",
            "type": "drift",
            "reason": "drifted",
            "baseline": {"last": "1d"},
            "current": {"last": "1h"},
        }
    )
    baseline, current = sides(rule, ("travel-desk", "travel-agent", "1.5.0"), NOW)
    assert current.start == NOW - timedelta(hours=1) == baseline.end
    assert baseline.start == NOW - timedelta(hours=25)
    assert baseline.description == "the 86400 s before the current window"


def comparison(p_value: float, n: int = 60) -> Comparison:
    return Comparison(0.5, p_value, n, n, 1, "")


def test_holm_judges_every_test_of_a_target_as_one_family() -> None:
    # Each of four tests would fail alone at alpha 0.01; together only the strongest does.
    family = [comparison(0.004), comparison(0.008), comparison(0.009), comparison(0.0001)]
    assert corrected(canary(), family) == pytest.approx([0.012, 0.016, 0.016, 0.0004])
    assert corrected(canary(correction="none"), family) == [0.004, 0.008, 0.009, 0.0001]


def test_a_test_with_too_few_samples_is_left_out_of_the_family() -> None:
    family = [comparison(0.004), comparison(0.0001, n=5)]
    assert corrected(canary(), family) == [0.004, 0.0001]


def test_the_message_shows_the_raw_and_the_adjusted_p_value(store: RunStore) -> None:
    send(store, "1.4.0", A)
    send(store, "1.5.0", B)
    rule = canary(metrics=["tool_choice", "steps", "error_rate"])
    outcomes = {o.metric: o for o in evaluate_drift(store.cursor, TRAVEL, rule, NOW)}
    tool = outcomes["tool_choice"]
    assert tool.verdict == Verdict.FAIL
    assert "Holm-adjusted over " in tool.message
    assert outcomes["error_rate"].p_value == 1.0


def test_each_tool_of_a_tool_mix_counts_in_the_family() -> None:
    mix = Comparison(0.3, 0.003, 60, 60, 0, "", parts=(0.001, 0.5, 0.9))
    # four tests in all: the tool mix is judged on its best tool, 4 x 0.001
    assert corrected(canary(), [mix, comparison(0.2)]) == pytest.approx([0.004, 0.6])
