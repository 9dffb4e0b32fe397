"""One assembly round's pure work, run in a worker process: stored spans to trajectories,
handed to the round's evaluator, as rows for the store."""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

import pyarrow as pa

from collector.assembler.build import build_trajectory
from collector.assembler.prices import PriceTable
from collector.assembler.records import as_tables, step_rows, trajectory_row
from evaluators.base import Result
from evaluators.model import Trajectory

_prices: dict[str, PriceTable] = {}


class Evaluates(Protocol):
    """What the assembler is handed to evaluate each trajectory it builds (picklable)."""

    def evaluate(
        self, t: Trajectory, at: datetime
    ) -> tuple[list[Result], list[dict[str, Any]]]: ...


@dataclass(frozen=True)
class Closing:
    """A trace to close: why, its new revision, and up to when the previous revision saw spans."""

    trace_id: str
    reason: str
    revision: int
    covered: datetime | None = None


@dataclass
class Built:
    tables: dict[str, pa.Table]
    # per trajectory: (trace_id, close_reason, revision, late spans)
    closed: list[tuple[str, str, int, int]] = field(default_factory=list)
    step_kinds: Counter[str] = field(default_factory=Counter)
    build_errors: list[str] = field(default_factory=list)
    # the round's evaluator, back from the worker with what it tallied
    evaluator: Evaluates | None = None


def prices_for(overrides: dict[str, Any]) -> PriceTable:
    key = repr(sorted(overrides.items()))
    if key not in _prices:
        _prices[key] = PriceTable.load(overrides)
    return _prices[key]


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
    evaluator: Evaluates | None = None,
) -> Built:
    prices = prices_for(price_overrides)
    by_trace: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in spans.to_pylist():
        by_trace[row["trace_id"]].append(row)
    rows: dict[str, list[dict[str, Any]]] = {"trajectories": [], "steps": [], "results": []}
    built = Built({}, evaluator=evaluator)
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
        results: list[Result] = []
        if evaluator is not None:
            results, result_rows = evaluator.evaluate(t, closed_at)
            rows["results"].extend(result_rows)
        received = [r["received_at"] for r in span_rows]
        rows["trajectories"].append(
            trajectory_row(t, min(received), max(received), closed_at, results)
        )
        rows["steps"].extend(step_rows(t))
        built.closed.append((t.trace_id, t.close_reason, t.revision, late))
        built.step_kinds.update(s.kind for s in t.steps)
    built.tables = as_tables(rows)
    return built
