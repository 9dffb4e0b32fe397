"""One assembly round's pure work, run in a worker process: stored spans to trajectories,
evaluated under the current rule packs, as rows for the store."""

from __future__ import annotations

import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import pyarrow as pa

from collector.assembler.build import build_trajectory
from collector.assembler.prices import PriceTable
from collector.assembler.records import as_tables, result_rows, step_rows, trajectory_row
from evaluators.engine import evaluate_pack
from evaluators.model import Trajectory
from evaluators.rulepack import RulePack, load_text

_prices: dict[str, PriceTable] = {}
_packs: dict[str, RulePack] = {}


@dataclass(frozen=True)
class Closing:
    """A trace to close: why, its new revision, and up to when the previous revision saw spans."""

    trace_id: str
    reason: str
    revision: int
    covered: datetime | None = None


@dataclass(frozen=True)
class PackText:
    """A loaded pack as it crosses to a worker: its text and hash (workers compile and cache)."""

    name: str
    sha256: str
    text: str
    disabled_rules: frozenset[str] = frozenset()


@dataclass
class Built:
    tables: dict[str, pa.Table]
    # per trajectory: (trace_id, close_reason, revision, late spans)
    closed: list[tuple[str, str, int, int]] = field(default_factory=list)
    step_kinds: Counter[str] = field(default_factory=Counter)
    # per (pack, rule): how results went, for metrics and evaluator health
    outcomes: Counter[tuple[str, str, str, str]] = field(default_factory=Counter)
    # an example trace per outcome and per trajectory verdict: exemplars link metrics to traces
    examples: dict[tuple[str, ...], str] = field(default_factory=dict)
    verdicts: Counter[str] = field(default_factory=Counter)
    scores: list[tuple[str, str, float]] = field(default_factory=list)
    errors: dict[tuple[str, str], str] = field(default_factory=dict)
    applied: Counter[str] = field(default_factory=Counter)  # pack -> trajectories it applied to
    evaluation_seconds: float = 0.0
    build_errors: list[str] = field(default_factory=list)


def prices_for(overrides: dict[str, Any]) -> PriceTable:
    key = repr(sorted(overrides.items()))
    if key not in _prices:
        _prices[key] = PriceTable.load(overrides)
    return _prices[key]


def compiled(pack: PackText) -> RulePack:
    if pack.sha256 not in _packs:
        loaded = load_text(pack.text, pack.name).pack
        if pack.disabled_rules:
            kept = [r for r in loaded.rules if r.id not in pack.disabled_rules]
            loaded = loaded.model_copy(update={"rules": kept})
        _packs[pack.sha256] = loaded
    return _packs[pack.sha256]


def unbuildable(item: Closing, rows: list[dict[str, Any]], late: int) -> Trajectory:
    """A stand-in for a trace the builder could not read: stored as incomplete, so it closes
    (and is reviewed) instead of being retried for ever."""
    first = rows[0]
    return Trajectory(
        trace_id=item.trace_id,
        revision=item.revision,
        status="incomplete",
        close_reason=item.reason,
        agent_run=True,
        service_name=first.get("service_name"),
        agent_name=None,
        service_version=first.get("service_version"),
        incomplete_reasons=["build_error"],
        start_time_unix_nano=min(r["start_time_unix_nano"] for r in rows),
        end_time_unix_nano=max(r["end_time_unix_nano"] for r in rows),
        span_count=len(rows),
        late_spans=late,
    )


def build_batch(
    spans: pa.Table,
    closing: list[Closing],
    price_overrides: dict[str, Any],
    closed_at: datetime,
    packs: tuple[PackText, ...] = (),
) -> Built:
    prices = prices_for(price_overrides)
    rule_packs = [(p, compiled(p)) for p in packs]
    shas = {rp.name: p.sha256 for p, rp in rule_packs}
    by_trace: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in spans.to_pylist():
        by_trace[row["trace_id"]].append(row)
    rows: dict[str, list[dict[str, Any]]] = {"trajectories": [], "steps": [], "results": []}
    built = Built({})
    for item in closing:
        span_rows = by_trace.get(item.trace_id)
        if not span_rows:
            continue  # nothing stored under this id any more (deleted by retention)
        covered = item.covered
        late = sum(1 for r in span_rows if covered is not None and r["received_at"] > covered)
        try:
            t = build_trajectory(item.trace_id, span_rows, prices, item.revision, item.reason, late)
        except Exception as exc:  # bad data in one trace must not stop the others
            t = unbuildable(item, span_rows, late)
            built.build_errors.append(f"{item.trace_id}: {type(exc).__name__}: {exc}")
        started = time.perf_counter()
        results = []
        for _, pack in rule_packs:
            try:
                pack_results = evaluate_pack(t, pack)
            except Exception as exc:  # evaluate_pack reviews its own errors; this is a backstop
                built.build_errors.append(f"{item.trace_id}: pack {pack.name}: {exc!r}")
                continue
            if pack_results:
                built.applied[pack.name] += 1
            results.extend(pack_results)
        built.evaluation_seconds += time.perf_counter() - started
        for r in results:
            outcome = (r.pack, r.rule_id, r.verdict.value, r.reason)
            built.outcomes[outcome] += 1
            built.examples[outcome] = t.trace_id
            if r.score is not None and r.rule_type == "trajectory":
                built.scores.append((r.pack, r.rule_id, r.score))
            if r.reason == "evaluator_error":
                built.errors[(r.pack, r.rule_id)] = r.message
        received = [r["received_at"] for r in span_rows]
        row = trajectory_row(t, min(received), max(received), closed_at, results)
        rows["trajectories"].append(row)
        verdict = row["verdict"] or "none"
        built.verdicts[verdict] += 1
        built.examples[(verdict,)] = t.trace_id
        rows["steps"].extend(step_rows(t))
        rows["results"].extend(result_rows(t, results, shas, closed_at))
        built.closed.append((t.trace_id, t.close_reason, t.revision, late))
        built.step_kinds.update(s.kind for s in t.steps)
    built.tables = as_tables(rows)
    return built
