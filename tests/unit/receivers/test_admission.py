"""Exports are refused (retryably) when the work in flight would keep a new one waiting too
long, or when the oldest in flight has waited too long; taken again once the backlog clears."""

from __future__ import annotations

import pytest

from collector.clock import FakeClock
from collector.errors import Overloaded
from collector.receivers.admission import Admission

KB = 1000


def test_refuses_while_the_oldest_request_in_flight_waits_too_long() -> None:
    clock = FakeClock()
    admission = Admission(2.0, clock.monotonic)
    with admission.admitted(KB):  # a request that takes long
        clock.advance(1.5)
        with admission.admitted(KB):  # still under the bound: taken
            clock.advance(1.0)
            with pytest.raises(Overloaded) as refused, admission.admitted(KB):
                pass
            assert refused.value.retry_after_seconds == 1
            assert "wait about 2.5 s" in str(refused.value)
    assert admission.oldest_wait() == 0.0
    with admission.admitted(KB):  # the backlog cleared: taken again
        pass


def test_refuses_when_the_bytes_in_flight_take_longer_than_the_bound() -> None:
    clock = FakeClock()
    admission = Admission(1.0, clock.monotonic)
    for _ in range(3):  # it finishes 100 KB in 0.1 s: 1 MB/s
        with admission.admitted(100 * KB):
            clock.advance(0.1)
    held = [admission.admitted(400 * KB) for _ in range(3)]
    held[0].__enter__()
    held[1].__enter__()  # 0.8 MB in flight: 0.8 s of work ahead, a new one is taken
    assert admission.expected_wait() == pytest.approx(0.8)
    held[2].__enter__()  # 1.2 s ahead: refused
    with pytest.raises(Overloaded), admission.admitted(KB):
        pass
    for place in held:
        place.__exit__(None, None, None)


def test_idle_time_does_not_lower_the_rate() -> None:
    clock = FakeClock()
    admission = Admission(1.0, clock.monotonic)
    for _ in range(5):
        clock.advance(10.0)  # idle between requests
        with admission.admitted(100 * KB):
            clock.advance(0.1)
    assert admission.expected_wait() == 0.0
    with admission.admitted(500 * KB):
        assert admission.expected_wait() == pytest.approx(0.5)


def test_requests_answered_together_count_as_one_sample_of_the_rate() -> None:
    """A batch of small requests acknowledged by one fsync finishes at one instant: that is
    its bytes over the batch's time, not a dozen requests each finished in no time."""
    clock = FakeClock()
    admission = Admission(1.0, clock.monotonic)
    next_batch = admission.admitted(KB)
    next_batch.__enter__()  # arrives meanwhile: the receiver stays busy
    batch = [admission.admitted(10 * KB) for _ in range(12)]
    for place in batch:
        place.__enter__()
    clock.advance(0.1)
    for place in batch:  # all answered at once
        place.__exit__(None, None, None)
    clock.advance(0.1)
    next_batch.__exit__(None, None, None)
    # 121 KB finished in 0.2 s: a rate of the order of 0.6 MB/s, not thousands of MB/s
    with admission.admitted(100 * KB):
        assert 0.05 < admission.expected_wait() < 1.0
