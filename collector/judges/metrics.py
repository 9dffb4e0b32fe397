"""What the judges cost and how they answer, for Prometheus (labels: pack, rule, model; never a
trace id)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram


class JudgeMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.calls = Counter(
            "sextant_judge_calls",
            "Judgements asked for, by outcome: ok, cached (no call made), timeout, rate_limited,"
            " provider_error, malformed, budget (refused by the pack's budget, no call made).",
            ["pack", "rule", "model", "outcome"],
            registry=registry,
        )
        self.cost = Counter(
            "sextant_judge_cost_usd",
            "USD spent on judge calls (from the pack's price or the price table).",
            ["pack", "rule", "model"],
            registry=registry,
        )
        self.tokens = Counter(
            "sextant_judge_tokens",
            "Tokens of judge calls, by direction (input, output).",
            ["pack", "rule", "model", "direction"],
            registry=registry,
        )
        self.latency = Histogram(
            "sextant_judge_call_duration_seconds",
            "Time of a judge call that got an answer.",
            ["pack", "rule", "model"],
            buckets=(0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60),
            registry=registry,
        )
        self.lag = Gauge(
            "sextant_judge_lag_seconds",
            "How far behind the runs being closed the judges are (0 when caught up); runs"
            " closed longer ago than judges.lookback_seconds are not judged.",
            registry=registry,
        )
        self.sampled_out = Counter(
            "sextant_judge_sampled_out",
            "Runs a judge rule applied to but did not judge, by its `sample` share.",
            ["pack", "rule"],
            registry=registry,
        )


class EventMetrics:
    """Evaluation events in and out (see events_in, events_out)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.sent = Counter(
            "sextant_evaluation_events_sent",
            "Results handed to the OTLP log exporter as gen_ai.evaluation.result records.",
            registry=registry,
        )
        self.dropped = Counter(
            "sextant_evaluation_events_dropped",
            "Results not sent as evaluation events, by reason: queue_full, no_span (no span to"
            " parent them to), export_failed (refused, or not accepted within the timeout).",
            ["reason"],
            registry=registry,
        )
        self.unmatched = Counter(
            "sextant_evaluation_events_unmatched",
            "Evaluation events received whose run was not stored within"
            " judges.lookback_seconds (or past the 10,000 waiting): not made results.",
            registry=registry,
        )
        for reason in ("queue_full", "no_span", "export_failed"):
            self.dropped.labels(reason)
