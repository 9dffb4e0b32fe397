"""The writer's bounded queue of requests, and how long a commit lingers to take more of them."""

from __future__ import annotations

import contextlib
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator

from collector.config.writer import WriterConfig
from collector.errors import Overloaded
from collector.store.metrics import StoreMetrics
from collector.store.pending import Pending, Progress


class WriteQueue:
    """Requests waiting for a commit, bounded in rows: a full queue refuses (never blocks) so
    the client retries, rather than holding its connection while memory grows.

    It has two lanes, each taken by its own thread of the writer. The loads: export
    requests (and any rows of spans or logs), in journal order. The stages' own writes (a
    round's trajectories and results, decisions, sessions): a stage waits for its commit, and
    behind a load of tens of thousands of acknowledged spans it waited for all of it, for rows
    that do not depend on them (they are built from rows already committed), while those
    exports, journaled, wait for nothing. Each table is written by one lane only, so its rows
    are committed in the order they were inserted (collector/store/follow.py).

    Its condition is the writer's one lock: the commit, journal and replay threads take it to
    share the queue, the journal's progress and the commits' failure state.
    """

    def __init__(self, config: WriterConfig, metrics: StoreMetrics) -> None:
        self.config = config
        self.metrics = metrics
        self.cond = threading.Condition()
        self.stopping = False
        self.progress = Progress()
        self._items: deque[Pending] = deque()  # the loads: export requests, in journal order
        self._stages: deque[Pending] = deque()  # the stages' own writes, a lane of their own
        self._rows = 0  # queued, and for journaled requests also those being appended
        self._incoming = 0
        metrics.queue_limit.set(config.max_queue_rows)

    @property
    def rows(self) -> int:
        """Rows queued (acknowledged ones included) and not yet taken into a commit."""
        return self._rows

    def fits(self, rows: int) -> bool:
        """Whether `rows` would be taken now (an empty queue takes any number)."""
        return not self._rows or self._rows + rows <= self.config.max_queue_rows

    def reserve(self, rows: int) -> None:
        """Counts `rows` in, or refuses them when they would overflow a non-empty queue."""
        with self.cond:
            if not self.fits(rows):
                self.metrics.dropped.labels("queue_full").inc(rows)
                error = Overloaded(f"write queue full ({self._rows} rows waiting); retry later")
                error.retry_after_seconds = self.config.retry_after_seconds
                raise error
            self._rows += rows
            self.metrics.queue_rows.set(self._rows)

    def release(self, rows: int) -> None:
        """Counts out reserved rows that will not be queued (their journal append failed)."""
        with self.cond:
            self._rows -= rows
            self.cond.notify_all()

    def oldest_export(self) -> float:
        """When the oldest export request still waiting for its load was submitted (0 with
        none, or for rows replayed at start)."""
        with self.cond:
            return self._items[0].queued_at if self._items else 0.0

    def push(self, items: list[Pending], stages: bool = False) -> None:
        """Queues requests whose rows are already reserved; `stages`: the stages' own writes,
        committed in their lane (in the order the stages wrote)."""
        with self.cond:
            (self._stages if stages else self._items).extend(items)
            self.cond.notify_all()

    def add(self, item: Pending) -> None:
        """Queues a journaled request without the bound, once the queue has drained to half of
        it: loading is what makes room. For rows a previous run acknowledged."""
        with self.cond:
            while self._rows > self.config.max_queue_rows // 2 and not self.stopping:
                self.cond.wait(0.1)
            self._items.append(item)
            self._rows += item.rows
            self.progress.acked = max(self.progress.acked, item.seq)
            self.cond.notify_all()

    def requeue(self, items: list[Pending]) -> None:
        """Puts requests back at the head, to be loaded first, in journal order."""
        with self.cond:
            self._items.extendleft(reversed(items))
            self._rows += sum(item.rows for item in items)

    def stop(self) -> None:
        with self.cond:
            self.stopping = True
            self.cond.notify_all()

    @contextlib.contextmanager
    def incoming(self) -> Iterator[None]:
        """Marks a request on its way to the queue, so a commit can wait a moment to include it."""
        with self.cond:
            self._incoming += 1
        try:
            yield
        finally:
            with self.cond:
                self._incoming -= 1
                self.cond.notify_all()

    def take(self, appending: Callable[[], bool]) -> list[Pending] | None:
        """The next load's requests, at most max_commit_rows (at least one request), in
        journal order; None once stopping with nothing queued and nothing being appended to
        the journal."""
        return self._take(self._items, appending)

    def take_stages(self) -> list[Pending] | None:
        """The stages' writes for their next commit, as `take`; None once stopping with none."""
        return self._take(self._stages, lambda: False)

    def _take(self, queued: deque[Pending], appending: Callable[[], bool]) -> list[Pending] | None:
        with self.cond:
            while not queued and not (self.stopping and not appending()):
                self.cond.wait(0.1 if self.stopping else None)
            if not queued:
                return None
            if queued is self._items:
                self._linger()
            taken: list[Pending] = []
            rows = 0
            while queued and (not taken or rows + queued[0].rows <= self.config.max_commit_rows):
                item = queued.popleft()
                rows += item.rows
                taken.append(item)
            self._rows -= rows
            self.metrics.queue_rows.set(self._rows)
            return taken

    def _linger(self) -> None:
        # Every commit has a fixed cost of a few milliseconds, so when more requests are being
        # decoded right now, wait (at most max_linger) to commit them together; rows already
        # acknowledged (journaled) wait longer for the same reason, load_linger at most.
        journaled = all(item.seq for item in self._items)
        linger = self.config.load_linger_seconds if journaled else 0.0
        deadline = time.monotonic() + max(linger, self.config.max_linger_seconds)
        while (
            (self._incoming or (journaled and linger and not self.progress.waiters))
            and not self.stopping
            and self._rows < self.config.max_commit_rows
            and (remaining := deadline - time.monotonic()) > 0
        ):
            self.cond.wait(remaining)
            journaled = journaled and all(item.seq for item in self._items)
            if not journaled and not self._incoming:
                break
