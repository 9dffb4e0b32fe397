"""The close policy, stepped with a fake clock: quiet period, maximum age, bounds."""

from __future__ import annotations

from datetime import datetime

from collector.assembler.buffers import TraceBuffers
from collector.clock import FakeClock
from collector.config.sections import AssemblerConfig

T0 = datetime(2026, 11, 29, 12, 0, 0)


def buffers(**overrides) -> TraceBuffers:
    settings = {
        "quiet_period_seconds": 5,
        "max_trace_age_seconds": 60,
        "max_open_traces": 3,
        "max_spans_per_trace": 100,
        **overrides,
    }
    return TraceBuffers(AssemblerConfig(**settings))


def closed(b: TraceBuffers, clock: FakeClock) -> list[tuple[str, str]]:
    return [(t.trace_id, reason) for t, reason in b.due(clock.monotonic())]


def test_a_trace_closes_once_its_root_ended_and_it_was_quiet() -> None:
    clock, b = FakeClock(), buffers()
    b.add("a", 3, False, T0, clock.monotonic())  # children first
    clock.advance(4)
    b.add("a", 1, True, T0, clock.monotonic())  # the root arrives
    clock.advance(4.9)
    assert closed(b, clock) == []
    clock.advance(0.2)
    assert closed(b, clock) == [("a", "complete")]
    assert len(b) == 0


def test_a_trace_without_root_waits_for_max_age_then_is_incomplete() -> None:
    clock, b = FakeClock(), buffers()
    b.add("a", 2, False, T0, clock.monotonic())
    clock.advance(30)
    assert closed(b, clock) == []  # quiet, but no root yet
    clock.advance(30)
    assert closed(b, clock) == [("a", "incomplete_timeout")]


def test_a_busy_trace_with_its_root_closes_at_max_age_as_incomplete() -> None:
    clock, b = FakeClock(), buffers()
    b.add("a", 1, True, T0, clock.monotonic())
    for _ in range(30):  # a span every 2 s: never quiet for 5 s
        clock.advance(2)
        b.add("a", 1, False, T0, clock.monotonic())
        if done := closed(b, clock):
            break
    assert done == [("a", "incomplete_timeout")]
    assert clock.monotonic() - 1000 >= 60


def test_due_takes_at_most_the_limit_per_round() -> None:
    clock, b = FakeClock(), buffers(max_open_traces=10)
    for trace_id in "abcde":
        b.add(trace_id, 1, True, T0, clock.monotonic())
    clock.advance(6)
    assert [t.trace_id for t, _ in b.due(clock.monotonic(), limit=2)] == ["a", "b"]
    assert [t.trace_id for t, _ in b.due(clock.monotonic(), limit=2)] == ["c", "d"]


def test_restore_merges_spans_that_arrived_meanwhile() -> None:
    clock, b = FakeClock(), buffers()
    b.add("a", 3, True, T0, clock.monotonic())
    clock.advance(6)
    (taken,) = b.due(clock.monotonic())
    later = T0.replace(second=9)
    b.add("a", 2, False, later, clock.monotonic())  # new spans while the round was failing
    b.restore([taken[0]])
    clock.advance(5.1)
    ((trace, reason),) = b.due(clock.monotonic())
    assert (trace.spans, trace.root_seen, trace.last_received, reason) == (
        5,
        True,
        later,
        "complete",
    )


def test_a_trace_restored_after_two_failed_rounds_keeps_its_batches_in_arrival_order() -> None:
    """Round 1 takes a trace, late spans reopen it, round 2 takes those; both rounds fail and
    are put back, the later one last: its trace holds the earlier batches too, first."""
    clock, b = FakeClock(), buffers()
    b.add("a", 1, True, T0, clock.monotonic(), batch=0)
    b.add("a", 1, False, T0, clock.monotonic(), batch=1)
    clock.advance(6)
    ((first, _),) = b.due(clock.monotonic())
    b.add("a", 1, False, T0, clock.monotonic(), batch=2)
    clock.advance(6)
    ((second, _),) = b.due(clock.monotonic())
    b.restore([first])
    b.restore([second])
    assert b.get("a") is second and second.batches == [0, 1, 2]


def test_over_max_open_traces_the_oldest_closes_early() -> None:
    clock, b = FakeClock(), buffers()
    for trace_id in "abc":
        assert b.add(trace_id, 1, True, T0, clock.monotonic()) == []
        clock.advance(1)
    bounded = b.add("d", 1, True, T0, clock.monotonic())
    assert [(t.trace_id, r) for t, r in bounded] == [("a", "incomplete_bound")]
    assert len(b) == 3 and "a" not in b


def test_over_max_spans_a_trace_closes_early() -> None:
    clock, b = FakeClock(), buffers()
    assert b.add("a", 60, False, T0, clock.monotonic()) == []
    bounded = b.add("a", 60, False, T0, clock.monotonic())
    assert [(t.trace_id, r, t.spans) for t, r in bounded] == [("a", "incomplete_bound", 120)]


def test_restore_keeps_the_clocks_of_recovered_traces() -> None:
    clock, b = FakeClock(), buffers()
    b.add("new", 1, True, T0, clock.monotonic())
    taken = b.due(clock.monotonic() + 10)
    assert [t.trace_id for t, _ in taken] == ["new"]
    b.restore([t for t, _ in taken])
    assert closed(b, clock) == []
    clock.advance(5)
    assert closed(b, clock) == [("new", "complete")]


def test_the_lag_is_how_long_the_trace_waiting_longest_past_its_close_time_has_waited() -> None:
    clock, b = FakeClock(), buffers()
    b.add("a", 1, True, T0, clock.monotonic())
    b.add("b", 1, False, T0, clock.monotonic())  # no root: waits for max age, not late
    clock.advance(4)
    assert b.late_since(clock.monotonic()) is None  # still in its quiet period
    clock.advance(3)  # "a" was due at 5 s and nothing closed it
    assert clock.monotonic() - b.late_since(clock.monotonic()) == 2
    b.due(clock.monotonic())
    assert b.late_since(clock.monotonic()) is None
    clock.advance(60)  # "b" reached its max age at 60 s
    assert clock.monotonic() - b.late_since(clock.monotonic()) == 7
