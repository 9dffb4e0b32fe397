"""The home page's rows: every target the decision engine knows, its effective decision, and
its runs over the last hour and over the chosen range from the store, with a chart of runs and
fails across that range."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

import duckdb

from collector.decisions.engine import Snapshot
from collector.decisions.state import State
from collector.targets import Target


@dataclass(frozen=True)
class Range:
    """How far back the page looks, and the chart's buckets across it."""

    name: str  # as the query parameter says it: ?range=7d
    label: str  # as the page says it: "7 d"
    span: timedelta
    buckets: int
    per: str  # one bucket, as the chart's legend says it

    @property
    def bucket(self) -> timedelta:
        return self.span / self.buckets


RANGES = {
    r.name: r
    for r in (
        Range("1h", "1 h", timedelta(hours=1), 12, "5 min"),
        Range("6h", "6 h", timedelta(hours=6), 24, "15 min"),
        Range("24h", "24 h", timedelta(hours=24), 24, "hour"),
        Range("7d", "7 d", timedelta(days=7), 28, "6 h"),
    )
}
DEFAULT_RANGE = "24h"
# Reloading the page (a <meta http-equiv="refresh">: the console runs no inline script)
REFRESHES = {"off": 0, "30s": 30, "1m": 60}


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
    buckets: int = 24
    hour: Counts = field(default_factory=Counts)
    span: Counts = field(default_factory=Counts)  # over the page's range
    runs: list[int] = field(default_factory=list)  # per bucket of the range, oldest first
    fails: list[int] = field(default_factory=list)
    decision_id: str | None = None  # the strongest firing decision, which its page explains

    def __post_init__(self) -> None:
        self.runs = self.runs or [0] * self.buckets
        self.fails = self.fails or [0] * self.buckets


COUNTS = """
SELECT coalesce(service_name, ''), coalesce(agent_name, ''), coalesce(service_version, ''),
       least(floor(epoch(end_time - ?::TIMESTAMP) / ?), ? - 1)::INTEGER AS bucket,
       end_time >= ?::TIMESTAMP AS last_hour,
       count(*), count(*) FILTER (WHERE verdict = 'pass'),
       count(*) FILTER (WHERE verdict = 'fail'), count(*) FILTER (WHERE verdict = 'review')
FROM trajectories
WHERE is_current AND agent_run AND end_time >= ?::TIMESTAMP
GROUP BY ALL
"""


def target_rows(
    cursor: duckdb.DuckDBPyConnection,
    snapshot: Snapshot,
    now: datetime,
    shown: Range = RANGES[DEFAULT_RANGE],
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
            target,
            decision.value,
            reasons,
            owners,
            last,
            buckets=shown.buckets,
            decision_id=strongest,
        )
    start = now - shown.span  # every range is an hour or more: it holds the last hour's column
    seconds = shown.bucket.total_seconds()
    hour_ago = now - timedelta(hours=1)
    found = cursor.execute(COUNTS, [start, seconds, shown.buckets, hour_ago, start]).fetchall()
    for service, agent, version, bucket, last_hour, runs, passed, failed, reviewed in found:
        row = rows.get(Target(service, agent, version))
        if row is None:
            continue  # a target the engine has not seen yet (its runs are not evaluated)
        row.runs[bucket] += runs
        row.fails[bucket] += failed
        add(row.span, runs, passed, failed, reviewed)
        if last_hour:
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
