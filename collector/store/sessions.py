"""Read queries of sessions, shared by the admin API and the command line."""

from __future__ import annotations

from typing import Any

import duckdb

from collector.store.queries import SUMMARY_COLUMNS, jsonable, rows_as_dicts

# filter -> the SQL condition it adds ($name is its value)
SESSION_FILTERS = {
    "service": "service_name = $service",
    "agent": "agent_name = $agent",
    "version": "service_version = $version",
    "status": "status = $status",
    "user": "user_id = $user",
    "verdict": "verdict = $verdict",
    "since": "last_turn_at >= $since",
    "until": "last_turn_at < $until",
}
TURN_COLUMNS = ", ".join(SUMMARY_COLUMNS)


def list_sessions(
    cursor: duckdb.DuckDBPyConnection, filters: dict[str, Any], limit: int
) -> list[dict[str, Any]]:
    """The sessions with the latest turns first."""
    where = " AND ".join(SESSION_FILTERS[k] for k in filters) or "true"
    cursor.execute(
        f"SELECT * FROM sessions WHERE {where} ORDER BY last_turn_at DESC, session_id LIMIT $limit",
        {**filters, "limit": limit},
    )
    return [jsonable(row) for row in rows_as_dicts(cursor)]


def load_session(cursor: duckdb.DuckDBPyConnection, session_id: str) -> dict[str, Any] | None:
    """A session with its turns (in the order they began) and every result its rules stored
    (each a change of the rule's verdict or evidence), oldest first."""
    cursor.execute("SELECT * FROM sessions WHERE session_id = ?", [session_id])
    found = rows_as_dicts(cursor)
    if not found:
        return None
    session = jsonable(found[0])
    traces = session["trace_ids"] or []
    cursor.execute(
        f"SELECT {TURN_COLUMNS}, verdict FROM trajectories WHERE is_current AND trace_id IN ?",
        [traces],
    )
    by_trace = {row["trace_id"]: jsonable(row) for row in rows_as_dicts(cursor)}
    # a turn retention deleted is still named, with nothing else known
    session["turns_detail"] = [by_trace.get(t, {"trace_id": t}) for t in traces]
    cursor.execute(
        "SELECT * EXCLUDE (window_start, window_end, baseline, metric, effect_size, p_value,"
        " baseline_n, current_n) FROM results WHERE scope = 'session' AND session_id = ?"
        " ORDER BY evaluated_at, pack, rule_id",
        [session_id],
    )
    session["results"] = [jsonable(row) for row in rows_as_dicts(cursor)]
    return session
