"""Drift statistics: a known shift is detected, no shift is flagged about alpha of the time."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from evaluators.base import Verdict
from evaluators.drift import (
    Comparison,
    compare_continuous,
    compare_proportions,
    compare_tool_mix,
    holm,
    judge,
)

ALPHA = 0.05
SEEDS = 400
TOOLS = ["search", "fetch", "answer", "book"]


def tool_mix(runs: list[list[str]]) -> tuple[dict[str, float], dict[str, float]]:
    """(calls, presence) per tool of these runs, as the store's query counts them."""
    calls = Counter(tool for run in runs for tool in run)
    presence = Counter(tool for run in runs for tool in set(run))
    return dict(calls), dict(presence)


def clustered_runs(rng: np.random.Generator, count: int) -> list[list[str]]:
    """One run in five repeats a tool eight times; the others call one tool each."""
    runs = []
    for _ in range(count):
        tool = str(rng.choice(TOOLS[:3], p=[0.5, 0.3, 0.2]))
        runs.append([tool] * (8 if rng.random() < 0.2 else 1))
    return runs


def compare_runs(baseline: list[list[str]], current: list[list[str]]) -> Comparison:
    (b_calls, b_used), (c_calls, c_used) = tool_mix(baseline), tool_mix(current)
    return compare_tool_mix((b_calls, c_calls), (b_used, c_used), len(baseline), len(current))


def false_positive_rate(flagged: list[bool]) -> float:
    return sum(flagged) / len(flagged)


def within_alpha(rate: float) -> bool:
    # Binomial(400, 0.05): sd 1.1 percentage points; 4 sd either way.
    return rate <= ALPHA + 0.045


def test_a_new_tool_in_30_percent_of_60_runs_fails_at_alpha_001() -> None:
    baseline = [["search", "answer"]] * 60
    current = [["search", "book", "answer"]] * 18 + [["search", "answer"]] * 42
    comp = compare_runs(baseline, current)
    # Fisher's exact test on 18/60 runs against 0/60, times the 3 tools tested
    assert comp.p_value == pytest.approx(3 * 1.7023857793953295e-06, rel=1e-6)
    assert comp.effect_size > 0.2
    assert judge(comp, 0.1, 0.01, 30) == (Verdict.FAIL, None)
    assert "book 0.0%→" in comp.detail


def test_clustered_calls_do_not_make_an_unchanged_mix_fail() -> None:
    flagged = []
    for seed in range(SEEDS):
        rng = np.random.default_rng(seed)
        comp = compare_runs(clustered_runs(rng, 60), clustered_runs(rng, 60))
        flagged.append(comp.p_value < ALPHA)
    rate = false_positive_rate(flagged)
    assert within_alpha(rate), rate


def test_a_run_repeating_a_tool_is_one_run_of_evidence() -> None:
    # Same share of runs calling each tool; one current run calls book 30 times.
    baseline = [["search"]] * 40 + [["book"]] * 20
    current = [["search"]] * 40 + [["book"]] * 19 + [["book"] * 30]
    comp = compare_runs(baseline, current)
    assert comp.effect_size > 0.1  # the call mix moved...
    assert comp.p_value == 1.0  # ...but not the runs calling each tool


def test_identical_single_tool_mix_is_no_drift() -> None:
    comp = compare_runs([["search"]] * 50, [["search"]] * 80)
    assert (comp.effect_size, comp.p_value) == (0.0, 1.0)


def test_holm_adjusts_step_down_and_keeps_the_order() -> None:
    assert holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    assert holm([0.5, 0.001]) == pytest.approx([0.5, 0.002])
    assert holm([]) == []


@pytest.mark.parametrize("scale", [1.3, 0.7])
def test_continuous_shift_is_detected_with_its_percentiles(scale: float) -> None:
    rng = np.random.default_rng(2)
    base = rng.lognormal(5, 0.4, 400)
    now = rng.lognormal(5, 0.4, 400) * scale
    comp = compare_continuous(base, now, " ms")
    assert comp.p_value < 1e-6 and comp.effect_size > 0.2
    assert comp.direction == (1 if scale > 1 else -1)
    assert comp.detail.startswith("p50 ") and " ms (" in comp.detail
    assert judge(comp, 0.2, ALPHA, 30)[0] == Verdict.FAIL


def test_continuous_without_shift_flags_about_alpha() -> None:
    flagged = []
    for seed in range(SEEDS):
        rng = np.random.default_rng(seed)
        comp = compare_continuous(rng.gamma(2, 50, 200), rng.gamma(2, 50, 250))
        flagged.append(comp.p_value < ALPHA)
    rate = false_positive_rate(flagged)
    assert within_alpha(rate) and rate > 0.005, rate


def test_continuous_ignores_unknown_values() -> None:
    comp = compare_continuous(np.array([1.0, np.nan, 2.0]), np.array([np.nan, 3.0]))
    assert (comp.baseline_n, comp.current_n) == (2, 1)


def test_error_rate_rise_is_detected() -> None:
    comp = compare_proportions(10, 500, 60, 500)  # 2% -> 12%
    assert comp.effect_size == pytest.approx(0.10)
    assert comp.p_value < 1e-8 and comp.direction == 1
    assert judge(comp, 0.05, ALPHA, 30) == (Verdict.FAIL, None)


def test_proportions_without_shift_flag_about_alpha() -> None:
    flagged = []
    for seed in range(SEEDS):
        rng = np.random.default_rng(seed)
        a, b = rng.binomial(400, 0.2), rng.binomial(400, 0.2)
        flagged.append(compare_proportions(a, 400, b, 400).p_value < ALPHA)
    rate = false_positive_rate(flagged)
    assert within_alpha(rate) and rate > 0.005, rate


def test_rare_events_are_tested_exactly() -> None:
    # 0 of 60 against 7 of 60: z would say p = 0.007, Fisher's exact test 0.013
    comp = compare_proportions(0, 60, 7, 60)
    assert comp.p_value == pytest.approx(0.012984457997245721)
    assert judge(comp, 0.05, 0.01, 30) == (Verdict.PASS, None)


def test_shares_of_repeated_cases_use_the_normal_approximation() -> None:
    comp = compare_proportions(10.5, 100, 30.25, 100)
    assert 0 < comp.p_value < 1e-3 and comp.direction == 1


def test_a_significant_but_small_effect_passes() -> None:
    comp = compare_proportions(20_000, 100_000, 21_000, 100_000)  # 1 point, p ~ 1e-8
    assert comp.p_value < 1e-6
    assert judge(comp, 0.05, ALPHA, 30) == (Verdict.PASS, None)


def test_too_few_samples_is_a_review_never_a_pass() -> None:
    comp = compare_proportions(0, 10, 9, 10)  # a huge change, but 10 runs a side
    assert judge(comp, 0.05, ALPHA, 30) == (Verdict.REVIEW, "insufficient_samples")
    empty = compare_continuous(np.array([]), np.array([1.0, 2.0]))
    assert judge(empty, 0.2, ALPHA, 2) == (Verdict.REVIEW, "insufficient_samples")
