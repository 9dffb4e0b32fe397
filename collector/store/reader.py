"""The read cursor of a background round, which shutdown interrupts from another thread."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

import duckdb

from collector.lifecycle import remaining
from collector.store.database import Database

POLL_SECONDS = 0.05


class Interrupted(Exception):
    """The round was stopped by shutdown, not failed: nothing to count or retry."""


class Reader:
    """Hands out one cursor at a time; `interrupt()` stops the query running on it and makes
    every later one fail, so a round of many queries ends at its next query, not its last.

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
            yield cursor
        except duckdb.InterruptException as exc:
            raise Interrupted from exc
        finally:
            with self._lock:
                self._cursor = None
                cursor.close()

    def interrupt(self) -> None:
        with self._lock:
            self.interrupted = True
            if self._cursor is not None:
                self._cursor.interrupt()

    def stop(self, thread: threading.Thread | None, deadline: float) -> None:
        """Interrupt until `thread` is gone or the deadline passes: an interrupt that lands
        between two queries is lost, the next one catches the query after it."""
        while True:
            self.interrupt()
            if thread is None:
                return
            thread.join(min(POLL_SECONDS, remaining(deadline)))
            if not thread.is_alive() or not remaining(deadline):
                return
