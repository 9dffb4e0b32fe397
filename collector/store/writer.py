"""The single writer: a bounded queue of Arrow batches, committed together (group commit)."""

from __future__ import annotations

import concurrent.futures
import contextlib
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from datetime import datetime

import duckdb
import pyarrow as pa

from collector.clock import Clock, SystemClock
from collector.config.sections import WriterConfig
from collector.errors import Overloaded, ShuttingDown, StoreUnavailable
from collector.lifecycle import remaining
from collector.store.appender import Appender
from collector.store.database import Database
from collector.store.journal import Frame, Journal
from collector.store.pending import CommitHook, Pending, Progress, invalidated, settle
from collector.store.tables import (
    BEFORE_INSERT,
    INSERTS,
    INSERTS_IGNORING_DUPLICATES,
    SIGNAL_TABLES,
)
from collector.telemetry import StoreMetrics
from collector.threads import name_os_thread

log = logging.getLogger(__name__)

# A failed load of journaled rows is tried again after this long, doubling up to the cap.
RETRY_SECONDS = (0.05, 1.0)


class Writer:
    """Commits whatever is queued in one transaction, so concurrent requests share a commit.

    Without a journal, a request's future completes only after the COMMIT that holds its rows,
    which is what lets the receivers acknowledge a client only once its data is durable. With
    one, an export request's future completes once the journal has it on disk (the journal
    thread fsyncs the requests queued meanwhile together), and its rows are loaded behind the
    ack; the stages' own writes (trajectories, results, decisions) still complete at their
    COMMIT. A failed load of journaled rows is retried: they were acknowledged.
    """

    def __init__(
        self,
        database: Database,
        config: WriterConfig,
        metrics: StoreMetrics,
        on_commit: CommitHook | None = None,
        clock: Clock | None = None,
        journal: Journal | None = None,
    ) -> None:
        self.database = database
        self.clock = clock or SystemClock()
        self.config = config
        self.metrics = metrics
        self.on_commit = on_commit
        self.on_invalidated: Callable[[str], None] | None = None  # the store must be reopened
        self.journal = journal
        self.appender = (
            Appender(journal, metrics, self._appended, self._refused) if journal else None
        )
        self._queue: deque[Pending] = deque()  # to load, in journal order
        self._queued_rows = 0
        self._cond = threading.Condition()
        self._stopping = False
        self._incoming = 0
        self._thread: threading.Thread | None = None
        self._last_error = ""
        self._held = False  # journaled rows wait for a load to succeed again
        self._progress = Progress()
        self._unloaded: list[Frame] = []  # acknowledged by a previous run, not loaded
        self._last_received_at = datetime.min
        metrics.queue_limit.set(config.max_queue_rows)
        for reason in ("queue_full", "commit_failed", "journal_failed"):  # at 0 for increase()
            metrics.dropped.labels(reason)

    @property
    def alive(self) -> bool:
        threads = self.threads()
        return bool(threads) and all(t.is_alive() for t in threads) and not self._stopping

    @property
    def failing(self) -> str:
        """Why the last commit or journal append failed ('' once one succeeds): disk full, a
        broken store."""
        return self._last_error or (self.appender.failing if self.appender else "")

    def start(self) -> None:
        """Opens the journal, keeping the requests a previous run acknowledged but had not
        loaded for `replay`, and starts the threads."""
        if self.journal is not None:
            con = self.database.connection
            row = con.execute("SELECT applied_seq FROM journal_state").fetchone()
            self._progress.applied = self._progress.acked = int(row[0]) if row else 0
            self._unloaded = list(self.journal.open(self._progress.applied))
            self.metrics.journal_bytes.set(self.journal.bytes)
        self._thread = threading.Thread(target=self._run, name="sextant-writer", daemon=True)
        self._thread.start()
        if self.appender is not None:
            self.appender.start()

    def replay(self, decode: Callable[[Frame], pa.Table | None]) -> int:
        """Loads the requests the journal held at start and waits for their commits; they keep
        their sequence numbers, so a crash meanwhile replays them again. Rows loaded."""
        frames, self._unloaded = self._unloaded, []
        loaded = 0
        futures: list[concurrent.futures.Future[None]] = []
        for frame in frames:
            table = decode(frame)
            if table is None:
                continue
            pending = Pending({SIGNAL_TABLES[frame.signal]: table}, concurrent.futures.Future())
            pending.seq = frame.seq
            with self._cond:
                while self._queued_rows > self.config.max_queue_rows // 2 and not self._stopping:
                    self._cond.wait(0.1)  # loading is what makes room
                self._queue.append(pending)
                self._queued_rows += pending.rows
                self._progress.acked = max(self._progress.acked, frame.seq)
                self._cond.notify_all()
            futures.append(pending.future)
            loaded += pending.rows
        concurrent.futures.wait(futures)
        self.metrics.journal_replayed.inc(len(futures))
        return loaded

    def submit(
        self, table: str, data: pa.Table, request: tuple[str, str, int, bytes] | None = None
    ) -> concurrent.futures.Future[None]:
        """Queue rows; with `request` (the export as it came) and a journal, the future
        completes once the request is journaled rather than at the rows' commit."""
        return self.submit_tables({table: data}, request)

    def submit_tables(
        self,
        parts: dict[str, pa.Table],
        request: tuple[str, str, int, bytes] | None = None,
    ) -> concurrent.futures.Future[None]:
        """Queue rows for the next commit; refuses (never blocks) when the queue is full."""
        journaled = request is not None and self.appender is not None
        pending = Pending(parts, concurrent.futures.Future(), request if journaled else None)
        rows = pending.rows
        with self._cond:
            if self._stopping:
                raise ShuttingDown("Sextant is shutting down; retry against another replica")
            if journaled and self._held:
                self._cond.notify_all()  # try the held load again now rather than at its turn
                raise StoreUnavailable(f"the store cannot commit: {self._last_error}")
            if self._queued_rows and self._queued_rows + rows > self.config.max_queue_rows:
                self.metrics.dropped.labels("queue_full").inc(rows)
                error = Overloaded(
                    f"write queue full ({self._queued_rows} rows waiting); retry later"
                )
                error.retry_after_seconds = self.config.retry_after_seconds
                raise error
            self._queued_rows += rows
            self.metrics.queue_rows.set(self._queued_rows)
            if not journaled:
                self._queue.append(pending)
                self._cond.notify_all()
        if journaled and self.appender is not None:
            self.appender.put(pending)
        return pending.future

    def settled(self) -> concurrent.futures.Future[None]:
        """Completes once every request acknowledged so far is loaded into DuckDB, so a read
        after an acknowledgement sees its rows."""
        with self._cond:
            return self._progress.settled()

    @contextlib.contextmanager
    def incoming(self) -> Iterator[None]:
        """Marks a request on its way to `submit`, so a commit can wait a moment to include it
        (with a journal, no ack waits for a commit: the load lingers on its own)."""
        if self.appender is not None:
            yield
            return
        with self._cond:
            self._incoming += 1
        try:
            yield
        finally:
            with self._cond:
                self._incoming -= 1
                self._cond.notify_all()

    def shutdown(self, deadline: float) -> None:
        """Stop taking rows, commit everything queued, then return; safe to call twice."""
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        if self.appender is not None:  # what it appends still loads below
            self.appender.stop(deadline)
        if self._thread is not None:
            self._thread.join(remaining(deadline))
            if self._thread.is_alive():
                log.error("writer did not finish its last commit before the shutdown deadline")

    def threads(self) -> list[threading.Thread]:
        journal = self.appender.threads() if self.appender is not None else []
        return ([self._thread] if self._thread is not None else []) + journal

    def _appended(self, taken: list[Pending], seqs: list[int]) -> None:
        """From the journal thread: the requests are on disk; acknowledge them, load them."""
        with self._cond:
            for item, seq in zip(taken, seqs, strict=True):
                item.seq, item.request = seq, None
                self._queue.append(item)
            self._progress.acked = seqs[-1]
            self._cond.notify_all()
        for item in taken:
            settle(item.future)

    def _refused(self, taken: list[Pending], exc: OSError) -> None:
        """From the journal thread: the append failed; the clients are told to retry."""
        with self._cond:
            self._queued_rows -= sum(item.rows for item in taken)
            self._cond.notify_all()
        error = StoreUnavailable(f"the store could not take this request: {exc}")
        for item in taken:
            settle(item.future, error)

    def _take(self) -> list[Pending] | None:
        with self._cond:
            while not self._queue and not (self._stopping and not self._appending()):
                self._cond.wait(0.1 if self._stopping else None)
            if not self._queue:
                return None
            # Every commit has a fixed cost of a few milliseconds, so when more requests are being
            # decoded right now, wait (at most max_linger) to commit them together; rows already
            # acknowledged (journaled) wait longer for the same reason, load_linger at most.
            journaled = all(item.seq for item in self._queue)
            linger = self.config.load_linger_seconds if journaled else 0.0
            deadline = time.monotonic() + max(linger, self.config.max_linger_seconds)
            while (
                (self._incoming or (journaled and linger and not self._progress.waiters))
                and not self._stopping
                and self._queued_rows < self.config.max_commit_rows
                and (remaining := deadline - time.monotonic()) > 0
            ):
                self._cond.wait(remaining)
                journaled = journaled and all(item.seq for item in self._queue)
                if not journaled and not self._incoming:
                    break
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

    def _appending(self) -> bool:
        return self.appender is not None and self.appender.busy

    def _run(self) -> None:
        name_os_thread()
        retry = RETRY_SECONDS[0]
        while (taken := self._take()) is not None:
            try:
                loaded = self._commit(taken)
            except Exception as exc:  # the writer must outlive any one commit
                log.exception("unexpected error in the writer")
                self._fail(self.database.connection, taken, exc)
                loaded = False
            if loaded:
                retry = RETRY_SECONDS[0]
                continue
            with self._cond:  # journaled rows are back at the head of the queue: wait a moment
                if self._held and not self._stopping:
                    self._cond.wait(retry)
            retry = min(retry * 2, RETRY_SECONDS[1])

    def _commit(self, taken: list[Pending]) -> bool:
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
        applied = max((item.seq for item in taken), default=0)
        # Never backwards, even if the wall clock steps back: readers bound queries by it.
        received_at = max(self.clock.now(), self._last_received_at)
        self._last_received_at = received_at
        try:
            try:
                written = self._write(con, by_table, INSERTS, received_at, applied)
            except duckdb.ConstraintException:
                con.execute("ROLLBACK")
                inserts = {**INSERTS, **INSERTS_IGNORING_DUPLICATES}
                written = self._write(con, by_table, inserts, received_at, applied)
        except Exception as exc:
            self._fail(con, taken, exc)
            return False
        with self._cond:  # before the commit hooks run: /readyz and exports agree at once
            self._last_error = ""
            if applied:
                self._held = False
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
        if applied:
            self._loaded(applied)
        return True

    def _loaded(self, applied: int) -> None:
        """After a commit that loaded journal frames up to `applied`."""
        with self._cond:
            self._held = False
            ready = self._progress.loaded(applied)
        for future in ready:
            settle(future)
        if self.journal is not None:
            self.journal.release(applied)
            self.metrics.journal_bytes.set(self.journal.bytes)

    def _write(
        self,
        con: duckdb.DuckDBPyConnection,
        by_table: dict[str, pa.Table],
        inserts: dict[str, str],
        received_at: datetime,
        applied: int,
    ) -> dict[str, int]:
        """One transaction appending every table's batch, and recording the last journal frame
        it loads; rows written per table."""
        params = {"received_at": received_at}
        written: dict[str, int] = {}
        con.execute("BEGIN")
        if applied:
            con.execute("UPDATE journal_state SET applied_seq = ?", [applied])
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
        journaled = [item for item in taken if item.seq]
        others = [item for item in taken if not item.seq]
        self.metrics.dropped.labels("commit_failed").inc(sum(item.rows for item in others))
        error = StoreUnavailable("the store could not commit this request; retry later")
        for item in others:
            settle(item.future, error)
        if not journaled:
            return
        with self._cond:
            if self._stopping:  # they stay in the journal and load at the next start
                log.error("%d journaled requests are left for the next start", len(journaled))
                for item in journaled:  # a replay waiting for them stops waiting
                    settle(item.future, error)
                return
            self._queue.extendleft(reversed(journaled))  # loaded first, in journal order
            self._queued_rows += sum(item.rows for item in journaled)
            self._held = True
