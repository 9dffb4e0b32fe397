"""The single writer: a bounded queue of Arrow batches, committed together (group commit)."""

from __future__ import annotations

import concurrent.futures
import logging
import threading
import time
from collections import deque
from dataclasses import dataclass
from datetime import UTC, datetime

import pyarrow as pa

from collector.config import WriterConfig
from collector.errors import Overloaded, ShuttingDown, StoreUnavailable
from collector.store.database import Database
from collector.store.schema import LOGS, SPANS, arrow_schema, insert_select
from collector.telemetry import StoreMetrics

log = logging.getLogger(__name__)

TABLES = {"spans": SPANS, "logs": LOGS}
ARROW_SCHEMAS = {name: arrow_schema(columns) for name, columns in TABLES.items()}
INSERTS = {name: insert_select(name, columns) for name, columns in TABLES.items()}


def arrow_batch(table: str, columns: dict[str, list]) -> pa.Table:
    """Column lists from the decoder as an Arrow table of the store's batch schema."""
    return pa.Table.from_pydict(columns, schema=ARROW_SCHEMAS[table])


@dataclass
class Pending:
    table: str
    data: pa.Table
    future: concurrent.futures.Future[None]


class Writer:
    """Commits whatever is queued in one transaction, so concurrent requests share a commit.

    A request's future completes only after the COMMIT that holds its rows, which is what lets the
    receivers acknowledge a client only once its data is durable.
    """

    def __init__(self, database: Database, config: WriterConfig, metrics: StoreMetrics) -> None:
        self.database = database
        self.config = config
        self.metrics = metrics
        self._queue: deque[Pending] = deque()
        self._queued_rows = 0
        self._cond = threading.Condition()
        self._stopping = False
        self._thread: threading.Thread | None = None
        self._last_error = ""
        metrics.queue_limit.set(config.max_queue_rows)

    @property
    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive() and not self._stopping

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="sextant-writer", daemon=True)
        self._thread.start()

    def submit(self, table: str, data: pa.Table) -> concurrent.futures.Future[None]:
        """Queue rows for the next commit; refuses (never blocks) when the queue is full."""
        future: concurrent.futures.Future[None] = concurrent.futures.Future()
        rows = data.num_rows
        with self._cond:
            if self._stopping:
                raise ShuttingDown("Sextant is shutting down; retry against another replica")
            if self._queued_rows and self._queued_rows + rows > self.config.max_queue_rows:
                self.metrics.dropped.labels("queue_full").inc(rows)
                raise Overloaded(
                    f"write queue full ({self._queued_rows} rows waiting); retry later"
                )
            self._queue.append(Pending(table, data, future))
            self._queued_rows += rows
            self.metrics.queue_rows.set(self._queued_rows)
            self._cond.notify()
        return future

    def shutdown(self, timeout: float) -> None:
        """Stop taking rows, commit everything queued, then return; safe to call twice."""
        with self._cond:
            self._stopping = True
            self._cond.notify()
        if self._thread is not None:
            self._thread.join(timeout)
            if self._thread.is_alive():
                log.error("writer did not finish its last commit within %.1fs", timeout)

    def _take(self) -> list[Pending] | None:
        with self._cond:
            while not self._queue and not self._stopping:
                self._cond.wait()
            if not self._queue:
                return None
            taken: list[Pending] = []
            rows = 0
            while self._queue and (
                not taken or rows + self._queue[0].data.num_rows <= (self.config.max_commit_rows)
            ):
                item = self._queue.popleft()
                rows += item.data.num_rows
                taken.append(item)
            self._queued_rows -= rows
            self.metrics.queue_rows.set(self._queued_rows)
            return taken

    def _run(self) -> None:
        while (taken := self._take()) is not None:
            self._commit(taken)

    def _commit(self, taken: list[Pending]) -> None:
        started = time.perf_counter()
        con = self.database.connection
        by_table: dict[str, list[pa.Table]] = {}
        for item in taken:
            by_table.setdefault(item.table, []).append(item.data)
        params = {"received_at": datetime.now(UTC).replace(tzinfo=None)}
        written: dict[str, int] = {}
        try:
            con.execute("BEGIN")
            for table, parts in by_table.items():
                batch = pa.concat_tables(parts)
                con.register("batch", batch)
                try:
                    row = con.execute(INSERTS[table], params).fetchone()
                finally:
                    con.unregister("batch")
                written[table] = int(row[0]) if row else 0
                if table == "spans":
                    self.metrics.duplicates.inc(batch.num_rows - written[table])
            con.execute("COMMIT")
        except Exception as exc:
            self._fail(con, taken, exc)
            return
        self._last_error = ""
        for table, count in written.items():
            self.metrics.rows_written.labels(table).inc(count)
        self.metrics.commit_rows.observe(sum(item.data.num_rows for item in taken))
        self.metrics.commit_duration.observe(time.perf_counter() - started)
        for item in taken:
            item.future.set_result(None)

    def _fail(self, con, taken: list[Pending], exc: Exception) -> None:
        try:
            con.execute("ROLLBACK")
        except Exception:  # the transaction may already be gone; the error below is what matters
            pass
        message = f"{type(exc).__name__}: {exc}"
        if message != self._last_error:  # one log line per distinct failure, not per commit
            log.error("group commit failed, clients will retry: %s", message)
            self._last_error = message
        self.metrics.commit_errors.inc()
        rows = sum(item.data.num_rows for item in taken)
        self.metrics.dropped.labels("commit_failed").inc(rows)
        error = StoreUnavailable("the store could not commit this request; retry later")
        for item in taken:
            item.future.set_exception(error)
