"""One evaluation round: trajectories under a snapshot of the packs in force, with the tally
that metrics and evaluator health are fed from."""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field

from collector.evaluation.mcp import Sightings
from collector.evaluation.packs import PackText, compiled
from collector.evaluation.runs import RunFacts, Runs
from collector.targets import Target
from evaluators.base import Result, overall_verdict
from evaluators.evaluate import evaluate_pack
from evaluators.model import Trajectory


@dataclass
class Tally:
    """How a round's results went, per (pack, rule, verdict, reason), with an example trace
    per outcome and per trajectory verdict (exemplars link metrics to traces)."""

    outcomes: Counter[tuple[str, str, str, str]] = field(default_factory=Counter)
    examples: dict[tuple[str, ...], str] = field(default_factory=dict)
    verdicts: Counter[str] = field(default_factory=Counter)
    scores: list[tuple[str, str, float]] = field(default_factory=list)
    errors: dict[tuple[str, str], str] = field(default_factory=dict)
    applied: Counter[str] = field(default_factory=Counter)  # pack -> trajectories it applied to
    seconds: float = 0.0
    failures: list[str] = field(default_factory=list)  # packs that raised past evaluate_pack
    # (service, agent, version) -> its runs; a run counts once, not again when late spans
    # rebuild it as a new revision (its tokens and time would count twice).
    targets: dict[Target, Runs] = field(default_factory=dict)
    mcp: Sightings = field(default_factory=Sightings)  # MCP servers' tools, for the inventory

    def count(self, t: Trajectory, results: list[Result]) -> None:
        self.mcp.count(t)  # an MCP `tools/list` trace is no run, but lists a server's tools
        self.count_run(RunFacts.of(t), results)

    def count_run(self, t: RunFacts, results: list[Result]) -> None:
        """A run's results (its MCP steps are counted apart, in `mcp`)."""
        if not t.agent_run:
            return  # not a run of its target: no verdict, no duration, no tokens
        for r in results:
            outcome = (r.pack, r.rule_id, r.verdict.value, r.reason)
            self.outcomes[outcome] += 1
            self.examples[outcome] = t.trace_id
            if r.score is not None and r.rule_type == "trajectory":
                self.scores.append((r.pack, r.rule_id, r.score))
            if r.reason == "evaluator_error":
                self.errors[(r.pack, r.rule_id)] = r.message
        # No rule applied: no verdict (an unevaluated run is not a pass).
        verdict = overall_verdict(results).value if results else "none"
        self.verdicts[verdict] += 1
        self.examples[(verdict,)] = t.trace_id
        if t.revision <= 1:
            target = Target(t.service_name or "", t.agent_name or "", t.service_version or "")
            self.targets.setdefault(target, Runs()).count_facts(t, verdict)


@dataclass
class RoundEvaluator:
    """Evaluates trajectories under one snapshot of the packs. Picklable: it travels to the
    worker process that builds the round and comes back with its tally."""

    packs: tuple[PackText, ...] = ()
    tally: Tally = field(default_factory=Tally)

    @property
    def shas(self) -> dict[str, str]:
        """pack -> sha256 of the version evaluated, stored with each of its results."""
        return {p.name: p.sha256 for p in self.packs}

    def evaluate(self, t: Trajectory) -> list[Result]:
        """The trajectory's results."""
        started = time.perf_counter()
        results: list[Result] = []
        for text in self.packs:
            pack = compiled(text)
            try:
                pack_results = evaluate_pack(t, pack)
            except Exception as exc:  # evaluate_pack reviews its own errors; this is a backstop
                self.tally.failures.append(f"{t.trace_id}: pack {pack.name}: {exc!r}")
                continue
            if pack_results:
                self.tally.applied[pack.name] += 1
            results.extend(pack_results)
        self.tally.seconds += time.perf_counter() - started
        self.tally.count(t, results)
        return results
