"""Exports are refused (retryably) while the oldest one in flight has waited too long, and taken
again as soon as the backlog clears."""

from __future__ import annotations

import pytest

from collector.clock import FakeClock
from collector.errors import Overloaded
from collector.receivers.admission import Admission


def test_refuses_while_the_oldest_request_in_flight_waits_too_long() -> None:
    clock = FakeClock()
    admission = Admission(2.0, clock.monotonic)
    with admission.admitted():  # a request that takes long
        clock.advance(1.5)
        with admission.admitted():  # still under the bound: taken
            clock.advance(1.0)
            with pytest.raises(Overloaded) as refused, admission.admitted():
                pass
            assert refused.value.retry_after_seconds == 1
            assert "waited 2.5 s" in str(refused.value)
    assert admission.oldest_wait() == 0.0
    with admission.admitted():  # the backlog cleared: taken again
        pass


def test_the_oldest_is_the_earliest_still_in_flight() -> None:
    clock = FakeClock()
    admission = Admission(2.0, clock.monotonic)
    first = admission.admitted()
    first.__enter__()
    clock.advance(1.0)
    with admission.admitted():
        clock.advance(0.5)
        first.__exit__(None, None, None)  # the oldest finishes first
        assert admission.oldest_wait() == pytest.approx(0.5)
