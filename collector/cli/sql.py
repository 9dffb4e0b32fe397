"""`sextant sql`: one read-only query against a running collector or a stopped one's file."""

from __future__ import annotations

import argparse
import sys
from typing import Any

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
    add_format(sql)
    sql.add_argument("--max-rows", type=positive_int, default=1000, help="rows to print at most")
    sql.set_defaults(func=run)


def query(args: argparse.Namespace) -> tuple[Any, bool]:
    """Rows (Arrow) and whether the row limit cut them short."""
    from collector.cli._source import DuckDBSource, SourceSpec
    from collector.store.readonly import run_read_only

    source = SourceSpec.of(args).open()
    try:
        if isinstance(source, DuckDBSource):
            found = run_read_only(source.con, args.query, None, args.max_rows, FILE_TIMEOUT_SECONDS)
            return found.table, found.truncated
        # One more row than asked tells whether there were more.
        table = source.client.sql(args.query, max_rows=args.max_rows + 1)
        return table.slice(0, args.max_rows), table.num_rows > args.max_rows
    finally:
        source.close()


def run(args: argparse.Namespace) -> int:
    from collector.cli._output import Table, emit
    from collector.store.readonly import QueryRefused

    try:
        table, truncated = query(args)
    except QueryRefused as exc:
        print(f"sextant: query refused: {exc}", file=sys.stderr)
        return 1
    rows = table.to_pylist()
    footer = f"({len(rows)} row{'s' if len(rows) != 1 else ''})"
    shown = Table(rows, table.column_names, max_width=CELL_WIDTH, rule=True, footer=footer)
    emit(shown, args.format)
    if truncated:
        print(f"sextant: only the first {args.max_rows} rows shown (--max-rows)", file=sys.stderr)
    return 0
