"""The spans of open traces, held as the committed Arrow batches they arrived in.

The writer's commit hook hands the assembler each committed batch; rather than reading a
closing trace's spans back out of DuckDB (which cost more CPU than building it), the assembler
keeps a reference to the batch and, when the trace closes, takes its rows from the batches it
arrived in. A batch is dropped when its last open trace has closed. Past `max_bytes` the oldest
batches are let go; their traces are then read from the store when they close (counted as
spilled), which keeps memory bounded whatever the load.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from collector.assembler.spans import SPAN_FIELDS

RECEIVED_AT = pa.timestamp("us")
# A held batch this small is read into rows whole the first time a trace of it is asked for.
WHOLE_BATCH_ROWS = 64
# A larger one has its runs' rows read one by one, each row a scalar per column (about 12 µs a
# row, where a `take` of a run's rows cost 170 µs whatever the rows: Arrow's per-column cost),
# and is read whole (3.5-4 µs a row) once the rows read one by one cost as much.
ROW_AS_ROWS = 3


@dataclass(slots=True)
class HeldBatch:
    """One committed batch's span columns, when it was stored, and its traces still open."""

    table: pa.Table
    received_at: datetime
    waiting: set[str] = field(default_factory=set)
    _index: dict[str, list[int]] | None = None  # trace id -> its rows, built on first use
    _taken: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    _read: int = 0  # rows read one by one
    _columns: list[pa.ChunkedArray] = field(default_factory=list)

    def rows_of(self, trace_id: str) -> list[dict[str, Any]]:
        """One trace's rows of the batch (read-only), kept once read: a runtime guard asks
        about the same runs again and again, and a scan of the batch each time costs more."""
        taken = self._taken.get(trace_id)
        if taken is not None:
            return taken
        size = self.table.num_rows
        small = size <= WHOLE_BATCH_ROWS and self._index is None
        if small or (self._index and self._read * ROW_AS_ROWS >= size):
            whole: dict[str, list[dict[str, Any]]] = {}
            for row in self.table.to_pylist():  # one conversion: cheaper than rows one by one
                whole.setdefault(row["trace_id"], []).append(row)
            self._taken, self._index = whole, {}  # (two readers at once build the same)
            return whole.get(trace_id, [])
        if self._index is None:
            index: dict[str, list[int]] = {}
            for i, found in enumerate(self.table["trace_id"].to_pylist()):
                index.setdefault(found, []).append(i)
            # (each access of `columns` makes new column objects; set before the index)
            self._columns = self.table.columns
            self._index = index
        names, columns = self.table.column_names, self._columns
        taken = [
            dict(zip(names, [c[i].as_py() for c in columns], strict=True))
            for i in self._index.get(trace_id, ())
        ]
        self._read += len(taken)
        self._taken[trace_id] = taken
        return taken


class HeldSpans:
    """Committed span batches by id, each kept until none of its traces is open.

    Not thread-safe: the Assembler holds its lock around every call.
    """

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.bytes = 0
        self._batches: dict[int, HeldBatch] = {}  # insertion order is arrival order
        self._next = 0

    def add(self, spans: pa.Table, received_at: datetime, trace_ids: Iterable[str]) -> int:
        """Hold a committed batch for `trace_ids` (its traces that are wholly held); its id."""
        table = spans.select(list(SPAN_FIELDS))
        batch_id = self._next
        self._next += 1
        self._batches[batch_id] = HeldBatch(table, received_at, set(trace_ids))
        self.bytes += table.nbytes
        return batch_id

    def over_cap(self) -> list[int]:
        """The oldest batches to let go so that what stays fits in `max_bytes`."""
        out, freed = [], 0
        for batch_id, batch in self._batches.items():
            if self.bytes - freed <= self.max_bytes:
                break
            out.append(batch_id)
            freed += batch.table.nbytes
        return out

    def drop(self, batch_id: int) -> set[str]:
        """Let a batch go; the open traces that were waiting for it."""
        batch = self._batches.pop(batch_id)
        self.bytes -= batch.table.nbytes
        return batch.waiting

    def release(self, trace_id: str, batch_ids: Iterable[int]) -> None:
        """`trace_id` no longer needs these batches (it closed, or it is read from the store);
        a batch no open trace waits for is dropped."""
        for batch_id in batch_ids:
            batch = self._batches.get(batch_id)
            if batch is None:
                continue
            batch.waiting.discard(trace_id)
            if not batch.waiting:
                self.drop(batch_id)

    def held(self, batch_ids: list[int]) -> list[tuple[int, HeldBatch]] | None:
        """These batches with their ids, when all are still held; None when not."""
        batches = [(b, found) for b in batch_ids if (found := self._batches.get(b)) is not None]
        return batches if len(batches) == len(batch_ids) else None

    def holds(self, batch_ids: Iterable[int]) -> bool:
        return all(batch_id in self._batches for batch_id in batch_ids)

    def parts(self, wanted: dict[str, list[int]]) -> list[tuple[HeldBatch, list[str]]]:
        """The held batches the traces in `wanted` (trace id -> its batches) take rows from,
        each with those traces' ids, in arrival order (the lock is held only for this)."""
        by_batch: dict[int, list[str]] = {}
        for trace_id, batch_ids in wanted.items():
            for batch_id in batch_ids:
                by_batch.setdefault(batch_id, []).append(trace_id)
        return [(self._batches[b], by_batch[b]) for b in sorted(by_batch)]


def rows_of(parts: list[tuple[HeldBatch, list[str]]]) -> pa.Table | None:
    """The rows of the traces named in `parts` with their `received_at`, as the store would
    give them, each span once; None when there are none.

    A span sent twice (an exporter's retry) is in two batches but stored once, the first time;
    the later copies are left out here the same way."""
    tables = []
    for batch, trace_ids in parts:
        table = batch.table
        rows = table.filter(pc.is_in(table["trace_id"], pa.array(trace_ids, pa.string())))
        at = pa.repeat(pa.scalar(batch.received_at, RECEIVED_AT), rows.num_rows)
        tables.append(rows.append_column("received_at", at))
    if not tables:
        return None
    return first_of_each_span(pa.concat_tables(tables))


def first_of_each_span(spans: pa.Table) -> pa.Table:
    """`spans` with only the first row of each (trace id, span id)."""
    keyed = spans.append_column("_row", pa.array(range(spans.num_rows), pa.int64()))
    firsts = keyed.group_by(["trace_id", "span_id"], use_threads=False).aggregate([("_row", "min")])
    if firsts.num_rows == spans.num_rows:
        return spans
    return spans.take(pc.sort_indices(firsts["_row_min"]))


# Runs whose rows read so far are kept for the runtime guard: enough for the runs it is asked
# about at once; one forgotten is read again from its batches.
REMEMBERED_RUNS = 10_000


@dataclass(slots=True)
class ReadRows:
    """One open trace's rows read so far, each span once, in the order first read; `rows` only
    grows, so what a reader was handed stays as it was at the list's front."""

    trace: object  # the open trace the batches are of: one reopened or restored is another
    batches: list[int] = field(default_factory=list)  # read, in arrival order
    rows: list[dict[str, Any]] = field(default_factory=list)
    spans: set[str] = field(default_factory=set)


@dataclass(frozen=True, slots=True)
class RunSoFar:
    """A run's rows as read at one moment: the first `count` of `rows` (a list that only
    grows). A reader that kept an earlier one takes what came since as `rows[count:]` of the
    newer, without a pass over the whole run."""

    rows: list[dict[str, Any]]
    count: int

    def as_list(self) -> list[dict[str, Any]]:
        return self.rows[: self.count]


class HeldRuns:
    """The rows read so far of the runs a runtime guard asks about: asked again, a run reads
    only the batches that came since (its own earlier guard steps make a run of tens of
    batches, each read again on every call otherwise), and hands them out without copying the
    rows read before.

    A trace's batch ids grow with arrival and its list of them only grows while it is open,
    so the batches read are a prefix of that list, and held batches never change."""

    def __init__(self, capacity: int = REMEMBERED_RUNS) -> None:
        self.capacity = capacity
        self._runs: OrderedDict[str, ReadRows] = OrderedDict()
        self._lock = threading.Lock()

    def unread(
        self, trace_id: str, trace: object, batch_ids: list[int]
    ) -> tuple[ReadRows, int, list[int]]:
        """The run's rows read so far (of `trace`, the open trace `batch_ids` are of), how many
        of its batches they are, and the batches not read yet. The ids are in arrival order
        (a restored trace's merged in order), so the batches read are still a prefix of them
        when the last read is still in its place; else the run is read anew."""
        with self._lock:
            run = self._runs.get(trace_id)
            read = len(run.batches) if run is not None else 0
            if (
                run is None
                or run.trace is not trace
                or len(batch_ids) < read
                or (read and batch_ids[read - 1] != run.batches[-1])
            ):
                run, read = ReadRows(trace), 0
                self._runs[trace_id] = run
            self._runs.move_to_end(trace_id)
            while len(self._runs) > self.capacity:
                self._runs.popitem(last=False)
            return run, read, batch_ids[read:]

    def read(
        self, trace_id: str, run: ReadRows, start: int, parts: list[tuple[int, HeldBatch]]
    ) -> RunSoFar:
        """The run once `parts` (the batches `unread` named from position `start`, with their
        ids) are read; those another reader added meanwhile are not added twice."""
        taken = [(batch_id, batch.rows_of(trace_id)) for batch_id, batch in parts]
        with self._lock:
            for batch_id, rows in taken[len(run.batches) - start :]:
                run.batches.append(batch_id)
                for row in rows:
                    if row["span_id"] not in run.spans:
                        run.spans.add(row["span_id"])
                        run.rows.append(row)
            return RunSoFar(run.rows, len(run.rows))

    def forget(self, trace_id: str) -> None:
        with self._lock:
            self._runs.pop(trace_id, None)
