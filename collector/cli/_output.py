"""The one renderer of rows as an aligned table, CSV or JSON, for every command that prints data."""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TextIO

import orjson

from collector.spreadsheet import csv_cell, csv_text, defused

JSON_OPTIONS = orjson.OPT_NAIVE_UTC | orjson.OPT_UTC_Z | orjson.OPT_INDENT_2


def text(value: Any) -> str:
    """A cell as text: nothing for null, lists comma-joined, mappings as compact JSON."""
    if value is None:
        return ""
    if isinstance(value, list | tuple) and all(isinstance(v, str) for v in value):
        return ",".join(value)
    if isinstance(value, dict | list | tuple):
        return orjson.dumps(value, default=str).decode()
    return str(value)


def dumps(doc: Any) -> str:
    """JSON as every command prints it: indented, times in UTC with a Z."""
    return orjson.dumps(doc, option=JSON_OPTIONS, default=str).decode()


@dataclass
class Table:
    """Rows to print and how: `columns` pick and order the keys, `headers` label them."""

    rows: Sequence[dict[str, Any]]
    columns: Sequence[str]
    headers: Sequence[str] | None = None
    cell: Callable[[Any], str] = text
    max_width: int | None = None  # cut longer table cells (never CSV or JSON)
    rule: bool = False  # a line of dashes under the header
    footer: str | None = None  # printed after the table, e.g. "(3 rows)"
    empty: str | None = None  # printed instead of a table without rows
    notes: list[str] = field(default_factory=list)  # lines after the table


def render_table(table: Table) -> str:
    if not table.rows and table.empty is not None:
        return table.empty
    names = list(table.headers or table.columns)
    cells = [[table.cell(row.get(c)) for c in table.columns] for row in table.rows]
    if table.max_width:
        cut = table.max_width
        cells = [[c if len(c) <= cut else c[: cut - 1] + "…" for c in r] for r in cells]
    widths = [max([len(n)] + [len(r[i]) for r in cells]) for i, n in enumerate(names)]
    lines = [names] + ([["-" * w for w in widths]] if table.rule else []) + cells
    out = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in lines]
    if table.footer:
        out.append(table.footer)
    return "\n".join(out + table.notes)


def render_csv(table: Table) -> str:
    header = [defused(c) for c in table.columns]
    rows = ([csv_cell(row.get(c)) for c in table.columns] for row in table.rows)
    return csv_text([header, *rows]).rstrip("\n")


def emit(table: Table, fmt: str, doc: Any = None, out: TextIO | None = None) -> None:
    """Print `table` as `fmt`. JSON prints `doc` when given (the API's whole document), else the
    rows, so `--format json` shows everything the table leaves out."""
    out = out or sys.stdout
    if fmt == "json":
        body = dumps(doc if doc is not None else list(table.rows))
    elif fmt == "csv":
        body = render_csv(table)
    else:
        body = render_table(table)
    out.write(body + "\n")
    out.flush()
