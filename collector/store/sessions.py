"""Read queries of sessions, shared by the admin API and the command line."""

from __future__ import annotations

import base64
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import duckdb
import orjson

from collector.errors import SextantError
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


@dataclass(frozen=True)
class SessionCursor:
    """Where the previous page of sessions ended: its last row's last turn time and key."""

    last_turn_at: datetime
    session_id: str
    session_service: str

    def encode(self) -> str:
        raw = orjson.dumps([self.last_turn_at.isoformat(), self.session_id, self.session_service])
        return base64.urlsafe_b64encode(raw).decode().rstrip("=")

    @classmethod
    def decode(cls, text: str) -> SessionCursor:
        try:
            raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
            at, session_id, service = orjson.loads(raw)
            if not (isinstance(session_id, str) and isinstance(service, str)):
                raise ValueError("not a session cursor")
            return cls(datetime.fromisoformat(at), session_id, service)
        except (ValueError, TypeError, orjson.JSONDecodeError) as exc:
            raise SextantError(f"cursor {text!r}: not one this page wrote") from exc


# the keyset order of the list, and the rows after a cursor in it
ORDER = "last_turn_at DESC, session_id, session_service"
AFTER = (
    "(last_turn_at < $at OR (last_turn_at = $at AND (session_id > $sid"
    " OR (session_id = $sid AND session_service > $svc))))"
)


def list_sessions(
    cursor: duckdb.DuckDBPyConnection,
    filters: dict[str, Any],
    limit: int,
    after: SessionCursor | None = None,
) -> list[dict[str, Any]]:
    """The sessions with the latest turns first; `after` a cursor, the ones that follow it."""
    conditions = [SESSION_FILTERS[k] for k in filters]
    params: dict[str, Any] = {**filters, "limit": limit}
    if after is not None:
        conditions.append(AFTER)
        params |= {"at": after.last_turn_at, "sid": after.session_id, "svc": after.session_service}
    where = " AND ".join(conditions) or "true"
    cursor.execute(f"SELECT * FROM sessions WHERE {where} ORDER BY {ORDER} LIMIT $limit", params)
    return [jsonable(row) for row in rows_as_dicts(cursor)]


def page_of_sessions(
    cursor: duckdb.DuckDBPyConnection,
    filters: dict[str, Any],
    limit: int,
    after: SessionCursor | None = None,
) -> tuple[list[dict[str, Any]], SessionCursor | None]:
    """One page of sessions and the cursor of the next one (None on the last page)."""
    rows = list_sessions(cursor, filters, limit + 1, after)
    if len(rows) <= limit:
        return rows, None
    last = rows[limit - 1]
    at = datetime.fromisoformat(last["last_turn_at"].removesuffix("Z"))
    return rows[:limit], SessionCursor(at, last["session_id"], last["session_service"])


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
