"""The window rules' self-metrics: latest effect sizes, p-values and pass@k per target."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from collector.targets import OVERFLOW, TARGET_LABELS, Target, TargetCap, label_values
from collector.telemetry import LATENCY_BUCKETS


class DriftMetrics:
    """Window rules: labels are pack, rule and target (never trace ids). The per-target gauges
    ask the shared target cap: a target past it has no series of its own (a latest value under
    `_overflow` would mix targets; its results are in the store), and a target that gives its
    place up loses its series."""

    def __init__(self, registry: CollectorRegistry, cap: TargetCap | None = None) -> None:
        self.cap = cap
        target = ["pack", "rule", "service", "agent", "version"]
        self.effect_size = Gauge(
            "sextant_drift_effect_size",
            "Latest effect size of a drift metric (JS distance, KS D or a rate difference).",
            [*target, "metric"],
            registry=registry,
        )
        self.p_value = Gauge(
            "sextant_drift_p_value",
            "Latest p-value of a drift metric's test.",
            [*target, "metric"],
            registry=registry,
        )
        self.pass_at_k = Gauge(
            "sextant_reliability_pass_at_k",
            "Mean pass@k over a target's cases with at least k attempts.",
            [*target, "k"],
            registry=registry,
        )
        self.pass_hat_k = Gauge(
            "sextant_reliability_pass_hat_k",
            "Mean pass^k over a target's cases with at least k attempts.",
            [*target, "k"],
            registry=registry,
        )
        self.evaluations = Counter(
            "sextant_drift_evaluations",
            "Window rule results (drift and reliability), by verdict; `error` when a rule raised.",
            ["pack", "rule", "verdict"],
            registry=registry,
        )
        self.duration = Histogram(
            "sextant_drift_evaluation_duration_seconds",
            "Time to evaluate one window rule over every target.",
            buckets=LATENCY_BUCKETS,
            registry=registry,
        )
        if cap is not None:
            cap.on_release(self.remove)

    def shown(self, target: Target) -> bool:
        """Whether `target` (service, agent, version) has its own series under the cap."""
        return self.cap is None or self.cap.shown(target) != OVERFLOW

    def remove(self, target: Target) -> None:
        match = dict(zip(TARGET_LABELS, label_values(target), strict=True))
        for gauge in (self.effect_size, self.p_value, self.pass_at_k, self.pass_hat_k):
            gauge.remove_by_labels(match)
