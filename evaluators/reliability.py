"""pass@k and pass^k over repeated attempts of one case, and the consistency of those attempts.

Both estimators are the unbiased ones over n attempts with c passes (Chen et al. 2021 for pass@k;
pass^k as in tau-bench): the chance that k attempts drawn without replacement from the n contain
at least one pass, or only passes. Written as a product of k ratios instead of binomial
coefficients, they stay exact to a few ulps for any n and never overflow a float.
"""

from __future__ import annotations

import math
from collections.abc import Sequence


def _check(n: int, c: int, k: int) -> None:
    if not 0 <= c <= n:
        raise ValueError(f"passes must be between 0 and the attempts (n={n}, c={c})")
    if not 1 <= k <= n:
        raise ValueError(f"k must be between 1 and the attempts (n={n}, k={k})")


def _ratio_of_combinations(m: int, n: int, k: int) -> float:
    """C(m, k) / C(n, k) for 0 <= m <= n, k <= n, as prod_{i<k} (m - i) / (n - i)."""
    if m < k:
        return 0.0
    ratio = 1.0
    for i in range(k):
        ratio *= (m - i) / (n - i)
    return ratio


def pass_at_k(n: int, c: int, k: int) -> float:
    """1 - C(n-c, k)/C(n, k): capable at least once in k attempts."""
    _check(n, c, k)
    return 1.0 - _ratio_of_combinations(n - c, n, k)


def pass_hat_k(n: int, c: int, k: int) -> float:
    """C(c, k)/C(n, k): passes every one of k attempts."""
    _check(n, c, k)
    return _ratio_of_combinations(c, n, k)


def outcome_consistency(n: int, c: int) -> float:
    """Share of attempts that agree with the majority outcome (1.0 = always the same)."""
    if n <= 0:
        raise ValueError("no attempts")
    return max(c, n - c) / n


def coefficient_of_variation(values: Sequence[float]) -> float | None:
    """Sample standard deviation over the mean; None when undefined (n < 2 or mean 0)."""
    if len(values) < 2:
        return None
    mean = math.fsum(values) / len(values)
    if mean == 0:
        return None
    variance = math.fsum((v - mean) ** 2 for v in values) / (len(values) - 1)
    return math.sqrt(variance) / abs(mean)
