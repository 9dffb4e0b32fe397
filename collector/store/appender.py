"""The journal thread: appends the export requests queued meanwhile, fsyncs once, hands them on.

Appends never wait for one another's turn: whatever queued while one append and its fsync ran
goes into the next, so concurrent requests share an fsync the way they share a DuckDB commit.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable

from collector.lifecycle import remaining
from collector.store.journal import Journal
from collector.store.metrics import StoreMetrics
from collector.store.pending import Pending
from collector.threads import name_os_thread

log = logging.getLogger(__name__)

# After a failed append (a full disk), how often to look for free space again, and how much is
# enough: until then `failing` says why, so /readyz sends the exporters elsewhere meanwhile.
RECHECK_SECONDS = 0.5
ROOM_BYTES = 4 * 1024 * 1024


class Appender:
    """Owns the journal's appends. `appended(items, seqs)` runs once their frames are on disk
    (the caller acknowledges and loads them), `refused(items, error)` when the append failed
    (nothing of them stays in the journal)."""

    def __init__(
        self,
        journal: Journal,
        metrics: StoreMetrics,
        appended: Callable[[list[Pending], list[int]], None],
        refused: Callable[[list[Pending], OSError], None],
    ) -> None:
        self.journal = journal
        self.metrics = metrics
        self._appended = appended
        self._refused = refused
        self._queue: deque[Pending] = deque()
        self._in_flight = 0
        self._cond = threading.Condition()
        self._stopping = False
        self._thread: threading.Thread | None = None
        self.failing = ""  # why the last append failed, until one succeeds or room returns

    @property
    def busy(self) -> bool:
        """Requests queued or being appended: the loader waits for them before it stops."""
        return bool(self._queue) or self._in_flight > 0

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="sextant-journal", daemon=True)
        self._thread.start()

    def put(self, pending: Pending) -> None:
        with self._cond:
            self._queue.append(pending)
            self._cond.notify()

    def stop(self, deadline: float) -> None:
        """Appends what is queued, then ends the thread."""
        with self._cond:
            self._stopping = True
            self._cond.notify()
        if self._thread is not None:
            self._thread.join(remaining(deadline))
            if self._thread.is_alive():
                log.error("the journal thread did not finish before the shutdown deadline")
            else:
                self.journal.close()

    def threads(self) -> list[threading.Thread]:
        return [self._thread] if self._thread is not None else []

    def _take(self) -> list[Pending] | None:
        with self._cond:
            while not self._queue and not self._stopping:
                self._cond.wait(RECHECK_SECONDS if self.failing else None)
                if self.failing and self._room():
                    self.failing = ""
            if not self._queue:
                return None
            taken = list(self._queue)
            self._queue.clear()
            self._in_flight = len(taken)
            return taken

    def _room(self) -> bool:
        try:
            return self.journal.has_room(ROOM_BYTES)
        except OSError:
            return False

    def _run(self) -> None:
        name_os_thread()
        while (taken := self._take()) is not None:
            started = time.perf_counter()
            try:
                seqs = self.journal.append([item.request for item in taken if item.request])
            except OSError as exc:
                self._refuse(taken, exc)
                continue
            self.failing = ""
            self.metrics.journal_sync_duration.observe(time.perf_counter() - started)
            self.metrics.journal_bytes.set(self.journal.bytes)
            try:
                self._appended(taken, seqs)
            finally:
                self._in_flight = 0

    def _refuse(self, taken: list[Pending], exc: OSError) -> None:
        message = f"journal append failed: {exc}"
        if message != self.failing:
            log.error("%s; clients will retry", message)
        self.failing = message
        self.metrics.journal_errors.inc()
        self.metrics.dropped.labels("journal_failed").inc(sum(item.rows for item in taken))
        try:
            self._refused(taken, exc)
        finally:
            self._in_flight = 0
