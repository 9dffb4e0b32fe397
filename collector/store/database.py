"""The DuckDB database file: opening, migrating to the current schema, read cursors, closing."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import duckdb

from collector import memprofile
from collector.errors import StartupError
from collector.store.migrations import MIGRATIONS, SCHEMA_VERSION
from collector.store.readonly import lock_down
from collector.store.views import create_views
from collector.threads import os_thread_name

log = logging.getLogger(__name__)
T = TypeVar("T")
# max_vacuum_tasks outside retention's checkpoint, and during it (DuckDB's default).
VACUUM_OFF = 0
VACUUM_ON = 100
# Rows in one of the store's row groups (DuckDB's default is 122,880). A commit that adds at
# least a row group's rows to a table is written straight into the file; a smaller one goes
# through the WAL and is written again by the next checkpoint. Under load a commit holds a
# round's steps or a few thousand spans, so with DuckDB's default nearly every row was written
# twice (scripts/benchmark-checkpoint: 20,000-span commits and their rounds cost 26 µs of CPU a
# span with 122,880-row groups, 15 with 8,192; scans and lookups within 10 %).
ROW_GROUP_ROWS = 8192


def connect(path: Path, row_group_rows: int = ROW_GROUP_ROWS) -> duckdb.DuckDBPyConnection:
    """The store file opened read-write as the only database of the connection, named after the
    file as `duckdb.connect(path)` names it. DuckDB takes a row group size only when a file is
    attached, so the file is attached to a connection whose in-memory database is then
    detached: the cursors taken from it start in the store."""
    con = duckdb.connect()
    name = '"' + path.stem.replace('"', '""') + '"'
    location = "'" + str(path).replace("'", "''") + "'"
    con.execute(f"ATTACH {location} AS {name} (ROW_GROUP_SIZE {row_group_rows})")
    con.execute(f"USE {name}")
    con.execute("DETACH memory")
    return con


class Database:
    """Owns the one read-write connection of the process; readers take cursors from it."""

    def __init__(self, path: Path, memory_limit: str = "512MB") -> None:
        self.path = path
        self.memory_limit = memory_limit
        self._con: duckdb.DuckDBPyConnection | None = None

    @property
    def connection(self) -> duckdb.DuckDBPyConnection:
        if self._con is None:
            raise RuntimeError("database is not open")
        return self._con

    def open(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            # DuckDB starts its threads here; they inherit the name (see collector.threads).
            with os_thread_name("sextant-duckdb"):
                self._con = connect(self.path)
        except duckdb.Error as exc:
            raise StartupError(f"cannot open DuckDB store {self.path}: {exc}") from exc
        self._con.execute("SET TimeZone = 'UTC'")
        self._con.execute("SET memory_limit = ?", [self.memory_limit])
        # DuckDB checkpoints inside the COMMIT that crosses its threshold, stalling every request
        # waiting on that commit; the Checkpointer does it from its own thread instead.
        self._con.execute("SET checkpoint_threshold = '1TB'")
        # A checkpoint's vacuum merges the row groups of earlier checkpoints into fuller ones,
        # rewriting them whole: with commits arriving all the time, each checkpoint folds a part
        # of a row group, and the merges made checkpoints 0.3-3 s and growing with the store,
        # commits waiting meanwhile (scripts/benchmark-checkpoint: 0.3 s each without). Rows
        # deleted by whole days (retention) are freed without it; retention's own checkpoint
        # turns it on to compact the rest (`Retention.run`).
        self._con.execute(f"SET max_vacuum_tasks = {VACUUM_OFF}")
        self.migrate()
        create_views(self._con)
        # The SQL endpoint reads through this database: no file, network or extension access
        # from any SQL, ever (the setting is database-wide and cannot be turned back on).
        lock_down(self._con)
        memprofile.add_source(self.memory_report)  # when diagnosing memory only

    def memory_report(self) -> str:
        """DuckDB's own account of its memory (`duckdb_memory()`), largest tags first."""
        cursor = self.connection.cursor()
        try:
            rows = cursor.execute(
                "SELECT tag, memory_usage_bytes FROM duckdb_memory()"
                " WHERE memory_usage_bytes > 0 ORDER BY 2 DESC"
            ).fetchall()
        finally:
            cursor.close()
        total = sum(size for _, size in rows)
        parts = ", ".join(f"{tag} {size / 2**20:.0f}" for tag, size in rows[:6])
        return f"DuckDB {total / 2**20:.0f} MiB ({parts})"

    @property
    def wal_bytes(self) -> int:
        try:
            return self.path.with_name(self.path.name + ".wal").stat().st_size
        except FileNotFoundError:
            return 0

    def version(self) -> int:
        con = self.connection
        exists = con.execute(
            "SELECT count(*) FROM information_schema.tables WHERE table_name = 'schema_version'"
        ).fetchone()
        if not exists or not exists[0]:
            return 0
        row = con.execute("SELECT max(version) FROM schema_version").fetchone()
        return int(row[0]) if row and row[0] is not None else 0

    def migrate(self) -> None:
        current = self.version()
        if current > SCHEMA_VERSION:
            raise StartupError(
                f"{self.path} has schema version {current}, newer than this Sextant"
                f" ({SCHEMA_VERSION}); upgrade Sextant or use another data directory"
            )
        con = self.connection
        for version in range(current + 1, SCHEMA_VERSION + 1):
            con.execute("BEGIN")
            for statement in MIGRATIONS[version]:
                con.execute(statement)
            con.execute("INSERT INTO schema_version (version) VALUES (?)", [version])
            con.execute("COMMIT")
            log.info("store %s migrated to schema version %d", self.path, version)

    def cursor(self) -> duckdb.DuckDBPyConnection:
        """A cursor for reading from another thread while the writer keeps writing."""
        return self.connection.cursor()

    def read(self, query: Callable[..., T], *args: Any) -> T:
        """`query(cursor, *args)` on a cursor of its own, closed afterwards (for any thread)."""
        cursor = self.cursor()
        try:
            return query(cursor, *args)
        finally:
            cursor.close()

    def close(self) -> None:
        """Checkpoint and close. A checkpoint the disk has no room for loses nothing: what was
        committed stays in the write-ahead log, which the next open replays; so it is logged,
        not raised, and the process still stops cleanly."""
        if self._con is None:
            return
        try:
            self._con.execute("CHECKPOINT")
        except (duckdb.IOException, duckdb.FatalException) as exc:
            log.warning("final checkpoint not written (%s); the write-ahead log keeps what was"
                        " committed and the next start replays it", exc)  # fmt: skip
        finally:
            self._con.close()
            self._con = None
