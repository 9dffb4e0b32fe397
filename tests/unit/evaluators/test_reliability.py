"""pass@k and pass^k against closed forms, brute-force enumeration and exact fractions."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import pytest

from evaluators.reliability import (
    coefficient_of_variation,
    outcome_consistency,
    pass_at_k,
    pass_hat_k,
)


@pytest.mark.parametrize(
    ("n", "c", "k", "at", "hat"),
    [
        (5, 2, 1, 2 / 5, 2 / 5),  # one draw: the pass share
        (5, 2, 2, 1 - 3 / 10, 1 / 10),  # C(3,2)/C(5,2) = 3/10 fail both; C(2,2)/C(5,2) = 1/10
        (4, 4, 3, 1.0, 1.0),
        (4, 0, 3, 0.0, 0.0),
        (6, 3, 4, 1.0, 0.0),  # only 3 failures: 4 draws always hold a pass; never 4 passes
        (10, 7, 3, 1 - 1 / 120, 35 / 120),
    ],
)
def test_worked_by_hand(n: int, c: int, k: int, at: float, hat: float) -> None:
    assert pass_at_k(n, c, k) == pytest.approx(at, abs=1e-15)
    assert pass_hat_k(n, c, k) == pytest.approx(hat, abs=1e-15)


def brute_force(n: int, c: int, k: int) -> tuple[float, float]:
    attempts = [True] * c + [False] * (n - c)
    draws = list(itertools.combinations(range(n), k))
    some = sum(any(attempts[i] for i in d) for d in draws)
    every = sum(all(attempts[i] for i in d) for d in draws)
    return some / len(draws), every / len(draws)


def test_every_k_subset_up_to_twelve_attempts() -> None:
    checked = 0
    for n in range(1, 13):
        for c in range(n + 1):
            for k in range(1, n + 1):
                some, every = brute_force(n, c, k)
                assert pass_at_k(n, c, k) == pytest.approx(some, abs=1e-12), (n, c, k)
                assert pass_hat_k(n, c, k) == pytest.approx(every, abs=1e-12), (n, c, k)
                checked += 1
    assert checked == sum(n * (n + 1) for n in range(1, 13))


@pytest.mark.parametrize(
    ("c", "k"), [(0, 1), (1, 1), (500, 5), (999, 100), (700, 300), (1000, 1000)]
)
def test_a_thousand_attempts_exact_without_overflow(c: int, k: int) -> None:
    n = 1000
    total = math.comb(n, k)  # far beyond a float for k = 300: the estimator must not need it
    at = 1 - Fraction(math.comb(n - c, k), total)
    hat = Fraction(math.comb(c, k), total)
    assert pass_at_k(n, c, k) == pytest.approx(float(at), rel=1e-12, abs=1e-300)
    assert pass_hat_k(n, c, k) == pytest.approx(float(hat), rel=1e-12, abs=1e-300)


def test_bad_counts_are_refused() -> None:
    with pytest.raises(ValueError, match="k must be between 1 and the attempts"):
        pass_at_k(3, 1, 4)
    with pytest.raises(ValueError, match="passes must be between"):
        pass_hat_k(3, 4, 1)


def test_consistency_and_variation() -> None:
    assert outcome_consistency(10, 10) == 1.0
    assert outcome_consistency(10, 3) == 0.7
    assert outcome_consistency(4, 2) == 0.5
    assert coefficient_of_variation([10.0, 10.0, 10.0]) == 0.0
    assert coefficient_of_variation([1.0, 3.0]) == pytest.approx(math.sqrt(2) / 2)
    assert coefficient_of_variation([5.0]) is None
