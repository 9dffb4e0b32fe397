"""Trace exports are refused (retryable) while assembly and evaluation are behind, before they
cost a decode; logs, and traces once assembly has caught up, are taken as usual."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from collector.config.sections import IngestConfig, LimitsConfig
from collector.config.writer import WriterConfig
from collector.errors import Overloaded
from collector.lifecycle import deadline_in
from collector.receivers.ingest import Ingest
from collector.receivers.metrics import ReceiverMetrics
from collector.store.database import Database
from collector.store.metrics import StoreMetrics
from collector.store.writer import Writer
from tests.support.otlp import new_trace_id, simple_spans, trace_request


@pytest.fixture
def writer(tmp_path: Path):
    database = Database(tmp_path / "a.duckdb")
    database.open()
    writer = Writer(database, WriterConfig(), StoreMetrics(CollectorRegistry()))
    writer.start()
    yield writer
    writer.shutdown(deadline_in(5))
    database.close()


def test_trace_exports_wait_while_assembly_is_behind(writer: Writer) -> None:
    registry = CollectorRegistry()
    lag = [5.0]
    ingest = Ingest(
        writer,
        IngestConfig(max_assembly_lag_seconds=2),
        LimitsConfig(),
        ReceiverMetrics(registry),
        lambda: lag[0],
    )
    body = trace_request(simple_spans(3, new_trace_id())).SerializeToString()
    with pytest.raises(Overloaded, match=r"5\.0 s behind") as refused:
        asyncio.run(ingest.consume("traces", "protobuf", body, "grpc"))
    assert refused.value.retry_after_seconds == 1
    refusals = {"reason": "assembly_behind"}
    assert registry.get_sample_value("sextant_receiver_refused_requests_total", refusals) == 1
    assert not registry.get_sample_value(
        "sextant_receiver_items_received_total", {"protocol": "grpc", "signal": "traces"}
    )

    lag[0] = 1.5  # caught up within the bound
    reply = asyncio.run(ingest.consume("traces", "protobuf", body, "grpc"))
    assert reply.rejected == 0
    accepted = {"protocol": "grpc", "signal": "traces"}
    assert registry.get_sample_value("sextant_receiver_items_accepted_total", accepted) == 3


def test_no_bound_accepts_whatever_the_lag(writer: Writer) -> None:
    ingest = Ingest(
        writer,
        IngestConfig(max_assembly_lag_seconds=None),
        LimitsConfig(),
        ReceiverMetrics(CollectorRegistry()),
        lambda: 3600.0,
    )
    body = trace_request(simple_spans(2, new_trace_id())).SerializeToString()
    assert asyncio.run(ingest.consume("traces", "protobuf", body, "http")).rejected == 0
