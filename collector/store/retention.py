"""Retention: spans, logs, trajectories, steps and sessions (by their last turn) older than an
age are deleted, whole days of them (exported to Parquet first when asked) or to the moment,
then the store is checkpointed, with vacuum, to give the space back."""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime, timedelta

from prometheus_client import CollectorRegistry, Counter

from collector.clock import Clock, SystemClock
from collector.store.database import VACUUM_OFF, VACUUM_ON, Database
from collector.store.export import DATE_COLUMNS, start_of_day
from collector.store.reader import Interrupted
from collector.ticker import Ticker, TickingStage

log = logging.getLogger(__name__)

# Results, decisions, alerts and rule pack versions are the audit trail: they are kept.
EXPIRING = ("spans", "logs", "trajectories", "steps", "sessions")


class RetentionMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.deleted = Counter(
            "sextant_store_retention_deleted_rows",
            "Rows deleted by storage.retention, by table.",
            ["table"],
            registry=registry,
        )


class Retention(TickingStage):
    """Deletes by the same date column the export partitions by: a whole day at a time when
    the age is in days, so an export taken before a deletion holds complete days; otherwise
    everything older than the age (a store kept to hours, whose size the age bounds)."""

    def __init__(
        self,
        database: Database,
        age: timedelta,
        interval: float,
        metrics: RetentionMetrics,
        export: Callable[[datetime], object] | None = None,
        clock: Clock | None = None,
        whole_days: bool = True,
    ) -> None:
        self.database = database
        self.age = age
        self.whole_days = whole_days
        self.metrics = metrics
        self.export = export
        self.clock = clock or SystemClock()
        self.ticker = Ticker("sextant-retention", interval, self.run)

    def cutoff(self) -> datetime:
        oldest = self.clock.now() - self.age
        return start_of_day(oldest) if self.whole_days else oldest

    def run(self) -> dict[str, int]:
        cutoff = self.cutoff()
        if self.export is not None:
            try:
                self.export(cutoff)  # raises on failure: nothing is deleted unexported
            except Interrupted:
                log.info("retention skipped: its export was interrupted by shutdown")
                return {}
        deleted: dict[str, int] = {}
        cursor = self.database.cursor()
        try:
            for table in EXPIRING:
                row = cursor.execute(
                    f"DELETE FROM {table} WHERE {DATE_COLUMNS[table]} < ?", [cutoff]
                ).fetchone()
                deleted[table] = int(row[0]) if row else 0
                self.metrics.deleted.labels(table).inc(deleted[table])
            if any(deleted.values()):
                # Vacuum merges what is left of the row groups rows were deleted from, giving
                # their space back; the background checkpoints run without it (database.py).
                cursor.execute(f"SET max_vacuum_tasks = {VACUUM_ON}")
                try:
                    cursor.execute("CHECKPOINT")
                finally:
                    cursor.execute(f"SET max_vacuum_tasks = {VACUUM_OFF}")
        finally:
            cursor.close()
        if any(deleted.values()):
            older = cutoff.date() if self.whole_days else cutoff.isoformat(sep=" ")
            log.info("retention: deleted rows older than %s: %s", older, deleted)
        return deleted
