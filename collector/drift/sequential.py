"""A canary's life as anytime-valid tests: both versions' runs since the canary's first run, read
in the order the store closed them, cut into blocks, and one e-process per test.

The tests' state is not stored: it is a function of the stored runs in closing order, recomputed
at every look. A restart therefore resumes exactly where it was, and a replica that takes a
service over reads the same runs (a window split over replicas is a review, see resharding). A
run closed after a look lands after that look's runs in the order, so a later look extends the
sequence an earlier one saw instead of rewriting it.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime

import duckdb
import numpy as np

from collector.drift import samples
from collector.drift.sides import Side
from collector.store.review_tables import IN_FORCE
from evaluators import sequential
from evaluators.window import DriftRule

# The order the store closed runs in; runs written without a close time (imports) by their end.
CLOSED = "coalesce(closed_at, end_time)"
# A round closes many runs at once: those are in the order they ended, so that a block stays a
# stretch of consecutive runs of both versions instead of a draw by trace id.
CLOSING_ORDER = f"{CLOSED}, end_time, trace_id"


@dataclass(frozen=True)
class Life:
    """Both versions' runs in closing order: side (0 baseline, 1 candidate), per-run values
    (continuous metrics, error and pass flags), tools called, per-rule failures, blocks."""

    sides: np.ndarray
    values: dict[str, np.ndarray]
    tools: dict[str, np.ndarray]  # tool -> 1.0 for the runs calling it
    rule_failed: dict[str, np.ndarray]
    blocks: np.ndarray

    def evidence(self, flags: np.ndarray, horizon: int) -> np.ndarray:
        """-log p after each run, for the candidate's runs being flagged more often."""
        return sequential.evidence(self.sides, flags, self.blocks, horizon)

    def trajectories(self, horizon: int) -> Iterator[tuple[str, np.ndarray]]:
        """(test, -log p after each run) for every test a canary rule can hold: the
        continuous metrics (higher is worse), error_rate (errors up), pass_rate and
        pass_rate:PACK/RULE (passes down), tool_choice:TOOL (the candidate calling a tool
        more often)."""
        for metric in samples.CONTINUOUS:
            above = sequential.above_median(self.values[metric], self.blocks)
            yield metric, self.evidence(above, horizon)
        yield "error_rate", self.evidence(self.values["error_rate"], horizon)
        yield "pass_rate", self.evidence(1.0 - self.values["pass_rate"], horizon)
        for rule, failed in sorted(self.rule_failed.items()):
            yield f"pass_rate:{rule}", self.evidence(failed, horizon)
        for tool, used in sorted(self.tools.items()):
            yield f"tool_choice:{tool}", self.evidence(used, horizon)

    def tests(self, horizon: int) -> Iterator[tuple[str, float]]:
        """(test, its p-value over the life so far, valid at every look)."""
        for test, found in self.trajectories(horizon):
            yield test, sequential.anytime_p(found)


def canary_start(cursor: duckdb.DuckDBPyConnection, conditions: Side) -> datetime | None:
    """The end of the candidate target's first run: where its life (and the comparison) starts."""
    runs, params = conditions.sql()
    row = cursor.execute(f"WITH runs AS ({runs}) SELECT min(end_time) FROM runs", params).fetchone()
    return row[0] if row else None


def load(cursor: duckdb.DuckDBPyConnection, baseline: Side, current: Side) -> Life:
    """Both sides' runs, one query per kind of value, in closing order."""
    b_runs, b_params = baseline.sql()
    c_runs, c_params = current.sql()
    exprs = {**samples.CONTINUOUS, **samples.FLAGS}
    select = ", ".join(f"({sql})::DOUBLE AS {name}" for name, sql in exprs.items())
    both = (
        f"WITH b AS ({b_runs}), c AS ({c_runs}),"
        f" runs AS (SELECT 0 AS side, * FROM b UNION ALL SELECT 1 AS side, * FROM c)"
    )
    params = [*b_params, *c_params]
    order = f"ORDER BY {CLOSING_ORDER}"
    columns = cursor.execute(
        f"{both} SELECT side, trace_id, {select} FROM runs {order}", params
    ).fetchnumpy()
    index = {str(t): i for i, t in enumerate(columns["trace_id"])}
    sides = np.asarray(columns["side"], dtype=int)
    tools: dict[str, np.ndarray] = {}
    calling = np.zeros(len(index), dtype=bool)
    called = cursor.execute(
        f"{both} SELECT runs.trace_id, list(DISTINCT coalesce(s.tool_name, s.name))"
        " FROM runs JOIN steps s ON s.trace_id = runs.trace_id AND s.revision = runs.revision"
        " WHERE s.span_kind = 'tool' GROUP BY runs.trace_id",
        params,
    ).fetchall()
    for trace_id, names in called:
        row = index[trace_id]
        calling[row] = True
        for name in names:
            tools.setdefault(name, np.zeros(len(index)))[row] = 1.0
    if not calling.all():
        tools[samples.NO_TOOL] = (~calling).astype(float)
    rule_failed: dict[str, np.ndarray] = {}
    results = cursor.execute(
        f"{both} SELECT runs.trace_id, r.pack || '/' || r.rule_id,"
        " bool_and(r.verdict = 'pass') FROM runs JOIN results r ON r.trace_id = runs.trace_id"
        " AND r.revision = runs.revision WHERE r.scope = 'trajectory' AND r.origin = 'live'"
        f" AND r.verdict <> 'not_applicable' AND {IN_FORCE} GROUP BY ALL",
        params,
    ).fetchall()
    for trace_id, rule, passed in results:
        column = rule_failed.setdefault(rule, np.full(len(index), np.nan))
        column[index[trace_id]] = 0.0 if passed else 1.0
    return Life(
        sides=sides,
        values={name: samples.filled(columns[name]) for name in exprs},
        tools=tools,
        rule_failed=rule_failed,
        blocks=sequential.blocks_of(sides),
    )


def family(rule: DriftRule, tests: dict[str, float]) -> dict[str, float]:
    """Each test's weight: the rule's weight of its metric, split equally between the metric's
    tests (one per tool, overall and per-rule pass rates) that have no weight of their own
    (pass_rate:PACK/RULE may have one). Only the rule's metrics are in the family."""
    weights: dict[str, float] = {}
    for metric in rule.metrics:
        own = [t for t in tests if t.split(":")[0] == metric]
        pinned = {t: rule.weights[t] for t in own if t != metric and t in rule.weights}
        free = [t for t in own if t not in pinned]
        weights.update(pinned)
        for test in free:
            weights[test] = rule.weight(metric) / len(free)
    return weights
