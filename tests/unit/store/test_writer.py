"""The group-commit writer: shared commits, duplicates, failures, shutdown flush."""

from __future__ import annotations

import concurrent.futures
import sys
import threading
from datetime import datetime
from pathlib import Path

import duckdb
import pyarrow as pa
import pytest
from prometheus_client import CollectorRegistry

from collector.clock import FakeClock
from collector.config.writer import WriterConfig
from collector.errors import Overloaded, ShuttingDown, StoreUnavailable
from collector.lifecycle import deadline_in
from collector.normalize.wire import decode_request
from collector.store.database import Database
from collector.store.metrics import StoreMetrics
from collector.store.schema import STEPS_V2, with_key
from collector.store.tables import replacing, rows_table
from collector.store.writer import Writer
from tests.support.otlp import new_trace_id, simple_spans, trace_request
from tests.support.wait import wait_for


def batch(count: int, trace_id: bytes | None = None):
    body = trace_request(simple_spans(count, trace_id)).SerializeToString()
    return decode_request("traces", "protobuf", body, 1000).table


@pytest.fixture
def store(tmp_path: Path):
    database = Database(tmp_path / "s.duckdb")
    database.open()
    registry = CollectorRegistry()
    writer = Writer(database, WriterConfig(max_queue_rows=100), StoreMetrics(registry))
    yield database, writer, registry
    writer.shutdown(deadline_in(5))
    database.close()


def count(database: Database) -> int:
    return database.cursor().execute("SELECT count(*) FROM spans").fetchone()[0]


def test_queued_requests_share_one_commit(store) -> None:
    database, writer, registry = store
    futures = [writer.submit("spans", batch(5)) for _ in range(4)]  # queued before start
    writer.start()
    concurrent.futures.wait(futures, 10)
    assert all(f.result() is None for f in futures)
    assert count(database) == 20
    assert registry.get_sample_value("sextant_store_commit_rows_count") == 1
    assert registry.get_sample_value("sextant_store_commit_rows_sum") == 20


def test_a_stages_write_is_committed_while_a_load_is_in_progress(tmp_path: Path) -> None:
    """A round's rows are built from committed spans: they do not wait behind the load of the
    export requests queued before them, which runs in a lane of its own."""
    database = Database(tmp_path / "s.duckdb")
    database.open()
    writer = Writer(database, WriterConfig(), StoreMetrics(CollectorRegistry()))
    loading, release = threading.Event(), threading.Event()

    def hook(tables: dict[str, pa.Table], _: object) -> None:
        if "spans" in tables:  # the load's commit is done; its lane is held here
            loading.set()
            release.wait(10)

    writer.on_commit = hook
    try:
        writer.start()
        export = writer.submit("spans", batch(10), ("traces", "protobuf", 1000, b""))
        assert loading.wait(10)
        stage = writer.submit_tables({"sessions": sessions_batch({"s-1": 1}, set())})
        assert stage.result(10) is None
        assert not export.done()
        sessions = database.cursor().execute("SELECT session_id FROM sessions").fetchall()
        assert sessions == [("s-1",)]
        release.set()
        assert export.result(10) is None
    finally:
        release.set()
        writer.shutdown(deadline_in(5))
        database.close()


def test_rows_of_spans_go_with_the_loads_in_the_order_written(tmp_path: Path) -> None:
    """Spans written with no request still share the loads' lane: a table has one lane, so
    its rows are committed in the order they were inserted."""
    database = Database(tmp_path / "s.duckdb")
    database.open()
    writer = Writer(database, WriterConfig(max_commit_rows=10), StoreMetrics(CollectorRegistry()))
    commits: list[int] = []
    writer.on_commit = lambda tables, _: commits.append(tables["spans"].num_rows)
    try:
        export = writer.submit("spans", batch(10), ("traces", "protobuf", 1000, b""))
        stage = writer.submit_tables({"spans": batch(4)})  # no request
        writer.start()
        concurrent.futures.wait([export, stage], 10)
        assert [f.exception() for f in (export, stage)] == [None, None]
        assert commits == [10, 4]
    finally:
        writer.shutdown(deadline_in(5))
        database.close()


def test_how_long_exports_have_waited_for_their_load_is_told(tmp_path: Path) -> None:
    """Spans reach assembly only once loaded: an export waiting for its load delays its run's
    judgement by as long, which the receivers count as lag."""
    database = Database(tmp_path / "s.duckdb")
    database.open()
    clock = FakeClock()
    writer = Writer(database, WriterConfig(), StoreMetrics(CollectorRegistry()), clock=clock)
    try:
        writer.submit_tables({"spans": batch(2)})  # a stage's own write: not an export
        assert writer.load_wait() == 0
        export = writer.submit("spans", batch(3), ("traces", "protobuf", 1000, b""))
        clock.advance(2.5)
        writer.submit("spans", batch(3), ("traces", "protobuf", 1000, b""))
        assert writer.load_wait() == 2.5  # the oldest export's wait
        writer.start()
        export.result(10)
        wait_for(lambda: writer.queued_rows() == 0)
        assert writer.load_wait() == 0
    finally:
        writer.shutdown(deadline_in(5))
        database.close()


def test_duplicates_in_and_across_commits_are_stored_once(store) -> None:
    database, writer, registry = store
    writer.start()
    trace_id = new_trace_id()
    first = batch(3, trace_id)
    writer.submit("spans", first).result(10)
    futures = [writer.submit("spans", first), writer.submit("spans", batch(2))]
    concurrent.futures.wait(futures, 10)
    assert count(database) == 5
    assert registry.get_sample_value("sextant_store_duplicate_spans_total") == 3


def test_full_queue_refuses_without_blocking(store) -> None:
    _, writer, registry = store
    queued = writer.submit("spans", batch(60))
    with pytest.raises(Overloaded):
        writer.submit("spans", batch(60))
    assert (
        registry.get_sample_value("sextant_store_queue_dropped_total", {"reason": "queue_full"})
        == 60
    )
    # A single request larger than the whole queue is still taken when the queue is empty,
    # which it is once the queued rows are committed (not merely once the writer starts).
    writer.start()
    queued.result(10)
    writer.submit("spans", batch(150)).result(10)


def test_a_failed_commit_fails_its_requests_and_the_writer_goes_on(store) -> None:
    database, writer, registry = store
    real = database._con
    calls = {"n": 0}

    class Flaky:
        def __getattr__(self, name):
            return getattr(real, name)

        def execute(self, sql, *args):
            if sql.startswith("INSERT") and calls["n"] == 0:
                calls["n"] += 1
                raise duckdb.IOException("disk full")
            # The writer's SQL reads its local `batch` (a DuckDB replacement scan): pass it on.
            batch = sys._getframe(1).f_locals.get("batch")  # noqa: F841
            return real.execute(sql, *args)

    database._con = Flaky()
    writer.start()
    with pytest.raises(StoreUnavailable):
        writer.submit("spans", batch(3)).result(10)
    writer.submit("spans", batch(4)).result(10)
    database._con = real
    assert count(database) == 4
    assert registry.get_sample_value("sextant_store_commit_errors_total") == 1


def test_shutdown_flushes_everything_queued_then_refuses(store) -> None:
    database, writer, _ = store
    futures = [writer.submit("spans", batch(7)) for _ in range(3)]
    writer.start()
    writer.shutdown(deadline_in(10))
    assert all(f.done() and f.exception() is None for f in futures)
    assert count(database) == 21
    with pytest.raises(ShuttingDown):
        writer.submit("spans", batch(1))
    writer.shutdown(deadline_in(1))  # twice is fine


def test_an_invalidated_database_is_reported_once_it_happens(store) -> None:
    database, writer, _ = store
    real = database._con
    seen: list[str] = []
    writer.on_invalidated = seen.append

    class Invalidated:
        def __getattr__(self, name):
            return getattr(real, name)

        def execute(self, sql, *args):
            if sql.startswith("INSERT"):
                raise duckdb.FatalException("database has been invalidated because of a write")
            return real.execute(sql, *args)

    database._con = Invalidated()
    writer.start()
    with pytest.raises(StoreUnavailable):
        writer.submit("spans", batch(3)).result(10)
    database._con = real
    assert len(seen) == 1 and "invalidated" in seen[0]
    assert "FatalException" in writer.failing
    writer.submit("spans", batch(2)).result(10)
    assert writer.failing == ""  # a commit that succeeds clears it


def sessions_batch(turns: dict[str, int], stored: set[str]) -> pa.Table:
    """Session rows of `turns` (id: turns), saying which may replace a row of `stored`."""
    keys = [(session, "desk") for session in turns]
    rows = [
        {"session_id": session, "session_service": service, "status": "open", "turns": count}
        | {"reopened": 0, "last_turn_at": datetime(2026, 12, 3)}
        for (session, service), count in zip(keys, turns.values(), strict=True)
    ]
    return replacing(rows_table("sessions", rows), keys, {(s, "desk") for s in stored})


def test_a_session_row_replaces_its_stored_one_unless_its_stage_knows_there_is_none(
    store,
) -> None:
    """The search for the rows a batch replaces is a join over every stored session; rows
    of sessions their stage knows were never stored skip it, and the flag is trusted."""
    database, writer, _registry = store
    writer.start()
    writer.record({"sessions": sessions_batch({"a": 1}, stored=set())})
    writer.record({"sessions": sessions_batch({"a": 2, "b": 1}, stored={"a"})})
    turns = "SELECT session_id, turns FROM sessions ORDER BY ALL"
    assert database.cursor().execute(turns).fetchall() == [("a", 2), ("b", 1)]
    writer.record({"sessions": sessions_batch({"b": 2}, stored=set())})  # told wrong
    assert database.cursor().execute(turns).fetchall() == [("a", 2), ("b", 1), ("b", 2)]


def round_rows(trace_id: str) -> dict[str, pa.Table]:
    """A round's rows of one run: its trajectory and three steps."""
    steps = [{"trace_id": trace_id, "revision": 1, "seq": i, "name": f"s{i}"} for i in range(3)]
    return {
        "trajectories": rows_table(
            "trajectories", [{"trace_id": trace_id, "revision": 1, "is_current": True}]
        ),
        "steps": rows_table("steps", steps),
    }


@pytest.mark.parametrize("keyed", [False, True], ids=["new store", "store with the steps key"])
def test_a_round_stored_twice_keeps_one_trajectory_and_its_steps(
    tmp_path: Path, keyed: bool
) -> None:
    path = tmp_path / "s.duckdb"
    if keyed:  # the steps table as stores made before created it
        con = duckdb.connect(str(path))
        con.execute(with_key("steps", STEPS_V2, "trace_id, revision, seq"))
        con.close()
    database = Database(path)
    database.open()
    writer = Writer(database, WriterConfig(), StoreMetrics(CollectorRegistry()))
    writer.start()
    try:
        first, second = round_rows("a" * 32), round_rows("b" * 32)
        writer.submit_tables(first).result(10)
        writer.submit_tables(first).result(10)  # in a commit of its own
        together = [writer.submit_tables(second), writer.submit_tables(second)]
        concurrent.futures.wait(together, 10)  # queued together: most likely one commit
        assert all(f.exception() is None for f in together)
        cursor = database.cursor()
        assert cursor.execute("SELECT count(*) FROM trajectories").fetchone() == (2,)
        steps = "SELECT trace_id, count(*), count(DISTINCT seq) FROM steps GROUP BY ALL ORDER BY 1"
        assert cursor.execute(steps).fetchall() == [("a" * 32, 3, 3), ("b" * 32, 3, 3)]
    finally:
        writer.shutdown(deadline_in(5))
        database.close()
