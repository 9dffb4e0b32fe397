"""Two-sample comparisons behind drift rules: is the current window different from the baseline?

Each comparison gives an effect size (how different, on a scale a threshold can be put on) and a
p-value (how sure): the Jensen-Shannon distance of the tool mix with run-level presence tests,
Kolmogorov-Smirnov for continuous samples (steps, latency, cost, tokens) with the shift of the
median and the 95th percentile, and Fisher's exact test for rates (errors, passes). A rule fails
only when both say so, after Holm's correction over the rule's tests; too few samples is a
review, never a pass.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats
from scipy.spatial.distance import jensenshannon

from evaluators.base import Verdict

# With ties (steps are whole numbers) the exact KS distribution is not computable and scipy falls
# back to the asymptotic one, saying so each time; the fallback is what we want.
warnings.filterwarnings("ignore", "ks_2samp: Exact calculation unsuccessful")


@dataclass(frozen=True)
class Comparison:
    effect_size: float
    p_value: float
    baseline_n: int
    current_n: int
    direction: int  # +1: current higher (or a category gained share), -1 lower, 0 unchanged
    detail: str
    # The p-values of the tests `p_value` combines (one per tool of a tool mix), so that a
    # family-wise correction can count each of them rather than their Bonferroni bound.
    parts: tuple[float, ...] = ()


def compare_tool_mix(
    calls: tuple[Mapping[str, float], Mapping[str, float]],
    presence: tuple[Mapping[str, float], Mapping[str, float]],
    baseline_n: int,
    current_n: int,
) -> Comparison:
    """Which tools a side calls, from its `calls` per tool (the effect: how the mix moved) and
    its `presence` per tool (units calling the tool: the evidence), over `baseline_n` and
    `current_n` sample units (runs, or cases when cases repeat).

    The effect size is the Jensen-Shannon distance between the two sides' shares of calls. The
    p-value is run-level: for each tool, the share of units that call it is compared between
    the sides (Fisher's exact test), and the smallest p-value is multiplied by the number of
    tools (Bonferroni); the per-tool p-values are kept as `parts` for Holm's correction over
    the whole rule. Counting calls as draws would make the p-value depend on how calls
    cluster within runs (one run repeating a tool eight times is one run, not eight samples);
    counting units keeps the test valid however calls cluster.
    """
    seen = set(calls[0]) | set(calls[1])
    categories = sorted(c for c in seen if calls[0].get(c) or calls[1].get(c))
    if not categories or baseline_n <= 0 or current_n <= 0:
        return Comparison(0.0, 1.0, baseline_n, current_n, 0, "no observations")
    b = np.array([calls[0].get(c, 0.0) for c in categories], dtype=float)
    k = np.array([calls[1].get(c, 0.0) for c in categories], dtype=float)
    if b.sum() == 0 or k.sum() == 0:
        side = "baseline" if b.sum() == 0 else "current window"
        return Comparison(1.0, 0.0, baseline_n, current_n, 0, f"the {side} has no observations")
    b_share, k_share = b / b.sum(), k / k.sum()
    distance = float(jensenshannon(b_share, k_share, base=2))
    tested: tuple[float, ...] = ()
    if len(categories) > 1:
        tested = tuple(
            compare_proportions(
                presence[0].get(c, 0.0), baseline_n, presence[1].get(c, 0.0), current_n
            ).p_value
            for c in categories
        )
    p_value = min(1.0, min(tested) * len(tested)) if tested else 1.0
    shifts = sorted(
        zip(categories, k_share - b_share, b_share, k_share, strict=True),
        key=lambda item: -abs(item[1]),
    )
    detail = ", ".join(f"{c} {bs:.1%}→{ks:.1%}" for c, _, bs, ks in shifts[:3])
    return Comparison(distance, nan_to_one(p_value), baseline_n, current_n, 0, detail, tested)


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
    """Two rates, two-sided; the effect size is |p_current - p_baseline|.

    Whole counts get Fisher's exact test: the normal approximation is too eager when events
    are rare (0 of 60 against 7 of 60 is p = 0.007 by z, 0.013 exactly), which is where a
    new error or a new tool shows first. Hits may be fractional when cases repeat (each case
    counts once, with its share of hits); those get the pooled two-proportion z-test.
    """
    if baseline_n <= 0 or current_n <= 0:
        return Comparison(0.0, 1.0, max(baseline_n, 0), max(current_n, 0), 0, "no observations")
    p1, p2 = baseline_hits / baseline_n, current_hits / current_n
    direction = (p2 > p1) - (p2 < p1)
    detail = f"{p1:.1%}→{p2:.1%}"
    if whole(baseline_hits) and whole(current_hits):
        b, c = round(baseline_hits), round(current_hits)
        table = [[b, baseline_n - b], [c, current_n - c]]
        p_value = float(stats.fisher_exact(table).pvalue)
        return Comparison(abs(p2 - p1), p_value, baseline_n, current_n, direction, detail)
    pooled = (baseline_hits + current_hits) / (baseline_n + current_n)
    se = math.sqrt(pooled * (1 - pooled) * (1 / baseline_n + 1 / current_n))
    p_value = 1.0 if se == 0 else float(2 * stats.norm.sf(abs(p2 - p1) / se))
    return Comparison(abs(p2 - p1), p_value, baseline_n, current_n, direction, detail)


def judge(
    comparison: Comparison, threshold: float, alpha: float, min_samples: int
) -> tuple[Verdict, str | None]:
    """fail needs a large effect AND significance; too few samples on either side is a review."""
    if min(comparison.baseline_n, comparison.current_n) < min_samples:
        return Verdict.REVIEW, "insufficient_samples"
    if comparison.effect_size >= threshold and comparison.p_value < alpha:
        return Verdict.FAIL, None
    return Verdict.PASS, None


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values, in the order given.

    A drift rule tests many metrics of one target at once; testing each at `alpha` would fail
    an unchanged canary with probability near 1 - (1 - alpha)^m. Holm keeps the chance of any
    false failure in the family at most `alpha` under any dependence between the tests, and
    rejects at least what Bonferroni would.
    """
    order = sorted(range(len(p_values)), key=lambda i: p_values[i])
    adjusted = [1.0] * len(p_values)
    running = 0.0
    for rank, index in enumerate(order):
        running = max(running, min(1.0, (len(p_values) - rank) * p_values[index]))
        adjusted[index] = running
    return adjusted


def whole(count: float) -> bool:
    """A count summed from weights (1/attempts of a case) is whole up to rounding."""
    return abs(count - round(count)) < 1e-9


def shift(before: float, after: float, unit: str) -> str:
    change = f" ({(after - before) / before:+.0%})" if before else ""
    return f"{before:.4g}→{after:.4g}{unit}{change}"


def nan_to_one(p: float) -> float:
    """An undefined test (e.g. identical constant samples) shows no evidence of a difference."""
    return 1.0 if math.isnan(p) else p
