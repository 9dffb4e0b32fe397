"""Anytime-valid canary tests on seeded simulated rollouts: an unchanged canary crosses alpha at
most alpha of the time over a life of many looks (where a fixed-sample test looked at as often
crosses far more), a 97 -> 80 % pass-rate drop is caught by 120 runs a side, an improvement is
never a harm, the planned looks' exact p-value is Fisher's, and the weighted Holm correction
spends alpha by weight.

The bounds are chosen so that a correct implementation fails them with probability under 1e-6:
with 200 rollouts at a true crossing rate of at most 0.05, 28 or more crossings has probability
under 1e-6 (binomial tail)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from evaluators.sequential import (
    Blocks,
    above_median,
    anytime_p,
    blocks_of,
    evidence,
    exact_tail,
    weighted_holm,
)

ROLLOUTS = 200
ALPHA = 0.05
NULL_BOUND = 28  # P(Binomial(200, 0.05) >= 28) < 1e-6
CAUGHT_BOUND = 177  # 95.8 % of 200 (3000 rollouts) less 5 standard deviations


def rollout(
    rng: np.random.Generator, runs: int, baseline: float, candidate: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Both versions' runs in closing order (random interleaving, as traffic arrives): sides,
    a failure flag per run, and a latency per run that doubles over the life for both versions
    with a heavy (Pareto 1.2) tail."""
    sides = rng.permutation(np.repeat([0, 1], runs))
    failed = (rng.random(2 * runs) >= np.where(sides == 1, candidate, baseline)).astype(float)
    ramp = 1.0 + np.arange(2 * runs) / (2 * runs)
    latency = ramp * 600.0 * (1.0 + rng.pareto(1.2, 2 * runs))
    return sides, failed, latency


def crossed(sides: np.ndarray, flags: np.ndarray, alpha: float, upto: int | None = None) -> bool:
    """Whether the canary test (e-process and planned looks, horizon 120) crossed alpha by run
    `upto` (all runs by default)."""
    found = evidence(sides, flags, blocks_of(sides), 120)
    return anytime_p(found[:upto]) <= alpha


def test_an_unchanged_canary_crosses_alpha_at_most_alpha_over_its_life() -> None:
    # 360 runs a side, 72 blocks: the test is looked at after every block
    rng = np.random.default_rng(7)
    sequential = {"failed": 0, "latency": 0}
    per_look = 0
    for _ in range(ROLLOUTS):
        sides, failed, latency = rollout(rng, 360, 0.9, 0.9)
        slow = above_median(latency, blocks_of(sides))
        sequential["failed"] += crossed(sides, failed, ALPHA)
        sequential["latency"] += crossed(sides, slow, ALPHA)
        # what a fixed-sample one-sided Fisher test does when looked at after every block
        cand, base = np.cumsum(failed * sides), np.cumsum(failed * (1 - sides))
        n_c, n_b = np.cumsum(sides), np.cumsum(1 - sides)
        looks = [i for i in range(9, 2 * 360, 10)]
        per_look += any(
            stats.fisher_exact(
                [[cand[i], n_c[i] - cand[i]], [base[i], n_b[i] - base[i]]], alternative="greater"
            ).pvalue
            <= ALPHA
            for i in looks
        )
    assert sequential["failed"] < NULL_BOUND
    assert sequential["latency"] < NULL_BOUND
    assert per_look >= NULL_BOUND  # the bound is one the per-look test does not meet


def test_a_pass_rate_drop_from_97_to_80_is_caught_by_120_runs_a_side() -> None:
    rng = np.random.default_rng(11)
    caught = 0
    for _ in range(ROLLOUTS):
        sides, failed, _ = rollout(rng, 130, 0.97, 0.8)
        fewer = np.minimum(np.cumsum(sides), np.cumsum(1 - sides))
        caught += crossed(sides, failed, 0.01, int(np.searchsorted(fewer, 120)) + 1)
    # alone at alpha 0.01, by the look where each side has 120 runs (the e-process alone: 88 %)
    assert caught >= CAUGHT_BOUND


def test_a_candidate_that_improves_is_never_flagged_as_harmed() -> None:
    rng = np.random.default_rng(13)
    for _ in range(ROLLOUTS):
        sides, failed, latency = rollout(rng, 360, 0.8, 0.97)
        assert not crossed(sides, failed, ALPHA)
        faster = np.where(sides == 1, latency / 1.5, latency)
        assert not crossed(sides, above_median(faster, blocks_of(sides)), ALPHA)


def test_blocks_close_with_five_runs_of_each_version_and_the_rest_waits() -> None:
    sides = np.array([0] * 7 + [1] * 5 + [1, 0, 1])
    assert blocks_of(sides).tolist() == [0] * 12 + [-1] * 3


def test_a_planned_look_over_one_block_is_fishers_exact_test() -> None:
    # one block of 8 baseline and 7 candidate runs, 6 flagged, 5 of them the candidate's
    one = Blocks(np.array([15]), np.array([7]), np.array([6]), np.array([5]))
    fisher = stats.fisher_exact([[5, 2], [1, 7]], alternative="greater").pvalue
    assert exact_tail(one) == pytest.approx(fisher)
    # two blocks: the tail of the sum, enumerated by hand
    two = Blocks(np.array([2, 2]), np.array([1, 1]), np.array([1, 1]), np.array([1, 1]))
    assert exact_tail(two) == pytest.approx(0.25)
    half = Blocks(np.array([2, 2]), np.array([1, 1]), np.array([1, 1]), np.array([1, 0]))
    assert exact_tail(half) == pytest.approx(0.75)


def test_weighted_holm_spends_alpha_by_weight() -> None:
    # equal weights: plain Holm
    assert weighted_holm([0.004, 0.008, 0.009, 0.0001], [1, 1, 1, 1]) == pytest.approx(
        [0.012, 0.016, 0.016, 0.0004]
    )
    # the pass rate holds 4/6 of alpha: 0.006 passes at 0.01 where Bonferroni over 6 would not
    assert weighted_holm([0.006, 0.5, 0.5], [4, 1, 1]) == pytest.approx([0.009, 1.0, 1.0])
    with pytest.raises(ValueError, match="positive"):
        weighted_holm([0.1], [0])
