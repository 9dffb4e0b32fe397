"""The store's read model: a `Source` runs read-only SQL over the store's tables (a running
collector, a DuckDB file or a Parquet export; `collector/cli/_source.py` opens one), and
`load_trajectories` rebuilds stored runs as evaluator `Trajectory` objects, a batch per query.
Replay, export and evidence read through it, and so do the stages that read stored runs back
(judges, sessions)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Protocol

import duckdb
import orjson
import pyarrow as pa

from collector.errors import SextantError
from collector.store.sqlcheck import first_line
from evaluators.model import Step, Trajectory

READ_BATCH_ROWS = 65536


class Source(Protocol):
    """Runs read-only SQL over the store's tables, whichever way they are reached."""

    name: str

    def query(self, sql: str, params: list | None = None) -> pa.Table: ...

    def trajectory(self, trace_id: str, revision: int | None = None) -> dict[str, Any] | None:
        """The document `GET /api/v1/trajectories/{id}` returns; None when there is none."""
        ...

    def session(self, session_id: str, service: str | None = None) -> dict[str, Any] | None:
        """The document `GET /api/v1/sessions/{id}?service=` returns; None when there is none."""
        ...

    def rules_status(self) -> dict[str, Any] | None:
        """A running collector's `GET /api/v1/rules`; None for a stored copy."""
        ...

    def close(self) -> None: ...


class Opener(Protocol):
    """Something picklable that opens a Source: how a replay worker process gets its own."""

    def open(self) -> Source: ...


class DuckDBSource:
    """A DuckDB connection: a --db file, the in-memory views over a Parquet export, or a
    cursor of the running collector's own store (the console's evidence bundles)."""

    def __init__(self, con: duckdb.DuckDBPyConnection, name: str) -> None:
        self.con = con
        self.name = name

    def query(self, sql: str, params: list | None = None) -> pa.Table:
        try:
            return self.con.sql(sql, params=params or None).to_arrow_table()
        except duckdb.Error as exc:
            raise SextantError(f"{self.name}: {first_line(exc)}") from exc

    def batches(self, sql: str, params: list | None = None) -> Iterator[pa.RecordBatch]:
        yield from self.con.sql(sql, params=params or None).to_arrow_reader(READ_BATCH_ROWS)

    def trajectory(self, trace_id: str, revision: int | None = None) -> dict[str, Any] | None:
        from collector.store.queries import load_trajectory

        return load_trajectory(self.con.cursor(), trace_id, revision)

    def session(self, session_id: str, service: str | None = None) -> dict[str, Any] | None:
        from collector.store.sessions import load_session

        return load_session(self.con.cursor(), session_id, service)

    def rules_status(self) -> dict[str, Any] | None:
        return None  # a file has no packs in force, only the ones it recorded

    def close(self) -> None:
        self.con.close()


STEP_COLUMNS = [f for f in Step.__dataclass_fields__ if not f.startswith("_")]
TRAJECTORY_COLUMNS = [f for f in Trajectory.__dataclass_fields__ if f not in ("steps",)]
STEP_FIELDS = [c for c in STEP_COLUMNS if c != "attributes_json"]  # the steps table's
IDS = "(SELECT unnest(?::VARCHAR[]))"


def columns(table: pa.Table, names: list[str]) -> list[list[Any]]:
    return [table.column(n).to_pylist() for n in names]


def load_trajectories(source: Source, trace_ids: list[str]) -> list[Trajectory]:
    """The current revision of each trace, with its steps and their span attributes."""
    if not trace_ids:
        return []
    return trajectories_of(*run_tables(source, trace_ids))


def run_tables(source: Source, trace_ids: list[str]) -> tuple[pa.Table, pa.Table]:
    """The current revision of each trace as the store keeps it, in trace order: its
    `trajectories` row (`TRAJECTORY_COLUMNS`), and its steps in order (`STEP_COLUMNS`, with
    `trace_id`, `revision`, and the span attributes' JSON as `attributes_json`)."""
    head = source.query(
        f"SELECT {', '.join(TRAJECTORY_COLUMNS)} FROM trajectories"
        f" WHERE is_current AND trace_id IN {IDS} ORDER BY trace_id",
        [trace_ids],
    )
    steps = source.query(
        f"SELECT s.trace_id, s.revision, {', '.join('s.' + c for c in STEP_FIELDS)},"
        " sp.attributes AS attributes_json"
        " FROM steps s JOIN trajectories t ON t.trace_id = s.trace_id AND t.revision = s.revision"
        f" LEFT JOIN (SELECT trace_id, span_id, attributes FROM spans WHERE trace_id IN {IDS}) sp"
        " ON sp.trace_id = s.trace_id AND sp.span_id = s.span_id"
        f" WHERE t.is_current AND t.trace_id IN {IDS}"
        " ORDER BY s.trace_id, s.seq",
        [trace_ids, trace_ids],
    )
    return head, steps


def trajectories_of(head: pa.Table, steps: pa.Table) -> list[Trajectory]:
    """`run_tables`' rows as evaluator objects."""
    by_trace: dict[str, list[Step]] = {}
    names = ["trace_id", *STEP_FIELDS, "attributes_json"]
    for values in zip(*columns(steps, names), strict=True):
        fields = dict(zip(names, values, strict=True))
        trace_id = fields.pop("trace_id")
        for key in ("arguments", "mcp"):
            if fields[key] is not None:
                fields[key] = orjson.loads(fields[key])
        by_trace.setdefault(trace_id, []).append(Step(**fields))
    out = []
    for values in zip(*columns(head, TRAJECTORY_COLUMNS), strict=True):
        fields = dict(zip(TRAJECTORY_COLUMNS, values, strict=True))
        fields["incomplete_reasons"] = fields["incomplete_reasons"] or []
        out.append(Trajectory(steps=by_trace.get(fields["trace_id"], []), **fields))
    return out


def load_results(
    source: Source, trace_ids: list[str]
) -> tuple[dict[str, list[dict[str, Any]]], dict[str, str]]:
    """The live results each trajectory's current revision got when it closed, and its overall
    verdict ("none" when no rule applied)."""
    if not trace_ids:
        return {}, {}
    verdicts = source.query(
        f"SELECT trace_id, coalesce(verdict, 'none') AS verdict FROM trajectories"
        f" WHERE is_current AND trace_id IN {IDS}",
        [trace_ids],
    )
    table = source.query(
        "SELECT r.trace_id, r.pack, r.rule_id, r.verdict, r.reason, r.message,"
        " r.requested_decision FROM results r"
        " JOIN trajectories t ON t.trace_id = r.trace_id AND t.revision = r.revision"
        " AND r.evaluated_at = t.closed_at"
        f" WHERE t.is_current AND r.origin = 'live' AND r.scope = 'trajectory'"
        f" AND t.trace_id IN {IDS} AND r.trace_id IN {IDS}",
        [trace_ids, trace_ids],
    )
    out: dict[str, list[dict[str, Any]]] = {}
    for row in table.to_pylist():
        out.setdefault(row.pop("trace_id"), []).append(row)
    return out, dict(zip(*columns(verdicts, ["trace_id", "verdict"]), strict=True))
