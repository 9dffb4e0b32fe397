"""Read queries of sessions, shared by the admin API and the command line."""

from __future__ import annotations

from typing import Any

import duckdb

from collector.store.queries import SUMMARY_COLUMNS, jsonable, rows_as_dicts

# filter -> the SQL condition it adds ($name is its value)
SESSION_FILTERS = {
    "service": "(service_name = $service OR session_service = $service)",
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


class AmbiguousSession(LookupError):
    """A conversation id that several services use names several sessions: say which."""

    def __init__(self, session_id: str, services: list[str]) -> None:
        self.services = services
        super().__init__(
            f"session {session_id!r} is a conversation of several services"
            f" ({', '.join(services)}): name one with service="
        )


def load_session(
    cursor: duckdb.DuckDBPyConnection, session_id: str, service: str | None = None
) -> dict[str, Any] | None:
    """A session with its turns (in the order they arrived) and every result its rules stored
    (each a change of the rule's verdict or evidence), oldest first. A conversation id that
    several services use needs `service` (AmbiguousSession otherwise)."""
    cursor.execute(
        "SELECT * FROM sessions WHERE session_id = ? AND (? IS NULL OR session_service = ?)"
        " ORDER BY session_service",
        [session_id, service, service],
    )
    found = rows_as_dicts(cursor)
    if not found:
        return None
    if len(found) > 1:
        raise AmbiguousSession(session_id, [r["session_service"] for r in found])
    session = jsonable(found[0])
    traces = session["trace_ids"] or []
    cursor.execute(
        f"SELECT {TURN_COLUMNS}, verdict FROM trajectories WHERE is_current AND trace_id IN ?",
        [traces],
    )
    by_trace = {row["trace_id"]: jsonable(row) for row in rows_as_dicts(cursor)}
    # a turn retention deleted is still named, with nothing else known
    session["turns_detail"] = [by_trace.get(t, {"trace_id": t}) for t in traces]
    # a session across services holds the results of every service's turns
    cursor.execute(
        "SELECT * EXCLUDE (window_start, window_end, baseline, metric, effect_size, p_value,"
        " baseline_n, current_n) FROM results WHERE scope = 'session' AND session_id = ?"
        " AND (? = '*' OR coalesce(service_name, '') = ?)"
        " ORDER BY evaluated_at, pack, rule_id",
        [session_id, session["session_service"], session["session_service"]],
    )
    session["results"] = [jsonable(row) for row in rows_as_dicts(cursor)]
    return session
