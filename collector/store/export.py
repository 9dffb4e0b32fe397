"""Parquet export of every table, hive-partitioned by table and date, for DuckDB and others.

Rows are fetched as Arrow and written by pyarrow, so the store itself never needs file access
from SQL (it runs with external access disabled)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.dataset as ds

from collector.clock import Clock, SystemClock
from collector.store.database import Database
from collector.store.reader import Interrupted, ReadingStage
from collector.store.reader import Reader as RoundReader
from collector.ticker import Ticker

log = logging.getLogger(__name__)

# The time that puts a row in a date partition, per table.
DATE_COLUMNS = {
    "spans": "start_time",
    "logs": "time",
    "trajectories": "start_time",
    "steps": "start_time",
    "results": "evaluated_at",
    "rule_packs": "loaded_at",
    "decisions": "changed_at",
    "alerts": "sent_at",
    "sessions": "last_turn_at",
    "mcp_servers": "last_seen",
    "dataset_cases": "added_at",
    "review_claims": "claimed_at",
}
READ_BATCH_ROWS = 100_000

# (sql, params) -> Arrow record batches
Reader = Callable[[str, list], Iterator[pa.RecordBatch]]


def export_sql(table: str, since: datetime | None, until: datetime | None) -> tuple[str, list]:
    column = DATE_COLUMNS[table]
    where, params = [], []
    if since is not None:
        where.append(f"{column} >= ?")
        params.append(since)
    if until is not None:
        where.append(f"{column} < ?")
        params.append(until)
    condition = f" WHERE {' AND '.join(where)}" if where else ""
    # Rows without a time (a span with no start) land in date=1970-01-01 rather than vanish.
    date = f"strftime(coalesce({column}, TIMESTAMP '1970-01-01'), '%Y-%m-%d')"
    return f"SELECT *, {date} AS date FROM {table}{condition}", params


def export_parquet(
    read: Reader, out: Path, since: datetime | None = None, until: datetime | None = None
) -> dict[str, int]:
    """Write out/table=NAME/date=YYYY-MM-DD/*.parquet; a date written again replaces its files."""
    written: dict[str, int] = {}
    for table in DATE_COLUMNS:
        sql, params = export_sql(table, since, until)
        rows = 0

        def counted(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
            nonlocal rows
            for batch in batches:
                rows += batch.num_rows
                yield batch

        batches = read(sql, params)
        first = next(batches, None)
        if first is None:
            written[table] = 0
            continue
        ds.write_dataset(
            counted(chain_first(first, batches)),
            out / f"table={table}",
            schema=first.schema,
            format="parquet",
            partitioning=ds.partitioning(pa.schema([("date", pa.string())]), flavor="hive"),
            existing_data_behavior="delete_matching",
            basename_template=f"{table}-{{i}}.parquet",
        )
        written[table] = rows
    return written


def chain_first(first: pa.RecordBatch, rest: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    yield first
    yield from rest


def database_reader(database: Database) -> Reader:
    def read(sql: str, params: list) -> Iterator[pa.RecordBatch]:
        cursor = database.cursor()
        try:
            yield from cursor.sql(sql, params=params or None).to_arrow_reader(READ_BATCH_ROWS)
        finally:
            cursor.close()

    return read


def interruptible_reader(rounds: RoundReader) -> Reader:
    """Reads that shutdown can interrupt (`Interrupted` is raised in the exporting thread)."""

    def read(sql: str, params: list) -> Iterator[pa.RecordBatch]:
        with rounds.cursor() as cursor:
            yield from cursor.sql(sql, params=params or None).to_arrow_reader(READ_BATCH_ROWS)

    return read


def start_of_day(moment: datetime) -> datetime:
    return moment.replace(hour=0, minute=0, second=0, microsecond=0)


class ParquetExporter(ReadingStage):
    """The service's periodic export: each run rewrites the days since the previous run began,
    so a day's partition is complete once the day is over."""

    def __init__(
        self, database: Database, directory: Path, interval: float, clock: Clock | None = None
    ) -> None:
        self.database = database
        self.clock = clock or SystemClock()
        self.directory = directory
        self.ticker = Ticker("sextant-export", interval, self._periodic)
        self.reader = RoundReader(database)
        self.enabled = True
        self._lock = threading.Lock()
        self._since: datetime | None = None

    def _periodic(self) -> None:
        try:
            self.export()
        except Interrupted:
            log.info("export to %s abandoned: shutting down", self.directory)

    def export(
        self, since: datetime | None = None, until: datetime | None = None
    ) -> dict[str, int]:
        """Export the days since the last periodic export (or the given range); raises
        `Interrupted` at shutdown, leaving partitions half written until the next export."""
        with self._lock:
            now = self.clock.now()
            periodic = since is None and until is None
            log.debug("export to %s: starting", self.directory)
            written = export_parquet(
                interruptible_reader(self.reader),
                self.directory,
                self._since if periodic else since,
                until,
            )
            if periodic:
                self._since = start_of_day(now)
            log.info("exported to %s: %s", self.directory, written)
            return written
