"""Two-sample comparisons behind drift rules: is the current window different from the baseline?

Each comparison gives an effect size (how different, on a scale a threshold can be put on) and a
p-value (how sure): Jensen-Shannon distance and a chi-square test for a categorical mix (which
tools are called), Kolmogorov-Smirnov for continuous samples (steps, latency, cost, tokens) with
the shift of the median and the 95th percentile, and a two-proportion z-test for rates (errors,
passes). A rule fails only when both say so; too few samples is a review, never a pass.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
from scipy import stats
from scipy.spatial.distance import jensenshannon

from evaluators.base import Verdict


@dataclass(frozen=True)
class Comparison:
    effect_size: float
    p_value: float
    baseline_n: int
    current_n: int
    direction: int  # +1: current higher (or a category gained share), -1 lower, 0 unchanged
    detail: str


def compare_categorical(
    baseline: Mapping[str, float],
    current: Mapping[str, float],
    baseline_n: int,
    current_n: int,
) -> Comparison:
    """Weights per category on each side, from `baseline_n` and `current_n` sample units.

    The chi-square table gives each side as many observations as it has units (runs, or cases
    when cases repeat), not as many as it has categorical events: several tool calls of one run
    are not independent draws, and counting them each would overstate the evidence.
    """
    seen = set(baseline) | set(current)
    categories = sorted(c for c in seen if baseline.get(c) or current.get(c))
    if not categories or baseline_n <= 0 or current_n <= 0:
        return Comparison(0.0, 1.0, baseline_n, current_n, 0, "no observations")
    b = np.array([baseline.get(c, 0.0) for c in categories], dtype=float)
    k = np.array([current.get(c, 0.0) for c in categories], dtype=float)
    if b.sum() == 0 or k.sum() == 0:
        side = "baseline" if b.sum() == 0 else "current window"
        return Comparison(1.0, 0.0, baseline_n, current_n, 0, f"the {side} has no observations")
    b_share, k_share = b / b.sum(), k / k.sum()
    distance = float(jensenshannon(b_share, k_share, base=2))
    p_value = 1.0
    if len(categories) > 1:
        table = np.vstack([b_share * baseline_n, k_share * current_n])
        table = table[:, table.sum(axis=0) > 0]
        p_value = float(stats.chi2_contingency(table).pvalue)
    shifts = sorted(
        zip(categories, k_share - b_share, b_share, k_share, strict=True),
        key=lambda item: -abs(item[1]),
    )
    detail = ", ".join(f"{c} {bs:.1%}→{ks:.1%}" for c, _, bs, ks in shifts[:3])
    return Comparison(distance, nan_to_one(p_value), baseline_n, current_n, 0, detail)


def compare_continuous(baseline: np.ndarray, current: np.ndarray, unit: str = "") -> Comparison:
    """Two-sample Kolmogorov-Smirnov; the effect size is the KS distance D (0..1)."""
    baseline = np.asarray(baseline, dtype=float)
    current = np.asarray(current, dtype=float)
    baseline = baseline[~np.isnan(baseline)]
    current = current[~np.isnan(current)]
    if not len(baseline) or not len(current):
        return Comparison(0.0, 1.0, len(baseline), len(current), 0, "no observations")
    test = stats.ks_2samp(baseline, current)
    b50, b95 = np.percentile(baseline, [50, 95])
    k50, k95 = np.percentile(current, [50, 95])
    direction = int(np.sign(k50 - b50)) or int(np.sign(k95 - b95))
    detail = f"p50 {shift(b50, k50, unit)}, p95 {shift(b95, k95, unit)}"
    return Comparison(
        float(test.statistic),
        nan_to_one(float(test.pvalue)),
        len(baseline),
        len(current),
        direction,
        detail,
    )


def compare_proportions(
    baseline_hits: float, baseline_n: int, current_hits: float, current_n: int
) -> Comparison:
    """Two-proportion z-test (pooled, two-sided); the effect size is |p_current - p_baseline|.

    Hits may be fractional: when cases repeat each case counts once, with its share of hits.
    """
    if baseline_n <= 0 or current_n <= 0:
        return Comparison(0.0, 1.0, max(baseline_n, 0), max(current_n, 0), 0, "no observations")
    p1, p2 = baseline_hits / baseline_n, current_hits / current_n
    pooled = (baseline_hits + current_hits) / (baseline_n + current_n)
    se = math.sqrt(pooled * (1 - pooled) * (1 / baseline_n + 1 / current_n))
    p_value = 1.0 if se == 0 else float(2 * stats.norm.sf(abs(p2 - p1) / se))
    direction = (p2 > p1) - (p2 < p1)
    return Comparison(abs(p2 - p1), p_value, baseline_n, current_n, direction, f"{p1:.1%}→{p2:.1%}")


def judge(
    comparison: Comparison, threshold: float, alpha: float, min_samples: int
) -> tuple[Verdict, str | None]:
    """fail needs a large effect AND significance; too few samples on either side is a review."""
    if min(comparison.baseline_n, comparison.current_n) < min_samples:
        return Verdict.REVIEW, "insufficient_samples"
    if comparison.effect_size >= threshold and comparison.p_value < alpha:
        return Verdict.FAIL, None
    return Verdict.PASS, None


def shift(before: float, after: float, unit: str) -> str:
    change = f" ({(after - before) / before:+.0%})" if before else ""
    return f"{before:.4g}→{after:.4g}{unit}{change}"


def nan_to_one(p: float) -> float:
    """An undefined test (e.g. identical constant samples) shows no evidence of a difference."""
    return 1.0 if math.isnan(p) else p
