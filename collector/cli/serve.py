"""`sextant serve`: run the collector until SIGTERM or SIGINT, then drain and flush."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path
from typing import Any

from collector.cli._flags import add_command

log = logging.getLogger("sextant")
SWITCH_INTERVAL_SECONDS = 0.0005


def register(sub: Any) -> None:
    serve = add_command(
        sub,
        "serve",
        "run the collector (embedded defaults with no flags)",
        "sextant serve --config sextant.yaml --rules ./packs --admin-addr 127.0.0.1:9464",
    )
    serve.add_argument("--config", type=Path, help="YAML config file")
    serve.add_argument("--data-dir", help="directory of sextant.duckdb (default: ./sextant-data)")
    serve.add_argument("--grpc-addr", help="OTLP/gRPC HOST:PORT (default: 0.0.0.0:4317)")
    serve.add_argument("--http-addr", help="OTLP/HTTP HOST:PORT (default: 0.0.0.0:4318)")
    serve.add_argument(
        "--admin-addr", help="admin HTTP and console HOST:PORT (default: 127.0.0.1:9464)"
    )
    serve.add_argument(
        "--rules",
        type=Path,
        action="append",
        metavar="PATH",
        help="a rule pack file or a directory of packs, instead of rules.paths (default: the"
        " shipped packs); repeat for more",
    )
    serve.set_defaults(func=run)


def overrides(args: argparse.Namespace) -> dict[str, Any]:
    """The flags as config overrides: they win over the file and the environment."""
    found: dict[str, Any] = {}
    if args.data_dir:
        found["storage"] = {"data_dir": args.data_dir}
    if args.rules:
        found["rules"] = {"paths": [str(p) for p in args.rules]}
    for flag, section in (("grpc_addr", "grpc"), ("http_addr", "http"), ("admin_addr", "admin")):
        if getattr(args, flag):
            found[section] = {"addr": getattr(args, flag)}
    return found


# sysexits' EX_TEMPFAIL: the store gave up (disk full, an I/O error) and must be reopened; a
# supervisor (systemd, Kubernetes, compose) restarts the process, DuckDB replays its WAL.
EXIT_STORE_INVALIDATED = 75


async def run_server(config: Any) -> int:
    """Serve until SIGTERM/SIGINT (exit 0) or until the store is invalidated (exit 75)."""
    import asyncio
    import gc
    import signal
    import threading

    from collector.garbage import collect_on_a_clock
    from collector.pipeline import Pipeline
    from collector.priority import behind_the_listener
    from collector.threads import named_executor

    pipeline = Pipeline(config)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    # asyncio.to_thread's threads (admin requests, stage start and stop), named for /proc.
    loop.set_default_executor(named_executor("sextant-async"))
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await pipeline.start()
    if config.guard.enabled and config.guard.native:
        behind_the_listener(config.guard.listener_ahead, keep=threading.get_native_id())
    # What start-up built (modules, compiled packs, config) stays for the process's life: frozen,
    # full collections skip it, and a guard call or an export is not held up 0.1-0.5 s by one.
    # What is built later is walked by a full collection once a minute (collector/garbage.py).
    gc.freeze()
    stop_collecting = collect_on_a_clock(pipeline.registry)
    assert pipeline.failed is not None
    try:
        waits = [asyncio.ensure_future(e.wait()) for e in (stop, pipeline.failed)]
        _, pending = await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        for wait in pending:
            wait.cancel()
        if pipeline.invalidated:
            return EXIT_STORE_INVALIDATED
        log.info("signal received; draining in-flight requests and flushing")
        return 0
    finally:
        stop_collecting.set()
        await pipeline.shutdown()


def run(args: argparse.Namespace) -> int:
    from collector.config import load_config
    from collector.malloc import fix_mmap_threshold
    from collector.memprofile import start_from_environment

    fix_mmap_threshold()  # before the threads start: large blocks go back to the system
    start_from_environment()
    config = load_config(args.config, overrides=overrides(args))
    logging.getLogger().setLevel(config.log_level)
    # DuckDB's Arrow scan takes the GIL back many times per commit; with the default 5 ms switch
    # interval the writer stalls behind the decoding thread, so let threads hand over sooner.
    sys.setswitchinterval(SWITCH_INTERVAL_SECONDS)
    import asyncio

    return asyncio.run(run_server(config))
