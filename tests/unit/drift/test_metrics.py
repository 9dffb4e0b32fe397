"""The drift and reliability gauges are bounded by the shared target cap."""

from __future__ import annotations

from datetime import timedelta

from prometheus_client import CollectorRegistry

from collector.clock import FakeClock
from collector.drift.metrics import DriftMetrics
from collector.targets import TargetCap

A = ("travel-desk", "travel-agent", "1.5.0")
B = ("travel-desk", "travel-agent", "1.6.0")


def test_a_target_past_the_cap_has_no_gauge_and_a_released_one_loses_its_series() -> None:
    clock = FakeClock()
    registry = CollectorRegistry()
    cap = TargetCap(1, idle_seconds=60, clock=clock)
    metrics = DriftMetrics(registry, cap)
    assert metrics.shown(A)
    metrics.effect_size.labels("p", "r", *A, "latency").set(0.4)
    assert not metrics.shown(B)  # the cap is full: B's latest values are in the store only
    names = ["pack", "rule", "service", "agent", "version", "metric"]
    labels = dict(zip(names, ["p", "r", *A, "latency"], strict=True))
    assert registry.get_sample_value("sextant_drift_effect_size", labels) == 0.4
    clock.advance(timedelta(minutes=2).total_seconds())
    assert metrics.shown(B)  # A was idle past the lookback: its place and its series go
    assert registry.get_sample_value("sextant_drift_effect_size", labels) is None


def test_without_a_cap_every_target_is_shown() -> None:
    metrics = DriftMetrics(CollectorRegistry())
    assert metrics.shown(A) and metrics.shown(B)
