"""Drift calibration: how often the shipped drift procedure fails an unchanged canary, and how
often it catches a real shift.

Every canary of a scenario is a target of its own (service `canary-NNNN`, production 1.0.0 and
candidate 2.0.0 over the same hour) in one DuckDB store built with the collector's schema; one
evaluation of a canary drift rule over the store then judges them all, exactly as the collector's
window round does. A target with any failing metric is a ROLLBACK (what the shipped canary policy
maps a failing drift rule to).
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np
import pyarrow as pa
from scipy import stats

from collector.bench.canaries import RULES, Run, Scenario
from collector.drift.evaluate import evaluate_drift
from collector.drift.outcome import WindowOutcome
from collector.store.database import Database
from collector.targets import Target
from evaluators.base import Verdict
from evaluators.rulepack import Selector
from evaluators.window import DriftRule

NOW = datetime(2026, 1, 1, 12, 0)
SELECTOR = Selector(service="canary-*")
# Canaries per store: each target's queries scan its store, so one store for all would make
# the benchmark quadratic in canaries.
CHUNK = 50


def canary_rule(alpha: float, **overrides: object) -> DriftRule:
    """The canary rule the simulations judge: version 2.* against 1.*, at `alpha`."""
    return DriftRule.model_validate(
        {
            "id": "canary",
            "type": "drift",
            "reason": "canary_behaviour_changed",
            "compare": {
                "baseline": {"service.version": "1.*"},
                "candidate": {"service.version": "2.*"},
            },
            "alpha": alpha,
            **overrides,
        }
    )


@dataclass(frozen=True)
class Rate:
    """k of n, with its exact (Clopper-Pearson) 95 % interval."""

    k: int
    n: int

    @property
    def value(self) -> float:
        return self.k / self.n if self.n else 0.0

    @property
    def interval(self) -> tuple[float, float]:
        ci = stats.binomtest(self.k, self.n).proportion_ci(0.95, method="exact")
        return float(ci.low), float(ci.high)


@dataclass(frozen=True)
class Figures:
    scenario: Scenario
    correction: str
    canaries: int
    failed: Rate  # targets with any failing metric: false ROLLBACKs, or detections
    per_metric: dict[str, Rate]
    reviews: int  # targets with a review (too few samples): should be 0 here


def calibrate(
    scenarios: tuple[Scenario, ...],
    canaries: int,
    runs: int,
    alpha: float,
    seed: int = 1,
    corrections: tuple[str, ...] = ("holm", "none"),
) -> Iterator[Figures]:
    """Figures per scenario and correction."""
    for index, scenario in enumerate(scenarios):
        rng = np.random.default_rng([seed, index])
        outcomes: dict[str, list[WindowOutcome]] = {c: [] for c in corrections}
        for first in range(0, canaries, CHUNK):
            chunk = range(first, min(first + CHUNK, canaries))
            for correction, found in evaluate_chunk(rng, scenario, chunk, runs, alpha, corrections):
                outcomes[correction] += found
        for correction, found in outcomes.items():
            yield figures(scenario, correction, canaries, found)


def evaluate_chunk(
    rng: np.random.Generator,
    scenario: Scenario,
    canaries: range,
    runs: int,
    alpha: float,
    corrections: tuple[str, ...],
) -> Iterator[tuple[str, list[WindowOutcome]]]:
    """A store of these canaries, evaluated once per correction."""
    with tempfile.TemporaryDirectory() as tmp:
        database = Database(Path(tmp) / "calibration.duckdb", "1GB")
        database.open()
        try:
            fill(database, rng, scenario, canaries, runs)
            cursor = database.cursor()
            for correction in corrections:
                # one look at one window: the fixed-sample tests
                rule = canary_rule(alpha, correction=correction, sequential=False)
                yield correction, evaluate_drift(cursor, SELECTOR, rule, NOW, max_evidence=1)
            cursor.close()
        finally:
            database.close()


def figures(
    scenario: Scenario, correction: str, canaries: int, outcomes: list[WindowOutcome]
) -> Figures:
    failing: dict[str, set[Target]] = {}
    reviewed: set[Target] = set()
    for outcome in outcomes:
        metric = outcome.metric.split(":")[0]
        if outcome.verdict == Verdict.FAIL:
            failing.setdefault(metric, set()).add(outcome.target)
        elif outcome.verdict == Verdict.REVIEW:
            reviewed.add(outcome.target)
    metrics = sorted({o.metric.split(":")[0] for o in outcomes})
    any_failed: set[Target] = set().union(*failing.values())
    return Figures(
        scenario=scenario,
        correction=correction,
        canaries=canaries,
        failed=Rate(len(any_failed), canaries),
        per_metric={m: Rate(len(failing.get(m, ())), canaries) for m in metrics},
        reviews=len(reviewed),
    )


def fill(
    database: Database, rng: np.random.Generator, scenario: Scenario, canaries: range, runs: int
) -> None:
    """Both sides of every canary as trajectories, tool steps and per-run rule results."""
    rows: dict[str, list[dict[str, object]]] = {"trajectories": [], "steps": [], "results": []}
    for canary in canaries:
        baseline, candidate = scenario.sides(rng, runs)
        for version, side in (("1.0.0", baseline), ("2.0.0", candidate)):
            for run in side:
                add_run(rows, rng, f"canary-{canary:04d}", version, run)
    con = database.connection
    for table, table_rows in rows.items():
        con.register("new_rows", pa.Table.from_pylist(table_rows))
        con.execute(f"INSERT INTO {table} BY NAME SELECT * FROM new_rows")
        con.unregister("new_rows")
    con.execute("CHECKPOINT")


def add_run(
    rows: dict[str, list[dict[str, object]]],
    rng: np.random.Generator,
    service: str,
    version: str,
    run: Run,
) -> None:
    trace_id = f"{len(rows['trajectories']):032x}"
    passed = all(run.passes)
    rows["trajectories"].append(
        {
            "trace_id": trace_id,
            "revision": 1,
            "is_current": True,
            "status": "error" if run.error else "ok",
            "agent_run": True,
            "service_name": service,
            "agent_name": "support-agent",
            "service_version": version,
            "case_id": run.case,
            "steps": 2 * len(run.tools) + 1,
            "tool_calls": len(run.tools),
            "input_tokens": run.input_tokens,
            "output_tokens": run.output_tokens,
            "cost_usd": run.cost_usd,
            "error_count": int(run.error),
            "end_time": NOW - timedelta(seconds=float(rng.uniform(1, 3500))),
            "duration_ms": run.duration_ms,
            "verdict": "pass" if passed else "fail",
        }
    )
    for seq, tool in enumerate(run.tools, start=1):
        step = {"trace_id": trace_id, "revision": 1, "seq": seq, "kind": "tool"}
        rows["steps"].append({**step, "span_kind": "tool", "name": tool, "tool_name": tool})
    for rule, ok in zip(RULES, run.passes, strict=True):
        pack, rule_id = rule.split("/")
        rows["results"].append(
            {
                "trace_id": trace_id,
                "revision": 1,
                "pack": pack,
                "rule_id": rule_id,
                "verdict": "pass" if ok else "fail",
                "scope": "trajectory",
                "origin": "live",
            }
        )
