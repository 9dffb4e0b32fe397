"""`sextant bench` requests hold whole traces only: no remainder cut off as a fragment; each
copy sent carries the times of the moment it is sent."""

from __future__ import annotations

import time
from collections import Counter

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from collector.bench.runner import BenchOptions, payload_template
from collector.bench.traces import Restamp, salted_template
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
