"""What replay, export and evidence read stored data through; `collector/cli/_source.py` opens
one (a running collector, a DuckDB file or a Parquet export)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Protocol

import duckdb
import pyarrow as pa

from collector.errors import SextantError
from collector.store.sqlcheck import first_line

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
