"""A judge's failure rate corrected by its card (Rogan–Gladen): the point by hand, clipped to
[0, 1], refused for a judge no better than chance, and an interval that covers the true rate
about 95 % of the time even when the card is small."""

from __future__ import annotations

import numpy as np
import pytest

from collector.judges.prevalence import corrected, lang_reiczigel
from collector.judges.rates import rate_of
from evaluators.rulepack import load_text

PACK = """
name: support-judges
version: 1.0.0
owner: support-sre
selector: {service: support-desk}
judges:
  endpoint: {base_url: "http://127.0.0.1:9/v1", model: judge-mini}
rules:
  - id: helpful-answer
    type: judge
    reason: unhelpful_answer
    prompt: "Grade {{ answer }}"
    pass_when: {score_gte: 0.5}
"""


def test_the_corrected_rate_is_rogan_gladen_by_hand() -> None:
    # 120 of 400 runs flagged by a judge that caught 45 of 50 bad runs and passed 57 of 60 good
    found = corrected(120, 400, 45, 50, 57, 60)
    observed, tpr, tnr = 0.3, 0.9, 0.95
    assert found.observed == pytest.approx(observed)
    assert found.rate == pytest.approx((observed + tnr - 1) / (tpr + tnr - 1))  # 0.294...
    assert found.rate == pytest.approx(0.25 / 0.85)
    assert found.lower is not None and found.upper is not None
    assert 0 < found.lower < found.rate < found.upper < 1
    assert found.why == ""


def test_the_corrected_rate_is_clipped_to_0_and_1() -> None:
    # 2 % flagged, under the 5 % the judge flags of good runs: the true rate is 0, not negative
    low = corrected(2, 100, 45, 50, 57, 60)
    assert (0.02 + 0.95 - 1) / 0.85 < 0 and low.rate == 0.0 and low.lower == 0.0
    # 96 % flagged, over the 90 % it catches of bad runs (it never flags all): 1, not more
    high = corrected(96, 100, 45, 50, 57, 60)
    assert (0.96 + 0.95 - 1) / 0.85 > 1 and high.rate == 1.0 and high.upper == 1.0


@pytest.mark.parametrize(
    ("tp", "positives", "tn", "negatives"),
    [(30, 60, 30, 60), (20, 50, 25, 60), (0, 10, 10, 10)],  # TPR + TNR = 1, < 1, = 1
)
def test_a_judge_no_better_than_chance_cannot_be_corrected(
    tp: int, positives: int, tn: int, negatives: int
) -> None:
    found = corrected(30, 100, tp, positives, tn, negatives)
    assert found.observed == 0.3
    assert (found.rate, found.lower, found.upper) == (None, None, None)
    assert found.why.startswith("not correctable") and "≤ 1" in found.why


def test_without_runs_or_without_both_kinds_on_the_card_nothing_is_corrected() -> None:
    assert corrected(0, 0, 45, 50, 57, 60).why == "no run judged"
    assert "no run people failed" in corrected(3, 10, 0, 0, 57, 60).why
    assert "no run people passed" in corrected(3, 10, 45, 50, 0, 0).why


def test_a_card_that_cannot_correct_is_reported_per_target() -> None:
    pack = load_text(PACK, "judges.yaml").pack
    rule = pack.rules[0]
    card = ("c1", "reviews", None, 50, 50, 0.5, 0.4, 0)  # TPR + TNR = 0.9
    rate = rate_of(pack, rule, ("support-desk", "a", "1", 100, 30), card)  # type: ignore[arg-type]
    assert rate.observed_rate == 0.3 and rate.corrected_rate is None
    assert rate.why.startswith("not correctable")


@pytest.mark.parametrize(
    ("truth", "n", "tpr", "positives", "tnr", "negatives"),
    [
        (0.3, 2000, 0.85, 40, 0.9, 40),  # a small card beside many runs: its error dominates
        (0.05, 500, 0.9, 100, 0.95, 200),
        (0.5, 300, 0.8, 60, 0.85, 60),
    ],
)
def test_the_interval_covers_the_true_rate_about_95_percent_of_the_time(
    truth: float, n: int, tpr: float, positives: int, tnr: float, negatives: int
) -> None:
    """Simulated judges and cards: the Lang–Reiczigel interval holds its 95 %, where an interval
    that forgot the card's own error would cover far less in the first case."""
    rng = np.random.default_rng(7)
    trials = 4000
    flagged = rng.binomial(n, truth * tpr + (1 - truth) * (1 - tnr), trials)
    tps = rng.binomial(positives, tpr, trials)
    tns = rng.binomial(negatives, tnr, trials)
    covered = 0
    naive = 0
    for f, tp, tn in zip(flagged, tps, tns, strict=True):
        lower, upper = lang_reiczigel(int(f), n, int(tp), positives, int(tn), negatives)
        covered += lower <= truth <= upper
        # the same interval with the card taken as exact: only the runs' error
        se, sp, p = tp / positives, tn / negatives, f / n
        youden = se + sp - 1
        centre = (p + sp - 1) / youden
        half = 1.96 * (p * (1 - p) / n) ** 0.5 / youden
        naive += centre - half <= truth <= centre + half
    assert 0.93 <= covered / trials <= 0.985
    if n == 2000:
        assert naive / trials < 0.6
