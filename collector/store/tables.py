"""Arrow batch schemas and INSERT statements per table, shared by decoders and the writer."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.compute as pc

from collector.store.dataset_tables import DATASET_CASES
from collector.store.judge_tables import CARD_LABELS, EVALUATOR_CARDS, JUDGE_CALLS
from collector.store.review_tables import REVIEW_CLAIMS
from collector.store.schema import (
    ALERTS,
    BASELINE_MEMBERS,
    BASELINES,
    DECISIONS,
    LOGS,
    MCP_SERVERS,
    RESULTS,
    RULE_PACKS,
    SESSIONS,
    SPANS,
    STEPS,
    TRAJECTORIES,
    arrow_schema,
    insert_select,
)

TABLES = {
    "spans": SPANS,
    "logs": LOGS,
    "trajectories": TRAJECTORIES,
    "steps": STEPS,
    "results": RESULTS,
    "rule_packs": RULE_PACKS,
    "decisions": DECISIONS,
    "alerts": ALERTS,
    "baselines": BASELINES,
    "baseline_members": BASELINE_MEMBERS,
    "judge_calls": JUDGE_CALLS,
    "evaluator_cards": EVALUATOR_CARDS,
    "card_labels": CARD_LABELS,
    "sessions": SESSIONS,
    "mcp_servers": MCP_SERVERS,
    "dataset_cases": DATASET_CASES,
    "review_claims": REVIEW_CLAIMS,
}
# The table each OTLP signal is stored in.
SIGNAL_TABLES = {"traces": "spans", "logs": "logs"}
ARROW_SCHEMAS = {name: arrow_schema(columns) for name, columns in TABLES.items()}
INSERTS = {name: insert_select(name, columns) for name, columns in TABLES.items()}


def retire_revisions(con: duckdb.DuckDBPyConnection, batch: pa.Table) -> None:
    """A new revision of a trajectory replaces the current one (only rebuilt traces have one)."""
    rebuilt = batch["trace_id"].filter(pc.greater(batch["revision"], 1)).to_pylist()
    if rebuilt:
        con.execute(
            "UPDATE trajectories SET is_current = false WHERE trace_id IN ? AND is_current",
            [rebuilt],
        )


# A column a batch may add to its table's: whether each row may replace a stored one. The
# search for the rows replaced is a join over every stored row; a row whose key its stage knows
# was never stored (collector/store/maybe_stored.py) is spared it.
REPLACES = "replaces"


def replacing(batch: pa.Table, keys: list[Any], stored: set[Any]) -> pa.Table:
    """`batch` (of rows keyed by `keys`) saying which rows may replace one of `stored` keys."""
    return batch.append_column(REPLACES, pa.array([key in stored for key in keys], pa.bool_()))


def replace_sessions(con: duckdb.DuckDBPyConnection, batch: pa.Table) -> None:
    """A session's new row replaces its old one (same id, same service)."""
    replaced = batch.select(["session_id", "session_service"])
    if REPLACES in batch.column_names:
        replaced = replaced.filter(batch[REPLACES])
        if not replaced.num_rows:
            return
    keys = replaced.to_pylist()
    con.execute(
        "DELETE FROM sessions WHERE (session_id, session_service) IN"
        " (SELECT unnest($ids), unnest($services))",
        {"ids": [k["session_id"] for k in keys], "services": [k["session_service"] for k in keys]},
    )


def replace_mcp_servers(con: duckdb.DuckDBPyConnection, batch: pa.Table) -> None:
    """A service's MCP servers are stored whole: its new rows replace all of its old ones."""
    services = sorted(set(batch["service_name"].to_pylist()))
    con.execute("DELETE FROM mcp_servers WHERE service_name IN ?", [services])


def replace_claims(con: duckdb.DuckDBPyConnection, batch: pa.Table) -> None:
    """An item's new claim (or its release) replaces the one before."""
    keys = batch.select(["trace_id", "pack", "rule_id"]).to_pylist()
    con.execute(
        "DELETE FROM review_claims WHERE (trace_id, pack, rule_id) IN"
        " (SELECT unnest($traces), unnest($packs), unnest($rules))",
        {
            "traces": [k["trace_id"] for k in keys],
            "packs": [k["pack"] for k in keys],
            "rules": [k["rule_id"] for k in keys],
        },
    )


# Run before a table's INSERT, in the same transaction.
BEFORE_INSERT: dict[str, Callable[[duckdb.DuckDBPyConnection, pa.Table], None]] = {
    "trajectories": retire_revisions,
    "sessions": replace_sessions,
    "mcp_servers": replace_mcp_servers,
    "review_claims": replace_claims,
}
# INSERT OR IGNORE costs twice a plain INSERT in DuckDB, so the writer uses it only to redo a
# commit whose plain INSERT hit a duplicate key (a round stored twice, a span re-sent after the
# writer's window to a store made when spans had a key).
INSERTS_IGNORING_DUPLICATES = {
    name: insert_select(name, TABLES[name], or_ignore=True)
    for name in ("spans", "trajectories", "decisions")
}
# `steps` has no key in a store made since its index was found to grow with every step stored:
# a round stored twice hits its trajectory's key, and its steps are then the ones stored.
INSERTS_IGNORING_DUPLICATES["steps"] = (
    INSERTS["steps"].removesuffix(" FROM batch")
    + " FROM (SELECT DISTINCT ON (trace_id, revision, seq) * FROM batch) batch"
    " WHERE NOT EXISTS (SELECT 1 FROM steps s WHERE s.trace_id = batch.trace_id"
    " AND s.revision = batch.revision AND s.seq = batch.seq)"
)
# `results` has no key (window results have no trace): skip the rows already stored instead.
INSERTS_IGNORING_DUPLICATES["results"] = (
    INSERTS["results"]
    + " WHERE NOT EXISTS (SELECT 1 FROM results r WHERE r.trace_id = batch.trace_id"
    " AND r.revision = batch.revision AND r.pack = batch.pack AND r.rule_id = batch.rule_id"
    " AND r.origin = batch.origin AND r.replay_id IS NOT DISTINCT FROM batch.replay_id"
    " AND r.source IS NOT DISTINCT FROM batch.source"
    " AND r.reviewer IS NOT DISTINCT FROM batch.reviewer"
    " AND r.scope = 'trajectory')"
)


def arrow_batch(table: str, columns: dict[str, list]) -> pa.Table:
    """Column lists from the decoder as an Arrow table of the store's batch schema."""
    return pa.Table.from_pydict(columns, schema=ARROW_SCHEMAS[table])


def rows_table(table: str, rows: list[dict]) -> pa.Table:
    """Row dicts as an Arrow table of the store's batch schema (missing keys are NULL)."""
    return pa.Table.from_pylist(rows, schema=ARROW_SCHEMAS[table])


def columns_table(table: str, columns: dict[str, list], rows: int) -> pa.Table:
    """Column lists of `rows` values as an Arrow table of the store's batch schema (columns not
    given are NULL). What builds many rows per batch uses it: a dict per row cost more than
    the row's values, and converting them to Arrow again as much."""
    # Not `pa.nulls`: its null strings and lists carry buffers that double their pickled size.
    arrays = [pa.array(columns.get(f.name, [None] * rows), f.type) for f in ARROW_SCHEMAS[table]]
    return pa.Table.from_arrays(arrays, schema=ARROW_SCHEMAS[table])


def integer_range(typ: pa.DataType) -> tuple[int, int]:
    bits = typ.bit_width
    if pa.types.is_unsigned_integer(typ):
        return 0, 2**bits - 1
    return -(2 ** (bits - 1)), 2 ** (bits - 1) - 1


# The integer columns of each table and the values their type holds.
INTEGER_RANGES = {
    name: {f.name: integer_range(f.type) for f in schema if pa.types.is_integer(f.type)}
    for name, schema in ARROW_SCHEMAS.items()
}


def out_of_range(table: str, columns: dict[str, list], rows: int) -> list[dict[str, str] | None]:
    """Set the integers of `columns` (of `rows` values) that their column's type cannot hold to
    None; returns per row the ones set ({column: decimal text}, None for a row without any), so
    the caller can keep them as text instead of failing the batch."""
    kept: list[dict[str, str] | None] = [None] * rows
    for name, (low, high) in INTEGER_RANGES[table].items():
        values = columns.get(name, [])
        for i, value in enumerate(values):
            if isinstance(value, int) and not low <= value <= high:
                kept[i] = {**(kept[i] or {}), name: str(value)}
                values[i] = None
    return kept
