"""`sextant baseline save` and `sextant report reliability`, against a running collector's
admin API or, with --db, a stopped collector's DuckDB file."""

from __future__ import annotations

import argparse
import urllib.parse

import orjson

from collector.admin_client import AdminClient
from collector.drift import baselines
from collector.drift.report import render
from collector.drift.requests import ReliabilityQuery, baseline_spec, utcnow
from collector.errors import SextantError


def options(args: argparse.Namespace, names: tuple[str, ...]) -> dict[str, str]:
    return {n: getattr(args, n) for n in names if getattr(args, n, None) not in (None, "")}


def cmd_report(args: argparse.Namespace) -> int:
    params = options(args, ("k", "target", "since", "until", "rule"))
    if args.db:
        query = ReliabilityQuery.parse(params, utcnow())
        with open_store(args.db, read_only=True) as con:
            found = query.run(con)
    else:
        client = AdminClient(args.url, args.token, timeout=60)
        found = orjson.loads(client.get(f"/api/v1/reliability?{urllib.parse.urlencode(params)}"))
    print(render(found, args.format))
    return 0


def cmd_baseline(args: argparse.Namespace) -> int:
    params = {"name": args.name, **options(args, ("target", "since", "until"))}
    if args.db:
        spec = baseline_spec(params, utcnow())
        with open_store(args.db, read_only=False) as con:
            tables = baselines.build(con, spec, utcnow())
            con.execute("BEGIN")
            for name, table in tables.items():
                con.register("batch", table)
                con.execute(f"INSERT INTO {name} SELECT * FROM batch")
                con.unregister("batch")
            con.execute("COMMIT")
        saved = baselines.describe(tables["baselines"])
    else:
        client = AdminClient(args.url, args.token, timeout=60)
        saved = orjson.loads(client.post("/api/v1/baselines", orjson.dumps(params)))
    print(f"baseline {saved['name']} saved: {saved['runs']} runs")
    return 0


class open_store:
    """The DuckDB file of a stopped collector, migrated to this Sextant's schema when writing."""

    def __init__(self, path, read_only: bool) -> None:  # type: ignore[no-untyped-def]
        self.path, self.read_only = path, read_only

    def __enter__(self):  # type: ignore[no-untyped-def]
        import duckdb

        from collector.store.database import Database

        if not self.path.exists():
            raise SextantError(f"{self.path}: no such file")
        if self.read_only:
            try:
                self.con = duckdb.connect(str(self.path), read_only=True)
            except duckdb.Error as exc:
                raise SextantError(f"cannot open {self.path}: {exc}") from exc
            return self.con
        self.database = Database(self.path)
        self.database.open()
        return self.database.connection

    def __exit__(self, *exc) -> None:  # type: ignore[no-untyped-def]
        if self.read_only:
            self.con.close()
        else:
            self.database.close()


def register(sub: argparse._SubParsersAction) -> None:
    """The `baseline` and `report` commands."""
    baseline = sub.add_parser("baseline", help="frozen baselines for drift rules")
    baseline_sub = baseline.add_subparsers(dest="baseline_command", required=True)
    save = baseline_sub.add_parser("save", help="freeze the matching runs as baseline NAME")
    save.add_argument("name")
    add_common(save)
    save.set_defaults(func=cmd_baseline)

    report = sub.add_parser("report", help="reports over stored runs")
    report_sub = report.add_subparsers(dest="report_command", required=True)
    reliability = report_sub.add_parser("reliability", help="pass@k, pass^k and consistency")
    reliability.add_argument("--k", default="1,3,5", help="comma-separated k (default 1,3,5)")
    reliability.add_argument("--rule", help="PACK/RULE whose pass counts (default: verdict)")
    reliability.add_argument("--format", choices=("table", "json", "csv"), default="table")
    add_common(reliability)
    reliability.set_defaults(func=cmd_report)


def add_common(parser: argparse.ArgumentParser) -> None:
    from pathlib import Path

    parser.add_argument("--target", help="SERVICE[/AGENT[/VERSION]], globs allowed")
    parser.add_argument("--since", help="ISO 8601 time or a duration back from now (7d)")
    parser.add_argument("--until", help="ISO 8601 time or a duration back from now")
    parser.add_argument("--url", default="http://localhost:9464", help="admin API of a collector")
    parser.add_argument("--token", help="bearer token (default $SEXTANT_TOKEN) when one is set")
    parser.add_argument("--db", type=Path, help="read a DuckDB file instead (collector stopped)")
