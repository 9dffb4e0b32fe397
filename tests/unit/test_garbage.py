"""Full garbage collections come from the clock, not from CPython's allocation counts."""

from __future__ import annotations

import gc
import time
import weakref
from collections.abc import Iterator

import pytest
from prometheus_client import CollectorRegistry

from collector.garbage import NEVER, collect_on_a_clock


class Node:
    def __init__(self) -> None:
        self.other: Node | None = None


@pytest.fixture
def thresholds() -> Iterator[None]:
    before = gc.get_threshold()
    yield
    gc.set_threshold(*before)


def old_cycle() -> weakref.ref[Node]:
    """A reference cycle that survived young collections into the oldest generation, then
    dropped: only a full collection frees it."""
    a, b = Node(), Node()
    a.other, b.other = b, a
    gc.collect(1)  # survivors of gen 1 move to gen 2
    alive = weakref.ref(a)
    del a, b
    gc.collect(1)
    assert alive() is not None, "a young collection must not reach the oldest generation"
    return alive


def test_cpython_starts_no_full_collection_and_the_clock_frees_old_cycles(thresholds: None):
    registry = CollectorRegistry()
    stop = collect_on_a_clock(registry, period=0.05)
    try:
        assert gc.get_threshold()[2] == NEVER
        alive = old_cycle()
        deadline = time.monotonic() + 5
        while alive() is not None and time.monotonic() < deadline:
            time.sleep(0.01)
        assert alive() is None, "the clock's full collection did not free the cycle"
        while not timed(registry) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert timed(registry), "the collection was not timed"
    finally:
        stop.set()


def test_stopped_the_clock_collects_no_more(thresholds: None):
    registry = CollectorRegistry()
    collect_on_a_clock(registry, period=0.05).set()
    time.sleep(0.2)
    assert not timed(registry)


def timed(registry: CollectorRegistry) -> float:
    return registry.get_sample_value("sextant_gc_full_collection_seconds_count") or 0.0
