"""Drift rules over the store: find the targets, build both sides, compare every metric."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import replace
from datetime import datetime, timedelta

import duckdb
import numpy as np

from collector.drift import samples, sequential
from collector.drift.details import Values, details, percentiles, rate, tool_shares
from collector.drift.outcome import WindowOutcome, is_interrupt, unevaluated
from collector.drift.sides import Side, exactly, matching, sides
from collector.store.reader import Reader
from collector.targets import Target
from evaluators.base import Verdict
from evaluators.drift import (
    Comparison,
    compare_continuous,
    compare_proportions,
    compare_tool_mix,
    holm,
    judge,
)
from evaluators.rulepack import Selector
from evaluators.sequential import weighted_holm
from evaluators.window import DriftRule

# A tool the baseline "always" used: called in at least this share of its runs (or cases).
# Trace ids behind a shifted metric, up to a limit, fetched only when a rule does not pass.
Evidence = Callable[[int], list[str]]
ALWAYS = 0.99


def find_targets(
    cursor: duckdb.DuckDBPyConnection,
    selector: Selector,
    start: datetime,
    end: datetime,
    version: str | None = None,
) -> list[Target]:
    """Targets with runs in the window that the pack's selector (and a version glob) admits."""
    conditions, params = matching(selector.service, selector.agent, selector.version)
    if version is not None:
        conditions += ("t.service_version GLOB ?",)
        params += (version,)
    fixed = ("t.is_current", "t.agent_run", "t.end_time >= ?", "t.end_time < ?")
    where = " AND ".join((*fixed, *conditions))
    rows = cursor.execute(
        f"SELECT DISTINCT service_name, agent_name, service_version FROM trajectories t"
        f" WHERE {where} ORDER BY ALL",
        [start, end, *params],
    ).fetchall()
    return [Target(r[0], r[1], r[2]) for r in rows]


def evaluate_drift(
    cursor: duckdb.DuckDBPyConnection,
    selector: Selector,
    rule: DriftRule,
    now: datetime,
    max_evidence: int = 10,
    reader: Reader | None = None,
) -> list[WindowOutcome]:
    """Every target's outcomes; a target whose evaluation raises is a REVIEW of its own
    (`evaluation_error`) and the others are evaluated all the same. With the `reader` whose
    cursor this is, each target reads a snapshot of its own (a failed query aborts the
    transaction it ran in)."""
    start = now - timedelta(seconds=rule.current.last)
    candidate = rule.compare.candidate.version if rule.compare else None
    outcomes: list[WindowOutcome] = []
    for i, target in enumerate(find_targets(cursor, selector, start, now, candidate)):
        try:
            if reader is not None and i:
                reader.renew(cursor)
            outcomes.extend(evaluate_target(cursor, rule, target, now, max_evidence))
        except Exception as exc:
            if is_interrupt(exc, reader):
                raise
            outcomes.append(unevaluated(target, ",".join(rule.metrics), exc, start, now))
    return outcomes


def evaluate_target(
    cursor: duckdb.DuckDBPyConnection,
    rule: DriftRule,
    target: Target,
    now: datetime,
    max_evidence: int,
) -> list[WindowOutcome]:
    since = None
    if rule.compare is not None:
        since = sequential.canary_start(cursor, Side(*exactly(target), end=now))
    pair = sides(rule, target, now, since)
    if pair is None:
        return []
    baseline, current = pair
    start = current.start or now - timedelta(seconds=rule.current.last)
    values: dict[str, Values] = {}
    compared = list(compare_sides(cursor, rule, baseline, current, values))
    per_test: dict[str, tuple[float, float]] = {}
    if rule.is_sequential:
        compared, adjusted, tests = anytime(cursor, rule, baseline, current, compared, per_test)
    else:
        adjusted = corrected(rule, [comparison for _, comparison, _ in compared], per_test, values)
        tests = sum(len(c.parts) or 1 for _, c, _ in compared)
    mode = "canary" if rule.compare is not None else "baseline"
    versions = side_versions(cursor, baseline) if rule.compare is not None else None
    outcomes: list[WindowOutcome] = []
    for (metric, comparison, evidence), p_value in zip(compared, adjusted, strict=True):
        tested = replace(comparison, p_value=p_value)
        verdict, reason = judge(
            tested, rule.threshold(metric.split(":")[0]), rule.alpha, rule.min_samples
        )
        found = evidence(max_evidence) if verdict != Verdict.PASS else []
        decided_on = details(
            metric, values.get(metric, {}), comparison.p_value, p_value, per_test, mode
        )
        if versions is not None:
            decided_on["baseline_versions"] = versions
        outcomes.append(
            WindowOutcome(
                target=target,
                metric=metric,
                verdict=verdict,
                reason=reason,
                message=message(rule, metric, comparison, p_value, tests, verdict),
                window_start=start,
                window_end=now,
                baseline=baseline.description,
                effect_size=comparison.effect_size,
                p_value=p_value,
                baseline_n=comparison.baseline_n,
                current_n=comparison.current_n,
                evidence=tuple(found),
                details=decided_on,
            )
        )
    return outcomes


def side_versions(cursor: duckdb.DuckDBPyConnection, side: Side, limit: int = 5) -> list[str]:
    """The versions a side's runs report (a canary's baseline is a version glob), so that
    its runs can be listed version by version."""
    runs, params = side.sql()
    rows = cursor.execute(
        f"SELECT DISTINCT service_version FROM ({runs}) WHERE service_version IS NOT NULL"
        f" ORDER BY 1 LIMIT {int(limit)}",
        params,
    ).fetchall()
    return [r[0] for r in rows]


Compared = tuple[str, Comparison, Evidence]


def anytime(
    cursor: duckdb.DuckDBPyConnection,
    rule: DriftRule,
    baseline: Side,
    current: Side,
    compared: list[Compared],
    per_test: dict[str, tuple[float, float]] | None = None,
) -> tuple[list[Compared], list[float], int]:
    """The comparisons with their anytime-valid one-sided p-values, and each one's p-value
    after the weighted Holm correction over the rule's tests (one per tool, per rule pass
    rate), and how many tests that is.

    A test whose metric has too few samples to be judged stays in the family with p = 1: it
    cannot fail, and the family's weights are the same at every look. `per_test` receives
    every test's (raw, adjusted) p-value."""
    life = sequential.load(cursor, baseline, current)
    raw = dict(life.tests(rule.horizon))
    weights = sequential.family(rule, raw)
    judged = {
        metric for metric, c, _ in compared if min(c.baseline_n, c.current_n) >= rule.min_samples
    }
    names = sorted(weights)
    p_values = [raw[t] if member(t, judged) else 1.0 for t in names]
    holm_p: dict[str, float] = {}
    for group in families(rule, names):
        found = weighted_holm(
            [p_values[names.index(t)] for t in group], [weights[t] for t in group]
        )
        holm_p.update(zip(group, found, strict=True))
    if per_test is not None:
        per_test.update((t, (raw[t], holm_p[t])) for t in names)
    out: list[Compared] = []
    adjusted: list[float] = []
    for metric, comparison, evidence in compared:
        own = [t for t in names if t == metric or t.startswith(f"{metric}:")]
        if metric == "pass_rate":  # the per-rule pass rates are metrics of their own
            own = [t for t in own if t == metric]
        p_raw = min((raw[t] for t in own), default=1.0)
        out.append((metric, replace(comparison, p_value=p_raw, parts=()), evidence))
        adjusted.append(min((holm_p[t] for t in own), default=1.0))
    return out, adjusted, len(names)


def families(rule: DriftRule, names: list[str]) -> list[list[str]]:
    """The tests corrected together: all of them (`holm`), or each metric alone (`none`), a
    tool mix still over its tools."""
    if rule.correction == "holm":
        return [names]
    by_metric: dict[str, list[str]] = {}
    for test in names:
        by_metric.setdefault("tool_choice" if test.startswith("tool_choice:") else test, []).append(
            test
        )
    return list(by_metric.values())


def member(test: str, judged: set[str]) -> bool:
    """Whether a test belongs to a metric with enough samples to be judged."""
    return test in judged or (test.startswith("tool_choice:") and "tool_choice" in judged)


def corrected(
    rule: DriftRule,
    comparisons: list[Comparison],
    per_test: dict[str, tuple[float, float]] | None = None,
    values: dict[str, Values] | None = None,
) -> list[float]:
    """The p-value each comparison is judged on.

    Holm's correction runs over every test of the target that has enough samples to be judged
    (the others are reviews whatever their p-value); a comparison made of several tests (the
    tool mix, one per tool) enters with each of them and is judged on the smallest of their
    adjusted p-values. `per_test` receives each tool's (raw, adjusted) p-value, the tools
    named by `values` (the tool mix's parts are its tools in sorted order).
    """
    adjusted = [c.p_value for c in comparisons]
    parts_adjusted: dict[int, list[float]] = {
        i: list(c.parts) for i, c in enumerate(comparisons) if c.parts
    }
    if rule.correction != "none":
        adjust(rule, comparisons, adjusted, parts_adjusted)
    tools = ((values or {}).get("tool_choice") or {}).get("tools") or {}
    names = [t for t in sorted(tools) if tools[t]["baseline"] or tools[t]["current"]]
    for i, c in enumerate(comparisons):
        if per_test is not None and len(c.parts) == len(names) and c.parts:
            for tool, raw, adj in zip(names, c.parts, parts_adjusted[i], strict=True):
                per_test[f"tool_choice:{tool}"] = (raw, adj)
    return adjusted


def adjust(
    rule: DriftRule,
    comparisons: list[Comparison],
    adjusted: list[float],
    parts_adjusted: dict[int, list[float]],
) -> None:
    """Holm over the judged comparisons' tests, in place."""
    family = [
        (i, p_value)
        for i, c in enumerate(comparisons)
        if min(c.baseline_n, c.current_n) >= rule.min_samples
        for p_value in (c.parts or (c.p_value,))
    ]
    judged = {i for i, _ in family}
    for i in judged:
        adjusted[i] = 1.0
    part = dict.fromkeys(judged, 0)
    for (i, _), p_value in zip(family, holm([p for _, p in family]), strict=True):
        adjusted[i] = min(adjusted[i], p_value)
        if i in parts_adjusted:
            parts_adjusted[i][part[i]] = p_value
            part[i] += 1


def compare_sides(
    cursor: duckdb.DuckDBPyConnection,
    rule: DriftRule,
    baseline: Side,
    current: Side,
    values: dict[str, Values] | None = None,
) -> Iterator[tuple[str, Comparison, Evidence]]:
    """(metric, comparison, evidence(limit) -> trace ids) for each metric of the rule;
    `values` receives each metric's value on both sides."""
    b, c = samples.unit_values(cursor, baseline), samples.unit_values(cursor, current)
    b_units, c_units = len(b["steps"]), len(c["steps"])
    seen: dict[str, Values] = {} if values is None else values
    for metric in rule.metrics:
        if metric in samples.CONTINUOUS:
            comp = compare_continuous(b[metric], c[metric], samples.UNITS[metric])
            found = evidence_of(samples.continuous_evidence, cursor, current, metric, comp)
            seen[metric] = {
                "baseline": percentiles(b[metric]),
                "current": percentiles(c[metric]),
                "unit": samples.UNITS[metric].strip(),
            }
            yield metric, comp, found
        elif metric in samples.FLAGS:
            comp = proportions(b[metric], c[metric])
            seen[metric] = {"baseline": mean_of(b[metric]), "current": mean_of(c[metric])}
            yield metric, comp, evidence_of(samples.flag_evidence, cursor, current, metric, comp)
            if metric == "pass_rate":
                yield from rule_pass_rates(cursor, baseline, current, seen)
        else:
            yield tool_choice(cursor, baseline, current, b_units, c_units, seen)


def mean_of(values: np.ndarray) -> float | None:
    kept = values[~np.isnan(values)]
    return float(kept.mean()) if len(kept) else None


def evidence_of(
    query: Callable[..., list[str]],
    cursor: duckdb.DuckDBPyConnection,
    side: Side,
    metric: str,
    comp: Comparison,
) -> Evidence:
    """The trace ids behind a shifted metric, fetched only when the rule does not pass."""
    return lambda limit: query(cursor, side, metric, comp.direction, limit)


def proportions(baseline: np.ndarray, current: np.ndarray) -> Comparison:
    b, c = baseline[~np.isnan(baseline)], current[~np.isnan(current)]
    return compare_proportions(float(b.sum()), len(b), float(c.sum()), len(c))


def rule_pass_rates(
    cursor: duckdb.DuckDBPyConnection,
    baseline: Side,
    current: Side,
    values: dict[str, Values],
) -> Iterator[tuple[str, Comparison, Evidence]]:
    b, c = samples.rule_passes(cursor, baseline), samples.rule_passes(cursor, current)
    for rule in sorted(set(b) | set(c)):
        (bx, bn), (cx, cn) = b.get(rule, (0.0, 0)), c.get(rule, (0.0, 0))
        comp = compare_proportions(bx, bn, cx, cn)
        values[f"pass_rate:{rule}"] = {"baseline": rate(bx, bn), "current": rate(cx, cn)}
        yield (
            f"pass_rate:{rule}",
            comp,
            evidence_of(samples.rule_evidence, cursor, current, rule, comp),
        )


def tool_choice(
    cursor: duckdb.DuckDBPyConnection,
    baseline: Side,
    current: Side,
    b_units: int,
    c_units: int,
    values: dict[str, Values],
) -> tuple[str, Comparison, Evidence]:
    (b, b_used), (c, c_used) = samples.tools(cursor, baseline), samples.tools(cursor, current)
    values["tool_choice"] = {"tools": tool_shares(b_used, c_used, b_units, c_units)}
    comp = compare_tool_mix((b, c), (b_used, c_used), b_units, c_units)
    b_total, c_total = sum(b.values()) or 1.0, sum(c.values()) or 1.0
    rises = {t: w / c_total - b.get(t, 0.0) / b_total for t, w in c.items()}
    never = [t for t in rises if t not in b]
    gained = never or [t for t, d in sorted(rises.items(), key=lambda i: -i[1])[:3] if d > 0]
    gained = [t for t in gained if t != samples.NO_TOOL]
    lost = [
        t
        for t, hits in b_used.items()
        if t != samples.NO_TOOL and hits / b_units >= ALWAYS > c_used.get(t, 0.0) / c_units
    ]

    def evidence(limit: int) -> list[str]:
        return samples.tool_evidence(cursor, current, gained, lost, limit)

    notes = []
    if never:
        notes.append("new: " + ", ".join(sorted(never)))
    if lost:
        notes.append("no longer always: " + ", ".join(sorted(lost)))
    detail = comp.detail + (f" ({'; '.join(notes)})" if notes else "")
    return "tool_choice", replace(comp, detail=detail), evidence


STATISTIC = {"tool_choice": "JS distance", "error_rate": "Δ rate", "pass_rate": "Δ rate"}


def message(
    rule: DriftRule, metric: str, comp: Comparison, p_value: float, tests: int, verdict: Verdict
) -> str:
    name = metric.split(":")[0]
    statistic = STATISTIC.get(name, "KS D")
    kind = "anytime one-sided p" if rule.is_sequential else "p"
    significance = f"{kind}={comp.p_value:.3g}"
    if p_value != comp.p_value:
        holm = "weighted-Holm" if rule.is_sequential else "Holm"
        significance += f", {holm}-adjusted over {tests} tests p={p_value:.3g}"
    text = (
        f"{metric}: {comp.detail}; {statistic} {comp.effect_size:.3f}"
        f" (threshold {rule.threshold(name):g}), {significance} (alpha {rule.alpha:g});"
        f" n {comp.baseline_n} baseline, {comp.current_n} current"
    )
    if verdict == Verdict.REVIEW:
        text = f"fewer than {rule.min_samples} samples on a side; " + text
    return text
