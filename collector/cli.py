"""`sextant` commands; the only place that exits the process."""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
from pathlib import Path
from typing import Any

import orjson

from collector.config import SextantConfig, load_config
from collector.errors import ConfigError, SextantError

log = logging.getLogger("sextant")
SWITCH_INTERVAL_SECONDS = 0.0005


def serve_overrides(args: argparse.Namespace) -> dict[str, Any]:
    overrides: dict[str, Any] = {}
    if args.data_dir:
        overrides["storage"] = {"data_dir": args.data_dir}
    for flag, section in (("grpc_addr", "grpc"), ("http_addr", "http"), ("admin_addr", "admin")):
        if getattr(args, flag):
            overrides[section] = {"addr": getattr(args, flag)}
    return overrides


async def run_server(config: SextantConfig) -> None:
    from collector.pipeline import Pipeline

    pipeline = Pipeline(config)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await pipeline.start()
    try:
        await stop.wait()
        log.info("signal received; draining in-flight requests and flushing")
    finally:
        await pipeline.shutdown()


def cmd_serve(args: argparse.Namespace) -> int:
    config = load_config(args.config, overrides=serve_overrides(args))
    logging.getLogger().setLevel(config.log_level.upper())
    # DuckDB's Arrow scan takes the GIL back many times per commit; with the default 5 ms switch
    # interval the writer stalls behind the decoding thread, so let threads hand over sooner.
    sys.setswitchinterval(SWITCH_INTERVAL_SECONDS)
    asyncio.run(run_server(config))
    return 0


def cmd_bench(args: argparse.Namespace) -> int:
    from collector.bench.runner import BenchOptions, run_bench

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
        )
    )
    print(report.render())
    return 0 if report.requests_ok else 1


def cmd_show(args: argparse.Namespace) -> int:
    from collector.show import render

    if args.trace_id is None and not args.latest:
        raise SextantError("give a TRACE_ID or --latest")
    trajectory = fetch_trajectory(args)
    if trajectory is None:
        print(f"sextant: no trajectory for trace {args.trace_id or '(latest)'}", file=sys.stderr)
        return 1
    if args.json:
        print(orjson.dumps(trajectory, option=orjson.OPT_INDENT_2).decode())
    else:
        print(render(trajectory))
    return 0


def fetch_trajectory(args: argparse.Namespace) -> dict | None:
    """From a DuckDB file when --db is given, else from a running collector's admin API."""
    if args.db:
        import duckdb

        from collector.store.queries import list_trajectories, load_trajectory

        try:
            con = duckdb.connect(str(args.db), read_only=True)
        except duckdb.Error as exc:
            raise SextantError(f"cannot open {args.db}: {exc}") from exc
        trace_id = args.trace_id
        if args.latest:
            latest = list_trajectories(con, {}, 1)
            if not latest:
                return None
            trace_id = latest[0]["trace_id"]
        return load_trajectory(con, trace_id, args.revision)
    base = f"{args.url.rstrip('/')}/api/v1/trajectories"
    trace_id = args.trace_id
    if args.latest:
        latest = get_json(f"{base}?limit=1")
        if not latest or not latest["trajectories"]:
            return None
        trace_id = latest["trajectories"][0]["trace_id"]
    url = f"{base}/{trace_id}" + (f"?revision={args.revision}" if args.revision else "")
    return get_json(url)


def get_json(url: str) -> dict | None:
    """GET a JSON document; None on 404."""
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(url, timeout=10) as reply:
            return orjson.loads(reply.read())
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            return None
        raise SextantError(
            f"{url}: HTTP {exc.code}: {exc.read().decode(errors='replace')}"
        ) from exc
    except urllib.error.URLError as exc:
        raise SextantError(f"cannot reach {url}: {exc.reason}") from exc


def cmd_rules(args: argparse.Namespace) -> int:
    from collector import rules_cli

    if args.rules_command == "validate":
        return rules_cli.validate(args.paths)
    if args.rules_command == "test":
        return rules_cli.test_cases(args.pack, args.cases)
    status = get_json(f"{args.url.rstrip('/')}/api/v1/rules")
    if args.json:
        print(orjson.dumps(status, option=orjson.OPT_INDENT_2).decode())
    else:
        print(rules_cli.render_status(status or {"packs": [], "rules": []}))
    return 0


def cmd_sql(args: argparse.Namespace) -> int:
    from collector import sql_cli

    return sql_cli.run(args.query, args.url, args.token, args.db, args.format, args.max_rows)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="sextant", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    serve = sub.add_parser("serve", help="run the collector (embedded defaults with no flags)")
    serve.add_argument("--config", type=Path, help="YAML config file")
    serve.add_argument("--data-dir", help="directory of sextant.duckdb (default ./sextant-data)")
    serve.add_argument("--grpc-addr", help="OTLP/gRPC HOST:PORT (default 0.0.0.0:4317)")
    serve.add_argument("--http-addr", help="OTLP/HTTP HOST:PORT (default 0.0.0.0:4318)")
    serve.add_argument("--admin-addr", help="admin HTTP HOST:PORT (default 0.0.0.0:9464)")
    serve.set_defaults(func=cmd_serve)

    bench = sub.add_parser("bench", help="send synthetic agent traces to an OTLP endpoint")
    bench.add_argument("--endpoint", default="localhost:4317", help="HOST:PORT or http(s) URL")
    bench.add_argument("--protocol", choices=("grpc", "http/protobuf", "http/json"), default="grpc")
    bench.add_argument("--concurrency", type=int, default=4, help="requests in flight")
    bench.add_argument("--duration", type=float, default=10.0, help="seconds to run (bounded)")
    bench.add_argument("--traces", type=int, default=0, help="stop after this many traces")
    bench.add_argument("--spans-per-request", type=int, default=512)
    bench.add_argument("--spans-per-trace", type=int, default=10)
    bench.add_argument(
        "--rate", type=float, default=0.0, help="offer this many spans/s (default: all it takes)"
    )
    bench.add_argument(
        "--header", action="append", default=[], help="KEY=VALUE header, e.g. authorization=..."
    )
    bench.set_defaults(func=cmd_bench)

    show = sub.add_parser("show", help="print a trajectory as a tree")
    show.add_argument("trace_id", nargs="?", help="32 hex digits")
    show.add_argument("--latest", action="store_true", help="the most recently closed trajectory")
    show.add_argument("--url", default="http://localhost:9464", help="admin API of a collector")
    show.add_argument("--db", type=Path, help="read a DuckDB file instead (collector stopped)")
    show.add_argument("--revision", type=int, help="a past revision (default: current)")
    show.add_argument("--json", action="store_true", help="print the trajectory as JSON")
    show.set_defaults(func=cmd_show)

    rules = sub.add_parser("rules", help="validate, test and inspect rule packs")
    rules_sub = rules.add_subparsers(dest="rules_command", required=True)
    validate = rules_sub.add_parser("validate", help="check packs; non-zero exit on any error")
    validate.add_argument("paths", nargs="+", type=Path, help="pack files or directories")
    test = rules_sub.add_parser("test", help="run a pack over JSONL trajectory cases")
    test.add_argument("pack", type=Path)
    test.add_argument("--cases", type=Path, required=True, help="JSONL: trajectory + expect")
    status = rules_sub.add_parser("status", help="packs in force and evaluator health")
    status.add_argument("--url", default="http://localhost:9464", help="admin API")
    status.add_argument("--json", action="store_true")
    rules.set_defaults(func=cmd_rules)

    sql = sub.add_parser("sql", help="run one read-only SQL query against the store")
    sql.add_argument("query", help="SELECT / WITH / DESCRIBE / SHOW / SUMMARIZE / EXPLAIN")
    sql.add_argument("--url", default="http://localhost:9464", help="admin API of a collector")
    sql.add_argument("--token", help="bearer token (default: $SEXTANT_TOKEN)")
    sql.add_argument("--db", type=Path, help="query a DuckDB file instead (collector stopped)")
    sql.add_argument("--format", choices=("table", "csv", "json"), default="table")
    sql.add_argument("--max-rows", type=int, default=1000, help="rows to print at most")
    sql.set_defaults(func=cmd_sql)

    from collector.replay import command as replay_command

    replay_command.add_parser(sub)
    from collector import export_cli

    export_cli.add_parsers(sub)
    add_decision_commands(sub)

    demo = sub.add_parser("demo", help="a collector, simulated agents, live verdicts and decisions")
    demo.add_argument("--runs", type=int, default=3, help="runs per simulated agent")
    demo.add_argument("--data-dir", type=Path, help="keep the store here (default: a temp dir)")
    demo.set_defaults(func=cmd_demo)

    from collector.drift.commands import register as register_drift

    register_drift(sub)
    return parser


def cmd_demo(args: argparse.Namespace) -> int:
    from collector.demo.run import run_demo

    if args.runs < 1:
        raise SextantError("--runs must be at least 1")
    logging.getLogger().setLevel(logging.WARNING)
    return run_demo(sys.stdout, args.runs, args.data_dir)


def add_decision_commands(sub: Any) -> None:
    from collector import decisions_cli

    def api(p: argparse.ArgumentParser) -> None:
        p.add_argument("--url", default="http://localhost:9464", help="admin API of a collector")
        p.add_argument("--token", help="bearer token, when the collector requires one")

    decisions = sub.add_parser("decisions", help="current decisions; acknowledge or resolve one")
    api(decisions)
    decisions.add_argument("--all", action="store_true", help="include resolved decisions")
    decisions.add_argument("--json", action="store_true")
    for name in ("service", "agent", "version", "decision"):
        decisions.add_argument(f"--{name}", help=f"only this {name}")
    dsub = decisions.add_subparsers(dest="decisions_command")
    show = dsub.add_parser("show", help="the history of one decision")
    show.add_argument("id")
    api(show)
    for verb, text in (("ack", "acknowledge: you own it now"), ("resolve", "resolve it by hand")):
        p = dsub.add_parser(verb, help=text)
        p.add_argument("id")
        p.add_argument("--by", required=True, help="who acts (recorded in the history)")
        p.add_argument("--note", default="", help="why, or what was done")
        api(p)
    decisions.set_defaults(func=decisions_cli.run)

    alerts = sub.add_parser("alerts", help="alert channels")
    asub = alerts.add_subparsers(dest="alerts_command", required=True)
    test = asub.add_parser("test", help="send a test alert through every configured channel")
    api(test)
    alerts.set_defaults(func=decisions_cli.alerts_test)


def main(argv: list[str] | None = None) -> None:
    logging.basicConfig(
        level=logging.INFO,
        format="%(asctime)s sextant %(levelname)s %(message)s",
        stream=sys.stderr,
    )
    args = build_parser().parse_args(argv)
    try:
        code = args.func(args)
    except ConfigError as exc:
        print(f"sextant: {exc}", file=sys.stderr)
        code = 2
    except SextantError as exc:
        print(f"sextant: {exc}", file=sys.stderr)
        code = 1
    except KeyboardInterrupt:
        code = 130
    sys.exit(code)


if __name__ == "__main__":
    main()
