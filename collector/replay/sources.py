"""Where stored data is read from: a running collector, a DuckDB file, or a Parquet export."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import duckdb
import pyarrow as pa

from collector.admin_client import AdminClient
from collector.errors import SextantError
from collector.store.readonly import first_line, open_file_read_only
from collector.store.schema import create_table
from collector.store.tables import TABLES
from collector.store.views import create_views


class Source(Protocol):
    """Runs read-only SQL over the store's tables, whichever way they are reached."""

    name: str

    def query(self, sql: str, params: list | None = None) -> pa.Table: ...

    def close(self) -> None: ...


class DuckDBSource:
    def __init__(self, con: duckdb.DuckDBPyConnection, name: str) -> None:
        self.con = con
        self.name = name

    def query(self, sql: str, params: list | None = None) -> pa.Table:
        try:
            return self.con.sql(sql, params=params or None).to_arrow_table()
        except duckdb.Error as exc:
            raise SextantError(f"{self.name}: {first_line(exc)}") from exc

    def close(self) -> None:
        self.con.close()


class LiveSource:
    """A running collector, through its SQL endpoint (Arrow, up to the collector's row limit)."""

    def __init__(self, client: AdminClient) -> None:
        self.client = client
        self.name = client.url
        self.max_rows: int | None = None

    def query(self, sql: str, params: list | None = None) -> pa.Table:
        return self.client.sql(sql, params, self.max_rows)

    def close(self) -> None:
        pass


def parquet_source(directory: Path) -> DuckDBSource:
    """An in-memory DuckDB whose tables are views over a `sextant export parquet` directory."""
    if not directory.is_dir():
        raise SextantError(f"{directory}: no such Parquet export directory")
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
        raise SextantError(f"{directory}: no table=*/date=*/*.parquet files in it")
    create_views(con)
    return DuckDBSource(con, str(directory))


@dataclass(frozen=True)
class SourceSpec:
    """How to reach the store: picklable, so replay worker processes open their own handle."""

    url: str = "http://localhost:9464"
    token: str | None = None
    db: Path | None = None
    parquet: Path | None = None

    def open(self) -> Source:
        if self.db is not None and self.parquet is not None:
            raise SextantError("give --db or --parquet, not both")
        if self.db is not None:
            return DuckDBSource(open_file_read_only(self.db), str(self.db))
        if self.parquet is not None:
            return parquet_source(self.parquet)
        return LiveSource(AdminClient(self.url, self.token))
