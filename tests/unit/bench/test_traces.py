"""`sextant bench` requests hold whole traces only: no remainder cut off as a fragment; each
copy sent carries the times of the moment it is sent."""

from __future__ import annotations

import time
from collections import Counter

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from collector.bench.runner import BenchOptions, payload_template
from collector.bench.traces import TURNS, Restamp, salted_copy, salted_template
from collector.normalize.wire import decode_request


def trace_sizes(spans_per_request: int, spans_per_trace: int) -> Counter[int]:
    request, _ = salted_template(spans_per_request, spans_per_trace)
    spans = request.resource_spans[0].scope_spans[0].spans
    return Counter(Counter(s.trace_id for s in spans).values())


def test_a_request_is_whole_traces() -> None:
    assert trace_sizes(512, 10) == {10: 51}  # once 51 traces and a 2-span fragment
    assert trace_sizes(50, 10) == {10: 5}
    assert trace_sizes(5, 10) == {10: 1}  # never less than one whole trace


@pytest.mark.parametrize("protocol", ["grpc", "http/json"])
def test_a_copy_sent_later_carries_times_of_that_moment(protocol: str) -> None:
    """A store bounded by age keeps what it would of real traffic only if a copy sent an hour
    later says so: every span's start and end move by the hour, nothing else changes."""
    made = time.time_ns()
    payload, _, spans = payload_template(BenchOptions(protocol=protocol, spans_per_request=64))
    hour = 3600 * 10**9
    later = Restamp(payload, made, as_json=protocol == "http/json").fresh(payload, made + hour)
    encoding = "json" if protocol == "http/json" else "protobuf"
    before = decode_request("traces", encoding, payload, 65536).table.to_pylist()
    after = decode_request("traces", encoding, later, 65536).table.to_pylist()
    assert len(after) == spans == 60
    moved = ("start_time_unix_nano", "end_time_unix_nano")
    for old, new in zip(before, after, strict=True):
        assert all(new[key] == old[key] + hour for key in moved)
        assert {k: v for k, v in new.items() if k not in moved} == {
            k: v for k, v in old.items() if k not in moved
        }
    if protocol == "grpc":  # still one valid message, of the same length
        assert len(ExportTraceServiceRequest.FromString(later).SerializeToString()) == len(payload)


@pytest.mark.parametrize("protocol", ["grpc", "http/json"])
def test_each_copy_sent_starts_conversations_of_a_few_turns(protocol: str) -> None:
    """Copies of fixed conversation ids made sessions of 10,000 turns in three minutes: a copy
    carries new trace ids and new conversations, each of `TURNS` runs, and nothing else new."""
    payload, salt, spans = payload_template(BenchOptions(protocol=protocol, spans_per_request=512))
    encoding = "json" if protocol == "http/json" else "protobuf"
    copies = [salted_copy(payload, salt) for _ in range(2)]
    assert all(len(copy) == len(payload) for copy in copies)
    runs = []
    for copy in copies:
        rows = decode_request("traces", encoding, copy, 65536).table.to_pylist()
        assert len(rows) == spans
        roots = [r for r in rows if r["name"].startswith("invoke_agent")]
        runs.append({r["trace_id"]: r["conversation_id"] for r in roots})
    first, second = runs
    assert len(first) == len(second) == 51 and not set(first) & set(second)
    assert Counter(Counter(first.values()).values()) == {TURNS: 51 // TURNS, 51 % TURNS: 1}
    assert not set(first.values()) & set(second.values())
