"""The assembler stage: learns of stored spans, closes traces when due, stores trajectories."""

from __future__ import annotations

import logging
import threading
import time
from datetime import datetime
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from collector.assembler import read_back
from collector.assembler.buffers import OpenTrace, TraceBuffers
from collector.assembler.dispatch import Dispatch
from collector.assembler.held import HeldRuns, HeldSpans, RunSoFar, rows_of
from collector.assembler.metrics import AssemblerMetrics
from collector.assembler.pace import Pace
from collector.assembler.rounds import EvaluationStage, Round, count_stored
from collector.assembler.spans import REMOTE_PARENT
from collector.assembler.work import Closing, merged_tables
from collector.clock import Clock, SystemClock
from collector.config.sections import AssemblerConfig
from collector.store.database import Database
from collector.store.maybe_stored import MaybeStored
from collector.store.writer import STORE_TIMEOUT_SECONDS, Writer
from collector.ticker import Ticker, TickingStage
from collector.workers import WorkerPool

log = logging.getLogger(__name__)

MIN_PAUSE_SECONDS = 0.005


class Assembler(TickingStage):
    """Keeps a small record per open trace and builds each trajectory when it closes.

    The writer's commit hook hands it each committed batch; an open trace's spans are taken
    from the batches it arrived in (collector/assembler/held.py), so closing a trace does not
    read back what was just written. The store is read only for what memory does not hold:
    traces open at a restart, late spans of a trace that had closed (its rebuild needs every
    span), traces whose batches were let go past `max_held_mib`, and traces closed at a bound.
    Building runs where `Dispatch` puts it (collector/assembler/dispatch.py): natively in the
    collector's threads without the GIL, or in the worker processes.

    With a backlog, the next round is read and built while the one before commits (a commit
    waits on the writer about as long as a build takes); rounds are stored in order.
    """

    def __init__(
        self,
        config: AssemblerConfig,
        database: Database,
        writer: Writer,
        workers: WorkerPool,
        price_overrides: dict[str, Any],
        metrics: AssemblerMetrics,
        clock: Clock | None = None,
        evaluation: EvaluationStage | None = None,
    ) -> None:
        self.evaluation = evaluation
        self.config = config
        self.database = database
        self.writer = writer
        self.dispatch = Dispatch(config, workers, price_overrides)
        self.metrics = metrics
        self.clock = clock or SystemClock()
        self._buffers = TraceBuffers(config)
        self._held = HeldSpans(config.max_held_mib * 1024 * 1024)
        self._runs = HeldRuns()  # the rows of the runs a runtime guard asks about
        self._stored_runs: MaybeStored[str] = MaybeStored()  # traces that may have a revision
        self._recovered = 0  # traces recovered at the start not closed yet
        self._bounded: list[tuple[OpenTrace, str]] = []  # closed by a bound, stored next tick
        self._lock = threading.Lock()
        self.ticker = Ticker("sextant-assembler", self._pause, self.tick)
        self._last_error = ""
        self._rounds: list[Round] = []  # taken and not yet stored: building, committing
        self._last_stored = 0.0  # perf_counter when the last round was stored
        self._pace = Pace(self.dispatch.width, self.dispatch.in_threads)
        metrics.lag.set_function(self.lag)
        metrics.pending.set_function(self.pending)
        metrics.held_bytes.set_function(lambda: self._held.bytes)
        metrics.stored_runs_bytes.set_function(lambda: self._stored_runs.bytes)
        metrics.expected_lag.set_function(self.expected_lag)

    def consume(self, tables: dict[str, pa.Table], received_at: datetime) -> None:
        """Commit hook: hold the batch for its traces, note which traces got spans (runs in
        the writer thread, so stays cheap)."""
        spans = tables.get("spans")
        if spans is None or not spans.num_rows or not self.config.enabled:
            return
        # A root has no parent, or a parent in another service (OTLP remote-parent flags).
        remote = pc.equal(pc.bit_wise_and(spans["flags"], REMOTE_PARENT), REMOTE_PARENT)
        root = pc.or_(pc.is_null(spans["parent_span_id"]), remote)
        per_trace = (
            pa.table({"t": spans["trace_id"], "root": root})
            .group_by("t")
            .aggregate([("root", "any"), ("t", "count")])
        )
        now = self.clock.monotonic()
        trace_ids = per_trace["t"].to_pylist()
        with self._lock:
            self.metrics.spans.inc(spans.num_rows)
            batch = self._held.add(spans, received_at, trace_ids)
            for trace_id, root, count in zip(
                trace_ids,
                per_trace["root_any"].to_pylist(),
                per_trace["t_count"].to_pylist(),
                strict=True,
            ):
                closing = self._buffers.add(trace_id, count, root, received_at, now, batch)
                self._bounded.extend(closing)
            self._spill()
            self.metrics.open_traces.set(len(self._buffers))

    def _spill(self) -> None:
        """Past the memory cap, let the oldest batches go; their open traces will be read
        back from the store when they close."""
        for batch in self._held.over_cap():
            for trace_id in self._held.drop(batch):
                self._runs.forget(trace_id)  # its rows kept for the guard go with the batch
                trace = self._buffers.get(trace_id)
                if trace is not None and trace.read_back is None:
                    trace.read_back = "spilled"

    def held_run(self, trace_id: str) -> RunSoFar | None:
        """One open trace's stored spans so far, each once (for the runtime guard), when memory
        holds them all; None when the store must be read (closed, recovered or spilled)."""
        with self._lock:
            trace = self._buffers.get(trace_id)
            if trace is None or trace.read_back is not None:
                return None
            run, start, unread = self._runs.unread(trace_id, trace, trace.batches)
            parts = self._held.held(unread)
        return None if parts is None else self._runs.read(trace_id, run, start, parts)

    def run_so_far(self, trace_id: str) -> list[dict[str, Any]]:
        """The spans stored so far of one trace, each once, as rows: from memory when it
        holds them, else from the store. Empty when none is stored."""
        held = self.held_run(trace_id)
        if held is not None:
            return held.as_list()
        return read_back.run_from_store(self.database, trace_id, self.config.max_spans_per_trace)

    def backlog(self, limit: int = 1_000_000) -> int:
        """Traces overdue for assembly and evaluation (bounded count, for coverage decisions)."""
        with self._lock:
            return len(self._bounded) + self._buffers.overdue(self.clock.monotonic(), limit)

    def pending(self) -> int:
        """Traces whose latest spans have no stored trajectory yet (at scrape time): open,
        closing at a bound, or in the round in progress. With the spans noted so far
        (`sextant_assembler_spans_total`), it says when everything stored has been assembled
        and evaluated, without a query on the store."""
        with self._lock:
            in_rounds = sum(len(r.due) for r in self._rounds)
            return len(self._buffers) + len(self._bounded) + in_rounds

    def lag(self) -> float:
        """Seconds the longest-waiting due trace has waited past its close time (at scrape
        time); a round in progress counts from its start until it is stored, its traces being
        due then."""
        now = self.clock.monotonic()
        with self._lock:
            since = [r.since for r in self._rounds]
            if (late := self._buffers.late_since(now)) is not None:
                since.append(late)
        return max(0.0, now - min(since)) if since else 0.0

    def expected_lag(self, coming: int = 0) -> float:
        """How long past its close time the last span held now (and `coming` more, on their
        way) will wait, at the pace of the latest rounds (collector/assembler/pace.py)."""
        with self._lock:
            held = self._buffers.spans + sum(r.spans for r in self._rounds) + coming
            held += sum(trace.spans for trace, _ in self._bounded)
            return self._pace.expected_lag(held, self.config.quiet_period_seconds)

    def live_lag(self, coming: int = 0, loading: float = 0.0) -> float:
        """How far behind the traffic arriving now is, or will be once the spans held (and
        `coming`, acknowledged and not yet loaded) are due: the more of the lag and the
        expected lag, plus `loading`, how long acknowledged spans have been waiting for their
        load (the spans acknowledged now close that much later than their quiet period says,
        and still wait for their round then). 0 while traces recovered at the start are still
        being worked off (they are not late because of it, and refusing new spans would not
        make them sooner)."""
        with self._lock:
            recovering = self._recovered > 0
        return 0.0 if recovering else max(self.lag(), self.expected_lag(coming)) + loading

    def recover(self) -> int:
        """Reopen, from the store, every trace whose spans no trajectory covers yet, and
        remember the traces that closed last with their root (as the running process does)."""
        cursor = self.database.cursor()
        try:
            traces = read_back.unclosed_traces(cursor, self.clock)
            rooted = read_back.recently_rooted(cursor, self.config.max_open_traces)
            self._stored_runs.load_behind(self.database, read_back.STORED_TRACES)
        finally:
            cursor.close()
        with self._lock:
            self._recovered += len(traces)
            self._buffers.remember_rooted(rooted)
            self._buffers.restore(traces)
            self.metrics.open_traces.set(len(self._buffers))
        return len(traces)

    def start(self) -> None:
        if not self.config.enabled:
            log.info("assembly is off (assembler.enabled): spans are stored, not assembled")
            return
        recovered = self.recover()
        if recovered:
            log.info("recovered %d open traces from the store", recovered)
        self.dispatch.start()
        super().start()  # on shutdown, open traces stay in the store, recovered on next start

    def shutdown(self, deadline: float) -> None:
        super().shutdown(deadline)
        self.dispatch.shutdown()

    def _pause(self) -> float:
        """Until the next trace may close, at most tick_seconds (new traces may come sooner)."""
        with self._lock:
            due = self._buffers.next_due()
            if self._bounded:
                return MIN_PAUSE_SECONDS
        if due is None:
            return self.config.tick_seconds
        wait = due - self.clock.monotonic()
        return min(self.config.tick_seconds, max(MIN_PAUSE_SECONDS, wait))

    def tick(self) -> int:
        """Close the traces due now and store their trajectories; returns how many were stored.
        While rounds are full, the next is built while the one before commits; returns once the
        last is stored (or failed: its traces go back and are retried on the next tick)."""
        stored = 0
        committing: Round | None = None
        try:
            while True:
                current = self._take()
                if current is None:
                    break
                if committing is not None and committing.trace_ids & current.trace_ids:
                    # late spans of a trace still committing: its revision must be read after
                    stored += self._stored(committing)
                    committing = None
                try:
                    self._build(current)
                except Exception as exc:
                    self._failed(current, exc)
                    break
                if committing is not None:  # stored in order, one round at a time
                    stored += self._stored(committing)
                    committing = None
                if not self._commit(current):
                    break
                committing = current
                if not current.full or self.ticker.stopping.is_set():
                    break
        finally:
            if committing is not None:
                stored += self._stored(committing)
        return stored

    def _take(self) -> Round | None:
        """The traces due now, as a round (counted as in progress from here); None if none."""
        with self._lock:
            room = max(0, self.config.max_round_traces - len(self._bounded))
            due = self._bounded + self._buffers.due(self.clock.monotonic(), room)
            self._bounded = []
            if not due:
                return None
            full = len(due) >= self.config.max_round_traces
            current = Round(due, self.clock.monotonic(), time.perf_counter(), full)
            self._rounds.append(current)
            return current

    def _failed(self, current: Round, exc: BaseException) -> None:
        """A round not stored: its traces go back and are retried on the next tick."""
        with self._lock:
            self._rounds.remove(current)
            self._buffers.restore([trace for trace, _ in current.due])
        self.metrics.errors.inc()
        if str(exc) != self._last_error:
            log.warning("assembly failed, retrying next tick: %s", exc)
            self._last_error = str(exc)

    def _build(self, current: Round) -> None:
        """Read the round's spans and previous revisions, and build and evaluate it."""
        due = current.due
        previous, spans = self._spans_of(due)
        closing = [
            Closing(
                trace.trace_id,
                reason,
                previous.get(trace.trace_id, (0,))[0] + 1,
                previous.get(trace.trace_id, (0, None, None))[2],
            )
            for trace, reason in due
        ]
        evaluator = self.evaluation.evaluator() if self.evaluation else None
        current.builds = self.dispatch.build_round(spans, closing, evaluator, self.clock.now())
        for built in current.builds:
            for error in built.build_errors:
                self.metrics.build_errors.inc()
                log.warning("trajectory stored as incomplete (build_error): %s", error)

    def _commit(self, current: Round) -> bool:
        """Queue the round's rows for commit; False (the round failed) if they cannot be."""
        if not any(built.closed for built in current.builds):
            return True
        try:
            # A full queue is waited out: building the round again next tick would cost the
            # workers its whole work while ingest is what fills the queue.
            self._stored_runs.add([trace.trace_id for trace, _ in current.due])  # before commit
            current.stored = self.writer.queue_record(
                merged_tables(current.builds), self.ticker.stopping
            )
        except Exception as exc:
            self._failed(current, exc)
            return False
        return True

    def _stored(self, current: Round) -> int:
        """Wait for the round's commit; then its batches may go, and it is counted. The
        traces it stored (0 if its commit failed: they go back for the next tick)."""
        try:
            if current.stored is not None:
                current.stored.result(STORE_TIMEOUT_SECONDS)
        except Exception as exc:
            self._failed(current, exc)
            return 0
        self._last_error = ""
        now = time.perf_counter()
        # Its share of the time: from its start, or from when the round before it was stored
        # if it was built while that one committed.
        seconds = now - max(current.started, self._last_stored)
        self._last_stored = now
        with self._lock:  # stored: the batches these traces waited for may go
            self._rounds.remove(current)
            for trace, _ in current.due:
                self._held.release(trace.trace_id, trace.batches)
                self._runs.forget(trace.trace_id)
                self._recovered -= trace.read_back == "recovered"
            self._pace.record(current.spans, seconds)
            self.metrics.open_traces.set(len(self._buffers))
        last_seen = {trace.trace_id: trace.last_seen for trace, _ in current.due}
        for built in current.builds:
            count_stored(built, last_seen, self.clock.monotonic(), self.metrics, self.evaluation)
        self.metrics.round_duration.observe(now - current.started)
        return len(current.due)

    def _spans_of(
        self, due: list[tuple[OpenTrace, str]]
    ) -> tuple[dict[str, tuple[Any, ...]], pa.Table]:
        """The previous revision of each closing trace (revision, first and last received),
        and the round's spans: from the batches held in memory where they are all there, else
        read back from the store."""
        trace_ids = [trace.trace_id for trace, _ in due]
        cursor = self.database.cursor()
        try:
            # One snapshot: the revisions and the spans they are rebuilt from agree.
            cursor.execute("BEGIN TRANSACTION")
            asked = self._stored_runs.maybe_stored(trace_ids)  # the others have no revision
            previous = read_back.previous_revisions(cursor, asked)
            with self._lock:
                held = {
                    trace.trace_id: trace.batches
                    for trace, reason in due
                    if self._from_memory(trace, reason, previous)
                }
                parts = self._held.parts(held)
            stored = [(trace, reason) for trace, reason in due if trace.trace_id not in held]
            limit = self.config.max_spans_per_trace
            read = read_back.spans_from_store(cursor, stored, previous, limit) if stored else None
        finally:
            cursor.close()  # closing ends the read transaction
        taken = rows_of(parts)
        if taken is None or read is None:  # one of them is there: the round is not empty
            return previous, taken if read is None else read
        return previous, pa.concat_tables([taken, read.cast(taken.schema)])

    def _from_memory(self, trace: OpenTrace, reason: str, previous: dict[str, Any]) -> bool:
        """Whether a closing trace is built from the batches held for it; if not, counts why
        it is read back from the store."""
        why = (
            "bound"
            if reason == "incomplete_bound"  # built from its first spans by arrival
            else "late"
            if trace.trace_id in previous  # a rebuild needs the spans of every revision
            else trace.read_back
            if trace.read_back is not None
            else None
            if self._held.holds(trace.batches)
            else "spilled"
        )
        if why is not None:
            self.metrics.read_back.labels(why).inc()
        return why is None
