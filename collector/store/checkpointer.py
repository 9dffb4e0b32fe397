"""Background checkpoints: fold the WAL into the database file off the commit path."""

from __future__ import annotations

import logging
import time

import duckdb

from collector.store.database import Database
from collector.store.metrics import StoreMetrics
from collector.ticker import Ticker, TickingStage

log = logging.getLogger(__name__)

FORCE_FACTOR = 4
RETRY_WINDOW_SECONDS = 2.0
RETRY_PAUSE_SECONDS = 0.005


class Checkpointer(TickingStage):
    """Runs CHECKPOINT on its own cursor whenever the WAL passes `wal_limit_bytes`.

    Commits carry on while a checkpoint runs, so a checkpoint costs the writer little instead of
    freezing one commit (and every request in it) for the whole checkpoint.
    """

    def __init__(
        self,
        database: Database,
        wal_limit_bytes: int,
        metrics: StoreMetrics,
        interval: float = 1.0,
    ) -> None:
        self.database = database
        self.wal_limit_bytes = wal_limit_bytes
        self.metrics = metrics
        self.ticker = Ticker("sextant-checkpoint", interval, self.tick)
        self._last_error = ""

    def tick(self) -> None:
        wal = self.database.wal_bytes
        if wal < self.wal_limit_bytes:
            return
        started = time.perf_counter()
        cursor = self.database.cursor()
        try:
            self._checkpoint(cursor, force=wal > FORCE_FACTOR * self.wal_limit_bytes)
        except Exception as exc:  # retried next interval; logged once per distinct error
            if str(exc) != self._last_error:
                log.warning("background checkpoint failed, will retry: %s", exc)
                self._last_error = str(exc)
            return
        finally:
            cursor.close()
        self._last_error = ""
        self.metrics.checkpoint_duration.observe(time.perf_counter() - started)

    def _checkpoint(self, cursor: duckdb.DuckDBPyConnection, force: bool) -> None:
        """CHECKPOINT must start between two commits; under load, keep trying for a moment.

        FORCE CHECKPOINT aborts the commit in flight (its clients get a retryable error), so it is
        kept for a WAL that plain checkpoints could not shrink for a long time.
        """
        if force:
            log.warning("WAL over %dx its limit: forcing a checkpoint", FORCE_FACTOR)
            cursor.execute("FORCE CHECKPOINT")
            return
        deadline = time.monotonic() + RETRY_WINDOW_SECONDS
        while True:
            try:
                cursor.execute("CHECKPOINT")
                return
            except duckdb.Error as exc:
                busy = "transactions active" in str(exc)
                if not busy or time.monotonic() > deadline or self.ticker.stopping.is_set():
                    raise
                time.sleep(RETRY_PAUSE_SECONDS)
