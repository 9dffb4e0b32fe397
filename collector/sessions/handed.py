"""The runs the writer hands the session stage as it commits them: a bounded queue.

`consume` is a commit hook: it runs in the writer's thread after each commit, so it only picks
the committed runs that may belong to a session (current agent runs with a conversation id, or
every agent run when the id is a configured span attribute looked up later) and queues their
columns. Past `max_runs` waiting, a commit's runs are not queued: they are counted, and the
stage reads them again from the store (`dropped` changes), so none is lost.

`commits` counts the commit hooks that have returned. The stage uses it to know when every run
stored by the time it looked at the store has been handed to it (or dropped): the writer runs
one commit's hooks before it commits the next, so once the count passes what it was after the
look, the commits the look saw have all been through here.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from prometheus_client import Counter

from collector.sessions.running import RUN_COLUMNS

# Whether one of these trace ids may be a turn of the session asked about.
MayBe = Callable[[Iterable[str]], bool]


class Handed:
    def __init__(
        self, max_runs: int, by_attribute: bool, dropped: Counter, wake: Callable[[], None]
    ) -> None:
        self.max_runs = max_runs
        self.by_attribute = by_attribute  # the session id is looked up on the run's spans
        self.dropped_runs = dropped
        self.wake = wake
        self.dropped = 0  # commits whose runs were not queued, ever
        self.commits = 0  # commit hooks returned, ever
        self._queue: deque[tuple[datetime, pa.Table]] = deque()
        self._making: list[pa.Table] = []  # taken, not made into sessions yet
        self._runs = 0
        self._lock = threading.Lock()

    def consume(self, tables: dict[str, pa.Table], received_at: datetime) -> None:
        """Commit hook (the writer's thread): queue the committed runs that may be turns."""
        try:
            runs = tables.get("trajectories")
            if runs is not None and runs.num_rows:
                self._queue_runs(runs, received_at)
        except Exception:  # not queued: read again from the store, like an overflow
            with self._lock:
                self.dropped += 1
            self.wake()
            raise
        finally:
            with self._lock:
                self.commits += 1

    def _queue_runs(self, runs: pa.Table, received_at: datetime) -> None:
        keep = pc.and_(runs["is_current"], pc.fill_null(runs["agent_run"], True))
        if not self.by_attribute:
            keep = pc.and_(keep, pc.is_valid(runs["conversation_id"]))
        chosen = runs.filter(keep).select(list(RUN_COLUMNS))
        if not chosen.num_rows:
            return
        with self._lock:
            if self._runs + chosen.num_rows > self.max_runs:
                self.dropped += 1
                self.dropped_runs.inc(chosen.num_rows)
            else:
                self._queue.append((received_at, chosen))
                self._runs += chosen.num_rows
        self.wake()

    def take(self) -> tuple[list[dict[str, Any]], datetime | None]:
        """Every queued run, in the order committed, and when the first was committed."""
        with self._lock:
            taken, self._runs = list(self._queue), 0
            self._queue.clear()
            self._making = [table for _, table in taken]
        runs = [r for _, table in taken for r in table.to_pylist()]
        return runs, taken[0][0] if taken else None

    def put_back(self, runs: list[dict[str, Any]], received_at: datetime) -> None:
        """Runs taken and not made into sessions (the store failed): first in line again."""
        with self._lock:
            self._making = []
            if runs:
                self._queue.appendleft((received_at, pa.Table.from_pylist(runs)))
                self._runs += len(runs)

    def made(self) -> None:
        """The runs taken are in their sessions (stored)."""
        with self._lock:
            self._making = []

    def waiting(self, session_id: str, may_be: MayBe | None = None) -> bool:
        """Whether a run queued or being made may be a turn of this session: one with its
        conversation id; with the id a configured attribute looked up later, one `may_be` says
        may be (of their trace ids), any without it."""
        with self._lock:
            tables = [table for _, table in self._queue] + self._making
        if self.by_attribute:
            if may_be is None:
                return any(table.num_rows for table in tables)
            traces = [t for table in tables for t in table["trace_id"].to_pylist()]
            return bool(traces) and may_be(traces)
        return any(
            pc.any(pc.equal(table["conversation_id"], session_id)).as_py() for table in tables
        )

    def oldest(self) -> datetime | None:
        """When the oldest run waiting was committed."""
        with self._lock:
            return self._queue[0][0] if self._queue else None

    def marks(self) -> tuple[int, int]:
        """(commits, dropped) so far."""
        with self._lock:
            return self.commits, self.dropped
