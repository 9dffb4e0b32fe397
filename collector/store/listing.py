"""One page of current trajectories, newest first, by keyset: the SQL and its cursor."""

from __future__ import annotations

import base64
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from collector.errors import SextantError

COLUMNS = (
    "trace_id",
    "closed_at",
    "service_name",
    "agent_name",
    "service_version",
    "status",
    "verdict",
    "verdict_reasons",
    "steps",
    "duration_ms",
    "cost_usd",
)
# filter name → SQL condition over `trajectories`, with one parameter
CONDITIONS = {
    "service": "service_name = ?",
    "agent": "agent_name = ?",
    "version": "service_version = ?",
    "status": "status = ?",
    "verdict": "coalesce(verdict, 'none') = ?",
    "reason": "list_contains(verdict_reasons, ?)",
    "case": "case_id = ?",
    "since": "closed_at >= ?",
    "until": "closed_at < ?",
}


@dataclass(frozen=True)
class Cursor:
    """Where the previous page ended: the last row's close time and trace id."""

    closed_at: datetime
    trace_id: str

    def encode(self) -> str:
        raw = f"{self.closed_at.isoformat()}|{self.trace_id}".encode()
        return base64.urlsafe_b64encode(raw).decode().rstrip("=")

    @classmethod
    def decode(cls, text: str) -> Cursor:
        try:
            raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)).decode()
            closed_at, trace_id = raw.split("|")
            return cls(datetime.fromisoformat(closed_at), trace_id)
        except ValueError as exc:
            raise SextantError(f"cursor {text!r}: not one this command printed") from exc


def page_query(
    filters: dict[str, Any],
    limit: int,
    after: Cursor | None = None,
    columns: tuple[str, ...] = COLUMNS,
) -> tuple[str, list[Any]]:
    """SQL for the next `limit` + 1 rows (one more tells whether another page follows).

    Ordered by close time, newest first, then trace id, so a page boundary is a total order and
    rows closing meanwhile never shift a later page (keyset, not OFFSET)."""
    unknown = set(filters) - set(CONDITIONS)
    if unknown:
        raise SextantError(f"unknown filter {sorted(unknown)[0]!r}")
    where, params = ["is_current"], []
    for name, condition in CONDITIONS.items():
        if filters.get(name) is not None:
            where.append(condition)
            params.append(filters[name])
    if after is not None:
        where.append("(closed_at < ? OR (closed_at = ? AND trace_id > ?))")
        params += [after.closed_at, after.closed_at, after.trace_id]
    sql = (
        f"SELECT {', '.join(columns)} FROM trajectories WHERE {' AND '.join(where)}"
        f" ORDER BY closed_at DESC, trace_id LIMIT {int(limit) + 1}"
    )
    return sql, params


def split_page(rows: list[dict[str, Any]], limit: int) -> tuple[list[dict[str, Any]], str | None]:
    """The page's rows and the cursor of the next page (None on the last one)."""
    if len(rows) <= limit:
        return rows, None
    last = rows[limit - 1]
    return rows[:limit], Cursor(last["closed_at"], last["trace_id"]).encode()
