"""Builds the stages from config, wires them in order, and runs start and shutdown."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

from prometheus_client import CollectorRegistry

from collector.admin.server import AdminServer
from collector.admin.throttle import FailedLogins
from collector.alerts.metrics import AlertMetrics
from collector.alerts.notifier import Notifier
from collector.assembler.assembler import Assembler
from collector.assembler.metrics import AssemblerMetrics
from collector.assembler.prices import PriceTable
from collector.auth import BearerAuth
from collector.clock import Clock, SystemClock
from collector.cluster import other_peers, peer_token
from collector.config import SextantConfig
from collector.console.access import ConsoleAccess
from collector.console.missing import not_found_page
from collector.decisions.engine import Coverage, DecisionEngine
from collector.decisions.metrics import DecisionCollector, DecisionMetrics
from collector.drift.metrics import DriftMetrics
from collector.drift.scheduler import DriftScheduler
from collector.evaluation.health import EvaluatorHealth
from collector.evaluation.mcp import McpInventory
from collector.evaluation.metrics import RulesMetrics, TargetMetrics
from collector.evaluation.packs import PackRegistry
from collector.evaluation.stage import Evaluation
from collector.guard.build import guard_for
from collector.judges.events_in import EvaluationEvents
from collector.judges.events_out import EvaluationExport
from collector.judges.metrics import EventMetrics, JudgeMetrics
from collector.judges.stage import JudgeStage
from collector.lifecycle import Stage, deadline_in
from collector.receivers.ingest import Ingest
from collector.receivers.journaled import decode_journaled
from collector.receivers.listeners import otlp_listeners
from collector.receivers.metrics import ReceiverMetrics
from collector.review.backlog_metrics import ReviewBacklogCollector
from collector.routes import admin_routes
from collector.sampled import Sampled
from collector.sessions.metrics import SessionMetrics
from collector.sessions.stage import SessionStage
from collector.store.checkpointer import Checkpointer
from collector.store.database import Database
from collector.store.export import ParquetExporter
from collector.store.journal import Journal
from collector.store.metrics import StoreMetrics, StoreSizeCollector
from collector.store.pending import CommitHook, fan_out
from collector.store.retention import Retention, RetentionMetrics
from collector.store.writer import Writer
from collector.targets import TargetCap
from collector.telemetry import register_process_metrics
from collector.threads import start_arrow_threads
from collector.workers import WorkerPool

log = logging.getLogger(__name__)
# How long a reading of the assembly lag answers ingest's admission.
LAG_READ_SECONDS = 0.05


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
        self.peer_token = peer_token(config.cluster, config.auth)
        self.registry = registry if registry is not None else CollectorRegistry()
        self.clock = clock = clock or SystemClock()
        storage = config.storage
        self.database = Database(storage.database, storage.memory_limit)
        register_process_metrics(self.registry)
        self.registry.register(StoreSizeCollector(storage.database))
        # One cap for every per-target metric: a target has its own labels everywhere or nowhere.
        decisions = config.decisions
        self.target_cap = TargetCap(decisions.max_targets, decisions.lookback_seconds, clock)
        store_metrics = StoreMetrics(self.registry)
        self.writer = self._writer(store_metrics)
        self.checkpointer = Checkpointer(
            self.database, storage.checkpoint_wal_mib * 1024 * 1024, store_metrics
        )
        self.workers = WorkerPool(0 if config.assembler.native else config.workers.processes)
        rules_metrics = RulesMetrics(self.registry)
        self.packs = PackRegistry(config.rules, self.database, self.writer, rules_metrics, clock)
        target_metrics = TargetMetrics(self.registry, self.target_cap)
        self.inventory = McpInventory(self.registry, self.database, self.writer, clock)
        self.evaluation = Evaluation(
            self.packs, EvaluatorHealth(clock), rules_metrics, target_metrics, self.inventory
        )
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
        self.drift, self.judges, self.evaluations, self.events_out = self._beside(config)
        self.sessions = self._sessions(rules_metrics)
        receiver_metrics = ReceiverMetrics(self.registry)
        # asked before every trace export, read at most every LAG_READ_SECONDS
        lag = Sampled(self._assembly_lag, LAG_READ_SECONDS)
        self.ingest = Ingest(self.writer, config.ingest, config.limits, receiver_metrics, lag)
        self.notifier, self.decisions = self._decisions(config, receiver_metrics)
        self.writer.on_commit = self._commit_hook()
        auth = BearerAuth([t.get_secret_value() for t in config.auth.secrets], config.auth.names)
        grace = config.shutdown_timeout_seconds
        self.guard = guard_for(self) if config.guard.enabled else None
        self.grpc, self.http = otlp_listeners(
            self.config, auth, self.ingest, receiver_metrics, grace, self.guard
        )
        self.exporter, self.retention = self._store_upkeep(config)
        self.admin = self._admin(auth, grace)
        self._started = self._stopped = False
        self._watch_the_store()

    def _commit_hook(self) -> CommitHook:
        """Each commit handed on: spans to assembly; runs and results to the stages after it
        (closed runs are the sessions' new turns; new failing results wake the decision round
        early; stored runs wake the judges)."""
        return fan_out(
            self.assembler.consume,
            self.sessions.consume,
            self.decisions.consume,
            self.events_out.consume,
            self.judges.consume,
            self.evaluations.consume,
        )

    def _writer(self, metrics: StoreMetrics) -> Writer:
        config, storage = self.config.writer, self.config.storage
        mib = 1024 * 1024
        journal = (
            Journal(storage.data_dir / "journal", config.journal_segment_mib * mib)
            if config.journal
            else None
        )
        return Writer(self.database, config, metrics, clock=self.clock, journal=journal)

    def _assembly_lag(self) -> float:
        """How far assembly is behind, when it runs (off, spans are only stored)."""
        if not self.config.assembler.enabled:
            return 0.0
        return self.assembler.live_lag(self.writer.queued_rows(), self.writer.load_wait())

    def _admin(self, auth: BearerAuth, grace: float) -> AdminServer:
        """The admin server with every route group, the console's login in front of its pages."""
        admin, settled, peers = self.config.admin, self.writer.settled, self.config.cluster.peers
        throttle = FailedLogins.configured(admin, self.clock.monotonic, self.registry)
        self.console = console = ConsoleAccess(admin, auth, self.clock.monotonic, throttle)
        return AdminServer(
            admin,
            admin_routes(self),
            auth,
            grace,
            console,
            settled,
            throttle,
            peers,
            not_found=not_found_page,
        )

    def _watch_the_store(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self.invalidated = ""  # why the store gave up; the process exits for a restart
        self.failed: asyncio.Event | None = None
        self.writer.on_invalidated = self._store_invalidated

    def _store_invalidated(self, why: str) -> None:
        """From the writer's thread: stop taking data and end the process, whose supervisor
        opens the store again (DuckDB replays its WAL; nothing acknowledged is lost)."""
        if not self.invalidated:
            log.critical("store invalidated, exiting so that it is reopened: %s", why)
        self.invalidated = why
        if self.failed is not None and self._loop is not None:
            self._loop.call_soon_threadsafe(self.failed.set)

    def _beside(
        self, config: SextantConfig
    ) -> tuple[DriftScheduler, JudgeStage, EvaluationEvents, EvaluationExport]:
        """The stages that read the store beside the pipeline: window rules, judges, and
        evaluation events in (from other evaluators) and out (to an OTLP endpoint)."""
        drift = DriftScheduler(
            config.drift,
            self.database,
            self.writer,
            self.packs,
            DriftMetrics(self.registry, self.target_cap),
            self.clock,
            (other_peers(config.cluster.peers, config.cluster.replica), self.peer_token),
        )
        judges = JudgeStage(
            config.judges,
            self.database,
            self.writer,
            self.packs,
            PriceTable.load({k: v.model_dump() for k, v in config.pricing.models.items()}),
            JudgeMetrics(self.registry),
            self.clock,
        )
        event_metrics = EventMetrics(self.registry)
        events = EvaluationEvents(
            config.judges, self.database, self.writer, self.packs, event_metrics, self.clock
        )
        out = EvaluationExport(config.evaluation_events, self.database, event_metrics)
        return drift, judges, events, out

    def _sessions(self, rules: RulesMetrics) -> SessionStage:
        metrics, config = SessionMetrics(self.registry), self.config.sessions
        return SessionStage(
            config, self.database, self.writer, self.packs, metrics, rules, self.clock
        )

    def _decisions(
        self, config: SextantConfig, receiver_metrics: ReceiverMetrics
    ) -> tuple[Notifier, DecisionEngine]:
        """The decision engine, fed coverage by the stages that count it, and its notifier."""
        notifier = Notifier(
            config.alerts, self.writer, AlertMetrics(self.registry), self.admin_url, self.clock
        )
        engine = DecisionEngine(
            config.decisions,
            self.database,
            self.writer,
            self.packs,
            DecisionMetrics(self.registry),
            self.clock,
            Coverage(
                rejected_spans=lambda: self.ingest.rejected_by_service("traces"),
                eval_backlog=lambda: self.assembler.backlog(config.decisions.max_eval_backlog + 1),
            ),
            notifier,
        )
        self.registry.register(DecisionCollector(engine.snapshot, self.target_cap))
        self.registry.register(ReviewBacklogCollector(lambda: engine.snapshot().review, self.clock))
        return notifier, engine

    def _store_upkeep(
        self, config: SextantConfig
    ) -> tuple[ParquetExporter | None, Retention | None]:
        """The optional Parquet export and retention, from `export` and `storage.retention`."""
        export, retention = config.export, config.storage.retention
        exporter = cleaner = None
        if export.parquet_dir is not None:
            exporter = ParquetExporter(
                self.database, export.parquet_dir, export.interval_seconds, self.clock
            )
        if retention.age is not None:
            first = exporter.export if exporter and retention.export_first else None
            cleaner = Retention(
                self.database,
                retention.age,
                retention.check_seconds,
                RetentionMetrics(self.registry),
                (lambda cutoff: first(until=cutoff)) if first else None,
                self.clock,
                whole_days=retention.days is not None,
            )
        return exporter, cleaner

    def stages(self) -> list[Stage]:
        """The threaded stages in start order (shutdown runs the other way)."""
        # The exporter stops before retention: its shutdown interrupts the export retention
        # may be running, so retention's stop does not wait for a whole export.
        upkeep = [x for x in (self.retention, self.exporter) if x is not None]
        return [
            self.writer,
            self.checkpointer,
            self.ingest,
            self.workers,
            self.packs,
            self.inventory,
            self.assembler,
            self.drift,
            self.judges,
            self.sessions,
            self.evaluations,
            self.events_out,
            self.notifier,
            self.decisions,
            *upkeep,
        ]

    def admin_url(self) -> str:
        host = self.config.admin.host_port[0]
        host = "127.0.0.1" if host in ("0.0.0.0", "::", "") else host
        scheme = "https" if self.config.admin.tls else "http"
        return f"{scheme}://{host}:{self.admin.port}"

    def not_ready_reason(self) -> str | None:
        if not self._started:
            return "starting"
        if self._stopped:
            return "shutting down"
        if self.invalidated:
            return f"store invalidated ({self.invalidated}); exiting for a restart"
        if not self.writer.alive:
            return "store writer is not running"
        if self.writer.failing:
            return f"store cannot commit: {self.writer.failing}"
        return None

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self.failed = asyncio.Event()
        start_arrow_threads()  # named for per-thread CPU, before any stage's thread uses it
        try:
            self.database.open()
            for stage in self.stages():
                await asyncio.to_thread(stage.start)
            await self._replay_journal()
            if self.guard is not None:  # the runs open before the stop are in flight
                await asyncio.to_thread(self.guard.recover)
            for edge in (self.admin, self.grpc, self.http):
                await edge.start()
        except BaseException:
            await self.shutdown()
            raise
        self._started = True
        cfg = self.config
        log.info("OTLP/gRPC listening on %s:%d", cfg.grpc.host_port[0], self.grpc.port)
        log.info("OTLP/HTTP listening on %s:%d", cfg.http.host_port[0], self.http.port)
        log.info("admin listening on %s:%d", cfg.admin.host_port[0], self.admin.port)
        log.info("%s", self.console.where(self.admin.port))
        log.info("store %s", self.database.path)

    async def _replay_journal(self) -> None:
        """Loads what the last run acknowledged but had not loaded (it crashed), before any
        receiver takes new requests; the stages are running, so those spans are assembled."""
        started = time.monotonic()
        rows = await asyncio.to_thread(self.writer.replay, decode_journaled)
        if rows:
            log.info(
                "loaded %d rows acknowledged before the last stop from the journal in %.1f s",
                rows,
                time.monotonic() - started,
            )

    async def shutdown(self) -> None:
        """Drain in-flight requests, flush the writer, close DuckDB; safe to call twice.

        The receivers stop first so no request is accepted that cannot be committed; the
        writer flushes after every stage that writes; the admin API answers to the end."""
        if self._stopped:
            return
        self._stopped = True
        deadline = deadline_in(self.config.shutdown_timeout_seconds)
        # Each step runs even if an earlier one failed: the flush and the close must happen.
        steps: list[Callable[[], Awaitable[object]]] = [
            lambda: asyncio.gather(self.grpc.shutdown(deadline), self.http.shutdown(deadline)),
            *([self.guard.shutdown] if self.guard is not None else []),  # before the writer
            *[
                (lambda stage=stage: asyncio.to_thread(stage.shutdown, deadline))
                for stage in reversed(self.stages())
            ],
            lambda: self.admin.shutdown(deadline),
        ]
        for step in steps:
            try:
                await step()
            except Exception:
                log.exception("error while shutting down; carrying on")
        busy = [t for stage in self.stages() for t in stage.threads() if t.is_alive()]
        if busy:
            # Closing under a thread that still uses the connection could corrupt the store;
            # DuckDB replays its WAL on the next start instead.
            log.error("not closing the store: %s still running", ", ".join(t.name for t in busy))
            return
        self.database.close()
        log.info("stopped; store closed cleanly")
