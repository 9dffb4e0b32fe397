"""Anytime-valid canary tests: e-processes over a canary's runs as they accrue, one-sided in the
direction of harm, and the weighted Holm correction that combines them.

A canary is judged again at every look while its runs accrue, and any look may roll it back. A
p-value valid for one look is not valid for many: the chance that some look falls under `alpha`
grows with the looks. An e-process E_t (a nonnegative process whose expectation stays at most 1
under the null at every stopping time) gives p = 1 / max_{s <= t} E_s, which by Ville's
inequality is under `alpha` at *some* time with probability at most `alpha`, however often it
is looked at and whenever the rollout stops.

The runs of both versions are cut, in the order the store closed them, into blocks of at least
`BLOCK` runs of each version: consecutive runs, so a block covers a few minutes of both versions
and a daily ramp or an outage that hits both is not a difference between them. Within a block,
if the candidate changes nothing, which of the block's runs belong to the candidate is a random
draw independent of their values; a harm flag per run (failed, errored, calls the tool, above
the block's median latency...) then puts the candidate's flagged count X under the
hypergeometric law given the block's flagged count F. Each block contributes the likelihood
ratio of Fisher's noncentral hypergeometric law with odds ratio psi > 1 (the candidate's runs
more often harmed) against psi = 1; their product over blocks, mixed over a grid of psi, is a
test martingale under the null, and stays a supermartingale when the candidate is better
(psi < 1): the test is one-sided. It holds whatever the runs' distribution (heavy tails,
retries within runs, repeated cases), because it conditions on the values and only bets on the
labels.

A bet over every block pays for being ready at any time: at a fixed horizon it is weaker than a
test of all the runs at once (a 97 -> 80 % drop of one rule at 120 runs a side: 88 % against 96 %
at alpha 0.01). A canary has a planned decision point, though: `horizon` runs a side. So each
test's share of alpha is split (Bonferroni, valid whatever the dependence): `ANYTIME_SHARE` goes
to the e-process, ready at every block from the first, and the rest to exact one-sided tests at a
few planned looks, fractions of the horizon, most of it at the horizon itself (`PLANNED_LOOKS`).
A planned look happens when both versions first have the fraction's runs, and tests the blocks
complete by then: the candidate's flagged count summed over them is, under the same null, a sum
of independent hypergeometric counts, whose exact upper tail is the p-value (the stratified exact
test of Fisher's for a common odds ratio). When a look happens depends only on how many runs each
version has, never on their values, so the looks are fixed in advance in the sense the union
bound needs. After the last planned look the e-process alone watches the canary.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

# Runs of each version per block: small blocks are time-local (a ramp moves little within one)
# and let the test move every few runs; larger ones would gain little power.
BLOCK = 5
# Odds ratios of harm the mixture bets on, equally weighted: from a mild shift to a rule that
# fails eight times as often. The price of the mixture against knowing the shift is log(6).
ODDS = np.geomspace(2.0, 16.0, 6)
# A test's share of alpha that the e-process holds; the rest is spent on the planned looks.
ANYTIME_SHARE = 0.1
# (fraction of the horizon, share of the planned looks' alpha): a little early, for a canary that
# is plainly worse, most at the horizon, the rest on the way to three times it.
PLANNED_LOOKS = ((0.5, 0.05), (1.0, 0.85), (2.0, 0.05), (3.0, 0.05))


@dataclass(frozen=True)
class Blocks:
    """Per complete block, for one metric: runs with a value, the candidate's among them, the
    flagged runs, the candidate's flagged runs."""

    runs: np.ndarray
    candidate: np.ndarray
    flagged: np.ndarray
    candidate_flagged: np.ndarray


def blocks_of(sides: np.ndarray, block: int = BLOCK) -> np.ndarray:
    """Block number of each run (0 baseline, 1 candidate, in closing order); -1 for the runs of
    the last, still incomplete block. A block closes when it holds `block` runs of each side."""
    out = np.full(len(sides), -1, dtype=int)
    counts = [0, 0]
    current, first = 0, 0
    for i, side in enumerate(sides.tolist()):
        counts[side] += 1
        if counts[0] >= block and counts[1] >= block:
            out[first : i + 1] = current
            current, first, counts = current + 1, i + 1, [0, 0]
    return out


def flag_blocks(sides: np.ndarray, flags: np.ndarray, blocks: np.ndarray) -> Blocks:
    """Per complete block, the counts of `flags` (1 harmed, 0 not, NaN unknown: left out)."""
    count = int(blocks.max(initial=-1)) + 1
    known = (blocks >= 0) & ~np.isnan(flags)
    block, side = blocks[known], sides[known].astype(float)
    flag = (flags[known] > 0.5).astype(float)

    def per_block(weights: np.ndarray | None) -> np.ndarray:
        return np.bincount(block, weights, minlength=count).astype(int)

    return Blocks(per_block(None), per_block(side), per_block(flag), per_block(flag * side))


def above_median(values: np.ndarray, blocks: np.ndarray) -> np.ndarray:
    """1 for a run above its block's median, 0 at or below, NaN when unknown: a continuous
    metric (latency, cost...) as a harm flag, higher being worse."""
    flags = np.full(len(values), np.nan)
    known = np.flatnonzero((blocks >= 0) & ~np.isnan(values))
    if not len(known):
        return flags
    order = known[np.lexsort((values[known], blocks[known]))]  # by block, then value
    block, value = blocks[order], values[order]
    starts = np.flatnonzero(np.r_[True, block[1:] != block[:-1]])
    sizes = np.diff(np.r_[starts, len(order)])
    medians = (value[starts + (sizes - 1) // 2] + value[starts + sizes // 2]) / 2.0
    flags[order] = (value > np.repeat(medians, sizes)).astype(float)
    return flags


def log_e_process(blocks: Blocks, odds: np.ndarray = ODDS) -> np.ndarray:
    """log E after each block: the mixture over `odds` of the product of the blocks'
    noncentral-hypergeometric likelihood ratios against odds 1."""
    log_odds = np.log(odds)
    key = tuple(float(o) for o in odds)
    informative = (
        (blocks.flagged > 0)
        & (blocks.flagged < blocks.runs)
        & (blocks.candidate > 0)
        & (blocks.candidate < blocks.runs)
    )
    norms = np.zeros((len(blocks.runs), len(odds)))
    for i in np.flatnonzero(informative):
        norms[i] = log_null_moment(
            int(blocks.runs[i]), int(blocks.candidate[i]), int(blocks.flagged[i]), key
        )
    bets = np.where(informative, blocks.candidate_flagged, 0)[:, None] * log_odds[None, :] - norms
    totals = np.cumsum(bets, axis=0)
    if not len(totals):
        return np.zeros(0)
    top = totals.max(axis=1, keepdims=True)
    return (top + np.log(np.exp(totals - top).mean(axis=1, keepdims=True)))[:, 0]


@functools.lru_cache(maxsize=4096)
def log_null_moment(runs: int, candidate: int, flagged: int, odds: tuple[float, ...]) -> np.ndarray:
    """log E[psi^X] per psi for X hypergeometric (a block's flagged candidate runs under the
    null); blocks repeat the same few shapes, so it is computed once per shape."""
    ys = np.arange(0, min(candidate, flagged) + 1)
    log_pmf = stats.hypergeom.logpmf(ys, runs, candidate, flagged)
    terms = np.log(np.asarray(odds))[:, None] * ys[None, :] + log_pmf[None, :]
    top = terms.max(axis=1, keepdims=True)
    moment = (top + np.log(np.exp(terms - top).sum(axis=1, keepdims=True)))[:, 0]
    moment.setflags(write=False)
    return moment


@functools.lru_cache(maxsize=4096)
def null_pmf(runs: int, candidate: int, flagged: int) -> tuple[int, np.ndarray]:
    """The least count and the pmf of a block's flagged candidate runs under the null."""
    low = max(0, flagged - (runs - candidate))
    pmf = stats.hypergeom.pmf(np.arange(low, min(candidate, flagged) + 1), runs, candidate, flagged)
    pmf.setflags(write=False)
    return low, pmf


def exact_tail(blocks: Blocks) -> float:
    """P(the candidate's flagged runs over the blocks >= what was seen) under the null: the
    upper tail of the exact convolution of the blocks' hypergeometric laws."""
    pmf, seen = np.ones(1), 0
    for runs, candidate, flagged, candidate_flagged in zip(
        blocks.runs.tolist(),
        blocks.candidate.tolist(),
        blocks.flagged.tolist(),
        blocks.candidate_flagged.tolist(),
        strict=True,
    ):
        low, block = null_pmf(runs, candidate, flagged)
        if len(block) > 1:
            pmf = np.convolve(pmf, block)
        seen += candidate_flagged - low
    return float(min(1.0, pmf[seen:].sum())) if seen < len(pmf) else 0.0


def evidence(sides: np.ndarray, flags: np.ndarray, blocks: np.ndarray, horizon: int) -> np.ndarray:
    """-log p after each run (in closing order), p the test's p-value valid at every look:
    the smaller of the e-process's over its share and each planned look's exact p-value over
    its share, once that look has happened. Never decreasing: evidence once found is kept.

    A planned look's strata are the blocks complete by then and the runs after them, a
    stratum of their own: which runs those are depends on the sides alone, as the blocks do."""
    runs = len(sides)
    ends = np.flatnonzero(np.diff(blocks, append=-1) != 0)
    done = np.searchsorted(ends[blocks[ends] >= 0], np.arange(runs), side="right")
    best = np.maximum.accumulate(np.maximum(log_e_process(flag_blocks(sides, flags, blocks)), 0))
    log_e = best[np.maximum(done - 1, 0)] * (done > 0) if len(best) else np.zeros(runs)
    p = np.minimum(1.0, np.exp(-log_e) / ANYTIME_SHARE)
    fewer = np.minimum(np.cumsum(sides), np.cumsum(1 - sides))
    for fraction, share in PLANNED_LOOKS:
        at = int(np.searchsorted(fewer, fraction * horizon))
        if at >= runs:
            break
        seen = blocks[: at + 1]
        strata = np.where(seen < 0, done[at], np.minimum(seen, done[at]))
        tail = exact_tail(flag_blocks(sides[: at + 1], flags[: at + 1], strata))
        p[at:] = np.minimum(p[at:], tail / ((1.0 - ANYTIME_SHARE) * share))
    return -np.log(np.maximum(np.minimum.accumulate(p), 1e-300))


def anytime_p(log_evidence: np.ndarray) -> float:
    """p from -log p after each run (`evidence`) or log E after each block: the smallest so
    far, valid at every look at once."""
    if not len(log_evidence):
        return 1.0
    return float(min(1.0, np.exp(-max(0.0, float(np.max(log_evidence))))))


def weighted_holm(p_values: Sequence[float], weights: Sequence[float]) -> list[float]:
    """Holm's step-down with weights, adjusted p-values in the order given.

    Test i is rejected at level alpha when, at its step, p_i <= alpha * w_i / (the weights of
    the tests not yet rejected). With anytime-valid p-values this bounds the chance that any
    look ever rejects a true null by alpha: at the first such rejection every true null is
    still in the family, so some true null i had p_i <= alpha * w_i / W_true at some time,
    which happens with probability at most the sum of alpha * w_i / W_true over them. Weights
    put more of alpha on what matters first; what a rejected test held passes on to the rest.
    """
    w = np.asarray(weights, dtype=float)
    p = np.asarray(p_values, dtype=float)
    if not len(p):
        return []
    if np.any(w <= 0):
        raise ValueError("weights must be positive")
    order = sorted(range(len(p)), key=lambda i: (p[i] / w[i], i))
    remaining = float(w.sum())
    adjusted = [1.0] * len(p)
    running = 0.0
    for index in order:
        running = max(running, min(1.0, p[index] * remaining / w[index]))
        adjusted[index] = running
        remaining -= w[index]
    return adjusted
