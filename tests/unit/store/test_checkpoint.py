"""Checkpoints write what was committed since the last one and leave earlier row groups alone;
retention's checkpoint still gives back the space of the rows it deleted."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from prometheus_client import CollectorRegistry

from collector.clock import FakeClock
from collector.store.database import Database
from collector.store.retention import Retention, RetentionMetrics
from collector.store.tables import INSERTS, columns_table

DAY_NS = 86_400 * 10**9


def commit_spans(
    database: Database, first: int, count: int, start_ns: int, starts: list[int] | None = None
) -> None:
    """`count` spans of one trace each, numbered from `first`; every other one a day older
    (or started at `starts`)."""
    con = database.connection
    batch = columns_table(
        "spans",
        {
            "trace_id": [f"{i:032x}" for i in range(first, first + count)],
            "span_id": [f"{i:016x}" for i in range(first, first + count)],
            "name": ["invoke_agent travel-desk"] * count,
            "attributes": [f'{{"gen_ai.prompt": "book flight {i}"}}' for i in range(count)],
            "start_time_unix_nano": starts or [start_ns - (i % 2) * DAY_NS for i in range(count)],
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
    metrics = RetentionMetrics(CollectorRegistry())
    retention = Retention(database, timedelta(0), 3600, metrics, clock=clock)
    cutoff = retention.cutoff()
    assert cutoff - timedelta(days=1) < clock.now() - timedelta(days=1) < cutoff
    deleted = retention.run()
    assert deleted["spans"] == 60_000
    after, _ = blocks(database)
    assert after < before * 0.75, (before, after)
    assert database.connection.execute("SELECT count(*) FROM spans").fetchall() == [(60_000,)]
    database.close()


def test_retention_by_age_deletes_to_the_moment_and_by_days_whole_days(tmp_path: Path) -> None:
    database = Database(tmp_path / "sextant.duckdb")
    database.open()
    clock = FakeClock(wall=datetime(2026, 12, 3, 15, 0).replace(tzinfo=UTC).timestamp())
    now_ns = int(clock.wall() * 1e9)
    hours = (26, 3, 1)  # a span started this long ago each
    commit_spans(database, 0, 3, now_ns, [now_ns - h * 3_600 * 10**9 for h in hours])
    metrics = RetentionMetrics(CollectorRegistry())

    def kept() -> list[str]:
        rows = database.connection.execute("SELECT span_id FROM spans ORDER BY 1").fetchall()
        return [row[0][-1] for row in rows]

    # a day's age in whole days: yesterday is kept whole, the day before is not there
    assert Retention(database, timedelta(days=1), 3600, metrics, clock=clock).run()["spans"] == 0
    assert kept() == ["0", "1", "2"]
    two_hours = Retention(
        database, timedelta(hours=2), 3600, metrics, clock=clock, whole_days=False
    )
    assert two_hours.cutoff() == datetime(2026, 12, 3, 13, 0)
    assert two_hours.run()["spans"] == 2
    assert kept() == ["2"]
    database.close()
