"""The single writer: a bounded queue of Arrow batches, committed together (group commit)."""

from __future__ import annotations

import concurrent.futures
import contextlib
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime

import duckdb
import pyarrow as pa

from collector.clock import Clock, SystemClock
from collector.config.sections import WriterConfig
from collector.errors import Overloaded, ShuttingDown, StoreUnavailable
from collector.lifecycle import remaining
from collector.store.database import Database
from collector.store.tables import BEFORE_INSERT, INSERTS, INSERTS_IGNORING_DUPLICATES
from collector.telemetry import StoreMetrics
from collector.threads import name_os_thread

log = logging.getLogger(__name__)

# Called in the writer thread after each successful commit with what it stored and the
# `received_at` it stamped on those rows; the assembler learns about new spans this way, the
# decision engine about new failing results. It holds up the next commit: keep it cheap.
CommitHook = Callable[[dict[str, pa.Table], datetime], None]


def fan_out(*hooks: CommitHook) -> CommitHook:
    """One commit hook that hands each commit to every one of `hooks` in turn; one that raises
    is logged and the others still run."""

    def each(tables: dict[str, pa.Table], received_at: datetime) -> None:
        for hook in hooks:
            try:
                hook(tables, received_at)
            except Exception:  # a downstream failure must not stop the writer or its neighbours
                log.exception("commit hook %s failed", getattr(hook, "__qualname__", hook))

    return each


def invalidated(exc: BaseException) -> bool:
    """DuckDB gives a database up after a failure it cannot roll back (a WAL write that failed
    halfway, for one): every later statement fails until the file is opened again."""
    return isinstance(exc, duckdb.FatalException) or "invalidated" in str(exc)


def settle(future: concurrent.futures.Future[None], error: Exception | None = None) -> None:
    """Complete a request's future; one whose client gave up (cancelled) is left as it is."""
    with contextlib.suppress(concurrent.futures.InvalidStateError):
        if error is None:
            future.set_result(None)
        else:
            future.set_exception(error)


@dataclass
class Pending:
    """Rows for one or more tables that must be committed together."""

    parts: dict[str, pa.Table]
    future: concurrent.futures.Future[None]

    @property
    def rows(self) -> int:
        return sum(t.num_rows for t in self.parts.values())


class Writer:
    """Commits whatever is queued in one transaction, so concurrent requests share a commit.

    A request's future completes only after the COMMIT that holds its rows, which is what lets the
    receivers acknowledge a client only once its data is durable.
    """

    def __init__(
        self,
        database: Database,
        config: WriterConfig,
        metrics: StoreMetrics,
        on_commit: CommitHook | None = None,
        clock: Clock | None = None,
    ) -> None:
        self.database = database
        self.clock = clock or SystemClock()
        self.config = config
        self.metrics = metrics
        self.on_commit = on_commit
        self.on_invalidated: Callable[[str], None] | None = None  # the store must be reopened
        self._queue: deque[Pending] = deque()
        self._queued_rows = 0
        self._cond = threading.Condition()
        self._stopping = False
        self._incoming = 0
        self._thread: threading.Thread | None = None
        self._last_error = ""
        self._last_received_at = datetime.min
        metrics.queue_limit.set(config.max_queue_rows)
        for reason in ("queue_full", "commit_failed"):  # at 0, so `increase()` sees the first
            metrics.dropped.labels(reason)

    @property
    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive() and not self._stopping

    @property
    def failing(self) -> str:
        """Why the last commit failed ('' once one succeeds): disk full, a broken store."""
        return self._last_error

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="sextant-writer", daemon=True)
        self._thread.start()

    def submit(self, table: str, data: pa.Table) -> concurrent.futures.Future[None]:
        return self.submit_tables({table: data})

    def submit_tables(self, parts: dict[str, pa.Table]) -> concurrent.futures.Future[None]:
        """Queue rows for the next commit; refuses (never blocks) when the queue is full."""
        pending = Pending(parts, concurrent.futures.Future())
        rows = pending.rows
        with self._cond:
            if self._stopping:
                raise ShuttingDown("Sextant is shutting down; retry against another replica")
            if self._queued_rows and self._queued_rows + rows > self.config.max_queue_rows:
                self.metrics.dropped.labels("queue_full").inc(rows)
                error = Overloaded(
                    f"write queue full ({self._queued_rows} rows waiting); retry later"
                )
                error.retry_after_seconds = self.config.retry_after_seconds
                raise error
            self._queue.append(pending)
            self._queued_rows += rows
            self.metrics.queue_rows.set(self._queued_rows)
            self._cond.notify()
        return pending.future

    @contextlib.contextmanager
    def incoming(self) -> Iterator[None]:
        """Marks a request on its way to `submit`, so a commit can wait a moment to include it."""
        with self._cond:
            self._incoming += 1
        try:
            yield
        finally:
            with self._cond:
                self._incoming -= 1
                self._cond.notify()

    def shutdown(self, deadline: float) -> None:
        """Stop taking rows, commit everything queued, then return; safe to call twice."""
        with self._cond:
            self._stopping = True
            self._cond.notify()
        if self._thread is not None:
            self._thread.join(remaining(deadline))
            if self._thread.is_alive():
                log.error("writer did not finish its last commit before the shutdown deadline")

    def threads(self) -> list[threading.Thread]:
        return [self._thread] if self._thread is not None else []

    def _take(self) -> list[Pending] | None:
        with self._cond:
            while not self._queue and not self._stopping:
                self._cond.wait()
            if not self._queue:
                return None
            # Every commit has a fixed cost of a few milliseconds, so when more requests are being
            # decoded right now, wait (at most max_linger) to commit them together.
            deadline = time.monotonic() + self.config.max_linger_seconds
            while (
                self._incoming
                and not self._stopping
                and self._queued_rows < self.config.max_commit_rows
                and (remaining := deadline - time.monotonic()) > 0
            ):
                self._cond.wait(remaining)
            taken: list[Pending] = []
            rows = 0
            while self._queue and (
                not taken or rows + self._queue[0].rows <= self.config.max_commit_rows
            ):
                item = self._queue.popleft()
                rows += item.rows
                taken.append(item)
            self._queued_rows -= rows
            self.metrics.queue_rows.set(self._queued_rows)
            return taken

    def _run(self) -> None:
        name_os_thread()
        while (taken := self._take()) is not None:
            try:
                self._commit(taken)
            except Exception as exc:  # the writer must outlive any one commit
                log.exception("unexpected error in the writer")
                for item in taken:
                    settle(item.future, StoreUnavailable(f"internal writer error: {exc}"))

    def _commit(self, taken: list[Pending]) -> None:
        started = time.perf_counter()
        con = self.database.connection
        grouped: dict[str, list[pa.Table]] = {}
        for item in taken:
            for table, data in item.parts.items():
                grouped.setdefault(table, []).append(data)
        # One chunk per table: DuckDB scans an Arrow table chunk by chunk with a fixed cost
        # each, so 64 small requests in 64 chunks took three times as long to insert as the same
        # rows in one (70 ms against 21 ms for 640 rows); the copy costs far less.
        by_table = {
            table: pa.concat_tables(parts).combine_chunks() for table, parts in grouped.items()
        }
        # Never backwards, even if the wall clock steps back: readers bound queries by it.
        received_at = max(self.clock.now(), self._last_received_at)
        self._last_received_at = received_at
        try:
            try:
                written = self._write(con, by_table, INSERTS, received_at)
            except duckdb.ConstraintException:
                con.execute("ROLLBACK")
                inserts = {**INSERTS, **INSERTS_IGNORING_DUPLICATES}
                written = self._write(con, by_table, inserts, received_at)
        except Exception as exc:
            self._fail(con, taken, exc)
            return
        self._last_error = ""
        for table, count in written.items():
            self.metrics.rows_written.labels(table).inc(count)
        if "spans" in by_table:
            self.metrics.duplicates.inc(by_table["spans"].num_rows - written["spans"])
        self.metrics.commit_rows.observe(sum(item.rows for item in taken))
        self.metrics.commit_duration.observe(time.perf_counter() - started)
        if self.on_commit is not None:  # before the acks, so a reader of an ack sees its effect
            try:
                self.on_commit(by_table, received_at)
            except Exception:  # a downstream failure must not stop the writer
                log.exception("commit hook failed")
        for item in taken:
            settle(item.future)

    def _write(
        self,
        con: duckdb.DuckDBPyConnection,
        by_table: dict[str, pa.Table],
        inserts: dict[str, str],
        received_at: datetime,
    ) -> dict[str, int]:
        """One transaction appending every table's batch; rows written per table."""
        params = {"received_at": received_at}
        written: dict[str, int] = {}
        con.execute("BEGIN")
        for table, batch in by_table.items():
            # Registered by name: the store runs without external access, which also turns off
            # DuckDB's replacement scans of Python variables.
            if table in BEFORE_INSERT:
                BEFORE_INSERT[table](con, batch)
            sql = inserts[table]
            con.register("batch", batch)  # replaces the previous table's batch
            row = con.execute(sql, params if "$received_at" in sql else None).fetchone()
            written[table] = int(row[0]) if row else 0
        con.execute("COMMIT")
        con.unregister("batch")
        return written

    def _fail(self, con: duckdb.DuckDBPyConnection, taken: list[Pending], exc: Exception) -> None:
        # The transaction may already be gone; the error below is what matters.
        with contextlib.suppress(Exception):
            con.execute("ROLLBACK")
        message = f"{type(exc).__name__}: {exc}"
        if message != self._last_error:  # one log line per distinct failure, not per commit
            log.error("group commit failed, clients will retry: %s", message)
            self._last_error = message
        if invalidated(exc) and self.on_invalidated is not None:
            self.on_invalidated(message)
        self.metrics.commit_errors.inc()
        rows = sum(item.rows for item in taken)
        self.metrics.dropped.labels("commit_failed").inc(rows)
        error = StoreUnavailable("the store could not commit this request; retry later")
        for item in taken:
            settle(item.future, error)
