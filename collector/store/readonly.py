"""Read-only SQL over the store: which statements may run, with a row limit and a deadline."""

from __future__ import annotations

import contextlib
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import duckdb
import pyarrow as pa

from collector.errors import PermanentError

# DESCRIBE, SHOW, SUMMARIZE, FROM-first queries and VALUES all parse as SELECT.
ALLOWED = {duckdb.StatementType.SELECT, duckdb.StatementType.EXPLAIN}
ALLOWED_NAMES = "SELECT, WITH, FROM, VALUES, DESCRIBE, SHOW, SUMMARIZE and EXPLAIN"


class QueryRefused(PermanentError):
    """The statement is not a single read-only query, or it failed: the message says why."""


@dataclass
class QueryResult:
    table: pa.Table
    truncated: bool
    elapsed_seconds: float


def statement_kind(con: duckdb.DuckDBPyConnection, sql: str) -> str:
    """The one statement's type name; refuses empty input, several statements and bad syntax."""
    try:
        statements = con.extract_statements(sql)
    except duckdb.Error as exc:
        raise QueryRefused(first_line(exc)) from exc
    except ValueError as exc:  # a statement type the Python API has no name for
        raise QueryRefused(f"statement not allowed: only {ALLOWED_NAMES} may run") from exc
    if not statements:
        raise QueryRefused("no SQL statement given")
    if len(statements) > 1:
        raise QueryRefused(f"one statement at a time ({len(statements)} given)")
    return statements[0].type.name


def check_read_only(con: duckdb.DuckDBPyConnection, sql: str) -> None:
    """Refuse anything but one query. EXPLAIN ANALYZE runs what it explains, so its statement
    is checked as well."""
    kind = statement_kind(con, sql)
    if kind not in {t.name for t in ALLOWED}:
        raise QueryRefused(f"{kind} statements are not allowed: only {ALLOWED_NAMES} may run")
    if kind == "EXPLAIN":
        inner = explained(sql)
        inner_kind = statement_kind(con, inner)
        if inner_kind != "SELECT":
            raise QueryRefused(
                f"EXPLAIN {inner_kind} is not allowed: only queries may be explained"
            )


def explained(sql: str) -> str:
    """The statement after EXPLAIN [ANALYZE] [(options)], found with DuckDB's tokenizer."""
    tokens = duckdb.tokenize(sql)
    i = 1
    if i < len(tokens) and sql[tokens[i][0] :].split(None, 1)[0].upper() in ("ANALYZE", "ANALYSE"):
        i += 1
    if i < len(tokens) and sql[tokens[i][0]] == "(":
        depth = 0
        while i < len(tokens):
            char = sql[tokens[i][0]]
            depth += char == "("
            depth -= char == ")"
            i += 1
            if depth == 0:
                break
    return sql[tokens[i][0] :] if i < len(tokens) else ""


def run_read_only(
    cursor: duckdb.DuckDBPyConnection,
    sql: str,
    params: list | None,
    max_rows: int,
    timeout_seconds: float,
) -> QueryResult:
    """Run one checked query in a read-only transaction, interrupted at the deadline.

    The transaction is the second line of defence after the statement check; the store runs with
    external access disabled, the third (no file, network or extension from SQL)."""
    check_read_only(cursor, sql)
    started = time.perf_counter()
    timer = threading.Timer(timeout_seconds, cursor.interrupt)
    cursor.execute("BEGIN TRANSACTION READ ONLY")
    timer.start()
    try:
        relation = cursor.sql(sql, params=params or None)
        if relation is None:  # cannot happen for a checked query; guards the type below
            raise QueryRefused("the statement returned no rows")
        reader = relation.to_arrow_reader(min(max_rows + 1, 65536))
        batches, rows = [], 0
        for batch in reader:
            batches.append(batch)
            rows += batch.num_rows
            if rows > max_rows:
                break
        table = pa.Table.from_batches(batches, reader.schema)
    except duckdb.InterruptException as exc:
        raise QueryRefused(
            f"query interrupted at its deadline of {timeout_seconds:g} s (sql.timeout_seconds)"
        ) from exc
    except duckdb.Error as exc:
        raise QueryRefused(first_line(exc)) from exc
    finally:
        timer.cancel()
        with contextlib.suppress(duckdb.Error):  # a failed query already ended the transaction
            cursor.execute("ROLLBACK")
    truncated = table.num_rows > max_rows
    return QueryResult(table.slice(0, max_rows), truncated, time.perf_counter() - started)


def first_line(exc: BaseException) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


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
    """Settings that need extensions (ICU for the time zone) first, then no external access:
    it cannot be re-enabled for the life of the database."""
    con.execute("SET TimeZone = 'UTC'")
    con.execute("SET enable_external_access = false")
