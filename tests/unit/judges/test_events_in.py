"""Evaluation events in, on a real store: an event that waits for its run is not lost when a
write fails."""

from __future__ import annotations

import json
import time
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from collector.clock import FakeClock
from collector.config.evaluation import JudgesConfig
from collector.config.writer import WriterConfig
from collector.judges.events_in import EvaluationEvents
from collector.judges.metrics import EventMetrics
from collector.store.metrics import StoreMetrics
from collector.store.writer import ShuttingDown, Writer
from tests.support.store import RunStore


class NoPacks:
    def snapshot(self) -> tuple[()]:
        return ()


def event(runs: RunStore, trace_id: str, at: datetime) -> None:
    """A `gen_ai.evaluation.result` record as an evaluator exports it."""
    attributes = {
        "gen_ai.evaluation.name": "Relevance",
        "gen_ai.evaluation.score.value": 0.2,
        "gen_ai.evaluation.score.label": "fail",
    }
    nanos = int((at - datetime(1970, 1, 1)).total_seconds() * 1e9)
    runs.cursor.execute(
        "INSERT INTO logs (trace_id, span_id, time_unix_nano, observed_time_unix_nano,"
        " event_name, attributes, received_at, store_seq)"
        " VALUES (?, NULL, ?, ?, 'gen_ai.evaluation.result', ?, ?, nextval('store_seq'))",
        [trace_id, nanos, nanos, json.dumps(attributes), at],
    )


def test_an_event_waiting_for_its_run_outlives_a_failed_write(tmp_path: Path) -> None:
    runs = RunStore(tmp_path / "sextant.duckdb")
    clock = FakeClock()
    now = clock.now()
    stopped = Writer(runs.database, WriterConfig(), StoreMetrics(CollectorRegistry()))
    stopped.shutdown(0.0)  # refuses what is submitted
    live = Writer(runs.database, WriterConfig(), StoreMetrics(CollectorRegistry()))
    live.start()
    events = EvaluationEvents(
        JudgesConfig(),
        runs.database,
        stopped,
        NoPacks(),
        EventMetrics(CollectorRegistry()),
        clock,
    )
    early = "e" * 32
    try:
        event(runs, early, now - timedelta(seconds=30))  # scored before its run is stored
        assert events.tick() == 1  # waits for its run
        runs.run(["lookup_customer"], trace_id=early, ago=timedelta(seconds=10))
        runs.cursor.execute("UPDATE trajectories SET store_seq = nextval('store_seq')")
        with pytest.raises(ShuttingDown):
            events.tick()  # its run is here; the write fails
        events.writer = live
        assert events.tick() == 1
        stored = runs.cursor.execute(
            "SELECT trace_id, rule_id, verdict FROM results WHERE origin = 'external'"
        ).fetchall()
    finally:
        live.shutdown(time.monotonic() + 5)
        runs.close()
    assert stored == [(early, "Relevance", "fail")]
