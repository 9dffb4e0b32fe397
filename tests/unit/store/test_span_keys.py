"""A re-sent span is stored once within the writer's window (`writer.resent_window_seconds`),
across commits and restarts, without a key on the spans table; the window is measured."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pyarrow as pa
from prometheus_client import CollectorRegistry

from collector.clock import FakeClock
from collector.config.writer import WriterConfig
from collector.lifecycle import deadline_in
from collector.normalize.wire import decode_request
from collector.store.database import Database
from collector.store.metrics import StoreMetrics
from collector.store.schema import SPANS_V1, with_key
from collector.store.writer import Writer
from tests.support.otlp import new_trace_id, simple_spans, trace_request


def batch(count: int, trace_id: bytes | None = None):
    body = trace_request(simple_spans(count, trace_id)).SerializeToString()
    return decode_request("traces", "protobuf", body, 1000).table


class Stored:
    """A store and its writer, reopened at will as a restart does."""

    def __init__(self, path: Path, clock: FakeClock, **config: object) -> None:
        self.path, self.clock, self.config = path, clock, WriterConfig(**config)
        self.registry = CollectorRegistry()
        self.database = Database(path)
        self.database.open()
        self.writer = Writer(
            self.database, self.config, StoreMetrics(self.registry), clock=self.clock
        )
        self.writer.start()

    def send(self, spans) -> None:
        self.writer.submit("spans", spans).result(10)

    def spans(self) -> int:
        return self.database.cursor().execute("SELECT count(*) FROM spans").fetchone()[0]

    def metric(self, name: str) -> float | None:
        return self.registry.get_sample_value(name)

    def close(self) -> None:
        self.writer.shutdown(deadline_in(5))
        self.database.close()


def test_a_new_store_keeps_no_key_on_spans(tmp_path: Path) -> None:
    stored = Stored(tmp_path / "s.duckdb", FakeClock())
    try:
        constraints = stored.database.cursor().execute(
            "SELECT count(*) FROM duckdb_constraints() WHERE table_name = 'spans'"
            " AND constraint_type = 'PRIMARY KEY'"
        )
        assert constraints.fetchone()[0] == 0
    finally:
        stored.close()


def test_a_request_sent_again_within_the_window_is_stored_once_also_after_a_restart(
    tmp_path: Path,
) -> None:
    clock = FakeClock()
    stored = Stored(tmp_path / "s.duckdb", clock, resent_window_seconds=300)
    first, second = batch(4, new_trace_id()), batch(3, new_trace_id())
    try:
        stored.send(first)
        clock.advance(290)
        stored.send(first)  # a retry
        stored.send(second)
        assert stored.spans() == 7
        assert stored.metric("sextant_store_duplicate_spans_total") == 4
    finally:
        stored.close()
    clock.advance(60)  # 350 s after the first copy, 60 s after the retry
    stored = Stored(tmp_path / "s.duckdb", clock, resent_window_seconds=300)
    try:
        stored.send(second)  # the previous run's retry, after the restart
        assert stored.spans() == 7
        assert stored.metric("sextant_store_duplicate_spans_total") == 3
        assert stored.metric("sextant_store_resent_window_seconds") == 300
    finally:
        stored.close()


def test_a_key_repeated_in_a_commit_is_stored_once(tmp_path: Path) -> None:
    stored = Stored(tmp_path / "s.duckdb", FakeClock())
    spans = batch(3, new_trace_id())
    try:
        stored.send(pa.concat_tables([spans, batch(2), spans.slice(1, 2)]))
        assert stored.spans() == 5
        rows = stored.database.cursor().execute(
            "SELECT count(DISTINCT (trace_id, span_id)) FROM spans"
        )
        assert rows.fetchone()[0] == 5
        assert stored.metric("sextant_store_duplicate_spans_total") == 2
    finally:
        stored.close()


def test_a_span_sent_again_after_the_window_is_stored_again(tmp_path: Path) -> None:
    clock = FakeClock()
    stored = Stored(tmp_path / "s.duckdb", clock, resent_window_seconds=60)
    spans = batch(2, new_trace_id())
    try:
        stored.send(spans)
        for _ in range(3):  # generations of 60 s: the first copy is forgotten after 120 s
            clock.advance(61)
            stored.send(batch(1))
        stored.send(spans)
        assert stored.spans() == 7
        assert stored.metric("sextant_store_duplicate_spans_total") == 0
        assert stored.metric("sextant_store_resent_window_seconds") == 61
    finally:
        stored.close()


def test_keys_over_the_limit_shorten_the_window_and_say_so(tmp_path: Path) -> None:
    clock = FakeClock()
    stored = Stored(tmp_path / "s.duckdb", clock, resent_window_seconds=300, resent_max_keys=8)
    early = batch(4, new_trace_id())
    try:
        stored.send(early)
        for _ in range(3):
            clock.advance(10)
            stored.send(batch(4))  # each fills a generation of 4 keys
        clock.advance(5)
        stored.send(early)  # its keys were let go 20 s later, well within 300 s
        assert stored.spans() == 20
        # the older generation began with the last 4 keys, 5 s before
        assert stored.metric("sextant_store_resent_window_seconds") == 5
        assert stored.metric("sextant_store_resent_keys") == 8
    finally:
        stored.close()


def test_a_store_made_with_the_span_key_still_stores_a_late_copy_once(tmp_path: Path) -> None:
    path = tmp_path / "s.duckdb"
    con = duckdb.connect(str(path))  # the spans table as stores made before created it
    con.execute(with_key("spans", SPANS_V1, "trace_id, span_id"))
    con.close()
    clock = FakeClock()
    stored = Stored(path, clock, resent_window_seconds=60)
    spans = batch(2, new_trace_id())
    try:
        stored.send(spans)
        clock.advance(300)
        stored.send(batch(1))
        clock.advance(300)
        stored.send(spans)  # past the window: the key drops it
        assert stored.spans() == 3
        assert stored.metric("sextant_store_duplicate_spans_total") == 2
    finally:
        stored.close()
