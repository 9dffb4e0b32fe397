"""`sextant bench`: offer synthetic agent traces to an OTLP endpoint and report the throughput."""

from __future__ import annotations

import argparse
from typing import Any

from collector.cli._flags import add_command, add_format, duration, positive_int

# The line on stderr that says the load has begun (scripts/benchmark starts measuring there).
SENDING = "sextant bench: sending"


def register(sub: Any) -> None:
    bench = add_command(
        sub,
        "bench",
        "send synthetic agent traces to an OTLP endpoint",
        "sextant bench --endpoint localhost:4317 --duration 30s --concurrency 8",
    )
    bench.add_argument("--endpoint", default="localhost:4317", help="HOST:PORT or http(s) URL")
    bench.add_argument(
        "--protocol",
        choices=("grpc", "http/protobuf", "http/json"),
        default="grpc",
        help="OTLP encoding",
    )
    bench.add_argument("--concurrency", type=positive_int, default=4, help="requests in flight")
    bench.add_argument("--duration", type=duration, default=10.0, help="how long to run (10s, 2m)")
    bench.add_argument("--traces", type=int, default=0, help="stop after this many traces (0: no)")
    bench.add_argument(
        "--spans-per-request",
        type=positive_int,
        default=512,
        help="spans in one export, rounded down to whole traces",
    )
    bench.add_argument(
        "--spans-per-trace", type=positive_int, default=10, help="spans in one agent run"
    )
    bench.add_argument(
        "--rate", type=float, default=0.0, help="offer this many spans/s (0: all it takes)"
    )
    bench.add_argument(
        "--header", action="append", default=[], help="KEY=VALUE header, e.g. authorization=..."
    )
    bench.add_argument(
        "--retry",
        action="store_true",
        help="retry a refusal that says when (RetryInfo, Retry-After) after that wait, as"
        " OpenTelemetry SDK exporters do; without it, a refusal counts failed",
    )
    bench.add_argument(
        "--client",
        choices=("native", "grpcio"),
        default="native",
        help="gRPC client: native (Rust, one thread, the least CPU on the cores it measures) or"
        " grpcio (a Python thread an exporter)",
    )
    add_format(bench)
    bench.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import sys

    from collector.bench.runner import BenchOptions, run_bench
    from collector.cli._errors import UsageError
    from collector.cli._output import Table, emit

    if any("=" not in h for h in args.header):
        raise UsageError("--header takes KEY=VALUE")
    report = run_bench(
        BenchOptions(
            endpoint=args.endpoint,
            protocol=args.protocol,
            concurrency=args.concurrency,
            duration=args.duration,
            traces=args.traces,
            spans_per_request=args.spans_per_request,
            spans_per_trace=args.spans_per_trace,
            rate=args.rate,
            headers=dict(h.split("=", 1) for h in args.header),
            retry=args.retry,
            client=args.client,
        ),
        on_start=lambda: print(f"{SENDING} for {args.duration:g} s", file=sys.stderr, flush=True),
    )
    if args.format == "table":
        print(report.render())
    else:
        summary = report.summary()
        emit(Table([summary], list(summary)), args.format, doc=summary)
    if not report.requests_ok:
        failed = sum(report.errors.values())
        first = report.errors.most_common(1)[0][0] if report.errors else "no request was sent"
        print(
            f"sextant bench: every request failed ({failed} of {failed}): {first}; check"
            f" --endpoint {args.endpoint} and --protocol {args.protocol}",
            file=sys.stderr,
        )
        return 1
    return 0
