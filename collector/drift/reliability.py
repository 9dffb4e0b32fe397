"""Reliability over repeated attempts of a case: per case and per target, from the store."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from statistics import fmean
from typing import Any

import duckdb

from collector.drift.evaluate import find_targets
from collector.drift.outcome import WindowOutcome, is_interrupt, unevaluated
from collector.drift.sides import Side, exactly
from collector.store.reader import Reader
from collector.store.review_tables import IN_FORCE
from collector.targets import Target, describe_target
from evaluators.base import Verdict
from evaluators.reliability import (
    coefficient_of_variation,
    outcome_consistency,
    pass_at_k,
    pass_hat_k,
)
from evaluators.rulepack import Selector
from evaluators.window import ReliabilityRule


@dataclass(frozen=True)
class CaseRuns:
    """What the store says about one case of one target."""

    target: Target
    case_id: str
    n: int
    c: int
    modal_runs: int  # attempts that follow the most common tool sequence
    latencies: list[float]
    costs: list[float]
    failed: list[str]  # trace ids of attempts that did not pass, newest first

    def pass_at(self, k: int) -> float | None:
        return pass_at_k(self.n, self.c, k) if self.n >= k else None

    def pass_hat(self, k: int) -> float | None:
        return pass_hat_k(self.n, self.c, k) if self.n >= k else None

    @property
    def consistency(self) -> float:
        return outcome_consistency(self.n, self.c)

    @property
    def trajectory_consistency(self) -> float:
        return self.modal_runs / self.n


def case_runs(
    cursor: duckdb.DuckDBPyConnection, side: Side, rule: str | None = None
) -> list[CaseRuns]:
    """Attempts per case. An attempt passes when its verdict is `pass`, or, with `rule`
    (pack/rule), when that rule passed; attempts with no such verdict are left out."""
    runs, params = side.sql()
    if rule is None:
        passed, join = "CASE WHEN verdict IS NULL THEN NULL ELSE verdict = 'pass' END", ""
    else:
        pack, rule_id = rule.split("/", 1)
        passed = "r.ok"
        join = (
            " LEFT JOIN (SELECT trace_id, revision, bool_and(verdict = 'pass') AS ok FROM results r"
            " WHERE scope = 'trajectory' AND origin = 'live' AND pack = ? AND rule_id = ?"
            f" AND verdict <> 'not_applicable' AND {IN_FORCE} GROUP BY ALL) r"
            " USING (trace_id, revision)"
        )
        params = [*params, pack, rule_id]
    query = f"""
        WITH runs AS ({runs}),
        attempts AS (SELECT runs.*, {passed} AS passed FROM runs{join}),
        sequences AS (
            SELECT a.*, coalesce(string_agg(coalesce(s.tool_name, s.name), ' > ' ORDER BY s.seq)
                        FILTER (WHERE s.span_kind = 'tool'), '') AS seq
            FROM attempts a LEFT JOIN steps s ON s.trace_id = a.trace_id AND s.revision = a.revision
            WHERE a.passed IS NOT NULL AND a.case_id IS NOT NULL
            GROUP BY ALL),
        counted AS (SELECT *, count(*) OVER (PARTITION BY service_name, agent_name,
                    service_version, case_id, seq) AS same FROM sequences)
        SELECT service_name, agent_name, service_version, case_id, count(*), sum(passed::INT),
               max(same), list(duration_ms) FILTER (WHERE duration_ms IS NOT NULL),
               list(cost_usd) FILTER (WHERE cost_usd IS NOT NULL),
               list(trace_id ORDER BY end_time DESC) FILTER (WHERE NOT passed)
        FROM counted GROUP BY ALL ORDER BY ALL
    """
    return [
        CaseRuns(Target(svc, agent, ver), case, n, c, modal, lat or [], cost or [], failed or [])
        for svc, agent, ver, case, n, c, modal, lat, cost, failed in cursor.execute(
            query, params
        ).fetchall()
    ]


def mean_of(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return fmean(known) if known else None


@dataclass
class TargetReliability:
    target: Target
    cases: list[CaseRuns] = field(default_factory=list)

    def eligible(self, k: int) -> list[CaseRuns]:
        return [case for case in self.cases if case.n >= k]

    def pass_at(self, k: int) -> float | None:
        return mean_of([case.pass_at(k) for case in self.cases])

    def pass_hat(self, k: int) -> float | None:
        return mean_of([case.pass_hat(k) for case in self.cases])


def by_target(cases: list[CaseRuns]) -> list[TargetReliability]:
    targets: dict[Target, TargetReliability] = {}
    for case in cases:
        targets.setdefault(case.target, TargetReliability(case.target)).cases.append(case)
    return list(targets.values())


def report(cases: list[CaseRuns], ks: list[int]) -> dict[str, Any]:
    """Per case and per target: n, c, pass@k, pass^k, their gap, consistency, CVs (JSON-ready)."""

    def metrics(at: dict[int, float | None], hat: dict[int, float | None]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for k in ks:
            capable, reliable = at[k], hat[k]
            gap = None if capable is None or reliable is None else capable - reliable
            out[f"pass@{k}"], out[f"pass^{k}"], out[f"gap@{k}"] = at[k], hat[k], gap
        return out

    case_rows = []
    for case in cases:
        case_rows.append(
            {
                "service": case.target.service,
                "agent": case.target.agent,
                "version": case.target.version,
                "case": case.case_id,
                "n": case.n,
                "c": case.c,
                **metrics({k: case.pass_at(k) for k in ks}, {k: case.pass_hat(k) for k in ks}),
                "consistency": case.consistency,
                "trajectory_consistency": case.trajectory_consistency,
                "latency_cv": coefficient_of_variation(case.latencies),
                "cost_cv": coefficient_of_variation(case.costs),
            }
        )
    target_rows = []
    for target in by_target(cases):
        rows = [r for r in case_rows if (r["service"], r["agent"], r["version"]) == target.target]
        target_rows.append(
            {
                "service": target.target.service,
                "agent": target.target.agent,
                "version": target.target.version,
                "cases": len(target.cases),
                "n": sum(c.n for c in target.cases),
                "c": sum(c.c for c in target.cases),
                **metrics({k: target.pass_at(k) for k in ks}, {k: target.pass_hat(k) for k in ks}),
                **{
                    key: mean_of([r[key] for r in rows])
                    for key in ("consistency", "trajectory_consistency", "latency_cv", "cost_cv")
                },
            }
        )
    return {"k": ks, "cases": case_rows, "targets": target_rows}


def evaluate_reliability(
    cursor: duckdb.DuckDBPyConnection,
    selector: Selector,
    rule: ReliabilityRule,
    now: datetime,
    max_evidence: int = 10,
    reader: Reader | None = None,
) -> list[tuple[WindowOutcome, TargetReliability]]:
    """Every target's reliability; as with `evaluate_drift`, a target that fails is a REVIEW
    of its own, and with `reader` each target reads a snapshot of its own."""
    start = now - timedelta(seconds=rule.window.last)
    out = []
    for i, target in enumerate(find_targets(cursor, selector, start, now)):
        side = Side(*exactly(target), start=start, end=now, runs=rule.window.runs)
        try:  # one target's failure is its own REVIEW, not the loss of the others' round
            if reader is not None and i:
                reader.renew(cursor)
            found = TargetReliability(target, case_runs(cursor, side, rule.rule))
            out.append((judge_target(rule, found, start, now, max_evidence), found))
        except Exception as exc:
            if is_interrupt(exc, reader):
                raise
            out.append(
                (unevaluated(target, rule.metric, exc, start, now), TargetReliability(target))
            )
    return out


def judge_target(
    rule: ReliabilityRule, found: TargetReliability, start: datetime, now: datetime, limit: int
) -> WindowOutcome:
    k = rule.k
    eligible = found.eligible(max(k, 2) if rule.metric == "consistency" else k)
    by_metric: dict[str, list[float | None]] = {
        "pass_at_k": [c.pass_at(k) for c in eligible],
        "pass_hat_k": [c.pass_hat(k) for c in eligible],
        "consistency": [c.consistency for c in eligible],
    }
    values = by_metric[rule.metric]
    value = mean_of(values)
    label = "consistency" if rule.metric == "consistency" else f"{rule.metric}@{k}"
    short = len(found.cases) - len(eligible)
    where = f"{describe_target(found.target)}: "
    if value is None or len(eligible) < rule.min_cases:
        verdict, reason = Verdict.REVIEW, "insufficient_samples"
        text = (
            f"{where}{len(eligible)} case(s) with at least {k} attempts (need {rule.min_cases});"
            f" {short} case(s) have fewer: underpowered"
        )
    else:
        verdict = Verdict.FAIL if value < rule.min else Verdict.PASS
        reason = None
        text = f"{where}{label} {value:.3f} (min {rule.min:g}) over {len(eligible)} case(s)"
        if short:
            text += f"; {short} case(s) with fewer than {k} attempts left out"
    evidence: list[str] = []
    if verdict != Verdict.PASS:
        for case in sorted(eligible or found.cases, key=lambda c: c.c / c.n):
            evidence.extend(case.failed[: limit - len(evidence)])
    return WindowOutcome(
        target=found.target,
        metric=label,
        verdict=verdict,
        reason=reason,
        message=text,
        window_start=start,
        window_end=now,
        current_n=len(eligible),
        score=value,
        evidence=tuple(evidence),
    )
