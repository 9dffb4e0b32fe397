"""The read cursor of a background round: one snapshot of the store for the whole round, which
shutdown interrupts from another thread."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress

import duckdb

from collector.lifecycle import remaining
from collector.store.database import Database
from collector.ticker import Ticker, TickingStage

POLL_SECONDS = 0.05


class Interrupted(Exception):
    """The round was stopped by shutdown, not failed: nothing to count or retry."""


class Reader:
    """Hands out one cursor at a time; `interrupt()` stops the query running on it and makes
    every later one fail, so a round of many queries ends at its next query, not its last.

    The cursor reads inside one transaction, so every query of a round sees the same snapshot:
    a round that counts a side's runs in one query and their tool calls in the next must not
    see runs committed between the two (callers that are not runs make negative counts).
    A round of several targets calls `renew` between them: a failed query aborts DuckDB's
    transaction, and every later query in it would fail too.

    A thread still inside DuckDB when the interpreter exits aborts the process (and keeps the
    store from being closed), so a stage that reads must stop reading before its deadline."""

    def __init__(self, database: Database) -> None:
        self.database = database
        self._lock = threading.Lock()
        self._cursor: duckdb.DuckDBPyConnection | None = None
        self.interrupted = False

    @contextmanager
    def cursor(self) -> Iterator[duckdb.DuckDBPyConnection]:
        with self._lock:
            if self.interrupted:
                raise Interrupted
            cursor = self._cursor = self.database.cursor()
        try:
            cursor.execute("BEGIN TRANSACTION")
            yield cursor
        except Exception as exc:
            # DuckDB says so as InterruptException, or as an OSError through an Arrow stream;
            # once shutdown has interrupted the reader, any failure of the round is its doing.
            if self.interrupted or isinstance(exc, duckdb.InterruptException):
                raise Interrupted from exc
            raise
        finally:
            with self._lock:
                self._cursor = None
                with suppress(duckdb.Error):  # read only: nothing to keep
                    cursor.execute("ROLLBACK")
                cursor.close()

    def renew(self, cursor: duckdb.DuckDBPyConnection) -> None:
        """A fresh snapshot on the round's cursor, ending the one before even if a query
        aborted it."""
        cursor.execute("ROLLBACK")
        cursor.execute("BEGIN TRANSACTION")

    def interrupt(self) -> None:
        with self._lock:
            self.interrupted = True
            if self._cursor is not None:
                self._cursor.interrupt()

    def stop(self, deadline: float) -> None:
        """Interrupt until no cursor is out or the deadline passes: an interrupt that lands
        between two queries is lost, the next one catches the query after it."""
        while True:
            self.interrupt()
            with self._lock:
                busy = self._cursor is not None
            if not busy or not remaining(deadline):
                return
            time.sleep(min(POLL_SECONDS, remaining(deadline)))


class ReadingStage(TickingStage):
    """A ticking stage that reads the store in rounds (window rules, judges, evaluation
    events): it starts only when `enabled`, and shutdown stops it between rounds and
    interrupts the query in flight, joining before the deadline."""

    ticker: Ticker
    reader: Reader
    enabled: bool

    def start(self) -> None:
        """Look at once (what the last run of the process left is caught up at the start),
        then when woken by a commit or at the tick."""
        if self.enabled:
            super().start()
            self.ticker.wake()

    def shutdown(self, deadline: float) -> None:
        self.ticker.stopping.set()
        self.reader.stop(deadline)
        self.ticker.shutdown(deadline)
