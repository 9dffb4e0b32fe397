"""What the assembler reads back from the store: the traces open at a restart, the previous
revision of a closing trace, and the spans of the traces memory does not hold."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pyarrow as pa

from collector.assembler.buffers import OpenTrace
from collector.assembler.spans import SPAN_FIELDS
from collector.clock import Clock

SPANS_OF_TRACES = (
    "SELECT " + ", ".join(SPAN_FIELDS) + ", received_at FROM spans"
    " WHERE received_at BETWEEN ? AND ? AND trace_id IN ?"
    # A runaway trace is built from its first spans only (it closed as incomplete_bound).
    " QUALIFY row_number() OVER (PARTITION BY trace_id ORDER BY received_at, span_id) <= ?"
)
SPANS_OF_ONE_TRACE = (
    "SELECT " + ", ".join(SPAN_FIELDS) + ", received_at FROM spans WHERE trace_id = ?"
    " ORDER BY received_at, span_id LIMIT ?"
)
STORED_TRACES = "SELECT trace_id FROM trajectories"
PREVIOUS_REVISIONS = (
    "SELECT trace_id, max(revision), min(first_received_at), max(last_received_at)"
    " FROM trajectories WHERE trace_id IN ? GROUP BY trace_id"
)
# Spans that no stored trajectory covers: traces still open when the process stopped, and late
# spans that arrived after their trace closed.
UNCLOSED = """
SELECT s.trace_id, count(*),
       bool_or(s.parent_span_id IS NULL OR s.flags & 768 = 768)
         OR coalesce(any_value(t.rooted), false),
       min(s.received_at), max(s.received_at)
FROM spans s
LEFT JOIN (
  SELECT trace_id, max(last_received_at) AS covered, bool_or(root_span_id IS NOT NULL) AS rooted
  FROM trajectories GROUP BY 1
) t USING (trace_id)
WHERE t.covered IS NULL OR s.received_at > t.covered
GROUP BY s.trace_id
"""
# The traces that closed last with their root, oldest first: a late span reopens them as
# rooted (closing after the quiet period, not at the maximum age), after a restart as before.
RECENTLY_ROOTED = """
SELECT trace_id FROM (
  SELECT trace_id, closed_at FROM trajectories WHERE is_current AND root_span_id IS NOT NULL
  ORDER BY closed_at DESC LIMIT ?
) ORDER BY closed_at
"""


def unclosed_traces(cursor: Any, clock: Clock) -> list[OpenTrace]:
    """Every trace whose spans no stored trajectory covers, as open traces whose quiet-period
    clock continues from when their spans were stored, not from now."""
    now, wall = clock.monotonic(), clock.now()
    return [
        OpenTrace(
            trace_id,
            first_seen=now - (wall - first).total_seconds(),
            last_seen=now - (wall - last).total_seconds(),
            first_received=first,
            last_received=last,
            spans=count,
            root_seen=bool(root),
        )
        for trace_id, count, root, first, last in cursor.execute(UNCLOSED).fetchall()
    ]


def recently_rooted(cursor: Any, limit: int) -> list[str]:
    """The ids of the `limit` traces that closed last with their root, oldest first."""
    return [row[0] for row in cursor.execute(RECENTLY_ROOTED, [limit]).fetchall()]


def previous_revisions(cursor: Any, trace_ids: list[str]) -> dict[str, tuple[Any, ...]]:
    """Each trace's stored revision, with when its spans were first and last received."""
    if not trace_ids:
        return {}
    return {row[0]: row[1:] for row in cursor.execute(PREVIOUS_REVISIONS, [trace_ids]).fetchall()}


def spans_from_store(
    cursor: Any,
    stored: list[tuple[OpenTrace, str]],
    previous: dict[str, tuple[Any, ...]],
    limit: int,
) -> pa.Table:
    """The spans of the closing traces `stored`, at most `limit` of each, from the store."""
    trace_ids = [trace.trace_id for trace, _ in stored]
    # received_at follows insertion order, so these bounds let DuckDB skip row groups.
    lower: datetime = min(
        [trace.first_received for trace, _ in stored]
        + [previous[t][1] for t in trace_ids if t in previous]
    )
    upper = max(trace.last_received for trace, _ in stored)
    return cursor.sql(SPANS_OF_TRACES, params=[lower, upper, trace_ids, limit]).to_arrow_table()


def run_from_store(database: Any, trace_id: str, limit: int) -> list[dict[str, Any]]:
    """One trace's stored spans (at most `limit`) as rows, for a reader memory cannot serve."""
    cursor = database.cursor()
    try:
        return cursor.sql(SPANS_OF_ONE_TRACE, params=[trace_id, limit]).to_arrow_table().to_pylist()
    finally:
        cursor.close()
