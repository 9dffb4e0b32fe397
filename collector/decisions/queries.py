"""What the decision engine reads from the store: aggregates, never every row in Python."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import duckdb

from collector.decisions.state import MAX_EVIDENCE
from collector.store.review_tables import IN_FORCE
from collector.targets import Target

# Failed and reviewed results in a window, one row per (pack, rule, reason, target), but for
# the reviews a person answered (the label counts instead, as the fail it says or not at all);
# results of a trajectory revision that a later revision replaced no longer count (a later
# revision closed after the result, so inside the window: the time bound lets DuckDB skip
# older row groups).
FINDINGS = f"""
SELECT r.pack, max(r.pack_version) AS pack_version, r.rule_id, r.reason, r.severity,
       r.verdict, r.requested_decision,
       coalesce(r.service_name, '') AS service, coalesce(r.agent_name, '') AS agent,
       coalesce(r.service_version, '') AS version,
       count(DISTINCT r.trace_id) + count(*) FILTER (WHERE r.trace_id IS NULL) AS runs,
       max(r.evaluated_at) AS latest,
       (list(r.trace_id ORDER BY r.evaluated_at DESC)
            FILTER (WHERE r.trace_id IS NOT NULL))[1:{MAX_EVIDENCE}] AS traces,
       flatten(list(r.evidence_trace_ids ORDER BY r.evaluated_at DESC)
            FILTER (WHERE r.evidence_trace_ids IS NOT NULL))[1:{MAX_EVIDENCE}] AS window_traces,
       list_sort(list(DISTINCT r.reviewer) FILTER (WHERE r.reviewer IS NOT NULL)) AS reviewers
FROM results r
WHERE r.origin = 'live' AND r.evaluated_at >= $since AND r.verdict IN ('fail', 'review')
  AND {IN_FORCE}
  AND NOT EXISTS (
      SELECT 1 FROM trajectories t
      WHERE t.closed_at >= $since AND t.trace_id = r.trace_id AND t.revision > r.revision)
GROUP BY ALL
"""

INCOMPLETE = f"""
SELECT coalesce(service_name, '') AS service, coalesce(agent_name, '') AS agent,
       coalesce(service_version, '') AS version, count(*) AS runs,
       max(closed_at) AS latest,
       (list(trace_id ORDER BY closed_at DESC))[1:{MAX_EVIDENCE}] AS traces
FROM trajectories
WHERE is_current AND closed_at >= $since AND len(coalesce(incomplete_reasons, [])) > 0
GROUP BY ALL
"""

TARGETS = """
SELECT coalesce(service_name, '') AS service, coalesce(agent_name, '') AS agent,
       coalesce(service_version, '') AS version, max(closed_at) AS last_closed,
       count(*) AS runs
FROM trajectories
WHERE closed_at >= $since AND agent_run IS NOT false
GROUP BY ALL
"""


@dataclass(frozen=True)
class Group:
    """Failed or reviewed results of one rule and reason for one target in a window."""

    pack: str
    pack_version: str
    rule_id: str
    reason: str
    severity: str
    verdict: str
    requested_decision: str | None
    target: Target
    runs: int
    latest: datetime
    traces: tuple[str, ...]
    reviewers: tuple[str, ...] = ()  # the people whose labels these are (human fails)


def rows(cursor: duckdb.DuckDBPyConnection, sql: str, since: datetime) -> list[dict[str, Any]]:
    cursor.execute(sql, {"since": since})
    names = [d[0] for d in cursor.description]
    return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


def target_of(row: dict[str, Any]) -> Target:
    return Target(row["service"], row["agent"], row["version"])


def evidence_traces(traces: list[str] | None, named: list[str] | None) -> tuple[str, ...]:
    """The results' own traces, then the runs they name as evidence (a window result's, or a
    session result's other turns), each once."""
    return tuple(dict.fromkeys([*(traces or ()), *(named or ())]))[:MAX_EVIDENCE]


def result_groups(cursor: duckdb.DuckDBPyConnection, since: datetime) -> list[Group]:
    return [
        Group(
            pack=r["pack"],
            pack_version=r["pack_version"] or "",
            rule_id=r["rule_id"],
            reason=r["reason"] or "",
            severity=r["severity"] or "",
            verdict=r["verdict"],
            requested_decision=r["requested_decision"],
            target=target_of(r),
            runs=r["runs"],
            latest=r["latest"],
            traces=evidence_traces(r["traces"], r["window_traces"]),
            reviewers=tuple(r["reviewers"] or ()),
        )
        for r in rows(cursor, FINDINGS, since)
    ]


DISTINCT_RUNS = f"""
SELECT coalesce(r.service_name, '') AS service, coalesce(r.agent_name, '') AS agent,
       coalesce(r.service_version, '') AS version,
       count(DISTINCT r.trace_id) + count(*) FILTER (WHERE r.trace_id IS NULL) AS runs
FROM results r
WHERE r.origin = 'live' AND r.evaluated_at >= $since
  AND r.pack || '/' || r.rule_id IN $rules AND coalesce(r.reason, '') IN $reasons
  AND coalesce(r.severity, '') IN $severities AND r.verdict IN $verdicts AND {IN_FORCE}
  AND NOT EXISTS (
      SELECT 1 FROM trajectories t
      WHERE t.closed_at >= $since AND t.trace_id = r.trace_id AND t.revision > r.revision)
GROUP BY ALL
"""


def distinct_runs(
    cursor: duckdb.DuckDBPyConnection, since: datetime, groups: list[Group]
) -> dict[Target, int]:
    """Runs behind a policy's groups per target, each run counted once however many of its
    results match. A policy tests its pack-qualified rule, reason, severity and verdict each on
    its own, so the rows it matches are exactly those whose `pack/rule`, reason, severity and
    verdict are each among the matched groups' values (pack names hold no `/`)."""
    cursor.execute(
        DISTINCT_RUNS,
        {
            "since": since,
            "rules": sorted({f"{g.pack}/{g.rule_id}" for g in groups}),
            "reasons": sorted({g.reason for g in groups}),
            "severities": sorted({g.severity for g in groups}),
            "verdicts": sorted({g.verdict for g in groups}),
        },
    )
    return {Target(s, a, v): runs for s, a, v, runs in cursor.fetchall()}
