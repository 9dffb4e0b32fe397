"""Reading decisions back: the current state of each, and the full history of one."""

from __future__ import annotations

from typing import Any

import duckdb

from collector.store.queries import jsonable, rows_as_dicts

DECISION_FILTERS = {
    "service": "service_name",
    "agent": "agent_name",
    "version": "service_version",
    "decision": "decision",
}
STATES = ("pending", "firing", "resolved", "active")

# Strongest first, as the precedence says, then the newest.
CURRENT = """
SELECT * FROM decisions
QUALIFY row_number() OVER (PARTITION BY decision_id ORDER BY seq DESC) = 1
"""
ORDER = """
ORDER BY CASE decision WHEN 'DISABLE' THEN 0 WHEN 'ROLLBACK' THEN 1 WHEN 'QUARANTINE' THEN 2
    WHEN 'DOWNGRADE' THEN 3 WHEN 'FAIL' THEN 4 WHEN 'REVIEW' THEN 5 ELSE 6 END,
    changed_at DESC
"""


def list_decisions(
    cursor: duckdb.DuckDBPyConnection, filters: dict[str, str], limit: int
) -> list[dict[str, Any]]:
    """Each decision's latest row; `state=active` means pending or firing."""
    where, params = [], []
    for name, value in filters.items():
        if name == "state":
            if value == "active":
                where.append("state IN ('pending', 'firing')")
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
