"""Drift statistics: a known shift is detected, no shift is flagged about alpha of the time."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from evaluators.base import Verdict
from evaluators.drift import (
    compare_categorical,
    compare_continuous,
    compare_proportions,
    judge,
)

ALPHA = 0.05
SEEDS = 400
TOOLS = ["search", "fetch", "answer", "book"]


def tool_counts(rng: np.random.Generator, shares: list[float], runs: int) -> dict[str, float]:
    return dict(Counter(rng.choice(TOOLS, size=runs, p=shares)))


def false_positive_rate(flagged: list[bool]) -> float:
    return sum(flagged) / len(flagged)


def within_alpha(rate: float) -> bool:
    # Binomial(400, 0.05): sd 1.1 percentage points; 4 sd either way.
    return rate <= ALPHA + 0.045


def test_tool_mix_shift_is_detected() -> None:
    rng = np.random.default_rng(1)
    base = tool_counts(rng, [0.4, 0.3, 0.3, 0.0], 500)
    now = tool_counts(rng, [0.1, 0.3, 0.3, 0.3], 500)
    comp = compare_categorical(base, now, 500, 500)
    assert comp.effect_size > 0.3 and comp.p_value < 1e-10
    assert judge(comp, 0.1, ALPHA, 30) == (Verdict.FAIL, None)
    assert "book 0.0%→" in comp.detail


def test_tool_mix_without_shift_flags_about_alpha() -> None:
    flagged = []
    for seed in range(SEEDS):
        rng = np.random.default_rng(seed)
        shares = [0.4, 0.3, 0.2, 0.1]
        comp = compare_categorical(
            tool_counts(rng, shares, 300), tool_counts(rng, shares, 300), 300, 300
        )
        flagged.append(comp.p_value < ALPHA)
    rate = false_positive_rate(flagged)
    assert within_alpha(rate), rate
    assert rate > 0.005  # the test is not inert


def test_identical_single_tool_mix_is_no_drift() -> None:
    comp = compare_categorical({"search": 50}, {"search": 80}, 50, 80)
    assert (comp.effect_size, comp.p_value) == (0.0, 1.0)


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


def test_a_significant_but_small_effect_passes() -> None:
    comp = compare_proportions(20_000, 100_000, 21_000, 100_000)  # 1 point, p ~ 1e-8
    assert comp.p_value < 1e-6
    assert judge(comp, 0.05, ALPHA, 30) == (Verdict.PASS, None)


def test_too_few_samples_is_a_review_never_a_pass() -> None:
    comp = compare_proportions(0, 10, 9, 10)  # a huge change, but 10 runs a side
    assert judge(comp, 0.05, ALPHA, 30) == (Verdict.REVIEW, "insufficient_samples")
    empty = compare_continuous(np.array([]), np.array([1.0, 2.0]))
    assert judge(empty, 0.2, ALPHA, 2) == (Verdict.REVIEW, "insufficient_samples")
