"""The evaluation stage as the pipeline sees it: where a round's evaluator comes from, and
where its tally goes (metrics and evaluator health)."""

from __future__ import annotations

import logging
from typing import Any

from collector.evaluation.health import EvaluatorHealth
from collector.evaluation.mcp import McpInventory
from collector.evaluation.metrics import RulesMetrics, TargetMetrics
from collector.evaluation.packs import PackRegistry
from collector.evaluation.round import RoundEvaluator

log = logging.getLogger(__name__)


class Evaluation:
    """Hands the assembler an evaluator over the packs in force for each round, and records
    what the round concluded once its rows are stored."""

    def __init__(
        self,
        packs: PackRegistry,
        health: EvaluatorHealth,
        metrics: RulesMetrics,
        targets: TargetMetrics,
        inventory: McpInventory,
    ) -> None:
        self.packs = packs
        self.inventory = inventory
        self.health = health
        self.metrics = metrics
        self.targets = targets

    def evaluator(self) -> RoundEvaluator:
        return RoundEvaluator(self.packs.snapshot())

    def record(self, evaluated: RoundEvaluator) -> None:
        tally = evaluated.tally
        for failure in tally.failures:
            log.warning("pack failed outside its rules; its results are missing: %s", failure)
        self.health.record(tally)
        for outcome, count in tally.outcomes.items():
            pack, rule, verdict, reason = outcome
            exemplar = {"trace_id": tally.examples[outcome]}
            self.metrics.results.labels(pack, rule, verdict, reason).inc(count, exemplar)
            if reason == "evaluator_error":
                self.metrics.errors.labels(pack, rule).inc(count)
        for verdict, count in tally.verdicts.items():
            exemplar = {"trace_id": tally.examples[(verdict,)]}
            self.metrics.trajectories.labels(verdict).inc(count, exemplar)
        for pack, rule, score in tally.scores:
            self.metrics.match_ratio.labels(pack, rule).observe(score)
        self.metrics.duration.observe(tally.seconds)
        self.inventory.record(tally.mcp)
        self.targets.record(tally.targets)

    def status(self) -> dict[str, Any]:
        """Packs in force (and refused) with each rule's health, for `/api/v1/rules`."""
        packs = self.packs.status()
        named = [p for p in packs if p["pack"]]
        rules = self.health.snapshot(named, self.packs.config.disabled)
        return {"packs": packs, "rules": rules, "counted_since": self.health.since}
