"""Builds the stages from config, wires them in order, and runs start and shutdown."""

from __future__ import annotations

import asyncio
import logging
import threading

from prometheus_client import CollectorRegistry

from collector.admin.decisions import DecisionRoutes
from collector.admin.server import AdminServer
from collector.admin.sql import SqlApi
from collector.alerts.notifier import Notifier
from collector.assembler.assembler import Assembler
from collector.clock import Clock
from collector.config import SextantConfig
from collector.decisions.engine import Coverage, DecisionEngine
from collector.decisions.metrics import DecisionCollector
from collector.drift.api import add_routes as drift_routes
from collector.drift.scheduler import DriftScheduler
from collector.evaluation.health import EvaluatorHealth
from collector.evaluation.metrics import RulesMetrics
from collector.evaluation.packs import PackRegistry
from collector.evaluation.stage import Evaluation
from collector.receivers.auth import BearerAuth
from collector.receivers.ingest import Ingest
from collector.receivers.otlp_grpc import OtlpGrpcReceiver
from collector.receivers.otlp_http import OtlpHttpReceiver
from collector.store.checkpointer import Checkpointer
from collector.store.database import Database
from collector.store.export import ParquetExporter
from collector.store.retention import Retention, RetentionMetrics
from collector.store.writer import Writer
from collector.telemetry import (
    AlertMetrics,
    AssemblerMetrics,
    DecisionMetrics,
    DriftMetrics,
    ReceiverMetrics,
    StoreMetrics,
)
from collector.workers import WorkerPool

log = logging.getLogger(__name__)


class Pipeline:
    """receivers → ingest (normalize) → writer → DuckDB → assembler → writer (trajectories),
    plus the admin server beside them.

    Start order is store first, receivers last; shutdown runs the other way, so no request is
    accepted that cannot be committed, and every accepted request is committed before exit.
    """

    def __init__(
        self,
        config: SextantConfig,
        registry: CollectorRegistry | None = None,
        clock: Clock | None = None,
    ) -> None:
        self.config = config
        self.registry = registry if registry is not None else CollectorRegistry()
        storage = config.storage
        self.database = Database(storage.database, storage.memory_limit)
        store_metrics = StoreMetrics(self.registry)
        self.writer = Writer(self.database, config.writer, store_metrics)
        self.checkpointer = Checkpointer(
            self.database, storage.checkpoint_wal_mib * 1024 * 1024, store_metrics
        )
        self.workers = WorkerPool(config.workers.processes)
        rules_metrics = RulesMetrics(self.registry)
        self.packs = PackRegistry(config.rules, self.database, self.writer, rules_metrics, clock)
        self.evaluation = Evaluation(self.packs, EvaluatorHealth(clock), rules_metrics)
        self.assembler = Assembler(
            config.assembler,
            self.database,
            self.writer,
            self.workers,
            {k: v.model_dump() for k, v in config.pricing.models.items()},
            AssemblerMetrics(self.registry),
            clock,
            self.evaluation,
        )
        self.writer.on_commit = self.assembler.consume
        self.drift = DriftScheduler(
            config.drift, self.database, self.writer, self.packs, DriftMetrics(self.registry), clock
        )
        receiver_metrics = ReceiverMetrics(self.registry)
        self.notifier = Notifier(
            config.alerts, self.writer, AlertMetrics(self.registry), self.admin_url, self.now
        )
        self.decisions = DecisionEngine(
            config.decisions,
            self.database,
            self.writer,
            self.packs,
            DecisionMetrics(self.registry),
            clock,
            Coverage(
                rejected_spans=lambda: counter_total(receiver_metrics.rejected, signal="traces"),
                eval_backlog=lambda: self.assembler.backlog(config.decisions.max_eval_backlog + 1),
            ),
            self.notifier,
        )
        self.registry.register(
            DecisionCollector(self.decisions.snapshot, config.decisions.max_targets)
        )
        self.ingest = Ingest(
            self.writer, self.workers, config.ingest, config.limits, receiver_metrics
        )
        ingest = self.ingest
        auth = BearerAuth([t.get_secret_value() for t in config.auth.tokens])
        self.grpc = OtlpGrpcReceiver(config.grpc, config.limits, auth, ingest, receiver_metrics)
        self.http = OtlpHttpReceiver(config.http, config.limits, auth, ingest, receiver_metrics)
        self.sql = SqlApi(config.sql, self.database, self.writer, auth)
        self.exporter = self.retention = None
        export, retention = config.export, storage.retention
        if export.parquet_dir is not None:
            self.exporter = ParquetExporter(
                self.database, export.parquet_dir, export.interval_seconds
            )
        if retention.days is not None:
            first = self.exporter.export if self.exporter and retention.export_first else None
            self.retention = Retention(
                self.database,
                retention.days,
                retention.check_seconds,
                RetentionMetrics(self.registry),
                (lambda cutoff: first(until=cutoff)) if first else None,
            )
        decision_routes = DecisionRoutes(self.decisions, self.notifier, self.database, auth)
        self.admin = AdminServer(
            config.admin,
            self.registry,
            self.not_ready_reason,
            self.database,
            self.evaluation.status,
            routes=[
                decision_routes.register,
                self.sql.register,
                lambda app: drift_routes(app, self.database, self.writer, auth),
            ],
        )
        self._started = False
        self._stopped = False

    def admin_url(self) -> str:
        host = self.config.admin.host_port[0]
        host = "127.0.0.1" if host in ("0.0.0.0", "::", "") else host
        return f"http://{host}:{self.admin.port}"

    def now(self):  # type: ignore[no-untyped-def]
        return self.decisions.now()

    def not_ready_reason(self) -> str | None:
        if not self._started:
            return "starting"
        if self._stopped:
            return "shutting down"
        if not self.writer.alive:
            return "store writer is not running"
        return None

    async def start(self) -> None:
        timeout = self.config.shutdown_timeout_seconds
        try:
            self.database.open()
            self.writer.start()
            self.checkpointer.start()
            await asyncio.to_thread(self.workers.start)
            await asyncio.to_thread(self.packs.start)
            await asyncio.to_thread(self.assembler.start)
            self.drift.start()
            await asyncio.to_thread(self.notifier.start)
            await asyncio.to_thread(self.decisions.start)
            for extra in (self.exporter, self.retention):
                if extra is not None:
                    extra.start()
            await self.admin.start(timeout)
            await self.grpc.start()
            await self.http.start(timeout)
        except BaseException:
            await self.shutdown()
            raise
        self._started = True
        cfg = self.config
        log.info("OTLP/gRPC listening on %s:%d", cfg.grpc.host_port[0], self.grpc.port)
        log.info("OTLP/HTTP listening on %s:%d", cfg.http.host_port[0], self.http.port)
        log.info("admin listening on %s:%d", cfg.admin.host_port[0], self.admin.port)
        log.info("store %s", self.database.path)

    async def shutdown(self) -> None:
        """Drain in-flight requests, flush the writer, close DuckDB; safe to call twice."""
        if self._stopped:
            return
        self._stopped = True
        timeout = self.config.shutdown_timeout_seconds
        # Each step runs even if an earlier one failed: the flush and the close must happen.
        steps = [
            lambda: asyncio.gather(self.grpc.stop(timeout), self.http.stop()),
            *[
                (lambda extra=extra: asyncio.to_thread(extra.shutdown, timeout))
                for extra in (self.retention, self.exporter)
                if extra is not None
            ],
            lambda: asyncio.to_thread(self.drift.shutdown, timeout),
            lambda: asyncio.to_thread(self.assembler.shutdown, timeout),
            lambda: asyncio.to_thread(self.decisions.shutdown, timeout),
            lambda: asyncio.to_thread(self.notifier.shutdown, timeout),
            lambda: asyncio.to_thread(self.packs.shutdown, timeout),
            lambda: asyncio.to_thread(self.workers.shutdown),
            lambda: asyncio.to_thread(self.writer.shutdown, timeout),
            lambda: asyncio.to_thread(self.checkpointer.shutdown, timeout),
            self.admin.stop,
        ]
        for step in steps:
            try:
                await step()
            except Exception:
                log.exception("error while shutting down; carrying on")
        busy = [t for t in self.database_users() if t.is_alive()]
        if busy:
            # Closing under a thread that still uses the connection could corrupt the store;
            # DuckDB replays its WAL on the next start instead.
            log.error("not closing the store: %s still running", ", ".join(t.name for t in busy))
            return
        self.database.close()
        log.info("stopped; store closed cleanly")

    def database_users(self) -> list[threading.Thread]:
        tickers = [
            self.checkpointer.ticker,
            self.assembler.ticker,
            self.packs.ticker,
            self.decisions.ticker,
            self.drift.ticker,
        ]
        tickers += [x.ticker for x in (self.exporter, self.retention) if x is not None]
        threads = [t.thread for t in tickers] + [self.writer._thread]
        return [t for t in threads if t is not None]


def counter_total(counter, **match: str) -> float:  # type: ignore[no-untyped-def]
    """Sum of a labelled counter's `_total` samples whose labels match."""
    return sum(
        sample.value
        for metric in counter.collect()
        for sample in metric.samples
        if sample.name.endswith("_total")
        and all(sample.labels.get(k) == v for k, v in match.items())
    )
