"""`sextant replay`: select, re-evaluate, show what changed, store it, check expectations."""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass
from pathlib import Path

import duckdb
import pyarrow as pa

from collector.errors import SextantError
from collector.replay.run import Report, current_packs, packs_from_paths, replay
from collector.replay.selection import Selection, check_trace_id, parse_time
from collector.replay.sources import LiveSource, Source, SourceSpec
from collector.store.readonly import first_line
from collector.store.tables import INSERTS

WRITE_CHUNK_ROWS = 20_000


@dataclass(frozen=True)
class Expectation:
    verdict: str  # pass | fail
    trace_id: str
    reason: str | None = None

    @classmethod
    def parse(cls, text: str) -> Expectation:
        parts = text.split(":")
        if parts[0] == "fail" and len(parts) == 3 and parts[2]:
            return cls("fail", check_trace_id(parts[1]), parts[2])
        if parts[0] == "pass" and len(parts) == 2:
            return cls("pass", check_trace_id(parts[1]))
        raise SextantError(f"--expect {text!r}: use fail:TRACE_ID:REASON or pass:TRACE_ID")

    def check(self, report: Report) -> str | None:
        """None when met, else what happened instead."""
        outcome = report.outcomes.get(self.trace_id)
        if outcome is None:
            return "not replayed (no current trajectory for it in the selection)"
        if outcome.new != self.verdict:
            reasons = f" ({', '.join(outcome.reasons)})" if outcome.reasons else ""
            return f"verdict {outcome.new}{reasons}"
        if self.reason is not None and self.reason not in outcome.reasons:
            return f"fails, but for {', '.join(outcome.reasons) or 'no reason'}"
        return None

    def __str__(self) -> str:
        return ":".join(p for p in (self.verdict, self.trace_id, self.reason) if p)


def selection_from(args: argparse.Namespace, expectations: list[Expectation]) -> Selection:
    return Selection(
        trace_ids=args.trace_id or [],
        since=parse_time(args.since, "--since") if args.since else None,
        until=parse_time(args.until, "--until") if args.until else None,
        target=args.target,
        verdict=args.verdict,
        reason=args.reason,
        decision=args.decision,
        extra=[e.trace_id for e in expectations],
    )


def render(report: Report, selected: int, max_rows: int) -> str:
    lines = []
    if report.changes:
        header = ("trace", "rule", "old -> new", "reason")
        rows = [
            (c.trace_id, c.rule, f"{c.old} -> {c.new}", c.reason) for c in report.changes[:max_rows]
        ]
        widths = [max(len(r[i]) for r in [header, *rows]) for i in range(3)]
        for row in [header, *rows]:
            cells = [cell.ljust(w) for cell, w in zip(row[:3], widths, strict=True)]
            lines.append("  ".join([*cells, row[3]]).rstrip())
        if len(report.changes) > max_rows:
            lines.append(f"... {len(report.changes) - max_rows} more changes (--max-diff)")
        lines.append("")
    packs = ", ".join(f"{p.pack.name} {p.pack.version}" for p in report.packs)
    changed = sum(1 for o in report.outcomes.values() if o.old != o.new)
    rate = len(report.outcomes) / report.elapsed_seconds if report.elapsed_seconds else 0.0
    lines.append(
        f"replay {report.replay_id}: {len(report.outcomes)} of {selected} selected trajectories"
        f" under {packs}: {report.results} results, {len(report.changes)} rule changes,"
        f" {changed} verdict changes ({report.elapsed_seconds:.1f} s, {rate:,.0f} trajectories/s)"
    )
    for (old, new), count in sorted(report.transitions.items()):
        lines.append(f"  {old} -> {new}: {count}")
    return "\n".join(lines)


def store(source: Source, db: Path | None, tables: list[pa.Table]) -> int:
    """Replay results go beside the live ones (origin 'replay'), never over them."""
    if not tables:
        return 0
    table = pa.concat_tables(tables)
    if isinstance(source, LiveSource):
        for offset in range(0, table.num_rows, WRITE_CHUNK_ROWS):
            chunk = table.slice(offset, WRITE_CHUNK_ROWS)
            sink = pa.BufferOutputStream()
            with pa.ipc.new_stream(sink, chunk.schema) as writer:
                writer.write_table(chunk)
            source.client.post(
                "/api/v1/replay/results",
                sink.getvalue().to_pybytes(),
                "application/vnd.apache.arrow.stream",
            )
        return table.num_rows
    if db is None:
        raise SextantError("--write needs a collector (--url) or a DuckDB file (--db)")
    source.close()  # the read-only handle, so the file can be opened for writing
    try:
        con = duckdb.connect(str(db))
    except duckdb.Error as exc:
        raise SextantError(
            f"cannot open {db} for writing ({first_line(exc)}); while a collector runs,"
            " replay with --url so it stores the results"
        ) from exc
    try:
        con.register("batch", table)
        con.execute(INSERTS["results"])
    finally:
        con.close()
    return table.num_rows


def run(args: argparse.Namespace) -> int:
    expectations = [Expectation.parse(e) for e in args.expect]
    selection = selection_from(args, expectations)
    spec = SourceSpec(args.url, args.token, args.db, args.parquet)
    source = spec.open()
    try:
        if args.to_otlp:
            from collector.replay.resend import resend

            headers = dict(h.split("=", 1) for h in args.otlp_header)
            return resend(
                source, selection, args.to_otlp, args.protocol, args.shift_to_now, headers
            )
        packs = packs_from_paths(args.rules) if args.rules else current_packs(source)
        trace_ids = selection.keys(source)
        report, tables = replay(spec, source, trace_ids, packs, args.write, args.jobs)
        if args.write:
            report.stored = store(source, args.db, tables)
    finally:
        source.close()
    print(render(report, len(trace_ids), args.max_diff))
    if args.write:
        print(f"stored {report.stored} results as replay {report.replay_id} (origin 'replay')")
    failed = 0
    for expectation in expectations:
        problem = expectation.check(report)
        failed += problem is not None
        print(f"expect {expectation}: " + ("ok" if problem is None else f"FAILED: {problem}"))
    if failed:
        print(f"sextant: {failed} of {len(expectations)} expectations failed", file=sys.stderr)
    return 1 if failed else 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    replay_parser = sub.add_parser(
        "replay", help="re-evaluate stored trajectories under a pack, or re-send their spans"
    )
    p = replay_parser
    p.add_argument("--trace-id", action="append", help="a trace to replay (repeatable)")
    p.add_argument("--since", help="runs that started at or after: ISO time or age (6h, 7d)")
    p.add_argument("--until", help="runs that started before: ISO time or age")
    p.add_argument("--target", help="SERVICE[/AGENT[/VERSION]]")
    p.add_argument("--verdict", choices=("pass", "fail", "review"), help="the live verdict")
    p.add_argument("--reason", help="a reason code the live verdict gave")
    p.add_argument("--decision", help="the evidence traces of this decision id")
    p.add_argument("--rules", type=Path, action="append", help="pack file or directory")
    p.add_argument("--url", default="http://localhost:9464", help="admin API of a collector")
    p.add_argument("--token", help="bearer token (default: $SEXTANT_TOKEN)")
    p.add_argument("--db", type=Path, help="read a DuckDB file (collector stopped)")
    p.add_argument("--parquet", type=Path, help="read a `sextant export parquet` directory")
    p.add_argument("--write", action="store_true", help="store the results as a replay revision")
    p.add_argument(
        "--expect",
        action="append",
        default=[],
        help="fail:TRACE_ID:REASON or pass:TRACE_ID; exit 1 when not met",
    )
    p.add_argument("--max-diff", type=int, default=200, help="changes to print at most")
    p.add_argument(
        "--jobs", type=int, default=os.cpu_count() or 1, help="processes evaluating (default: CPUs)"
    )
    p.add_argument("--to-otlp", help="re-send the selected traces' spans to this OTLP endpoint")
    p.add_argument("--protocol", choices=("grpc", "http/protobuf"), default="grpc")
    p.add_argument(
        "--otlp-header", action="append", default=[], help="KEY=VALUE sent with each export"
    )
    p.add_argument("--shift-to-now", action="store_true", help="move span times to end now")
    p.set_defaults(func=lambda args: run(args))
