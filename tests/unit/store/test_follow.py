"""Following a table: every row stored is looked at exactly once, whatever the batch size, the
commit grouping (a commit's rows share `received_at`) or the order runs closed in."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from collector.config.writer import WriterConfig
from collector.lifecycle import deadline_in
from collector.store.database import Database
from collector.store.follow import IN_ORDER, NEW, Follow
from collector.store.metrics import StoreMetrics
from collector.store.tables import rows_table
from collector.store.writer import Writer

LOGS = f"SELECT trace_id, store_seq FROM logs WHERE {NEW} AND received_at >= $oldest {IN_ORDER}"
RUNS = (
    f"SELECT trace_id, store_seq FROM trajectories WHERE {NEW} AND closed_at >= $oldest {IN_ORDER}"
)
NOW = datetime(2026, 1, 1, 12, 0)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[tuple[Database, Writer]]:
    database = Database(tmp_path / "s.duckdb")
    database.open()
    writer = Writer(database, WriterConfig(), StoreMetrics(CollectorRegistry()))
    writer.start()
    yield database, writer
    writer.shutdown(deadline_in(5))
    database.close()


def follow_all(database: Database, sql: str, follow: Follow, limit: int) -> list[str]:
    """Look until nothing is new, `limit` rows a look, as a stage does."""
    seen: list[str] = []
    cursor = database.cursor()
    while rows := cursor.execute(sql, follow.params(NOW - timedelta(days=1), limit)).fetchall():
        seen.extend(r[0] for r in rows)
        follow.advance(rows[-1][1])
    return seen


def test_every_record_of_every_commit_is_looked_at_once(store: tuple[Database, Writer]) -> None:
    database, writer = store
    follow = Follow()
    sent: list[str] = []
    seen: list[str] = []
    for commit, size in enumerate((300, 1, 1001, 7)):
        ids = [f"{commit:02d}{i:030x}" for i in range(size)]
        writer.submit("logs", rows_table("logs", [{"trace_id": t} for t in ids])).result(10)
        sent.extend(ids)
        seen.extend(follow_all(database, LOGS, follow, 200))  # 200 a look, as the stage
    received = database.cursor().execute("SELECT count(DISTINCT received_at) FROM logs")
    assert received.fetchone() == (4,)  # each commit's records share their received_at
    assert sorted(seen) == sorted(sent) and len(seen) == len(sent)


def test_runs_stored_later_but_closed_earlier_are_not_passed_over(
    store: tuple[Database, Writer],
) -> None:
    database, writer = store
    follow = Follow()

    def run(trace_id: str, closed_ago: float) -> None:
        row = {"trace_id": trace_id, "revision": 1, "is_current": True}
        row["closed_at"] = NOW - timedelta(seconds=closed_ago)
        writer.submit("trajectories", rows_table("trajectories", [row])).result(10)

    run("b" * 32, closed_ago=10)
    assert follow_all(database, RUNS, follow, 100) == ["b" * 32]
    run("a" * 32, closed_ago=20)  # closed before the run already looked at (a clock step back)
    run("c" * 32, closed_ago=5)
    assert follow_all(database, RUNS, follow, 1) == ["a" * 32, "c" * 32]
    assert follow_all(database, RUNS, follow, 100) == []
