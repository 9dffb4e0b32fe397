"""The store's self-metrics: the writer's queue and commits, the journal, checkpoints, and the
size of the files on disk."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from collector.telemetry import LATENCY_BUCKETS, ROW_BUCKETS


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
            "Spans not stored because the same trace_id and span_id was already stored (a"
            " re-sent span, within sextant_store_resent_window_seconds).",
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
        self._resent(registry)
        self._journal(registry)

    def _resent(self, registry: CollectorRegistry) -> None:
        self.resent_window = Gauge(
            "sextant_store_resent_window_seconds",
            "How far back the writer recognises a re-sent span now: writer.resent_window_seconds"
            " at least, less when writer.resent_max_keys keys filled sooner, and the time since"
            " the start while it is shorter.",
            registry=registry,
        )
        self.resent_keys = Gauge(
            "sextant_store_resent_keys",
            "Span keys the writer remembers to recognise a re-sent span.",
            registry=registry,
        )

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
