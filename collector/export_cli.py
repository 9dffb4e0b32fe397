"""`sextant export parquet | case` and `sextant evidence`: the store's data as files."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa

from collector.errors import SextantError
from collector.replay.selection import parse_time
from collector.replay.sources import DuckDBSource, LiveSource, SourceSpec
from collector.store.export import READ_BATCH_ROWS, export_parquet


def source_reader(spec: SourceSpec):  # type: ignore[no-untyped-def]
    source = spec.open()

    def read(sql: str, params: list) -> Iterator[pa.RecordBatch]:
        if isinstance(source, DuckDBSource):
            yield from source.con.sql(sql, params=params or None).to_arrow_reader(READ_BATCH_ROWS)
        else:
            assert isinstance(source, LiveSource)
            table = source.client.sql(sql, params, max_rows=None)
            yield from table.to_batches()

    return source, read


def cmd_parquet(args: argparse.Namespace) -> int:
    if args.parquet_from is not None:
        raise SextantError("export parquet reads a collector (--url) or a DuckDB file (--db)")
    spec = SourceSpec(args.url, args.token, args.db)
    since = parse_time(args.since, "--since") if args.since else None
    until = parse_time(args.until, "--until") if args.until else None
    source, read = source_reader(spec)
    try:
        written = export_parquet(read, args.out, since, until)
    finally:
        source.close()
    for table, rows in written.items():
        print(f"{table}: {rows} rows")
    print(f"exported to {args.out} (table=NAME/date=YYYY-MM-DD/*.parquet)")
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    if args.export_command == "parquet":
        return cmd_parquet(args)
    from collector.replay.cases import export_cases

    spec = SourceSpec(args.url, args.token, args.db)
    return export_cases(spec, args.trace_ids, args.out, args.pack)


def cmd_evidence(args: argparse.Namespace) -> int:
    from collector.replay.evidence import write_evidence

    return write_evidence(SourceSpec(args.url, args.token, args.db), args.decision_id, args.out)


def source_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--url", default="http://localhost:9464", help="admin API of a collector")
    parser.add_argument("--token", help="bearer token (default: $SEXTANT_TOKEN)")
    parser.add_argument("--db", type=Path, help="read a DuckDB file instead (collector stopped)")


def add_parsers(sub: argparse._SubParsersAction) -> None:
    export = sub.add_parser("export", help="write the store's data as Parquet or as cases")
    export_sub = export.add_subparsers(dest="export_command", required=True)
    parquet = export_sub.add_parser("parquet", help="every table, partitioned by table and date")
    parquet.add_argument("--out", type=Path, required=True, help="directory to write into")
    parquet.add_argument("--since", help="rows from this time: ISO time or age (6h, 7d)")
    parquet.add_argument("--until", help="rows before this time: ISO time or age")
    parquet.set_defaults(parquet_from=None)
    source_flags(parquet)
    case = export_sub.add_parser("case", help="trajectories as `sextant rules test` cases")
    case.add_argument("trace_ids", nargs="+", metavar="TRACE_ID")
    case.add_argument("--out", type=Path, required=True, help="JSONL file to write")
    case.add_argument("--pack", help="the pack the cases expect verdicts of (when several)")
    source_flags(case)
    export.set_defaults(func=cmd_export)

    evidence = sub.add_parser("evidence", help="a decision's evidence bundle as a zip")
    evidence.add_argument("decision_id")
    evidence.add_argument("--out", type=Path, required=True, help="zip file to write")
    source_flags(evidence)
    evidence.set_defaults(func=cmd_evidence)
