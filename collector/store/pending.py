"""What the writer's threads pass around: a queued request, its future, the commit hook."""

from __future__ import annotations

import concurrent.futures
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

import duckdb
import pyarrow as pa

log = logging.getLogger(__name__)

# Called after each successful commit, in the thread of the writer's lane that made it (so from
# two threads: a hook keeps its own state under a lock), with what it stored and the
# `received_at` it stamped on those rows; the assembler learns about new spans this way, the
# decision engine about new failing results. It holds up the lane's next commit: keep it cheap.
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
    # An export request as it came (signal, encoding, attribute limit, bytes): journaled, and
    # acknowledged, before its rows are loaded.
    request: tuple[str, str, int, bytes] | None = None
    seq: int = 0  # its journal frame once appended: its rows are loaded again after a failure
    queued_at: float = 0.0  # monotonic, when it was submitted (0: replayed at start)

    @property
    def rows(self) -> int:
        return sum(t.num_rows for t in self.parts.values())


class Progress:
    """How far the journal's frames are acknowledged and loaded, and the reads waiting for a
    load to catch up with an acknowledgement. Its lock is the writer's."""

    def __init__(self) -> None:
        self.acked = 0  # the last journal frame acknowledged
        self.applied = 0  # the last journal frame loaded into DuckDB
        self.waiters: list[tuple[int, concurrent.futures.Future[None]]] = []

    def settled(self) -> concurrent.futures.Future[None]:
        """Completes once every frame acknowledged so far is loaded."""
        future: concurrent.futures.Future[None] = concurrent.futures.Future()
        if self.applied >= self.acked:
            future.set_result(None)
        else:
            self.waiters.append((self.acked, future))
        return future

    def loaded(self, applied: int) -> list[concurrent.futures.Future[None]]:
        """Records a load up to `applied`; the waiters it satisfies, to settle outside the lock."""
        self.applied = applied
        ready = [f for seq, f in self.waiters if seq <= applied]
        self.waiters = [(seq, f) for seq, f in self.waiters if seq > applied]
        return ready
