"""Evaluation's self-metrics: rule results, verdicts, match ratios, errors, pack reloads, and
each target's runs (verdicts, duration, tokens, cost, tool errors)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from collector.evaluation.runs import Runs
from collector.targets import TARGET_LABELS, Target, TargetCap, label_values
from collector.telemetry import LATENCY_BUCKETS

# Agent runs take from a tenth of a second (one tool call) to minutes (a long plan).
RUN_BUCKETS = (0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600)
VERDICTS = ("pass", "fail", "review", "none")
TOKEN_TYPES = ("input", "output")


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
            "Evaluated agent runs by overall verdict (none: no pack applied).",
            ["verdict"],
            registry=registry,
        )
        self.match_ratio = Histogram(
            "sextant_evaluator_match_ratio",
            "Match ratio of trajectory rules (fraction of expected steps found, 0 to 1).",
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


class TargetMetrics:
    """Runs per target, counted once each when its first evaluation is stored. Labels are the
    target's, as the shared cap shows it: `_overflow` past `decisions.max_targets`."""

    def __init__(self, registry: CollectorRegistry, cap: TargetCap) -> None:
        self.cap = cap
        self.runs = Counter(
            "sextant_target_runs",
            "Agent runs of the target by overall verdict (none: no pack applied).",
            [*TARGET_LABELS, "verdict"],
            registry=registry,
        )
        self.duration = Histogram(
            "sextant_target_run_duration_seconds",
            "Duration of the target's runs, root span start to last span end.",
            TARGET_LABELS,
            buckets=RUN_BUCKETS,
            registry=registry,
        )
        self.tokens = Counter(
            "sextant_target_tokens",
            "Model tokens of the target's runs, by type (input, output).",
            [*TARGET_LABELS, "type"],
            registry=registry,
        )
        self.cost = Counter(
            "sextant_target_cost_usd",
            "Priced model cost of the target's runs in US dollars (unpriced calls add nothing).",
            TARGET_LABELS,
            registry=registry,
        )
        self.tool_errors = Counter(
            "sextant_target_tool_errors",
            "Tool calls of the target's runs that ended in error.",
            TARGET_LABELS,
            registry=registry,
        )
        cap.on_release(self.remove)

    def record(self, targets: dict[Target, Runs]) -> None:
        for target, runs in targets.items():
            shown = self.cap.shown(target)
            for verdict in VERDICTS:  # every verdict from the first run: rate() sees the first fail
                self.runs.labels(*shown, verdict)
            for verdict, count in runs.verdicts.items():
                self.runs.labels(*shown, verdict).inc(count, {"trace_id": runs.examples[verdict]})
            duration = self.duration.labels(*shown)
            for seconds, trace_id in runs.seconds:
                duration.observe(seconds, {"trace_id": trace_id})
            self.tokens.labels(*shown, "input").inc(runs.input_tokens)
            self.tokens.labels(*shown, "output").inc(runs.output_tokens)
            self.cost.labels(*shown).inc(runs.cost_usd)
            example = runs.examples.get("tool_error")
            exemplar = {"trace_id": example} if example else None
            self.tool_errors.labels(*shown).inc(runs.tool_errors, exemplar)

    def remove(self, target: Target) -> None:
        """The target gave its place in the cap up: its series go, so the cap stays a bound."""
        match = dict(zip(TARGET_LABELS, label_values(target), strict=True))
        for metric in (self.runs, self.duration, self.tokens, self.cost, self.tool_errors):
            metric.remove_by_labels(match)
