"""Each judge rule's failure rate per target, raw and corrected by its EvaluatorCard.

The raw rate is the share of the runs a judge judged that it failed; the corrected one is what
that share says once the judge's misses and false alarms, as its card measured them, are taken
out (prevalence.py). Both count the latest revision of each run judged by the pack version in
force, the version the card describes.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

import duckdb

from collector.judges.cards import FLAGGED, template_sha256
from collector.judges.prevalence import Corrected, corrected
from collector.targets import Target
from evaluators.judge import JudgeRule
from evaluators.rulepack import RulePack

COUNTS = f"""
SELECT coalesce(service_name, ''), coalesce(agent_name, ''), coalesce(service_version, ''),
       count(flagged), count(*) FILTER (WHERE flagged)
FROM (
  SELECT service_name, agent_name, service_version, {FLAGGED} AS flagged
  FROM results
  WHERE source IS NULL AND origin = 'live' AND scope = 'trajectory' AND rule_type = 'judge'
    AND pack = $pack AND pack_version = $version AND rule_id = $rule
    AND evaluated_at >= $since
    AND ($service IS NULL OR (coalesce(service_name, ''), coalesce(agent_name, ''),
         coalesce(service_version, '')) = ($service, $agent, $target_version))
  QUALIFY row_number() OVER (PARTITION BY trace_id ORDER BY revision DESC, evaluated_at DESC) = 1
)
GROUP BY ALL
ORDER BY ALL
"""
CARD = """
SELECT card_id, source, calibrated_at, positives, negatives, tpr, tnr, reused_labels
FROM evaluator_cards
WHERE pack = ? AND pack_version = ? AND rule_id = ? AND model = ? AND template_sha256 = ?
ORDER BY calibrated_at DESC LIMIT 1
"""


@dataclass(frozen=True)
class Rate:
    """One judge rule's failure rate on one target."""

    pack: str
    pack_version: str
    rule_id: str
    service: str
    agent: str
    version: str
    judged: int  # runs it judged (passed or failed)
    flagged: int  # of them, runs it failed
    observed_rate: float | None
    corrected_rate: float | None
    corrected_lower: float | None
    corrected_upper: float | None
    card_id: str | None
    card_source: str | None
    card_reused_labels: int | None
    tpr: float | None
    tnr: float | None
    why: str  # why there is no corrected rate ('' when there is one)

    def row(self) -> dict[str, Any]:
        return asdict(self)


def judge_rates(
    cursor: duckdb.DuckDBPyConnection,
    packs: list[RulePack],
    since: datetime,
    rule: str | None = None,
    target: Target | None = None,
) -> list[Rate]:
    """The rates of every judge rule of these packs (or of `rule`, PACK/RULE) on every target
    (or on `target`, exactly; a part it lacks is '') over the runs judged since `since`."""
    found = []
    service, agent, version = (p or "" for p in target) if target else (None, None, None)
    for pack in packs:
        for judge in pack.rules:
            if not isinstance(judge, JudgeRule) or rule not in (None, f"{pack.name}/{judge.id}"):
                continue
            card = latest_card(cursor, pack, judge)
            params = {
                "pack": pack.name,
                "version": pack.version,
                "rule": judge.id,
                "since": since,
                "service": service,
                "agent": agent,
                "target_version": version,
            }
            for on in cursor.execute(COUNTS, params).fetchall():
                found.append(rate_of(pack, judge, on, card))
    return found


def latest_card(
    cursor: duckdb.DuckDBPyConnection, pack: RulePack, rule: JudgeRule
) -> tuple[Any, ...] | None:
    """The card the judge is gated by (cards.trust reads the same one)."""
    assert pack.judges is not None  # a pack with judge rules has them (RulePack)
    model = rule.model or pack.judges.endpoint.model
    key = [pack.name, pack.version, rule.id, model, template_sha256(rule)]
    return cursor.execute(CARD, key).fetchone()


def rate_of(
    pack: RulePack, rule: JudgeRule, counts: tuple[Any, ...], card: tuple[Any, ...] | None
) -> Rate:
    service, agent, version, judged, flagged = counts
    base = dict(
        pack=pack.name,
        pack_version=pack.version,
        rule_id=rule.id,
        service=service,
        agent=agent,
        version=version,
        judged=judged,
        flagged=flagged,
    )
    if card is None:
        return Rate(
            **base,
            observed_rate=flagged / judged if judged else None,
            corrected_rate=None,
            corrected_lower=None,
            corrected_upper=None,
            card_id=None,
            card_source=None,
            card_reused_labels=None,
            tpr=None,
            tnr=None,
            why="no EvaluatorCard for this pack version, model and prompt",
        )
    card_id, source, _, positives, negatives, tpr, tnr, reused = card
    # the card stores rates over its counts: the counts come back exactly
    true_positives = round((tpr or 0.0) * positives)
    true_negatives = round((tnr or 0.0) * negatives)
    fixed: Corrected = corrected(
        flagged, judged, true_positives, positives, true_negatives, negatives
    )
    return Rate(
        **base,
        observed_rate=fixed.observed,
        corrected_rate=fixed.rate,
        corrected_lower=fixed.lower,
        corrected_upper=fixed.upper,
        card_id=card_id,
        card_source=source,
        card_reused_labels=reused,
        tpr=tpr,
        tnr=tnr,
        why=fixed.why,
    )
