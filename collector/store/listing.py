"""One page of current trajectories, newest (or longest, costliest...) first, by keyset: the SQL
and its cursor."""

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
    "session": "conversation_id = ?",
    "since": "closed_at >= ?",
    "until": "closed_at < ?",
    "text": "contains(lower(input), lower(?))",
    # a rule (`rule_id` or `pack/rule_id`) whose live result failed or reviewed this revision:
    # kept on the row at evaluation, so the filter reads one column instead of joining results
    "rule": "list_contains(list_concat(verdict_rules,"
    " list_transform(verdict_rules, lambda r: split_part(r, '/', 2))), ?)",
}
# sort name → its key, largest first; never NULL, so that the keyset comparison holds
SORTS = {
    "time": "closed_at",
    "duration": "coalesce(duration_ms, -1)",
    "cost": "coalesce(cost_usd, -1)",
    "tokens": "coalesce(input_tokens, 0) + coalesce(output_tokens, 0)",
}


@dataclass(frozen=True)
class Cursor:
    """Where the previous page ended: the last row's sort key (its close time by default) and
    trace id. A time cursor is written as it always was; another sort's is `sort=value`."""

    key: datetime | float
    trace_id: str
    sort: str = "time"

    def encode(self) -> str:
        key = self.key.isoformat() if isinstance(self.key, datetime) else repr(float(self.key))
        prefix = "" if self.sort == "time" else f"{self.sort}="
        raw = f"{prefix}{key}|{self.trace_id}".encode()
        return base64.urlsafe_b64encode(raw).decode().rstrip("=")

    @classmethod
    def decode(cls, text: str) -> Cursor:
        try:
            raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)).decode()
            key, trace_id = raw.split("|")
            sort, _, number = key.partition("=")
            if number and sort in SORTS:
                return cls(float(number), trace_id, sort)
            return cls(datetime.fromisoformat(key), trace_id)
        except ValueError as exc:
            raise SextantError(f"cursor {text!r}: not one this command printed") from exc


def page_query(
    filters: dict[str, Any],
    limit: int,
    after: Cursor | None = None,
    columns: tuple[str, ...] = COLUMNS,
    sort: str = "time",
) -> tuple[str, list[Any]]:
    """SQL for the next `limit` + 1 rows (one more tells whether another page follows).

    Ordered by close time (or `sort`), largest first, then trace id, so a page boundary is a
    total order and rows closing meanwhile never shift a later page (keyset, not OFFSET). The
    sort key comes back as the column `sort_key`."""
    unknown = set(filters) - set(CONDITIONS)
    if unknown:
        raise SextantError(f"unknown filter {sorted(unknown)[0]!r}")
    if sort not in SORTS:
        raise SextantError(f"unknown sort {sort!r}; sorts: {', '.join(SORTS)}")
    if after is not None and after.sort != sort:
        raise SextantError(f"the cursor is for sort {after.sort!r}, not {sort!r}")
    key = SORTS[sort]
    where, params = ["is_current"], []
    for name, condition in CONDITIONS.items():
        if filters.get(name) is not None:
            where.append(condition)
            params.append(filters[name])
    if after is not None:
        where.append(f"({key} < ? OR ({key} = ? AND trace_id > ?))")
        params += [after.key, after.key, after.trace_id]
    sql = (
        f"SELECT {', '.join(columns)}, {key} AS sort_key FROM trajectories"
        f" WHERE {' AND '.join(where)} ORDER BY {key} DESC, trace_id LIMIT {int(limit) + 1}"
    )
    return sql, params


def split_page(
    rows: list[dict[str, Any]], limit: int, sort: str = "time"
) -> tuple[list[dict[str, Any]], str | None]:
    """The page's rows (without `sort_key`) and the next page's cursor (None on the last one)."""
    keys = [row.pop("sort_key", None) for row in rows]
    if len(rows) <= limit:
        return rows, None
    return rows[:limit], Cursor(keys[limit - 1], rows[limit - 1]["trace_id"], sort).encode()
