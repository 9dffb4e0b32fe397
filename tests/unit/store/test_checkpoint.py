"""Checkpoints write what was committed since the last one and leave earlier row groups alone;
retention's checkpoint still gives back the space of the rows it deleted."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

from prometheus_client import CollectorRegistry

from collector.clock import FakeClock
from collector.store.database import Database
from collector.store.retention import Retention, RetentionMetrics
from collector.store.tables import INSERTS, columns_table

DAY_NS = 86_400 * 10**9


def commit_spans(database: Database, first: int, count: int, start_ns: int) -> None:
    """`count` spans of one trace each, numbered from `first`; every other one a day older."""
    con = database.connection
    batch = columns_table(
        "spans",
        {
            "trace_id": [f"{i:032x}" for i in range(first, first + count)],
            "span_id": [f"{i:016x}" for i in range(first, first + count)],
            "name": ["invoke_agent travel-desk"] * count,
            "attributes": [f'{{"gen_ai.prompt": "book flight {i}"}}' for i in range(count)],
            "start_time_unix_nano": [start_ns - (i % 2) * DAY_NS for i in range(count)],
            "end_time_unix_nano": [start_ns + 10**9] * count,
        },
        count,
    )
    con.register("batch", batch)
    con.execute("BEGIN")
    con.execute(INSERTS["spans"], {"received_at": datetime(2026, 1, 1)}).fetchall()
    con.execute("COMMIT")
    con.unregister("batch")


def blocks(database: Database) -> tuple[int, int]:
    """(used, free) blocks of the database file."""
    [(used, free)] = database.connection.execute(
        "SELECT used_blocks, free_blocks FROM pragma_database_size()"
    ).fetchall()
    return int(used), int(free)


def first_row_group(database: Database) -> list[tuple]:
    """Where the spans table's first row group is stored: (column, segment, rows, block)."""
    return database.connection.execute(
        "SELECT column_name, segment_id, count, block_id FROM pragma_storage_info('spans')"
        " WHERE row_group_id = 0 ORDER BY ALL"
    ).fetchall()


def test_a_checkpoint_leaves_the_row_groups_of_earlier_ones_as_they_were(tmp_path: Path) -> None:
    database = Database(tmp_path / "sextant.duckdb")
    database.open()
    start = 1_800_000_000 * 10**9
    commit_spans(database, 0, 20_000, start)  # a commit smaller than a row group
    database.connection.execute("CHECKPOINT")
    written = first_row_group(database)
    for n in range(1, 6):
        commit_spans(database, n * 20_000, 20_000, start)
        database.connection.execute("CHECKPOINT")
    # Merged with the later checkpoints' rows, the first row group would have been written
    # again, whole, by each of them.
    assert first_row_group(database) == written
    assert database.connection.execute("SELECT count(*) FROM spans").fetchall() == [(120_000,)]
    database.close()


def test_retention_gives_back_the_space_of_rows_deleted_among_others(tmp_path: Path) -> None:
    database = Database(tmp_path / "sextant.duckdb")
    database.open()
    clock = FakeClock()
    start = int(clock.now().timestamp()) * 10**9
    for n in range(4):  # every other span a day older: a day's deletion leaves half of each
        commit_spans(database, n * 30_000, 30_000, start)
        database.connection.execute("CHECKPOINT")
    before, _ = blocks(database)
    retention = Retention(database, 0, 3600, RetentionMetrics(CollectorRegistry()), clock=clock)
    cutoff = retention.cutoff()
    assert cutoff - timedelta(days=1) < clock.now() - timedelta(days=1) < cutoff
    deleted = retention.run()
    assert deleted["spans"] == 60_000
    after, _ = blocks(database)
    assert after < before * 0.75, (before, after)
    assert database.connection.execute("SELECT count(*) FROM spans").fetchall() == [(60_000,)]
    database.close()
