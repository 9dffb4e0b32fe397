"""`sextant demo`: the scenario of `collector/demo/` as it unfolds, live verdicts and decisions in
the terminal, then a summary; exit 1 when a target misses the decision the demo expects."""

from __future__ import annotations

import argparse
import logging
import sys
import time
from pathlib import Path
from typing import Any

from collector.cli._flags import add_command, add_format, duration, positive_int

POLL_SECONDS = 0.3


def register(sub: Any) -> None:
    demo = add_command(
        sub,
        "demo",
        "a collector, simulated agents, live verdicts and decisions",
        "sextant demo --runs 3 --data-dir ./demo-data",
    )
    demo.add_argument("--runs", type=positive_int, default=3, help="runs per simulated agent")
    demo.add_argument("--data-dir", type=Path, help="keep the store here (default: a temp dir)")
    demo.add_argument(
        "--timeout", type=duration, default=90.0, help="how long to wait for the decisions (90s)"
    )
    add_format(demo)
    demo.set_defaults(func=run)


class Say:
    """Where the demo's story goes: stdout, or stderr when stdout carries --format json/csv."""

    def __init__(self, fmt: str) -> None:
        self.out = sys.stdout if fmt == "table" else sys.stderr

    def __call__(self, text: str = "") -> None:
        print(text, file=self.out, flush=True)


def run(args: argparse.Namespace) -> int:
    from collector.demo.run import DemoRun

    logging.getLogger().setLevel(logging.WARNING)
    demo = DemoRun(args.runs, args.data_dir)
    say = Say(args.format)
    say("Sextant demo: a collector on loopback ports with a temporary store")
    server = demo.start()
    try:
        say(f"  OTLP/gRPC {server.grpc_endpoint}   admin {server.admin_url}")
        say(f"  store     {server.pipeline.database.path}")
        say()
        ok = drive(demo, args.timeout, args.format, say)
    finally:
        demo.stop()
        say()
        say(f"DuckDB file: {demo.db_path}")
        say(f"  sextant show --db {demo.db_path} --latest")
    return 0 if ok else 1


def drive(demo: Any, timeout: float, fmt: str, say: Say) -> bool:
    """Send the rounds, print what closes and is decided until the demo is done or times out."""
    from collector.demo.run import AGENTS

    say(f"Simulated agents export {demo.expected_runs} runs over OTLP/gRPC:")
    for a in AGENTS:
        say(f"  - {a.title:<36} {a.service}/{a.agent}@{a.version}  x{a.runs(demo.runs)}")
    say()
    for i in range(demo.rounds):
        demo.send_round(i)
        progress(demo, say)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        progress(demo, say)
        if demo.done():
            break
        time.sleep(POLL_SECONDS)
    progress(demo, say)
    return summary(demo.summary(), fmt, say)


def progress(demo: Any, say: Say) -> None:
    for trace_id, service, agent, version, steps, verdict, reasons, _ in demo.new_trajectories():
        why = f"  ({', '.join(reasons)})" if reasons else ""
        target = f"{service}/{agent}@{version}"
        say(
            f"  closed  {trace_id[:12]}  {target:<38} {steps:>2} steps"
            f"  {(verdict or 'none').upper()}{why}"
        )
    for _, _, event, decision, service, agent, version, reasons, ev in demo.new_decision_events():
        evidence = f"  evidence {ev[0][:12]}" if ev else ""
        say(
            f"  {event.upper():<7} {decision:<10} {service}/{agent}@{version}"
            f"  {', '.join(reasons or [])}{evidence}"
        )


def summary(rows: list[dict[str, Any]], fmt: str, say: Say) -> bool:
    """The per-target table; whether every target reached the decision expected of it."""
    from collector.cli._output import Table, emit

    say()
    for row in rows:
        why = f" ({', '.join(row['reasons'])})" if row["reasons"] else ""
        row["shown"] = f"{row['decision']}{why}"
    columns = ["target", "runs", "pass", "fail", "review", "shown"]
    headers = ["TARGET", "RUNS", "PASS", "FAIL", "REVIEW", "DECISION"]
    if fmt == "table":
        emit(Table(rows, columns, headers), fmt)
    else:
        plain = [{k: v for k, v in r.items() if k != "shown"} for r in rows]
        emit(Table(plain, [*columns[:-1], "decision", "expected"]), fmt)
    ok = all(r["decision"] == r["expected"] for r in rows)
    if not ok:
        say("\nsome targets did not reach the decision the demo expects (see above)")
    return ok
