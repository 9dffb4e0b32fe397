"""The one way a command opens the store: a running collector (--url), a stopped collector's
DuckDB file (--db) or a Parquet export (--parquet), read-only and locked down."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import duckdb
import pyarrow as pa

from collector.cli._client import AdminClient
from collector.cli._errors import NotFound, Unreachable
from collector.errors import SextantError
from collector.store.readonly import lock_down, open_file_read_only
from collector.store.runs import DuckDBSource
from collector.store.schema import create_table
from collector.store.tables import TABLES
from collector.store.views import create_views


def open_db(path: Path) -> duckdb.DuckDBPyConnection:
    """A stopped collector's file, read-only, with no file or network access from SQL."""
    try:
        return open_file_read_only(path)
    except SextantError as exc:
        raise Unreachable(str(exc)) from exc


class LiveSource:
    """A running collector, through its admin API (SQL as Arrow, up to its row limit)."""

    def __init__(self, client: AdminClient) -> None:
        self.client = client
        self.name = client.url
        self.max_rows: int | None = None

    def query(self, sql: str, params: list | None = None) -> pa.Table:
        return self.client.sql(sql, params, self.max_rows)

    def batches(self, sql: str, params: list | None = None) -> Iterator[pa.RecordBatch]:
        yield from self.client.sql(sql, params, max_rows=None).to_batches()

    def trajectory(self, trace_id: str, revision: int | None = None) -> dict[str, Any] | None:
        query = f"?revision={revision}" if revision else ""
        try:
            return self.client.get_json(f"/api/v1/trajectories/{trace_id}{query}")
        except NotFound:
            return None

    def session(self, session_id: str, service: str | None = None) -> dict[str, Any] | None:
        query = f"?service={quote(service, safe='')}" if service is not None else ""
        try:
            return self.client.get_json(f"/api/v1/sessions/{quote(session_id, safe='')}{query}")
        except NotFound:
            return None

    def rules_status(self) -> dict[str, Any] | None:
        return self.client.get_json("/api/v1/rules")

    def close(self) -> None:
        pass


def parquet_source(directory: Path) -> DuckDBSource:
    """An in-memory DuckDB whose tables are views over a `sextant export parquet` directory;
    SQL may read that directory and nothing else."""
    if not directory.is_dir():
        raise Unreachable(f"{directory}: no such Parquet export directory")
    con = duckdb.connect()
    found = 0
    for table, columns in TABLES.items():
        part = directory / f"table={table}"
        if not any(part.glob("date=*/*.parquet")):
            con.execute(create_table(table, columns))  # empty, so queries still bind
            continue
        found += 1
        pattern = str(part / "date=*" / "*.parquet").replace("'", "''")
        names = ", ".join(name for name, _, _ in columns)
        con.execute(
            f"CREATE VIEW {table} AS SELECT {names} FROM read_parquet('{pattern}',"
            " hive_partitioning = false, union_by_name = true)"
        )
    if not found:
        raise Unreachable(f"{directory}: no table=*/date=*/*.parquet files in it")
    create_views(con)
    con.execute("SET allowed_directories = ?", [[str(directory.resolve()) + "/"]])
    lock_down(con)
    return DuckDBSource(con, str(directory))


@dataclass(frozen=True)
class SourceSpec:
    """How to reach the store: picklable, so replay worker processes open their own handle."""

    url: str = "http://localhost:9464"
    token: str | None = None
    db: Path | None = None
    parquet: Path | None = None

    @classmethod
    def of(cls, args: argparse.Namespace) -> SourceSpec:
        """From the flags `_flags.add_source` added."""
        return cls(args.url, args.token, args.db, getattr(args, "parquet", None))

    def open(self) -> DuckDBSource | LiveSource:
        if self.db is not None and self.parquet is not None:
            raise SextantError("give --db or --parquet, not both")
        if self.db is not None:
            return DuckDBSource(open_db(self.db), str(self.db))
        if self.parquet is not None:
            return parquet_source(self.parquet)
        return LiveSource(AdminClient(self.url, self.token))
