"""`sextant trajectories`: list stored runs, newest first, a page at a time."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from collector.cli._flags import add_command, add_format, add_source, add_window, positive_int

COLUMNS = ["trace_id", "closed_at", "service_name", "agent_name", "service_version", "status",
           "verdict", "verdict_reasons", "steps", "duration_ms"]  # fmt: skip
HEADERS = ["TRACE", "CLOSED", "SERVICE", "AGENT", "VERSION", "STATUS", "VERDICT", "REASONS",
           "STEPS", "MS"]  # fmt: skip
MAX_LIMIT = 1000


def register(sub: Any) -> None:
    p = add_command(
        sub,
        "trajectories",
        "list current trajectories, newest first, with filters and pages",
        "sextant trajectories --agent support-agent --verdict fail --since 1h --limit 20",
    )
    for name, what in (("service", "service.name"), ("agent", "agent name"),
                       ("version", "service.version")):  # fmt: skip
        p.add_argument(f"--{name}", help=f"only this {what}")
    p.add_argument("--status", help="only this trajectory status (e.g. ok, error)")
    p.add_argument(
        "--verdict", choices=("pass", "fail", "review", "none"), help="only this overall verdict"
    )
    p.add_argument("--reason", help="only runs whose verdict gave this reason code")
    add_window(p, "runs that closed")
    p.add_argument("--limit", type=positive_int, default=50, help=f"rows per page (≤ {MAX_LIMIT})")
    p.add_argument("--cursor", help="the next page: the cursor the previous page printed")
    add_source(p, parquet=True)
    add_format(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from collector.cli._errors import UsageError
    from collector.cli._output import Table, emit
    from collector.cli._source import SourceSpec
    from collector.store.listing import Cursor, page_query, split_page

    if args.limit > MAX_LIMIT:
        raise UsageError(f"--limit {args.limit}: at most {MAX_LIMIT}")
    names = ("service", "agent", "version", "status", "verdict", "reason", "since", "until")
    filters = {n: getattr(args, n) for n in names if getattr(args, n) is not None}
    after = Cursor.decode(args.cursor) if args.cursor else None
    sql, params = page_query(filters, args.limit, after)
    source = SourceSpec.of(args).open()
    try:
        rows = source.query(sql, params).to_pylist()
    finally:
        source.close()
    page, cursor = split_page(rows, args.limit)
    table = Table(page, COLUMNS, HEADERS, cell=cell, empty="no trajectories")
    emit(table, args.format, doc={"trajectories": page, "next_cursor": cursor})
    if cursor and args.format != "json":
        # On stderr, so a CSV or a table piped on stays only rows.
        print(f"more: --cursor {cursor}", file=sys.stderr)
    return 0


def cell(value: Any) -> str:
    """Times to the second, durations to the millisecond: a list is for scanning."""
    from datetime import datetime

    from collector.cli._output import text

    if isinstance(value, datetime):
        return value.isoformat(sep=" ", timespec="seconds")
    if isinstance(value, float):
        return f"{value:.0f}"
    return text(value)
