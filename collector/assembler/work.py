"""One assembly round's pure work, run in a worker process: stored spans to trajectory rows."""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import pyarrow as pa

from collector.assembler.build import build_trajectory
from collector.assembler.prices import PriceTable
from collector.assembler.records import as_tables, step_rows, trajectory_row

_prices: dict[str, PriceTable] = {}


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


def prices_for(overrides: dict[str, Any]) -> PriceTable:
    key = repr(sorted(overrides.items()))
    if key not in _prices:
        _prices[key] = PriceTable.load(overrides)
    return _prices[key]


def build_batch(
    spans: pa.Table, closing: list[Closing], price_overrides: dict[str, Any], closed_at: datetime
) -> Built:
    prices = prices_for(price_overrides)
    by_trace: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in spans.to_pylist():
        by_trace[row["trace_id"]].append(row)
    trajectories, steps = [], []
    closed: list[tuple[str, str, int, int]] = []
    kinds: Counter[str] = Counter()
    for item in closing:
        rows = by_trace.get(item.trace_id)
        if not rows:
            continue  # nothing stored under this id any more (deleted by retention)
        covered = item.covered
        late = sum(1 for r in rows if covered is not None and r["received_at"] > covered)
        t = build_trajectory(item.trace_id, rows, prices, item.revision, item.reason, late)
        received = [r["received_at"] for r in rows]
        trajectories.append(trajectory_row(t, min(received), max(received), closed_at))
        steps.extend(step_rows(t))
        closed.append((t.trace_id, t.close_reason, t.revision, late))
        kinds.update(s.kind for s in t.steps)
    return Built(as_tables(trajectories, steps), closed, kinds)
