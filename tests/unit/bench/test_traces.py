"""`sextant bench` requests hold whole traces only: no remainder cut off as a fragment."""

from __future__ import annotations

from collections import Counter

from collector.bench.traces import salted_template


def trace_sizes(spans_per_request: int, spans_per_trace: int) -> Counter[int]:
    request, _ = salted_template(spans_per_request, spans_per_trace)
    spans = request.resource_spans[0].scope_spans[0].spans
    return Counter(Counter(s.trace_id for s in spans).values())


def test_a_request_is_whole_traces() -> None:
    assert trace_sizes(512, 10) == {10: 51}  # once 51 traces and a 2-span fragment
    assert trace_sizes(50, 10) == {10: 5}
    assert trace_sizes(5, 10) == {10: 1}  # never less than one whole trace
