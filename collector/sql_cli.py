"""`sextant sql`: one read-only query against a running collector or a stopped one's file."""

from __future__ import annotations

import csv
import sys
from pathlib import Path
from typing import Any, TextIO

import orjson
import pyarrow as pa

from collector.admin_client import AdminClient
from collector.store.readonly import QueryRefused, open_file_read_only, run_read_only

CELL_WIDTH = 60
FILE_TIMEOUT_SECONDS = 600.0


def query(
    sql: str, url: str, token: str | None, db: Path | None, max_rows: int
) -> tuple[pa.Table, bool]:
    """Rows and whether the row limit cut them short."""
    if db is not None:
        con = open_file_read_only(db)
        try:
            result = run_read_only(con, sql, None, max_rows, FILE_TIMEOUT_SECONDS)
        finally:
            con.close()
        return result.table, result.truncated
    # One more row than asked tells whether there were more.
    table = AdminClient(url, token).sql(sql, max_rows=max_rows + 1)
    return table.slice(0, max_rows), table.num_rows > max_rows


def cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, (dict, list)):
        return orjson.dumps(value, default=str).decode()
    return str(value)


def write_table(table: pa.Table, out: TextIO) -> None:
    names = table.column_names
    rows = [[cell(v) for v in row.values()] for row in table.to_pylist()]
    shown = [[c if len(c) <= CELL_WIDTH else c[: CELL_WIDTH - 1] + "…" for c in r] for r in rows]
    widths = [max([len(n)] + [len(r[i]) for r in shown]) for i, n in enumerate(names)]
    out.write("  ".join(n.ljust(w) for n, w in zip(names, widths, strict=True)).rstrip() + "\n")
    out.write("  ".join("-" * w for w in widths) + "\n")
    for r in shown:
        out.write("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() + "\n")
    out.write(f"({len(rows)} row{'s' if len(rows) != 1 else ''})\n")


def write_csv(table: pa.Table, out: TextIO) -> None:
    writer = csv.writer(out)
    writer.writerow(table.column_names)
    for row in table.to_pylist():
        writer.writerow([cell(v) for v in row.values()])


def write_json(table: pa.Table, out: TextIO) -> None:
    option = orjson.OPT_NAIVE_UTC | orjson.OPT_UTC_Z | orjson.OPT_INDENT_2
    out.write(orjson.dumps(table.to_pylist(), default=str, option=option).decode() + "\n")


FORMATS = {"table": write_table, "csv": write_csv, "json": write_json}


def run(sql: str, url: str, token: str | None, db: Path | None, fmt: str, max_rows: int) -> int:
    try:
        table, truncated = query(sql, url, token, db, max_rows)
    except QueryRefused as exc:
        print(f"sextant: query refused: {exc}", file=sys.stderr)
        return 1
    FORMATS[fmt](table, sys.stdout)
    if truncated:
        print(f"sextant: only the first {max_rows} rows shown (--max-rows)", file=sys.stderr)
    return 0
