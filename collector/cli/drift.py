"""`sextant baseline save` and `sextant report reliability`, against a running collector's
admin API or, with --db, a stopped collector's DuckDB file."""

from __future__ import annotations

import argparse
import urllib.parse
from typing import Any

from collector.cli._flags import add_command, add_format, add_source, add_window


def register(sub: Any) -> None:
    baseline = add_command(
        sub, "baseline", "frozen baselines for drift rules", "sextant baseline save release-1.4"
    )
    baseline_sub = baseline.add_subparsers(dest="baseline_command", required=True, metavar="CMD")
    save = add_command(
        baseline_sub,
        "save",
        "freeze the matching runs as baseline NAME",
        "sextant baseline save release-1.4 --target travel-desk/travel-agent/1.4.2 --since 7d",
    )
    save.add_argument("name")
    add_common(save)
    save.set_defaults(func=run_baseline)

    report = add_command(
        sub, "report", "reports over stored runs", "sextant report reliability --k 1,3"
    )
    report_sub = report.add_subparsers(dest="report_command", required=True, metavar="CMD")
    reliability = add_command(
        report_sub,
        "reliability",
        "pass@k, pass^k and consistency per case and target",
        "sextant report reliability --target travel-desk/* --since 7d --format csv",
    )
    reliability.add_argument("--k", default="1,3,5", help="comma-separated k")
    reliability.add_argument("--rule", help="PACK/RULE whose pass counts (default: the verdict)")
    add_format(reliability)
    add_common(reliability)
    reliability.set_defaults(func=run_report)


def add_common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--target", help="SERVICE[/AGENT[/VERSION]], globs allowed")
    add_window(parser)
    add_source(parser)


def params(args: argparse.Namespace, names: tuple[str, ...]) -> dict[str, str]:
    """The flags as the API's query parameters; times as ISO text, the API's own grammar."""
    found = {}
    for name in names:
        value = getattr(args, name, None)
        if value not in (None, ""):
            found[name] = value.isoformat() if hasattr(value, "isoformat") else str(value)
    return found


def run_report(args: argparse.Namespace) -> int:
    from collector.cli._client import AdminClient
    from collector.clock import SystemClock
    from collector.drift.requests import ReliabilityQuery

    query = params(args, ("k", "target", "since", "until", "rule"))
    if args.db:
        from collector.cli._source import open_db

        con = open_db(args.db)
        try:
            found = ReliabilityQuery.parse(query, SystemClock().now()).run(con)
        finally:
            con.close()
    else:
        client = AdminClient(args.url, args.token, timeout=60)
        found = client.get_json(f"/api/v1/reliability?{urllib.parse.urlencode(query)}")
    print_report(found, args.format)
    return 0


def run_baseline(args: argparse.Namespace) -> int:
    from collector.cli._client import AdminClient

    query = {"name": args.name, **params(args, ("target", "since", "until"))}
    if args.db:
        saved = save_in_file(args, query)
    else:
        client = AdminClient(args.url, args.token, timeout=60)
        saved = client.post_json("/api/v1/baselines", query)
    print(f"baseline {saved['name']} saved: {saved['runs']} runs")
    return 0


def save_in_file(args: argparse.Namespace, query: dict[str, str]) -> dict[str, Any]:
    """The one --db command that writes: the file is opened (and migrated) as the store."""
    from collector.cli._errors import Unreachable
    from collector.clock import SystemClock
    from collector.drift import baselines
    from collector.drift.requests import baseline_spec
    from collector.store.database import Database

    if not args.db.exists():
        raise Unreachable(f"{args.db}: no such DuckDB file")
    spec = baseline_spec(query, SystemClock().now())
    database = Database(args.db)
    database.open()
    try:
        con = database.connection
        tables = baselines.build(con, spec, SystemClock().now())
        con.execute("BEGIN")
        for name, table in tables.items():
            con.register("batch", table)
            con.execute(f"INSERT INTO {name} SELECT * FROM batch")
            con.unregister("batch")
        con.execute("COMMIT")
    finally:
        database.close()
    return baselines.describe(tables["baselines"])


def columns(report: dict[str, Any]) -> list[str]:
    per_k = [f"{m}{k}" for k in report["k"] for m in ("pass@", "pass^", "gap@")]
    return ["n", "c", *per_k, "consistency", "trajectory_consistency", "latency_cv", "cost_cv"]


def number(value: Any) -> str:
    """A table cell of the report: three decimals, a dash for a figure that does not exist."""
    if value is None:
        return "-"
    return f"{value:.3f}" if isinstance(value, float) else str(value)


def print_report(report: dict[str, Any], fmt: str) -> None:
    from collector.cli._output import Table, emit

    def label(row: dict[str, Any]) -> str:
        return "/".join(number(row[k]) for k in ("service", "agent", "version"))

    rows = [{**r, "target": label(r)} for r in report["cases"]]
    rows += [
        {**r, "target": label(r), "case": f"(all {r['cases']} cases)"} for r in report["targets"]
    ]
    notes = [] if report["cases"] else ["(no runs with a case id match)"]
    table = Table(rows, ["target", "case", *columns(report)], cell=number, notes=notes)
    emit(table, fmt, doc=report)
