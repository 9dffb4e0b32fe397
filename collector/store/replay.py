"""Loading again what a previous run acknowledged (journaled) but had not loaded into DuckDB."""

from __future__ import annotations

import concurrent.futures
from collections.abc import Callable

import pyarrow as pa

from collector.store.database import Database
from collector.store.journal import Frame, Journal
from collector.store.metrics import StoreMetrics
from collector.store.pending import Pending
from collector.store.tables import SIGNAL_TABLES
from collector.store.write_queue import WriteQueue


def open_journal(
    database: Database, journal: Journal, queue: WriteQueue, metrics: StoreMetrics
) -> list[Frame]:
    """Opens the journal after the last frame the store recorded as loaded; the frames past it,
    which a previous run acknowledged but had not loaded."""
    # On a cursor of its own: a result left unfinished on the loads' connection refuses the
    # `register` of their first commit.
    row = database.read(lambda c: c.execute("SELECT applied_seq FROM journal_state").fetchone())
    queue.progress.applied = queue.progress.acked = int(row[0]) if row else 0
    unloaded = list(journal.open(queue.progress.applied))
    metrics.journal_bytes.set(journal.bytes)
    return unloaded


def replay(
    frames: list[Frame],
    decode: Callable[[Frame], pa.Table | None],
    queue: WriteQueue,
    metrics: StoreMetrics,
) -> int:
    """Queues the frames' rows and waits for their commits; they keep their sequence numbers,
    so a crash meanwhile replays them again. Rows loaded."""
    loaded = 0
    futures: list[concurrent.futures.Future[None]] = []
    for frame in frames:
        table = decode(frame)
        if table is None:
            continue
        pending = Pending({SIGNAL_TABLES[frame.signal]: table}, concurrent.futures.Future())
        pending.seq = frame.seq
        queue.add(pending)
        futures.append(pending.future)
        loaded += pending.rows
    concurrent.futures.wait(futures)
    metrics.journal_replayed.inc(len(futures))
    return loaded
