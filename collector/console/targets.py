"""The home page's rows: every target the decision engine knows, its effective decision, and
its runs over the last hour and day from the store, with an hourly chart of runs and fails."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

import duckdb

from collector.decisions.engine import Snapshot
from collector.decisions.state import State
from collector.targets import Target

HOURS = 24  # the chart's buckets


@dataclass
class Counts:
    runs: int = 0
    passed: int = 0
    failed: int = 0
    reviewed: int = 0


@dataclass
class TargetRow:
    target: Target
    decision: str
    reasons: list[str]
    owners: list[str]
    last_run_at: datetime | None
    hour: Counts = field(default_factory=Counts)
    day: Counts = field(default_factory=Counts)
    runs: list[int] = field(default_factory=lambda: [0] * HOURS)  # per hour, oldest first
    fails: list[int] = field(default_factory=lambda: [0] * HOURS)
    decision_id: str | None = None  # the strongest firing decision, which its page explains


COUNTS = f"""
SELECT coalesce(service_name, ''), coalesce(agent_name, ''), coalesce(service_version, ''),
       least(floor(epoch(end_time - ?::TIMESTAMP) / 3600), {HOURS - 1})::INTEGER AS hour,
       count(*), count(*) FILTER (WHERE verdict = 'pass'),
       count(*) FILTER (WHERE verdict = 'fail'), count(*) FILTER (WHERE verdict = 'review')
FROM trajectories
WHERE is_current AND agent_run AND end_time >= ?::TIMESTAMP
GROUP BY ALL
"""


def target_rows(
    cursor: duckdb.DuckDBPyConnection, snapshot: Snapshot, now: datetime
) -> list[TargetRow]:
    """One row per target, sorted so that the versions of one agent (a canary and its
    baseline) sit together."""
    rows: dict[Target, TargetRow] = {}
    for target, last in snapshot.targets.items():
        decision, reasons = snapshot.decision_of(target)
        firing = [
            s for s in snapshot.states if s.state == State.FIRING and s.key.target.covers(target)
        ]
        owners = sorted({s.finding.owner for s in firing if s.finding.owner})
        strongest = firing[0].id if firing else None  # the states come strongest first
        rows[target] = TargetRow(
            target, decision.value, reasons, owners, last, decision_id=strongest
        )
    since = now - timedelta(hours=HOURS)
    for service, agent, version, hour, runs, passed, failed, reviewed in cursor.execute(
        COUNTS, [since, since]
    ).fetchall():
        row = rows.get(Target(service, agent, version))
        if row is None:
            continue  # a target the engine has not seen yet (its runs are not evaluated)
        row.runs[hour] += runs
        row.fails[hour] += failed
        add(row.day, runs, passed, failed, reviewed)
        if hour == HOURS - 1:
            add(row.hour, runs, passed, failed, reviewed)
    return [rows[key] for key in sorted(rows)]


def add(counts: Counts, runs: int, passed: int, failed: int, reviewed: int) -> None:
    counts.runs += runs
    counts.passed += passed
    counts.failed += failed
    counts.reviewed += reviewed


def spark(values: list[int], top: int, width: int = 96, height: int = 20) -> str:
    """SVG polyline points of `values` scaled to `top` (the larger series of a pair)."""
    if not values:
        return ""
    step = width / max(len(values) - 1, 1)
    scale = (height - 2) / top if top else 0.0
    return " ".join(f"{i * step:.1f},{height - 1 - v * scale:.1f}" for i, v in enumerate(values))
