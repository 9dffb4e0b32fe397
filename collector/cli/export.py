"""`sextant export parquet | case` and `sextant evidence`: the store's data as files."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from collector.cli._flags import add_command, add_format, add_source, add_window


def register(sub: Any) -> None:
    export = add_command(
        sub,
        "export",
        "write the store's data as Parquet or as rule-test cases",
        "sextant export parquet --out ./parquet --since 7d --db sextant-data/sextant.duckdb",
    )
    export_sub = export.add_subparsers(dest="export_command", required=True, metavar="COMMAND")
    parquet = add_command(
        export_sub,
        "parquet",
        "every table, partitioned by table and date",
        "sextant export parquet --out ./parquet --since 7d",
    )
    parquet.add_argument("--out", type=Path, required=True, help="directory to write into")
    add_window(parquet, "rows from the time")
    add_source(parquet)
    add_format(parquet)
    parquet.set_defaults(func=run_parquet)

    case = add_command(
        export_sub,
        "case",
        "trajectories as `sextant rules test` cases",
        "sextant export case TRACE_ID --out cases.jsonl",
    )
    case.add_argument("trace_ids", nargs="+", metavar="TRACE_ID")
    case.add_argument("--out", type=Path, required=True, help="JSONL file to write")
    case.add_argument(
        "--pack",
        help="only this pack's verdicts (default: every pack's; `rules test PACK` takes its own)",
    )
    add_source(case)
    case.set_defaults(func=run_case)

    evidence = add_command(
        sub,
        "evidence",
        "a decision's evidence bundle as a zip, with SHA-256 of every file",
        "sextant evidence DECISION_ID --out evidence.zip",
    )
    evidence.add_argument("decision_id")
    evidence.add_argument("--out", type=Path, required=True, help="zip file to write")
    add_source(evidence)
    evidence.set_defaults(func=run_evidence)


def run_parquet(args: argparse.Namespace) -> int:
    from collector.cli._output import Table, emit
    from collector.cli._source import SourceSpec
    from collector.store.export import export_parquet

    source = SourceSpec.of(args).open()
    try:
        written = export_parquet(source.batches, args.out, args.since, args.until)
    finally:
        source.close()
    rows = [{"table": table, "rows": count} for table, count in written.items()]
    if args.format == "table":
        for row in rows:
            print(f"{row['table']}: {row['rows']} rows")
        print(f"exported to {args.out} (table=NAME/date=YYYY-MM-DD/*.parquet)")
    else:
        emit(Table(rows, ["table", "rows"]), args.format, doc={"out": str(args.out), **written})
    return 0


def run_case(args: argparse.Namespace) -> int:
    from collector.cli._source import SourceSpec
    from collector.replay.cases import export_cases

    source = SourceSpec.of(args).open()
    try:
        written = export_cases(source, args.trace_ids, args.out, args.pack)
    finally:
        source.close()
    print(f"wrote {written} cases to {args.out}")
    return 0


def run_evidence(args: argparse.Namespace) -> int:
    from collector.cli._source import SourceSpec
    from collector.clock import SystemClock
    from collector.replay.evidence import write_evidence

    source = SourceSpec.of(args).open()
    try:
        files = write_evidence(source, args.decision_id, args.out, SystemClock().now())
    finally:
        source.close()
    print(
        f"wrote {args.out}: {files} files for decision {args.decision_id},"
        " manifest.json with SHA-256"
    )
    return 0
