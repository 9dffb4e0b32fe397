"""The writer: a bounded queue of Arrow batches, committed together (group commit) in two
lanes, the loads of exports and the stages' own writes, each a thread of its own.

The queue and its linger are in write_queue.py, one commit and its failure state in commit.py,
the journal's replay at start in replay.py; this module wires them to the threads.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterator

import pyarrow as pa

from collector.clock import Clock, SystemClock
from collector.config.writer import WriterConfig
from collector.errors import Overloaded, ShuttingDown, StoreUnavailable
from collector.lifecycle import remaining
from collector.store import replay
from collector.store.appender import Appender
from collector.store.commit import Committer
from collector.store.database import Database
from collector.store.journal import Frame, Journal
from collector.store.metrics import StoreMetrics
from collector.store.pending import CommitHook, Pending, settle
from collector.store.span_keys import RecentSpanKeys
from collector.store.tables import SIGNAL_TABLES
from collector.store.write_queue import WriteQueue
from collector.threads import name_os_thread

log = logging.getLogger(__name__)
# How long a stage waits for its rows to be committed, room in a full queue included.
STORE_TIMEOUT_SECONDS = 30.0
QUEUE_FULL_PAUSE_SECONDS = 0.05

# The tables of the exports' rows: loaded in the loads' lane, whoever writes them.
INGESTED = frozenset(SIGNAL_TABLES.values())

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

    The stages' writes are committed by a second thread on a cursor of its own, beside the
    loads (DuckDB appends to different tables in concurrent transactions), so a round's commit
    does not wait behind a load of acknowledged spans. Rows of spans and logs always go with
    the loads, whoever writes them: each table has one lane, and its rows are committed in the
    order they were inserted.
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
        self.journal = journal
        self.appender = (
            Appender(journal, metrics, self._appended, self._refused) if journal else None
        )
        self.queue = WriteQueue(config, metrics)
        keys = RecentSpanKeys(config.resent_window_seconds, config.resent_max_keys, metrics)
        self.committer = Committer(database, self.queue, metrics, self.clock, journal, keys)
        self.stages = Committer(
            database, self.queue, metrics, self.clock, None, keys, own_cursor=True
        )
        self.on_commit = on_commit
        self._thread: threading.Thread | None = None
        self._stages_thread: threading.Thread | None = None
        self._unloaded: list[Frame] = []  # acknowledged by a previous run, not loaded

    @property
    def on_commit(self) -> CommitHook | None:
        return self.committer.on_commit

    @on_commit.setter
    def on_commit(self, hook: CommitHook | None) -> None:
        """Called after each commit, from the thread of its lane."""
        self.committer.on_commit = self.stages.on_commit = hook

    @property
    def on_invalidated(self) -> Callable[[str], None] | None:
        """Called with the error when the store must be reopened."""
        return self.committer.on_invalidated

    @on_invalidated.setter
    def on_invalidated(self, hook: Callable[[str], None] | None) -> None:
        self.committer.on_invalidated = self.stages.on_invalidated = hook

    @property
    def alive(self) -> bool:
        threads = self.threads()
        return bool(threads) and all(t.is_alive() for t in threads) and not self.queue.stopping

    @property
    def failing(self) -> str:
        """Why the last commit or journal append failed ('' once one succeeds): disk full, a
        broken store. With a journal, also how much it holds: what was acknowledged and waits
        to load needs about as much space again in the store, so an SRE knows what to free."""
        why = (
            self.committer.last_error
            or self.stages.last_error
            or (self.appender.failing if self.appender else "")
        )
        if why and self.journal is not None and self.journal.bytes:
            why += (
                f" (the journal holds {self.journal.bytes / 2**20:.1f} MiB; the acknowledged"
                " requests in it not loaded yet need about as much free space again to load)"
            )
        return why

    def start(self) -> None:
        """Opens the journal, keeping the requests a previous run acknowledged but had not
        loaded for `replay`, and starts the threads."""
        if self.journal is not None:
            self._unloaded = replay.open_journal(
                self.database, self.journal, self.queue, self.metrics
            )
        self._thread = threading.Thread(target=self._run, name="sextant-writer", daemon=True)
        self._thread.start()
        self._stages_thread = threading.Thread(
            target=self._run_stages, name="sextant-writer-stages", daemon=True
        )
        self._stages_thread.start()
        if self.appender is not None:
            self.appender.start()

    def replay(self, decode: Callable[[Frame], pa.Table | None]) -> int:
        """Loads the requests the journal held at start and waits for their commits; they keep
        their sequence numbers, so a crash meanwhile replays them again. Rows loaded."""
        frames, self._unloaded = self._unloaded, []
        return replay.replay(frames, decode, self.queue, self.metrics)

    def submit(
        self, table: str, data: pa.Table, request: tuple[str, str, int, bytes] | None = None
    ) -> concurrent.futures.Future[None]:
        """Queue rows; with `request` (the export as it came) and a journal, the future
        completes once the request is journaled rather than at the rows' commit."""
        return self.submit_tables({table: data}, request)

    def fits(self, rows: int) -> bool:
        """Whether the queue would take `rows` now: requests that would each be taken alone
        are not refused together (collector/receivers/coalesce.py)."""
        return self.queue.fits(rows)

    def submit_tables(
        self,
        parts: dict[str, pa.Table],
        request: tuple[str, str, int, bytes] | None = None,
    ) -> concurrent.futures.Future[None]:
        """Queue rows for the next commit; refuses (never blocks) when the queue is full."""
        journaled = request is not None and self.appender is not None
        pending = Pending(parts, concurrent.futures.Future(), request if journaled else None)
        pending.queued_at = self.clock.monotonic()
        with self.queue.cond:
            if self.queue.stopping:
                raise ShuttingDown("Sextant is shutting down; retry against another replica")
            if journaled and self.committer.held:
                self.queue.cond.notify_all()  # try the held load again now rather than at its turn
                raise StoreUnavailable(f"the store cannot commit: {self.committer.last_error}")
            self.queue.reserve(pending.rows)
            if not journaled:  # a stage's own write (no request) has its lane
                stages = request is None and not parts.keys() & INGESTED
                self.queue.push([pending], stages=stages)
        if journaled and self.appender is not None:
            self.appender.put(pending)
        return pending.future

    def record(self, parts: dict[str, pa.Table], stopping: threading.Event | None = None) -> None:
        """Store what a stage decided and wait for the commit: the one way every stage after
        ingest writes. A full queue is waited out rather than refused (a built round or a
        decision is not thrown away because ingest filled the queue; ingest is the one
        refused), all within STORE_TIMEOUT_SECONDS; `stopping` ends the wait (shutdown: what
        was not stored is made again after the next start). Raises what the commit raised."""
        deadline = time.monotonic() + STORE_TIMEOUT_SECONDS
        future = self.queue_record(parts, stopping, deadline)
        future.result(max(0.0, deadline - time.monotonic()))

    def queue_record(
        self,
        parts: dict[str, pa.Table],
        stopping: threading.Event | None = None,
        deadline: float | None = None,
    ) -> concurrent.futures.Future[None]:
        """`record` without the wait for the commit: queued (a full queue waited out until
        `deadline`, STORE_TIMEOUT_SECONDS from now by default), the commit's future returned."""
        if deadline is None:
            deadline = time.monotonic() + STORE_TIMEOUT_SECONDS
        while True:
            try:
                return self.submit_tables(parts)
            except Overloaded:
                pause = min(QUEUE_FULL_PAUSE_SECONDS, deadline - time.monotonic())
                if pause <= 0:
                    raise
                if stopping is None:
                    time.sleep(pause)
                elif stopping.wait(pause):
                    raise

    def load_wait(self) -> float:
        """Seconds the oldest export request waiting for its load has waited (0 with none):
        its spans reach assembly, and their quiet period starts, only once loaded."""
        oldest = self.queue.oldest_export()
        return max(0.0, self.clock.monotonic() - oldest) if oldest else 0.0

    def queued_rows(self) -> int:
        """Rows waiting for a commit: the acknowledged spans not yet loaded among them."""
        return self.queue.rows

    def settled(self) -> concurrent.futures.Future[None]:
        """Completes once every request acknowledged so far is loaded into DuckDB, so a read
        after an acknowledgement sees its rows."""
        with self.queue.cond:
            future = self.queue.progress.settled()
            if not future.done():
                self.queue.cond.notify_all()  # a lingering load stops lingering for a reader
            return future

    def journal_progress(self) -> tuple[int, int]:
        """(last journal frame acknowledged, last loaded into DuckDB); (0, 0) without a
        journal, where an acknowledgement is the commit itself."""
        with self.queue.cond:
            return self.queue.progress.acked, self.queue.progress.applied

    @contextlib.contextmanager
    def incoming(self) -> Iterator[None]:
        """Marks a request on its way to `submit`, so a commit can wait a moment to include it
        (with a journal, no ack waits for a commit: the load lingers on its own)."""
        if self.appender is not None:
            yield
            return
        with self.queue.incoming():
            yield

    def shutdown(self, deadline: float) -> None:
        """Stop taking rows, commit everything queued, then return; safe to call twice."""
        self.queue.stop()
        if self.appender is not None:  # what it appends still loads below
            self.appender.stop(deadline)
        for thread in (self._thread, self._stages_thread):
            if thread is not None:
                thread.join(remaining(deadline))
                if thread.is_alive():
                    log.error("%s did not finish its last commit by the deadline", thread.name)

    def threads(self) -> list[threading.Thread]:
        journal = self.appender.threads() if self.appender is not None else []
        own = [t for t in (self._thread, self._stages_thread) if t is not None]
        return own + journal

    def _appended(self, taken: list[Pending], seqs: list[int]) -> None:
        """From the journal thread: the requests are on disk; acknowledge them, load them."""
        with self.queue.cond:
            for item, seq in zip(taken, seqs, strict=True):
                item.seq, item.request = seq, None
            self.queue.push(taken)
            self.queue.progress.acked = seqs[-1]
        for item in taken:
            settle(item.future)

    def _refused(self, taken: list[Pending], exc: OSError) -> None:
        """From the journal thread: the append failed; the clients are told to retry."""
        self.queue.release(sum(item.rows for item in taken))
        error = StoreUnavailable(f"the store could not take this request: {exc}")
        for item in taken:
            settle(item.future, error)

    def _appending(self) -> bool:
        return self.appender is not None and self.appender.busy

    def _run_stages(self) -> None:
        """The stages' lane: a failed commit has told its stage, which writes again."""
        name_os_thread()
        try:
            while (taken := self.queue.take_stages()) is not None:
                try:
                    self.stages.commit(taken)
                except Exception as exc:  # the lane must outlive any one commit
                    log.exception("unexpected error in the stages' writer")
                    self.stages.fail(taken, exc)
        finally:
            self.stages.close()

    def _run(self) -> None:
        name_os_thread()
        retry = RETRY_SECONDS[0]
        while (taken := self.queue.take(self._appending)) is not None:
            try:
                loaded = self.committer.commit(taken)
            except Exception as exc:  # the writer must outlive any one commit
                log.exception("unexpected error in the writer")
                self.committer.fail(taken, exc)
                loaded = False
            if loaded:
                retry = RETRY_SECONDS[0]
                continue
            with self.queue.cond:  # journaled rows are back at the head of the queue: wait a moment
                if self.committer.held and not self.queue.stopping:
                    self.queue.cond.wait(retry)
            retry = min(retry * 2, RETRY_SECONDS[1])
