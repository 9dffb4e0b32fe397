"""Arrow batch schemas and INSERT statements per table, shared by decoders and the writer."""

from __future__ import annotations

import pyarrow as pa

from collector.store.schema import LOGS, SPANS, STEPS, TRAJECTORIES, arrow_schema, insert_select

TABLES = {"spans": SPANS, "logs": LOGS, "trajectories": TRAJECTORIES, "steps": STEPS}
ARROW_SCHEMAS = {name: arrow_schema(columns) for name, columns in TABLES.items()}
INSERTS = {name: insert_select(name, columns) for name, columns in TABLES.items()}
# Statements run before a table's INSERT in the same transaction.
BEFORE_INSERT = {
    # A new revision of a trajectory replaces the current one.
    "trajectories": "UPDATE trajectories SET is_current = false"
    " WHERE is_current AND trace_id IN (SELECT trace_id FROM batch)",
}
# Only spans have a key. INSERT OR IGNORE costs twice a plain INSERT in DuckDB, so the writer uses
# it only to redo a commit whose plain INSERT hit a duplicate (a client retry).
INSERTS_IGNORING_DUPLICATES = {"spans": insert_select("spans", SPANS, or_ignore=True)}


def arrow_batch(table: str, columns: dict[str, list]) -> pa.Table:
    """Column lists from the decoder as an Arrow table of the store's batch schema."""
    return pa.Table.from_pydict(columns, schema=ARROW_SCHEMAS[table])
