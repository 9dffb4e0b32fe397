"""A costly reading asked on every request is taken at most every so often."""

from __future__ import annotations

import time

from collector.sampled import Sampled


def test_a_reading_is_taken_at_most_every_interval_and_answered_between() -> None:
    readings = iter([1.5, 7.0])
    taken = []

    def read() -> float:
        taken.append(time.monotonic())
        return next(readings)

    lag = Sampled(read, 0.2)
    assert [lag() for _ in range(1_000)] == [1.5] * 1_000
    assert len(taken) == 1
    time.sleep(0.25)
    assert lag() == 7.0
    assert len(taken) == 2
