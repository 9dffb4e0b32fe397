"""Frozen baselines: `sextant baseline save NAME` keeps the runs a drift rule compares with."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import duckdb
import pyarrow as pa

from collector.drift.sides import Side, matching
from collector.errors import SextantError
from collector.store.tables import ARROW_SCHEMAS

NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]*$"


@dataclass(frozen=True)
class BaselineSpec:
    name: str
    service: str | None = None
    agent: str | None = None
    version: str | None = None
    since: datetime | None = None
    until: datetime | None = None

    def side(self) -> Side:
        return Side(*matching(self.service, self.agent, self.version), self.since, self.until)


def parse_target(text: str | None) -> tuple[str | None, str | None, str | None]:
    """`service/agent/version`, globs allowed, trailing parts optional, `*` or empty = any."""
    if not text:
        return None, None, None
    parts = text.split("/")
    if len(parts) > 3:
        raise SextantError(f"--target {text!r}: expected SERVICE[/AGENT[/VERSION]]")
    service, agent, version = [p if p not in ("", "*") else None for p in parts + [""] * 2][:3]
    return service, agent, version


def build(
    cursor: duckdb.DuckDBPyConnection, spec: BaselineSpec, now: datetime
) -> dict[str, pa.Table]:
    """The rows of `baselines` and `baseline_members` for a new baseline, as Arrow tables."""
    exists = cursor.execute("SELECT count(*) FROM baselines WHERE name = ?", [spec.name])
    if exists.fetchall()[0][0]:
        raise SextantError(f"baseline {spec.name!r} already exists; baselines are frozen")
    runs, params = spec.side().sql()
    members = cursor.sql(
        f"SELECT ?::VARCHAR AS name, trace_id, revision FROM ({runs})", params=[spec.name, *params]
    ).to_arrow_table()
    if not members.num_rows:
        raise SextantError("no stored runs match; nothing to save")
    members = members.cast(ARROW_SCHEMAS["baseline_members"])
    header = pa.Table.from_pylist(
        [
            {
                "name": spec.name,
                "service_name": spec.service,
                "agent_name": spec.agent,
                "service_version": spec.version,
                "since": spec.since,
                "until": spec.until,
                "runs": members.num_rows,
                "created_at": now,
            }
        ],
        schema=ARROW_SCHEMAS["baselines"],
    )
    return {"baselines": header, "baseline_members": members}


def describe(header: pa.Table) -> dict:
    row = header.to_pylist()[0]
    return {k: v.isoformat() + "Z" if isinstance(v, datetime) else v for k, v in row.items()}
