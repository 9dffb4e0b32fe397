"""Evaluation's self-metrics: rule results, verdicts, match rates, errors and pack reloads."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from collector.telemetry import LATENCY_BUCKETS


class RulesMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.results = Counter(
            "sextant_evaluator_results",
            "Rule results, by pack, rule, verdict and reason code.",
            ["pack", "rule", "verdict", "reason"],
            registry=registry,
        )
        self.trajectories = Counter(
            "sextant_trajectories",
            "Evaluated trajectories by overall verdict (none: no pack applied).",
            ["verdict"],
            registry=registry,
        )
        self.match_rate = Histogram(
            "sextant_evaluator_match_rate",
            "Match rate of trajectory rules (fraction of expected steps found).",
            ["pack", "rule"],
            buckets=(0.25, 0.5, 0.75, 0.9, 0.99, 1.0),
            registry=registry,
        )
        self.errors = Counter(
            "sextant_evaluator_errors",
            "Evaluator exceptions (their trajectories got review / evaluator_error).",
            ["pack", "rule"],
            registry=registry,
        )
        self.duration = Histogram(
            "sextant_evaluator_duration_seconds",
            "Time spent evaluating the trajectories of one assembly round.",
            buckets=LATENCY_BUCKETS,
            registry=registry,
        )
        self.reloads = Counter(
            "sextant_rules_reloads",
            "Rule pack files loaded after an edit, by result (loaded, refused).",
            ["result"],
            registry=registry,
        )
        self.packs = Gauge(
            "sextant_rules_packs_active", "Rule packs being evaluated.", registry=registry
        )
        self.refused = Gauge(
            "sextant_rules_packs_refused",
            "Rule pack files whose current content is refused (a last good version stays).",
            registry=registry,
        )
        for result in ("loaded", "refused"):  # at 0, so `increase()` sees the first refusal
            self.reloads.labels(result)
