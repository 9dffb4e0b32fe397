"""`sextant replay`: select, re-evaluate, show what changed, store it, check expectations; or
re-send the selected traces' spans to an OTLP endpoint."""

from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from collector.cli._flags import add_command, add_format, add_source, add_window, positive_int

WRITE_CHUNK_ROWS = 20_000
CHANGE_COLUMNS = ["trace_id", "rule", "old", "new", "reason"]


@dataclass(frozen=True)
class Expectation:
    """`--expect fail:TRACE_ID:REASON` or `pass:TRACE_ID`: what the replay must show."""

    verdict: str  # pass | fail
    trace_id: str
    reason: str | None = None

    @classmethod
    def parse(cls, text: str) -> Expectation:
        from collector.errors import SextantError
        from collector.replay.selection import check_trace_id

        parts = text.split(":")
        if parts[0] == "fail" and len(parts) == 3 and parts[2]:
            return cls("fail", check_trace_id(parts[1]), parts[2])
        if parts[0] == "pass" and len(parts) == 2:
            return cls("pass", check_trace_id(parts[1]))
        raise SextantError(f"--expect {text!r}: use fail:TRACE_ID:REASON or pass:TRACE_ID")

    def check(self, report: Any) -> str | None:
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


def register(sub: Any) -> None:
    p = add_command(
        sub,
        "replay",
        "re-evaluate stored trajectories under a pack, or re-send their spans",
        "sextant replay --rules rules/support-agent.yaml --since 7d --expect pass:TRACE_ID",
    )
    p.add_argument("--trace-id", action="append", help="a trace to replay (repeatable)")
    add_window(p)
    p.add_argument("--target", help="SERVICE[/AGENT[/VERSION]]")
    p.add_argument("--verdict", choices=("pass", "fail", "review"), help="the live verdict")
    p.add_argument("--reason", help="a reason code the live verdict gave")
    p.add_argument("--decision", help="the evidence traces of this decision id")
    p.add_argument(
        "--dataset",
        help="the runs of this dataset, each checked against what it expects; exit 1 when not",
    )
    p.add_argument(
        "--rules",
        type=Path,
        action="append",
        metavar="PATH",
        help="pack file or directory, repeatable (default: the packs in force)",
    )
    add_source(p, parquet=True)
    p.add_argument("--write", action="store_true", help="store the results as a replay revision")
    p.add_argument(
        "--expect",
        action="append",
        default=[],
        metavar="SPEC",
        help="fail:TRACE_ID:REASON or pass:TRACE_ID, repeatable; exit 1 when not met",
    )
    p.add_argument("--max-diff", type=int, default=200, help="changes to print at most")
    p.add_argument(
        "--jobs", type=positive_int, default=os.cpu_count() or 1, help="processes evaluating"
    )
    p.add_argument(
        "--reference",
        action="store_true",
        help="evaluate with the Python evaluators (the rules' specification), not natively",
    )
    add_format(p)
    p.add_argument(
        "--to-otlp", metavar="ENDPOINT", help="re-send the selected traces' spans there (OTLP)"
    )
    p.add_argument(
        "--protocol", choices=("grpc", "http/protobuf"), default="grpc", help="with --to-otlp"
    )
    p.add_argument(
        "--otlp-header", action="append", default=[], help="KEY=VALUE sent with each export"
    )
    p.add_argument("--shift-to-now", action="store_true", help="move span times to end now")
    p.set_defaults(func=run)


def selection_from(
    args: argparse.Namespace, expectations: list[Expectation], cases: list[Any]
) -> Any:
    from collector.replay.selection import Selection

    return Selection(
        trace_ids=[*(args.trace_id or []), *(c.trace_id for c in cases)],
        since=args.since,
        until=args.until,
        target=args.target,
        verdict=args.verdict,
        reason=args.reason,
        decision=args.decision,
        extra=[e.trace_id for e in expectations],
    )


def summary(report: Any, selected: int) -> list[str]:
    packs = ", ".join(f"{p.pack.name} {p.pack.version}" for p in report.packs)
    changed = sum(1 for o in report.outcomes.values() if o.old != o.new)
    rate = len(report.outcomes) / report.elapsed_seconds if report.elapsed_seconds else 0.0
    lines = [
        f"replay {report.replay_id}: {len(report.outcomes)} of {selected} selected trajectories"
        f" under {packs}: {report.results} results, {len(report.changes)} rule changes,"
        f" {changed} verdict changes ({report.elapsed_seconds:.1f} s, {rate:,.0f} trajectories/s)"
    ]
    for (old, new), count in sorted(report.transitions.items()):
        lines.append(f"  {old} -> {new}: {count}")
    return lines


def print_report(report: Any, selected: int, args: argparse.Namespace) -> None:
    """The rule changes (table, CSV or JSON rows) and, for a table, the summary under them."""
    from collector.cli._output import Table, emit, render_table

    rows = [vars(c) | {"old -> new": f"{c.old} -> {c.new}"} for c in report.changes]
    if args.format != "table":
        emit(Table(rows, CHANGE_COLUMNS), args.format)
        print("\n".join(summary(report, selected)), file=sys.stderr)
        return
    if rows:
        shown = Table(rows[: args.max_diff], ["trace_id", "rule", "old -> new", "reason"],
                      ["trace", "rule", "old -> new", "reason"])  # fmt: skip
        print(render_table(shown))
        if len(rows) > args.max_diff:
            print(f"... {len(rows) - args.max_diff} more changes (--max-diff)")
        print()
    print("\n".join(summary(report, selected)))


def run(args: argparse.Namespace) -> int:
    from collector.cli._source import SourceSpec
    from collector.clock import SystemClock
    from collector.datasets.store import load_cases
    from collector.replay.run import current_packs, packs_from_paths, replay

    expectations = [Expectation.parse(e) for e in args.expect]
    spec = SourceSpec.of(args)
    source = spec.open()
    try:
        cases = load_cases(source, args.dataset) if args.dataset else []
        selection = selection_from(args, expectations, cases)
        if args.to_otlp:
            return resend(args, source, selection)
        packs = packs_from_paths(args.rules) if args.rules else current_packs(source)
        trace_ids = selection.keys(source)
        now = SystemClock().now()
        bar = Progress(len(trace_ids))
        report, tables = replay(
            spec, source, trace_ids, packs, now, args.write, args.jobs, bar.update, args.reference
        )
        bar.close()
        if args.write:
            report.stored = store(source, args.db, tables)
    finally:
        source.close()
    print_report(report, len(trace_ids), args)
    if args.write:
        print(f"stored {report.stored} results as replay {report.replay_id} (origin 'replay')")
    failed = 0
    for expectation in expectations:
        problem = expectation.check(report)
        failed += problem is not None
        print(f"expect {expectation}: " + ("ok" if problem is None else f"FAILED: {problem}"))
    if failed:
        print(f"sextant: {failed} of {len(expectations)} expectations failed", file=sys.stderr)
    if args.dataset and not dataset_clean(args.dataset, cases, report.packs):
        return 1
    return 1 if failed else 0


def dataset_clean(name: str, cases: list[Any], packs: list[Any]) -> bool:
    """Each case of the dataset (the run as it was added) under the replayed packs, against
    what it expects of them; whether all are as expected."""
    from collector.datasets.run import run_dataset

    outcomes = run_dataset(cases, [p.pack for p in packs])
    for o in outcomes:
        verdicts = ", ".join(f"{pack} {v}" for pack, v in o.verdicts.items())
        if o.clean:
            print(f"ok   {name} {o.trace_id}: {verdicts}")
            continue
        print(f"FAIL {name} {o.trace_id}: " + "; ".join(o.problems))
        for line in o.objections:
            print(f"     {line}")
    clean = sum(o.clean for o in outcomes)
    print(f"dataset {name}: {clean} of {len(outcomes)} cases as expected")
    return clean == len(outcomes)


def resend(args: argparse.Namespace, source: Any, selection: Any) -> int:
    from collector.cli._errors import UsageError
    from collector.replay.resend import resend as send

    if any("=" not in h for h in args.otlp_header):
        raise UsageError("--otlp-header takes KEY=VALUE")
    headers = dict(h.split("=", 1) for h in args.otlp_header)
    sent, traces = send(source, selection, args.to_otlp, args.protocol, args.shift_to_now, headers)
    print(f"sent {sent} spans of {traces} traces to {args.to_otlp} ({args.protocol})")
    return 0


def store(source: Any, db: Path | None, tables: list[Any]) -> int:
    """Replay results go beside the live ones (origin 'replay'), never over them."""
    import pyarrow as pa

    from collector.cli._source import LiveSource

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
    return store_in_file(source, db, table)


def store_in_file(source: Any, db: Path | None, table: Any) -> int:
    """The one write a --db command makes: the results table, after the read-only handle."""
    import duckdb

    from collector.errors import SextantError
    from collector.store.sqlcheck import first_line
    from collector.store.tables import INSERTS

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


# A bar is worth drawing only for replays longer than a moment.
PROGRESS_AFTER = 2000


class Progress:
    """A one-line bar on stderr, drawn only for a person watching (a TTY)."""

    def __init__(self, total: int, out: TextIO | None = None) -> None:
        self.total = total
        self.out = out or sys.stderr
        self.enabled = self.out.isatty() and total > PROGRESS_AFTER
        self.started = time.perf_counter()

    def update(self, done: int) -> None:
        if not self.enabled:
            return
        rate = done / max(time.perf_counter() - self.started, 1e-9)
        filled = int(30 * done / self.total)
        self.out.write(
            f"\r[{'#' * filled}{'.' * (30 - filled)}] {done:,}/{self.total:,}  {rate:,.0f}/s"
        )
        self.out.flush()

    def close(self) -> None:
        if self.enabled:
            self.out.write("\n")
