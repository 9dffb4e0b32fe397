"""The one builder of `results` rows: a rule's verdict on a trajectory or on a window."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

from collector.drift.details import encoded
from evaluators.base import Decision, Result, Verdict
from evaluators.model import Trajectory
from evaluators.rulepack import RulePack

if TYPE_CHECKING:
    from collector.drift.outcome import WindowOutcome


class Run(Protocol):
    """What a result's row says of its run: a trajectory, or what is kept of one."""

    @property
    def trace_id(self) -> str: ...
    @property
    def revision(self) -> int: ...
    @property
    def service_name(self) -> str | None: ...
    @property
    def agent_name(self) -> str | None: ...
    @property
    def service_version(self) -> str | None: ...


def trajectory_result_columns(
    runs: Iterable[tuple[Run, list[Result]]],
    shas: dict[str, str],
    at: datetime,
    replay_id: str | None = None,
) -> dict[str, list[Any]]:
    """The `results` columns of many trajectories' results (the columns not named are NULL);
    a `replay_id` marks them as a replay's, not live."""
    pairs = [(t, r) for t, results in runs for r in results]
    count = len(pairs)
    return {
        "trace_id": [t.trace_id for t, _ in pairs],
        "revision": [t.revision for t, _ in pairs],
        "pack": [r.pack for _, r in pairs],
        "pack_version": [r.pack_version for _, r in pairs],
        "pack_sha256": [shas.get(r.pack) for _, r in pairs],
        "rule_id": [r.rule_id for _, r in pairs],
        "rule_type": [r.rule_type for _, r in pairs],
        "verdict": [r.verdict.value for _, r in pairs],
        "score": [r.score for _, r in pairs],
        "severity": [r.severity.value for _, r in pairs],
        "reason": [r.reason or None for _, r in pairs],
        "message": [r.message for _, r in pairs],
        "evidence_span_ids": [list(r.evidence) or None for _, r in pairs],
        "requested_decision": [
            r.requested_decision.value if r.requested_decision else None for _, r in pairs
        ],
        "service_name": [t.service_name for t, _ in pairs],
        "agent_name": [t.agent_name for t, _ in pairs],
        "service_version": [t.service_version for t, _ in pairs],
        "evaluated_at": [at] * count,
        "scope": ["trajectory"] * count,
        "origin": ["live" if replay_id is None else "replay"] * count,
        "replay_id": [replay_id] * count,
        # a live result its pack audits waits in the owner's queue; a replay's never does
        "audit": [True if r.audit and replay_id is None else None for _, r in pairs],
    }


def trajectory_result_rows(
    t: Trajectory,
    results: list[Result],
    shas: dict[str, str],
    at: datetime,
    replay_id: str | None = None,
) -> list[dict[str, Any]]:
    """Rows of one trajectory's results; a `replay_id` marks them as a replay's, not live."""
    columns = trajectory_result_columns([(t, results)], shas, at, replay_id)
    return [
        dict(zip(columns, values, strict=True)) for values in zip(*columns.values(), strict=True)
    ]


def window_result_row(
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
        "details": encoded(outcome.details),
        "baseline_n": outcome.baseline_n,
        "current_n": outcome.current_n,
        "evidence_trace_ids": list(outcome.evidence) or None,
    }
