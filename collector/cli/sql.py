"""`sextant sql`: one read-only query against a running collector or a stopped one's file."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from collector.cli._cluster import add_cluster
from collector.cli._flags import add_command, add_format, add_source, positive_int

CELL_WIDTH = 60
FILE_TIMEOUT_SECONDS = 600.0


def register(sub: Any) -> None:
    sql = add_command(
        sub,
        "sql",
        "run one read-only SQL query against the store",
        'sextant sql "SELECT verdict, count(*) FROM trajectories GROUP BY ALL" --format csv',
    )
    sql.add_argument("query", help="SELECT / WITH / DESCRIBE / SHOW / SUMMARIZE / EXPLAIN")
    add_source(sql, parquet=True)
    add_cluster(sql)
    add_format(sql)
    sql.add_argument("--max-rows", type=positive_int, default=1000, help="rows to print at most")
    sql.set_defaults(func=run)


def query(args: argparse.Namespace) -> tuple[Any, str | None]:
    """Rows (Arrow) and which limit cut them short: "max_rows", "max_bytes" or None."""
    from collector.cli._source import DuckDBSource, SourceSpec
    from collector.config.sections import SqlConfig
    from collector.store.readonly import MIB, SqlLimits, TableAnswer, run_read_only

    source = SourceSpec.of(args).open()
    try:
        if isinstance(source, DuckDBSource):
            config = SqlConfig()
            limits = SqlLimits(
                args.max_rows,
                config.max_result_mib * MIB,
                config.memory_limit,
                FILE_TIMEOUT_SECONDS,
            )
            answer = TableAnswer()
            found = run_read_only(source.con, args.query, None, limits, answer)
            return answer.table(), found.truncated_by
        # One more row than asked tells whether there were more.
        table, truncated_by = source.client.sql_answer(args.query, None, args.max_rows + 1)
        if table.num_rows > args.max_rows:
            return table.slice(0, args.max_rows), "max_rows"
        return table, truncated_by if truncated_by == "max_bytes" else None
    finally:
        source.close()


def cluster_query(args: argparse.Namespace) -> tuple[Any, str | None, bool]:
    """Every replica's rows, each with its `replica` first; whether each replica answered."""
    import pyarrow as pa

    from collector.cli._cluster import ask_all

    answers, whole = ask_all(
        args, lambda client: client.sql_answer(args.query, None, args.max_rows + 1)
    )
    tables, truncated_by = [], None
    for replica, (table, cut) in answers:
        if table.num_rows > args.max_rows:
            table, cut = table.slice(0, args.max_rows), "max_rows"
        truncated_by = truncated_by or cut
        names = pa.array([replica] * table.num_rows, pa.string())
        tables.append(table.add_column(0, "replica", names))
    if not tables:
        return pa.table({"replica": pa.array([], pa.string())}), None, whole
    return pa.concat_tables(tables, promote_options="permissive"), truncated_by, whole


def run(args: argparse.Namespace) -> int:
    from collector.cli._output import Table, emit
    from collector.store.sqlcheck import QueryRefused

    whole = True
    try:
        if args.cluster is not None:
            table, truncated_by, whole = cluster_query(args)
        else:
            table, truncated_by = query(args)
    except QueryRefused as exc:
        print(f"sextant: query refused: {exc}", file=sys.stderr)
        return 1
    rows = table.to_pylist()
    footer = f"({len(rows)} row{'s' if len(rows) != 1 else ''})"
    shown = Table(rows, table.column_names, max_width=CELL_WIDTH, rule=True, footer=footer)
    emit(shown, args.format)
    if truncated_by == "max_rows":
        each = " of a replica" if args.cluster is not None else ""
        print(
            f"sextant: only the first {args.max_rows} rows{each} shown (--max-rows)",
            file=sys.stderr,
        )
    elif truncated_by == "max_bytes":
        print(
            f"sextant: only the first {len(rows)} rows shown: the answer reached"
            " sql.max_result_mib",
            file=sys.stderr,
        )
    return 0 if whole else 1
