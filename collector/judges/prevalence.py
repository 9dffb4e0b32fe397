"""A judge's failure rate corrected for its errors (Rogan–Gladen), with an interval that carries
the uncertainty of its EvaluatorCard as well as that of the runs counted.

A judge that misses bad runs (sensitivity = the card's TPR < 1) and flags good ones
(specificity = TNR < 1) reports a failure rate that is not the true one: of the runs it judged,
it flags p·TPR + (1 − p)·(1 − TNR). Solving for p gives the Rogan–Gladen estimate
(p_obs + TNR − 1) / (TPR + TNR − 1), clipped to [0, 1]. A judge with TPR + TNR ≤ 1 is no better
than a coin: nothing can be corrected.

The interval is Lang and Reiczigel's (Preventive Veterinary Medicine 113, 2014, "Confidence
limits for prevalence of disease adjusted for estimated sensitivity and specificity"): the
observed rate is taken Agresti–Coull style (z²/2 added to the flagged runs, z² to the runs), the
card's two rates with one success and one failure added, the estimate's variance by the delta
method over the three independent binomials, and its centre shifted by their second-order
term. Its coverage stays near 95 % where the plain delta method falls short (small cards, rates
near 0 or 1).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

Z95 = 1.959963984540054  # the two-sided 95 % normal quantile


@dataclass(frozen=True)
class Corrected:
    """A failure rate as the judge reports it and as corrected by its card."""

    observed: float | None  # flagged / judged
    rate: float | None  # Rogan–Gladen, clipped to [0, 1]; None when it cannot be corrected
    lower: float | None  # the Lang–Reiczigel 95 % interval
    upper: float | None
    why: str  # why there is no corrected rate ('' when there is one)


def clip(value: float) -> float:
    return min(1.0, max(0.0, value))


def rogan_gladen(observed: float, tpr: float, tnr: float) -> float:
    """The true rate whose runs a judge with these rates would flag `observed` of (clipped)."""
    return clip((observed + tnr - 1) / (tpr + tnr - 1))


def corrected(
    flagged: int,
    judged: int,
    true_positives: int,
    positives: int,
    true_negatives: int,
    negatives: int,
    z: float = Z95,
) -> Corrected:
    """The corrected rate of `flagged` runs among `judged`, for a judge whose card counted
    `true_positives` of `positives` (runs people failed) and `true_negatives` of `negatives`."""
    if not judged:
        return Corrected(None, None, None, None, "no run judged")
    observed = flagged / judged
    if not positives or not negatives:
        missing = "failed" if not positives else "passed"
        why = f"the card has no run people {missing}: it cannot correct a rate"
        return Corrected(observed, None, None, None, why)
    tpr, tnr = true_positives / positives, true_negatives / negatives
    if tpr + tnr <= 1:
        return Corrected(
            observed,
            None,
            None,
            None,
            f"not correctable: TPR {tpr:.4f} + TNR {tnr:.4f} ≤ 1 (no better than chance)",
        )
    rate = rogan_gladen(observed, tpr, tnr)
    lower, upper = lang_reiczigel(
        flagged, judged, true_positives, positives, true_negatives, negatives, z
    )
    return Corrected(observed, rate, lower, upper, "")


def lang_reiczigel(
    flagged: int,
    judged: int,
    true_positives: int,
    positives: int,
    true_negatives: int,
    negatives: int,
    z: float = Z95,
) -> tuple[float, float]:
    """The adjusted interval of the corrected rate, clipped to [0, 1] (the whole of it when the
    adjusted rates leave the judge no better than chance)."""
    n = judged + z * z
    observed = (flagged + z * z / 2) / n
    n_tpr, n_tnr = positives + 2, negatives + 2
    tpr = (true_positives + 1) / n_tpr
    tnr = (true_negatives + 1) / n_tnr
    youden = tpr + tnr - 1
    if youden <= 0:
        return 0.0, 1.0
    rate = (observed + tnr - 1) / youden
    var_tpr = tpr * (1 - tpr) / n_tpr
    var_tnr = tnr * (1 - tnr) / n_tnr
    spread = (
        math.sqrt(observed * (1 - observed) / n + var_tpr * rate**2 + var_tnr * (1 - rate) ** 2)
        / youden
    )
    shift = 2 * z * z * (rate * var_tpr - (1 - rate) * var_tnr)
    return clip(rate + shift - z * spread), clip(rate + shift + z * spread)
