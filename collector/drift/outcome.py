"""A window rule's conclusion about one target and metric, as a `results` row."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from collector.drift.sides import Target
from evaluators.base import Decision, Verdict
from evaluators.rulepack import RulePack


@dataclass(frozen=True)
class WindowOutcome:
    target: Target
    metric: str
    verdict: Verdict
    reason: str | None
    message: str
    window_start: datetime
    window_end: datetime
    baseline: str | None = None
    effect_size: float | None = None
    p_value: float | None = None
    baseline_n: int | None = None
    current_n: int | None = None
    score: float | None = None
    evidence: tuple[str, ...] = field(default=())


def result_row(
    pack: RulePack, sha256: str | None, rule: Any, outcome: WindowOutcome, at: datetime
) -> dict[str, Any]:
    """Window results have no trace (NULL) and revision 0; they ask for the rule's `on_fail`
    when they fail and for a review when they cannot decide."""
    requested: Decision | None = None
    reason = outcome.reason
    if outcome.verdict == Verdict.FAIL:
        requested, reason = rule.on_fail, reason or rule.reason
    elif outcome.verdict == Verdict.REVIEW:
        requested = Decision.REVIEW
    service, agent, version = outcome.target
    return {
        "trace_id": None,
        "revision": 0,
        "pack": pack.name,
        "pack_version": pack.version,
        "pack_sha256": sha256,
        "rule_id": rule.id,
        "rule_type": rule.type,
        "verdict": outcome.verdict.value,
        "score": outcome.score,
        "severity": rule.severity.value,
        "reason": reason,
        "message": outcome.message,
        "evidence_span_ids": None,
        "requested_decision": requested.value if requested else None,
        "service_name": service,
        "agent_name": agent,
        "service_version": version,
        "evaluated_at": at,
        "scope": "window",
        "origin": "live",
        "replay_id": None,
        "window_start": outcome.window_start,
        "window_end": outcome.window_end,
        "baseline": outcome.baseline,
        "metric": outcome.metric,
        "effect_size": outcome.effect_size,
        "p_value": outcome.p_value,
        "baseline_n": outcome.baseline_n,
        "current_n": outcome.current_n,
        "evidence_trace_ids": list(outcome.evidence) or None,
    }
