"""Reading decisions back: the current state of each, and the full history of one."""

from __future__ import annotations

from typing import Any

import duckdb

from collector.decisions.state import ACTIVE, ACTIVE_FILTER, State
from collector.store.queries import jsonable, rows_as_dicts
from evaluators.base import DECISION_PRECEDENCE

DECISION_FILTERS = {
    "service": "service_name",
    "agent": "agent_name",
    "version": "service_version",
    "decision": "decision",
}
STATES = (*(s.value for s in State), ACTIVE_FILTER)


def strength_sql(column: str = "decision") -> str:
    """A SQL expression ranking `column` by the decision precedence: 0 is the strongest."""
    ranks = " ".join(f"WHEN '{d.value}' THEN {i}" for i, d in enumerate(DECISION_PRECEDENCE))
    return f"CASE {column} {ranks} ELSE {len(DECISION_PRECEDENCE)} END"


CURRENT = """
SELECT * FROM decisions
QUALIFY row_number() OVER (PARTITION BY decision_id ORDER BY seq DESC) = 1
"""
# Strongest first, as the precedence says, then the newest.
ORDER = f"\nORDER BY {strength_sql()}, changed_at DESC\n"


def list_decisions(
    cursor: duckdb.DuckDBPyConnection, filters: dict[str, str], limit: int
) -> list[dict[str, Any]]:
    """Each decision's latest row; `state=active` means pending or firing."""
    where, params = [], []
    for name, value in filters.items():
        if name == "state":
            if value == ACTIVE_FILTER:
                where.append(f"state IN {tuple(str(s) for s in ACTIVE)}")
            else:
                where.append("state = ?")
                params.append(value)
        else:
            where.append(f"{DECISION_FILTERS[name]} = ?")
            params.append(value)
    sql = f"SELECT * FROM ({CURRENT})"
    if where:
        sql += " WHERE " + " AND ".join(where)
    cursor.execute(sql + ORDER + " LIMIT ?", [*params, limit])
    return [jsonable(r) for r in rows_as_dicts(cursor)]


def decision_history(cursor: duckdb.DuckDBPyConnection, decision_id: str) -> list[dict[str, Any]]:
    cursor.execute("SELECT * FROM decisions WHERE decision_id = ? ORDER BY seq", [decision_id])
    return [jsonable(r) for r in rows_as_dicts(cursor)]
