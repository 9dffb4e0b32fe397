"""A re-sent span stored once, without a key index over every stored span.

An exporter sends a request again when it lost the answer (a timeout, a dropped connection),
and it does so within its retry budget: the OpenTelemetry Collector's exporters give up after
5 minutes by default. So the writer remembers the keys (`trace_id`, `span_id`) of the spans it
stored in a recent window, in the native extension's `SpanKeys` (64-bit hashes, 10-20 bytes a
key, two generations), and asks the store only about the few keys found there, over the rows
received within the window. A primary key on `spans` did the same for every span ever stored:
about 10 bytes of memory and 71 bytes on disk a span for as long as it is kept, and 1.7-3.9 µs
of a commit's CPU a span (docs/performance.md, "The span and step keys replaced").

A span sent again after the window is stored twice: docs/ingest.md says so, and
`sextant_store_resent_window_seconds` says how far back the window reaches now.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from collector.normalize.native import native
from collector.store.metrics import StoreMetrics

log = logging.getLogger(__name__)

KEY = ["trace_id", "span_id"]
# The keys of the rows found again, confirmed in the store (a key noted by a commit that then
# failed, or two keys sharing a hash, is not there).
STORED = (
    "SELECT DISTINCT s.trace_id, s.span_id FROM spans s"
    " JOIN (SELECT DISTINCT trace_id, span_id FROM span_keys) k USING (trace_id, span_id)"
    " WHERE s.received_at >= ?"
)


class RecentSpanKeys:
    """The keys of the spans stored within the window, for the writer's thread only."""

    def __init__(self, window_seconds: float, max_keys: int, metrics: StoreMetrics) -> None:
        self.window = timedelta(seconds=window_seconds)
        self.metrics = metrics
        self._keys = native.SpanKeys(max(max_keys // 2, 1))  # a generation's room
        self._started: datetime | None = None  # the current generation's first key
        self._since: datetime | None = None  # the older generation's first key
        self._warned = False

    def load(self, con: duckdb.DuckDBPyConnection, now: datetime) -> None:
        """At the first commit: the keys of the spans received within the window before it
        (a previous run's, whose exporters may still be retrying)."""
        self._started = self._since = now - self.window
        # A cursor of its own: the writer's connection may hold a result not fetched to its end
        with con.cursor() as cursor:
            keys = cursor.sql(
                "SELECT trace_id, span_id FROM spans WHERE received_at >= ?",
                params=[self._started],
            )
            with keys.to_arrow_reader(65_536) as reader:
                for batch in reader:
                    self._note(batch, now)
        self._measure(now)

    def new_rows(self, con: duckdb.DuckDBPyConnection, spans: pa.Table, now: datetime) -> pa.Table:
        """`spans` less the rows stored before within the window and the later copies of a
        key repeated in it; the keys noted."""
        if self._started is None:
            self.load(con, now)
        assert self._started is not None and self._since is not None
        if now - self._started >= self.window:
            self._keys.rotate()
            self._since, self._started = self._started, now
        since = self._since  # the oldest key the generations may hold, before any fills up
        found: list[int] = []
        offset = 0
        for batch in spans.select(KEY).to_batches():
            found.extend(offset + i for i in self._note(batch, now))
            offset += batch.num_rows
        self._measure(now)
        if not found:
            return spans
        con.register("span_keys", spans.select(KEY).take(found))
        try:
            stored = set(con.execute(STORED, [since]).fetchall())
        finally:
            con.unregister("span_keys")
        return spans.filter(self._kept(spans, found, stored))

    def _note(self, batch: pa.RecordBatch, now: datetime) -> list[int]:
        """The rows of `batch` whose key may have been noted before; a generation filled
        meanwhile shortens the window."""
        before = self._keys.rotations
        found = self._keys.seen(batch)
        filled = self._keys.rotations - before
        if filled:
            self._since = self._started if filled == 1 else now
            self._started = now
            if not self._warned:
                log.warning(
                    "span keys: writer.resent_max_keys filled within %.0f s, so a re-sent span"
                    " is recognised for less than writer.resent_window_seconds (%.0f s)",
                    (now - self._since).total_seconds() if self._since else 0.0,
                    self.window.total_seconds(),
                )
                self._warned = True
        return found

    @staticmethod
    def _kept(spans: pa.Table, found: list[int], stored: set[tuple[str, str]]) -> np.ndarray:
        """Which rows to store: a row found again is dropped when its key is stored, or when
        an earlier row of `spans` has it (that one is kept unless stored)."""
        keep = np.ones(spans.num_rows, dtype=bool)
        traces, span_ids = spans["trace_id"], spans["span_id"]
        pairs = zip(traces.take(found).to_pylist(), span_ids.take(found).to_pylist(), strict=True)
        again = set(pairs)
        # The rows sharing a trace with a key found again, in order: its earlier copies are
        # among them.
        near = pc.indices_nonzero(
            pc.is_in(traces, value_set=pa.array({t for t, _ in again}, pa.string()))
        )
        first: set[tuple[str, str]] = set()
        keys = zip(traces.take(near).to_pylist(), span_ids.take(near).to_pylist(), strict=True)
        for i, key in zip(near.to_numpy(), keys, strict=True):
            if key not in again:
                continue
            if key in stored or key in first:
                keep[i] = False
            else:
                first.add(key)
        return keep

    def _measure(self, now: datetime) -> None:
        current, older = self._keys.sizes()
        self.metrics.resent_keys.set(current + older)
        if self._since is not None:
            self.metrics.resent_window.set((now - self._since).total_seconds())
