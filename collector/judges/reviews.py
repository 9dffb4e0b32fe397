"""EvaluatorCards from reviewers' labels: `sextant judge calibrate --from-reviews`.

A reviewer's label (`results.source = 'human'`) on a run the judge rule scored says what the
run deserved; the judge's own live result on the same revision says what the judge said. The
card counts them like a cases file's card, so it gates the same way.

Each run certifies one card only (a single-use gold set): the runs a card was calibrated on are
stored with it (`card_labels`), and the next card of the rule is calibrated on the runs no card
has seen. Tuning a prompt and calibrating again on the same runs until the card passes would
prove nothing about the runs to come, so calibrating again is refused while the fresh labels
could not certify a card at all, unless the caller asks to include the used ones; that card
then counts them (`reused_labels`), and every listing shows it.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import duckdb

from collector.errors import SextantError
from collector.judges.calibrate import Card, counted_card
from collector.judges.cards import FLAGGED, wilson_lower
from evaluators.judge import JudgeRule, JudgeSettings
from evaluators.rulepack import RulePack

# The latest label of each run on the rule (the latest label wins, whatever its revision), kept
# when it answered a result of the pack version in force, beside the judge's own result on the
# revision it answered.
REVIEWED = f"""
WITH labels AS (
  SELECT trace_id, revision, pack_version, reviewer, verdict, evaluated_at
  FROM results
  WHERE source = 'human' AND origin = 'live' AND scope = 'trajectory'
    AND pack = $pack AND rule_id = $rule
  QUALIFY row_number() OVER (PARTITION BY trace_id ORDER BY evaluated_at DESC, revision DESC) = 1
), judged AS (
  SELECT trace_id, revision, {FLAGGED} AS flagged
  FROM results
  WHERE source IS NULL AND origin = 'live' AND scope = 'trajectory' AND rule_type = 'judge'
    AND pack = $pack AND rule_id = $rule AND pack_version = $version
  QUALIFY row_number() OVER (PARTITION BY trace_id, revision ORDER BY evaluated_at DESC) = 1
)
SELECT l.trace_id, l.revision, l.reviewer, l.evaluated_at, l.verdict, j.flagged
FROM labels l LEFT JOIN judged j USING (trace_id, revision)
WHERE l.pack_version = $version
ORDER BY l.evaluated_at, l.trace_id
"""
# The runs of the rule earlier cards were calibrated on (any pack version), each with the
# latest card that used it.
USED = """
SELECT l.trace_id, c.card_id, c.calibrated_at
FROM card_labels l JOIN evaluator_cards c USING (card_id)
WHERE l.pack = $pack AND l.rule_id = $rule
QUALIFY row_number() OVER (PARTITION BY l.trace_id ORDER BY c.calibrated_at DESC) = 1
"""
LABEL_VERDICTS = ("pass", "fail", "not_applicable")


class UsedLabels(SextantError):
    """Calibrating again would reuse labels an earlier card was calibrated on."""


@dataclass(frozen=True)
class Reviewed:
    """A run with a reviewer's label on the rule, and what the judge said of it."""

    trace_id: str
    revision: int
    reviewer: str | None
    labelled_at: datetime | None
    verdict: str  # the label: pass | fail | not_applicable
    flagged: bool | None  # the judge failed the run; None: it gave no judgement

    @property
    def fails(self) -> bool:
        return self.verdict == "fail"


@dataclass(frozen=True)
class UsedBy:
    card_id: str
    calibrated_at: datetime


@dataclass(frozen=True)
class GoldSet:
    """The labelled runs a card is calibrated on."""

    runs: list[Reviewed]  # labelled pass or fail
    reused: int  # of them, runs an earlier card used
    left_out: int  # runs an earlier card used, left out because the fresh ones suffice
    not_applicable: int  # labels saying the rule does not apply: left out, counted


def reviewed_runs(
    cursor: duckdb.DuckDBPyConnection, pack: str, version: str, rule: str
) -> tuple[list[Reviewed], dict[str, UsedBy]]:
    """The labelled runs of the rule at this pack version, and the runs earlier cards used."""
    params = {"pack": pack, "rule": rule, "version": version}
    labels = [
        Reviewed(trace, revision, reviewer, at, verdict, flagged)
        for trace, revision, reviewer, at, verdict, flagged in cursor.execute(
            REVIEWED, params
        ).fetchall()
        if verdict in LABEL_VERDICTS
    ]
    rows = cursor.execute(USED, {"pack": pack, "rule": rule}).fetchall()
    return labels, {trace: UsedBy(card, at) for trace, card, at in rows}


def needed(minimum: float) -> int | None:
    """The fewest labelled runs, all agreed with, whose Wilson lower bound reaches `minimum`
    (None when none do): fewer fresh runs than this cannot certify a card."""
    for n in range(1, 100_000):
        bound = wilson_lower(n, n)
        if bound is not None and bound >= minimum:
            return n
    return None


def gold_set(
    labels: list[Reviewed],
    used: dict[str, UsedBy],
    settings: JudgeSettings,
    include_used: bool,
    name: str,
) -> GoldSet:
    """The runs to calibrate on: every labelled one when none was used before or when asked
    to include used ones; otherwise the fresh ones, if they could certify a card. Raises
    UsedLabels naming how many labels were used and by which cards."""
    answered = [r for r in labels if r.verdict in ("pass", "fail")]
    not_applicable = len(labels) - len(answered)
    if not answered:
        raise SextantError(
            f"no reviewers' labels (pass or fail) on runs {name} judged"
            + (f" ({not_applicable} not applicable)" if not_applicable else "")
            + ": a card needs labelled runs"
        )
    old = [r for r in answered if r.trace_id in used]
    if include_used or not old:
        return GoldSet(answered, len(old), 0, not_applicable)
    fresh = [r for r in answered if r.trace_id not in used]
    failed = sum(1 for r in fresh if r.fails and r.flagged is not None)
    passed = sum(1 for r in fresh if not r.fails and r.flagged is not None)
    need_failed, need_passed = needed(settings.min_tpr), needed(settings.min_tnr)
    enough = need_failed is not None and need_passed is not None
    if enough and failed >= (need_failed or 0) and passed >= (need_passed or 0):
        return GoldSet(fresh, 0, len(old), not_applicable)
    cards = Counter(used[r.trace_id] for r in old)
    by = ", ".join(
        f"card {card.card_id} of {card.calibrated_at.isoformat(timespec='seconds')}Z ({count})"
        for card, count in sorted(cards.items(), key=lambda kv: kv[0].calibrated_at, reverse=True)
    )
    raise UsedLabels(
        f"{len(old)} of the {len(answered)} labels on {name} were already used by {by};"
        f" the {len(fresh)} fresh ones ({failed} failed and {passed} passed by people, judged)"
        f" cannot certify a card at min_tpr {settings.min_tpr} / min_tnr {settings.min_tnr},"
        f" which takes at least {need_failed or 'more'} failed and {need_passed or 'more'}"
        " passed. Label more runs, or include the used labels (--include-used): the card"
        " then counts them as reused"
    )


def review_card(
    pack: RulePack, rule: JudgeRule, gold: GoldSet, used: dict[str, UsedBy], at: datetime
) -> tuple[Card, list[dict[str, Any]]]:
    """The card of the gold set, and the `card_labels` rows of the runs it was calibrated on
    (the runs the judge judged: the others taught it nothing and stay fresh)."""
    runs = gold.runs
    digest = hashlib.sha256(
        "".join(f"{r.trace_id}:{r.revision}:{r.verdict}\n" for r in runs).encode()
    ).hexdigest()
    card = counted_card(
        pack,
        rule,
        [r.fails for r in runs],
        [r.flagged for r in runs],
        at,
        digest,
        source="reviews",
        not_applicable=gold.not_applicable,
        reused_labels=gold.reused,
    )
    rows = [
        {
            "card_id": card.card_id,
            "pack": pack.name,
            "rule_id": rule.id,
            "trace_id": r.trace_id,
            "revision": r.revision,
            "reviewer": r.reviewer,
            "labelled_at": r.labelled_at,
            "fails": r.fails,
            "flagged": r.flagged,
            "reused": r.trace_id in used,
        }
        for r in runs
        if r.flagged is not None
    ]
    return card, rows
