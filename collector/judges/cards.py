"""EvaluatorCards: how far a judge agrees with people, and whether that is enough to gate.

A judge *flags* a run when it fails it; people's labels say which runs should fail. The card
holds the true-positive rate (flagged among the runs people failed), the true-negative rate
(passed among the runs people passed) and their Wilson 95 % lower bounds: a judge may ask for
more than REVIEW only when both lower bounds meet the pack's `min_tpr` and `min_tnr`, so a
handful of lucky agreements never certifies it.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import duckdb
from scipy.stats import binomtest

from evaluators.base import Decision, Finding, Verdict
from evaluators.judge import JudgeRule, JudgeSettings

# Whether the judge failed a run, from its stored result (SQL, over `results`): an uncalibrated
# judge's failure is stored as a review (judge_uncalibrated, see `gated`) but is still its
# failure; any other review (unavailable, over budget, incomplete run) is no judgement (NULL).
FLAGGED = """CASE WHEN verdict = 'fail' OR (verdict = 'review' AND reason = 'judge_uncalibrated')
THEN true WHEN verdict = 'pass' THEN false END"""
LATEST_CARD = """
SELECT tpr_lower, tnr_lower FROM evaluator_cards
WHERE pack = ? AND pack_version = ? AND rule_id = ? AND model = ? AND template_sha256 = ?
ORDER BY calibrated_at DESC LIMIT 1
"""


def template_sha256(rule: JudgeRule) -> str:
    """What identifies a judge besides its model: the prompt template and what passes."""
    text = rule.prompt + "\0" + rule.pass_when.model_dump_json() + "\0" + ",".join(rule.steps)
    return hashlib.sha256(text.encode()).hexdigest()


def wilson_lower(successes: int, trials: int) -> float | None:
    """The lower end of the two-sided Wilson 95 % interval; None without trials."""
    if not trials:
        return None
    interval = binomtest(successes, trials).proportion_ci(0.95, method="wilson")
    return float(interval.low)


def meets(tpr_lower: float | None, tnr_lower: float | None, settings: JudgeSettings) -> bool:
    """Whether a card's lower bounds meet the pack's `min_tpr` and `min_tnr`."""
    if tpr_lower is None or tnr_lower is None:
        return False
    return tpr_lower >= settings.min_tpr and tnr_lower >= settings.min_tnr


@dataclass(frozen=True)
class Trust:
    """Whether a judge's failures may ask for its rule's `on_fail`."""

    calibrated: bool
    why: str


def trust(
    cursor: duckdb.DuckDBPyConnection,
    pack: str,
    version: str,
    rule: JudgeRule,
    model: str,
    settings: JudgeSettings,
) -> Trust:
    row = cursor.execute(
        LATEST_CARD, [pack, version, rule.id, model, template_sha256(rule)]
    ).fetchone()
    if row is None:
        return Trust(False, f"no EvaluatorCard for {pack}@{version}/{rule.id} on {model}")
    tpr, tnr = row
    if not meets(tpr, tnr, settings):
        return Trust(
            False,
            f"EvaluatorCard lower bounds TPR {tpr} / TNR {tnr} under"
            f" min_tpr {settings.min_tpr} / min_tnr {settings.min_tnr}",
        )
    return Trust(True, "")


def gated(rule: JudgeRule, finding: Finding, trusted: Trust) -> Finding:
    """The finding as stored: an uncalibrated judge's failure is a REVIEW (judge_uncalibrated)
    whatever the rule's `on_fail`, unless that asks for no more than a review anyway."""
    if finding.verdict != Verdict.FAIL or trusted.calibrated or rule.on_fail == Decision.REVIEW:
        return finding
    return Finding(
        Verdict.REVIEW,
        f"would fail ({rule.reason}, asking {rule.on_fail}), but {trusted.why}: {finding.message}",
        finding.evidence,
        finding.score,
        reason="judge_uncalibrated",
    )
