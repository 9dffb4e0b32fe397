"""Read-only SQL over the store: a checked query run with a row, byte, memory and time budget,
its answer encoded as it streams."""

from __future__ import annotations

import contextlib
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import duckdb
import pyarrow as pa

from collector.store.sqlcheck import QueryRefused, check_read_only, first_line

# Small batches keep what one batch costs in Python small next to the byte budget.
BATCH_ROWS = 2048
MIB = 1024 * 1024


@dataclass(frozen=True)
class SqlLimits:
    """What one query may use: rows and bytes of answer, DuckDB operator memory, time."""

    max_rows: int
    max_bytes: int
    memory_limit: str
    timeout_seconds: float


class Answer(Protocol):
    """Where a query's rows go as they stream, counting the bytes of what it has built."""

    @property
    def size(self) -> int: ...

    def start(self, schema: pa.Schema) -> None: ...

    def write(self, batch: pa.RecordBatch, room: int) -> int:
        """Take the batch's first rows that fit in `room` more bytes; return how many."""
        ...


@dataclass
class QueryOutcome:
    rows: int
    truncated_by: str | None  # "max_rows", "max_bytes" or None
    elapsed_seconds: float

    @property
    def truncated(self) -> bool:
        return self.truncated_by is not None


def run_read_only(
    cursor: duckdb.DuckDBPyConnection,
    sql: str,
    params: list | None,
    limits: SqlLimits,
    answer: Answer,
) -> QueryOutcome:
    """Run one checked query in a read-only transaction, interrupted at the deadline, its
    intermediates held to `limits.memory_limit` (DuckDB's per-connection operator_memory_limit:
    sorts and hash tables spill to disk beyond it) and its answer cut at the row or byte limit.

    The statement check comes first; the transaction is the second line of defence; the store runs
    with external access disabled and its configuration locked, the third."""
    check_read_only(cursor, sql)
    started = time.perf_counter()
    cursor.execute("SET operator_memory_limit = ?", [limits.memory_limit])
    timer = threading.Timer(limits.timeout_seconds, cursor.interrupt)
    cursor.execute("BEGIN TRANSACTION READ ONLY")
    timer.start()
    try:
        relation = cursor.sql(sql, params=params or None)
        if relation is None:  # cannot happen for a checked query; guards the type below
            raise QueryRefused("the statement returned no rows")
        reader = relation.to_arrow_reader(BATCH_ROWS)
        answer.start(reader.schema)
        rows, truncated_by = stream(reader, limits, answer)
    except duckdb.InterruptException as exc:
        raise QueryRefused(
            f"query interrupted at its deadline of {limits.timeout_seconds:g} s"
            " (sql.timeout_seconds)"
        ) from exc
    except duckdb.Error as exc:
        raise QueryRefused(first_line(exc)) from exc
    finally:
        timer.cancel()
        with contextlib.suppress(duckdb.Error):  # a failed query already ended the transaction
            cursor.execute("ROLLBACK")
    return QueryOutcome(rows, truncated_by, time.perf_counter() - started)


def stream(
    reader: pa.RecordBatchReader, limits: SqlLimits, answer: Answer
) -> tuple[int, str | None]:
    """Hand batches to the answer until the rows run out or a limit is reached."""
    rows = 0
    for batch in reader:
        over_rows = rows + batch.num_rows > limits.max_rows
        if over_rows:
            batch = batch.slice(0, limits.max_rows - rows)
        taken = answer.write(batch, limits.max_bytes - answer.size)
        rows += taken
        if taken < batch.num_rows:
            return rows, "max_bytes"
        if over_rows:
            return rows, "max_rows"
    return rows, None


def truncation_note(outcome: QueryOutcome, limits: SqlLimits) -> str | None:
    """What cut the answer short, in words, naming the setting."""
    if outcome.truncated_by == "max_bytes":
        return (
            f"the answer reached {limits.max_bytes / MIB:g} MiB (sql.max_result_mib) after"
            f" {outcome.rows} rows; select fewer rows or columns"
        )
    if outcome.truncated_by == "max_rows":
        return f"only the first {outcome.rows} rows (max_rows)"
    return None


class TableAnswer:
    """The rows kept as Arrow batches (a command's answer), counted by their Arrow size."""

    def __init__(self) -> None:
        self.size = 0
        self.batches: list[pa.RecordBatch] = []
        self.schema = pa.schema([])

    def start(self, schema: pa.Schema) -> None:
        self.schema = schema

    def write(self, batch: pa.RecordBatch, room: int) -> int:
        batch = batch.slice(0, rows_within(batch, room))
        self.batches.append(batch)
        self.size += batch.nbytes
        return batch.num_rows

    def table(self) -> pa.Table:
        return pa.Table.from_batches(self.batches, self.schema)


def rows_within(batch: pa.RecordBatch, room: int) -> int:
    """How many of the batch's first rows fit in `room` bytes, by their average Arrow size."""
    if batch.nbytes <= room:
        return batch.num_rows
    return int(batch.num_rows * max(room, 0) / batch.nbytes)


def open_file_read_only(path: Path) -> duckdb.DuckDBPyConnection:
    """A stopped collector's store, opened read-only and without file or network access."""
    from collector.errors import SextantError

    if not path.exists():
        raise SextantError(f"{path}: no such DuckDB file")
    try:
        con = duckdb.connect(str(path), read_only=True)
    except duckdb.Error as exc:
        raise SextantError(
            f"cannot open {path} read-only ({first_line(exc)}); while a collector runs, query it"
            " with --url instead"
        ) from exc
    lock_down(con)
    return con


def lock_down(con: duckdb.DuckDBPyConnection) -> None:
    """Settings that need extensions (ICU for the time zone) first, then no external access and
    no configuration changes, for the life of the database: no SQL can turn on logging, change a
    limit or reach a file (the database's own files are refused by the statement check, since
    DuckDB lets those through). Only operator_memory_limit stays settable, for run_read_only to
    give each query's cursor its budget, and max_vacuum_tasks, for retention to compact the
    store in its checkpoint (SET statements never pass the check)."""
    con.execute("SET TimeZone = 'UTC'")
    con.execute("SET enable_external_access = false")
    con.execute("SET allowed_configs = ['operator_memory_limit', 'max_vacuum_tasks']")
    con.execute("SET lock_configuration = true")
