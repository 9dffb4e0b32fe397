"""Which stored trajectories a replay, a re-send or an export takes, as SQL over the store."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime

from collector.errors import SextantError
from collector.store.runs import Source

TRACE_ID = re.compile(r"^[0-9a-fA-F]{32}$")


def check_trace_id(value: str) -> str:
    if not TRACE_ID.match(value):
        raise SextantError(f"trace id {value!r}: expected 32 hex digits")
    return value.lower()


@dataclass
class Selection:
    """Filters over current trajectories; all given filters must hold. `extra` ids are taken
    whatever the filters say (the traces an --expect names)."""

    trace_ids: list[str] = field(default_factory=list)
    since: datetime | None = None
    until: datetime | None = None
    target: str | None = None  # SERVICE[/AGENT[/VERSION]]
    verdict: str | None = None
    reason: str | None = None
    decision: str | None = None
    extra: list[str] = field(default_factory=list)

    def where(self, source: Source) -> tuple[str, list]:
        """SQL condition over `trajectories t` and its parameters."""
        where: list[str] = ["t.is_current", "t.agent_run"]
        params: list[object] = []
        filters: list[str] = []
        if self.trace_ids:
            filters.append("t.trace_id IN (SELECT unnest(?::VARCHAR[]))")
            params.append([check_trace_id(i) for i in self.trace_ids])
        if self.since:
            filters.append("t.start_time >= ?")
            params.append(self.since)
        if self.until:
            filters.append("t.start_time < ?")
            params.append(self.until)
        if self.target:
            for column, value in zip(
                ("service_name", "agent_name", "service_version"),
                self.target.split("/", 2),
                strict=False,
            ):
                filters.append(f"t.{column} = ?")
                params.append(value)
        if self.verdict:
            filters.append("t.verdict = ?")
            params.append(self.verdict)
        if self.reason:
            filters.append("list_contains(t.verdict_reasons, ?)")
            params.append(self.reason)
        if self.decision:
            filters.append("t.trace_id IN (SELECT unnest(?::VARCHAR[]))")
            params.append(decision_traces(source, self.decision))
        condition = " AND ".join(filters) or "true"
        if self.extra:
            condition = f"({condition}) OR t.trace_id IN (SELECT unnest(?::VARCHAR[]))"
            params.append([check_trace_id(i) for i in self.extra])
        if filters or self.extra:
            where.append(f"({condition})")
        return " AND ".join(where), params

    def keys(self, source: Source) -> list[str]:
        """The selected trace ids, oldest run first."""
        where, params = self.where(source)
        table = source.query(
            f"SELECT trace_id FROM trajectories t WHERE {where} ORDER BY t.start_time, t.trace_id",
            params,
        )
        return table["trace_id"].to_pylist()


def decision_traces(source: Source, decision_id: str) -> list[str]:
    """Every trace a decision ever cited as evidence, over its whole history."""
    table = source.query(
        "SELECT DISTINCT unnest(evidence_trace_ids) AS trace_id FROM decisions"
        " WHERE decision_id = ?",
        [decision_id],
    )
    if not table.num_rows:
        found = source.query(
            "SELECT count(*) AS n FROM decisions WHERE decision_id = ?", [decision_id]
        )
        if not found["n"][0].as_py():
            raise SextantError(f"no decision {decision_id!r} in {source.name}")
    return table["trace_id"].to_pylist()
