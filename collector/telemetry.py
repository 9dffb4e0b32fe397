"""Sextant's self-metrics, created on an injected registry so each test can read its own."""

from __future__ import annotations

import platform
from collections.abc import Iterator
from pathlib import Path

import duckdb
import prometheus_client
from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    GCCollector,
    Histogram,
    Info,
    PlatformCollector,
    ProcessCollector,
)
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

import collector
from collector.receivers.misdirected import Misdirected
from collector.targets import OVERFLOW, TARGET_LABELS, Target, TargetCap, label_values

# A `_created` series for every counter and histogram doubles what Prometheus stores and says
# only when the process started, which `process_start_time_seconds` already says. The switch is
# process-wide and read at scrape time, so it holds for every registry built after this import.
prometheus_client.disable_created_metrics()

LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)
ROW_BUCKETS = (1, 10, 100, 500, 1000, 2500, 5000, 10000, 25000, 50000, 100000)


class ReceiverMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.requests = Counter(
            "sextant_receiver_requests",
            "Export requests answered, by protocol, signal and outcome.",
            ["protocol", "signal", "status"],
            registry=registry,
        )
        self.request_duration = Histogram(
            "sextant_receiver_request_duration_seconds",
            "Time from a request's arrival to its answer (includes waiting for the journal's"
            " fsync, or for the commit without a journal).",
            ["protocol", "signal"],
            buckets=LATENCY_BUCKETS,
            registry=registry,
        )
        self.received = Counter(
            "sextant_receiver_items_received",
            "Spans or log records decoded from requests.",
            ["protocol", "signal"],
            registry=registry,
        )
        self.accepted = Counter(
            "sextant_receiver_items_accepted",
            "Spans or log records committed to the store and acknowledged.",
            ["protocol", "signal"],
            registry=registry,
        )
        self.rejected = Counter(
            "sextant_receiver_items_rejected",
            "Spans or log records rejected alone (reported in partial_success), by reason.",
            ["protocol", "signal", "reason"],
            registry=registry,
        )
        self.truncated = Counter(
            "sextant_receiver_items_truncated",
            "Spans or log records stored with at least one attribute value truncated.",
            ["signal"],
            registry=registry,
        )
        self.misdirected = Misdirected(registry)


class StoreMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.commit_duration = Histogram(
            "sextant_store_commit_duration_seconds",
            "Duration of one group commit (Arrow append and COMMIT).",
            buckets=LATENCY_BUCKETS,
            registry=registry,
        )
        self.commit_rows = Histogram(
            "sextant_store_commit_rows",
            "Rows written by one group commit.",
            buckets=ROW_BUCKETS,
            registry=registry,
        )
        self.queue_rows = Gauge(
            "sextant_store_queue_rows",
            "Rows waiting in the write queue.",
            registry=registry,
        )
        self.queue_limit = Gauge(
            "sextant_store_queue_limit_rows",
            "Capacity of the write queue in rows.",
            registry=registry,
        )
        self.dropped = Counter(
            "sextant_store_queue_dropped",
            "Rows refused by the writer, by reason; the client was told to retry.",
            ["reason"],
            registry=registry,
        )
        self.rows_written = Counter(
            "sextant_store_rows_written",
            "Rows committed, by table.",
            ["table"],
            registry=registry,
        )
        self.duplicates = Counter(
            "sextant_store_duplicate_spans",
            "Spans not stored because the same trace_id and span_id was already stored.",
            registry=registry,
        )
        self.checkpoint_duration = Histogram(
            "sextant_store_checkpoint_duration_seconds",
            "Duration of background checkpoints (WAL folded into the database file).",
            buckets=LATENCY_BUCKETS,
            registry=registry,
        )
        self.commit_errors = Counter(
            "sextant_store_commit_errors",
            "Group commits that failed; their requests were answered with a retryable error,"
            " or, journaled and so already acknowledged, are loaded again.",
            registry=registry,
        )
        self._journal(registry)

    def _journal(self, registry: CollectorRegistry) -> None:
        self.journal_bytes = Gauge(
            "sextant_store_journal_bytes",
            "Bytes in the ingest journal's segments not yet released (acknowledged requests,"
            " some not yet loaded into DuckDB).",
            registry=registry,
        )
        self.journal_sync_duration = Histogram(
            "sextant_store_journal_sync_duration_seconds",
            "Duration of one journal append and its fdatasync (the requests it acknowledges).",
            buckets=LATENCY_BUCKETS,
            registry=registry,
        )
        self.journal_errors = Counter(
            "sextant_store_journal_errors",
            "Journal appends that failed; their requests were answered with a retryable error.",
            registry=registry,
        )
        self.journal_replayed = Counter(
            "sextant_store_journal_replayed_requests",
            "Acknowledged requests loaded again from the journal at start.",
            registry=registry,
        )


class AssemblerMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.open_traces = Gauge(
            "sextant_assembler_open_traces",
            "Traces with spans but no closed trajectory yet.",
            registry=registry,
        )
        self.pending = Gauge(
            "sextant_assembler_pending_traces",
            "Traces whose latest spans have no stored trajectory (and results) yet: open,"
            " closing early at a bound, or in the round being built and stored. Read at scrape"
            " time; 0 once every trace of sextant_assembler_spans_total is assembled and"
            " evaluated.",
            registry=registry,
        )
        self.spans = Counter(
            "sextant_assembler_spans",
            "Spans of committed writes noted by the assembler (duplicates included). At or"
            ' above sextant_receiver_items_accepted{signal="traces"}, every acknowledged'
            " span has reached assembly.",
            registry=registry,
        )
        self.closed = Counter(
            "sextant_assembler_traces_closed",
            "Traces closed into a trajectory, by reason.",
            ["reason"],
            registry=registry,
        )
        self.late_spans = Counter(
            "sextant_assembler_late_spans",
            "Spans that arrived after their trace had closed (they reopen it).",
            registry=registry,
        )
        self.reopened = Counter(
            "sextant_assembler_reopened_trajectories",
            "Trajectories rebuilt with a new revision because of late spans.",
            registry=registry,
        )
        self.steps = Counter(
            "sextant_assembler_steps",
            "Steps of stored trajectories, by kind.",
            ["kind"],
            registry=registry,
        )
        self.latency = Histogram(
            "sextant_assembler_assembly_latency_seconds",
            "From the last span of a trace being stored to its trajectory being stored.",
            buckets=(
                0.1,
                0.25,
                0.5,
                1,
                2,
                3,
                4,
                5,
                5.1,
                5.2,
                5.25,
                5.3,
                5.5,
                6,
                7.5,
                10,
                30,
                60,
                300,
            ),
            registry=registry,
        )
        self.round_duration = Histogram(
            "sextant_assembler_round_duration_seconds",
            "One assembly round: load the closing traces' spans, build, store.",
            buckets=LATENCY_BUCKETS,
            registry=registry,
        )
        self.build_errors = Counter(
            "sextant_assembler_build_errors",
            "Traces whose spans could not be built into steps; stored as incomplete (build_error).",
            registry=registry,
        )
        self.lag = Gauge(
            "sextant_assembler_lag_seconds",
            "How long the trace waiting longest past its close time has waited (0: none late).",
            registry=registry,
        )
        self.errors = Counter(
            "sextant_assembler_errors",
            "Assembly rounds that failed; their traces are retried on the next tick.",
            registry=registry,
        )


class DriftMetrics:
    """Window rules: labels are pack, rule and target (never trace ids). The per-target gauges
    ask the shared target cap: a target past it has no series of its own (a latest value under
    `_overflow` would mix targets; its results are in the store), and a target that gives its
    place up loses its series."""

    def __init__(self, registry: CollectorRegistry, cap: TargetCap | None = None) -> None:
        self.cap = cap
        target = ["pack", "rule", "service", "agent", "version"]
        self.effect_size = Gauge(
            "sextant_drift_effect_size",
            "Latest effect size of a drift metric (JS distance, KS D or a rate difference).",
            [*target, "metric"],
            registry=registry,
        )
        self.p_value = Gauge(
            "sextant_drift_p_value",
            "Latest p-value of a drift metric's test.",
            [*target, "metric"],
            registry=registry,
        )
        self.pass_at_k = Gauge(
            "sextant_reliability_pass_at_k",
            "Mean pass@k over a target's cases with at least k attempts.",
            [*target, "k"],
            registry=registry,
        )
        self.pass_hat_k = Gauge(
            "sextant_reliability_pass_hat_k",
            "Mean pass^k over a target's cases with at least k attempts.",
            [*target, "k"],
            registry=registry,
        )
        self.evaluations = Counter(
            "sextant_drift_evaluations",
            "Window rule results (drift and reliability), by verdict; `error` when a rule raised.",
            ["pack", "rule", "verdict"],
            registry=registry,
        )
        self.duration = Histogram(
            "sextant_drift_evaluation_duration_seconds",
            "Time to evaluate one window rule over every target.",
            buckets=LATENCY_BUCKETS,
            registry=registry,
        )
        if cap is not None:
            cap.on_release(self.remove)

    def shown(self, target: Target) -> bool:
        """Whether `target` (service, agent, version) has its own series under the cap."""
        return self.cap is None or self.cap.shown(target) != OVERFLOW

    def remove(self, target: Target) -> None:
        match = dict(zip(TARGET_LABELS, label_values(target), strict=True))
        for gauge in (self.effect_size, self.p_value, self.pass_at_k, self.pass_hat_k):
            gauge.remove_by_labels(match)


class DecisionMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.evaluations = Counter(
            "sextant_decision_evaluations", "Decision evaluation rounds run.", registry=registry
        )
        self.wakeups = Counter(
            "sextant_decision_wakeups",
            "Commits of failing or review results that woke the decision round early.",
            registry=registry,
        )
        self.last_round = Gauge(
            "sextant_decision_last_round_timestamp_seconds",
            "When the last decision round completed (Unix time; the start time before the first).",
            registry=registry,
        )
        self.interval = Gauge(
            "sextant_decision_interval_seconds",
            "The configured decision round interval (decisions.interval_seconds).",
            registry=registry,
        )
        self.transitions = Counter(
            "sextant_decision_transitions",
            "Decision transitions recorded, by decision and event (firing, resolved, ack...).",
            ["decision", "event"],
            registry=registry,
        )


class AlertMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.sent = Counter(
            "sextant_alerts_sent",
            "Alert notifications delivered, by channel and status (firing, resolved, test).",
            ["channel", "status"],
            registry=registry,
        )
        self.failed = Counter(
            "sextant_alerts_failed_attempts",
            "Delivery attempts that failed (each retry counts), by channel.",
            ["channel"],
            registry=registry,
        )
        self.dropped = Counter(
            "sextant_alerts_dropped",
            "Notifications given up: queue full or out of attempts, by channel and why.",
            ["channel", "why"],
            registry=registry,
        )
        self.queued = Gauge(
            "sextant_alerts_queued",
            "Notifications waiting for delivery, by channel.",
            ["channel"],
            registry=registry,
        )
        self.channel_failing = Gauge(
            "sextant_alerts_channel_failing",
            "1 from a channel's failed delivery attempt until one succeeds, else 0.",
            ["channel"],
            registry=registry,
        )


def register_process_metrics(registry: CollectorRegistry, database: Path) -> None:
    """What every exporter shows: its build, the process (CPU, memory, file descriptors), the
    Python runtime and garbage collector, and here the size of the store on disk."""
    Info(
        "sextant_build", "Sextant's version and the runtime it was built on.", registry=registry
    ).info(
        {
            "version": collector.__version__,
            "python": platform.python_version(),
            "duckdb": duckdb.__version__,
        }
    )
    ProcessCollector(registry=registry)
    PlatformCollector(registry=registry)
    GCCollector(registry=registry)
    registry.register(StoreSizeCollector(database))


class StoreSizeCollector(Collector):
    """`sextant_store_size_bytes{file}`: the DuckDB file and its write-ahead log, read at scrape
    time (a stat each, no query), so a growing WAL shows before its checkpoint."""

    def __init__(self, database: Path) -> None:
        self.files = {"database": database, "wal": database.with_name(database.name + ".wal")}

    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = GaugeMetricFamily(
            "sextant_store_size_bytes",
            "Size on disk of the DuckDB store, by file (database, wal).",
            labels=["file"],
        )
        for name, path in self.files.items():
            try:
                size = path.stat().st_size
            except FileNotFoundError:
                size = 0
            family.add_metric([name], float(size))
        yield family
