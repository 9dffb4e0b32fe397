"""The ticker's wake-up: an early tick in the one ticker thread, bursts coalesced."""

from __future__ import annotations

import threading
import time

from collector.lifecycle import deadline_in
from collector.ticker import Ticker


class Ticks:
    """Tick times; each tick can be held until the test lets it go."""

    def __init__(self) -> None:
        self.at: list[float] = []
        self.threads: set[str] = set()
        self.cond = threading.Condition()
        self.release = threading.Event()
        self.release.set()

    def tick(self) -> None:
        with self.cond:
            self.at.append(time.monotonic())
            self.threads.add(threading.current_thread().name)
            self.cond.notify_all()
        self.release.wait(5)

    def wait_for(self, count: int, timeout: float = 5.0) -> float:
        with self.cond:
            assert self.cond.wait_for(lambda: len(self.at) >= count, timeout), self.at
            return self.at[count - 1]


def test_a_wake_up_ticks_now_instead_of_at_the_end_of_the_interval() -> None:
    ticks = Ticks()
    ticker = Ticker("test-ticker", 3600, ticks.tick, min_gap=0.0)
    ticker.start()
    try:
        woken = time.monotonic()
        ticker.wake()
        assert ticks.wait_for(1) - woken < 0.25
        woken = time.monotonic()
        ticker.wake()
        assert ticks.wait_for(2) - woken < 0.25
    finally:
        ticker.shutdown(deadline_in(1))
    assert ticks.threads == {"test-ticker"}
    assert not ticker.thread or not ticker.thread.is_alive()


def test_wake_ups_during_a_tick_cost_one_more_tick_and_at_most_one_per_min_gap() -> None:
    ticks = Ticks()
    ticker = Ticker("test-ticker", 3600, ticks.tick, min_gap=0.2)
    ticker.start()
    try:
        ticks.release.clear()
        ticker.wake()
        first = ticks.wait_for(1)
        for _ in range(100):  # a burst while the first tick runs
            ticker.wake()
        ticks.release.set()
        second = ticks.wait_for(2)
        assert second - first >= 0.2  # not before min_gap since the last tick
    finally:
        ticker.shutdown(deadline_in(1))
    # The burst came before the second tick cleared its wake-up: it cost that one tick only.
    assert len(ticks.at) == 2


def test_shutdown_ends_the_wait_and_the_gap() -> None:
    ticks = Ticks()
    ticker = Ticker("test-ticker", 3600, ticks.tick, min_gap=30)
    ticker.start()
    ticker.wake()
    ticks.wait_for(1)
    ticker.wake()  # the next tick would wait out a 30 s gap
    started = time.monotonic()
    ticker.shutdown(deadline_in(5))
    assert time.monotonic() - started < 1
    assert ticker.thread is not None and not ticker.thread.is_alive()
    assert len(ticks.at) == 1
    ticker.shutdown(deadline_in(1))  # safe twice
