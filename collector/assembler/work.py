"""One assembly round's pure work, run in a worker process (or, natively, in a thread of the
collector: native_work.py): stored spans to trajectories, handed to the round's evaluator, as
rows for the store."""

from __future__ import annotations

import copy
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

import pyarrow as pa
import pyarrow.compute as pc

from collector.assembler.build import build_trajectory
from collector.assembler.prices import PriceTable
from collector.assembler.records import RoundRows, step_json
from evaluators.base import Result
from evaluators.model import Trajectory

_prices: dict[str, PriceTable] = {}


class Evaluates(Protocol):
    """What the assembler is handed to evaluate each trajectory it builds (picklable)."""

    @property
    def shas(self) -> dict[str, str]:
        """pack -> sha256 of the version evaluated, stored with each of its results."""
        ...

    def evaluate(self, t: Trajectory) -> list[Result]: ...


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
    # why a batch asked to be built natively was built in Python (None: it was not asked,
    # or it was built natively)
    fallback: str | None = None
    native: bool = False  # built by the native builder


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
    failed: dict[str, str] | None = None,
) -> Built:
    """The round's rows. A trace that raises while it is built, evaluated or turned into rows
    is stored as a build error instead; so are the traces named in `failed` (trace id ->
    error), which an earlier attempt found to stop a whole batch."""
    prices = prices_for(price_overrides)
    by_trace: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in spans.to_pylist():
        by_trace[row["trace_id"]].append(row)
    rows = RoundRows(closed_at, evaluator.shas if evaluator is not None else {})
    built = Built({}, evaluator=evaluator)
    for item in closing:
        span_rows = by_trace.get(item.trace_id)
        if not span_rows:
            continue  # nothing stored under this id any more (deleted by retention)
        covered = item.covered
        late = sum(1 for r in span_rows if covered is not None and r["received_at"] > covered)
        error = (failed or {}).get(item.trace_id)
        if error is None:
            try:  # bad data in one trace must not stop the others
                t = build_trajectory(
                    item.trace_id, span_rows, prices, item.revision, item.reason, late
                )
                add_trace(rows, t, span_rows, evaluator)
            except Exception as exc:
                error = f"{type(exc).__name__}: {exc}"
        if error is not None:
            built.build_errors.append(f"{item.trace_id}: {error}")
            t = unbuildable(item, span_rows, late)
            add_trace(rows, t, span_rows, evaluator, error)
        built.closed.append((t.trace_id, t.close_reason, t.revision, late))
        built.step_kinds.update(s.kind for s in t.steps)
    built.tables = rows.tables()
    return built


def add_trace(
    rows: RoundRows,
    t: Trajectory,
    span_rows: list[dict[str, Any]],
    evaluator: Evaluates | None,
    build_error: str | None = None,
) -> None:
    """One trajectory evaluated and added to the round's rows whole: what can raise (encoding
    its steps, evaluating it) is done before anything of it is added, so a trace that raises
    half way leaves nothing behind."""
    encoded = step_json(t.steps)
    results = evaluator.evaluate(t) if evaluator is not None else []
    received = [r["received_at"] for r in span_rows]
    rows.add(t, (min(received), max(received)), results, encoded, build_error)


class Builds(Protocol):
    """Builds one batch of a round (in a worker process or inline)."""

    def __call__(
        self, spans: pa.Table, closing: list[Closing], evaluator: Evaluates | None, **kw: Any
    ) -> Built: ...


def build_isolated(
    build: Builds, spans: pa.Table, closing: list[Closing], evaluator: Evaluates | None
) -> list[Built]:
    """The round's batches. A batch that raises (a value no table can hold, a worker that dies
    on it) is split in halves until each trace that raises is alone; that trace is then stored
    as a build error with the error's text and the rest of the round goes on, so one trace
    never stops a round, nor the rounds after it. Each attempt gets a fresh copy of the
    evaluator, so a failed attempt leaves nothing in its tally."""
    try:
        return [build(spans, closing, copy.deepcopy(evaluator))]
    except Exception as exc:
        if len(closing) == 1:
            failed = {closing[0].trace_id: f"{type(exc).__name__}: {exc}"}
            return [build(spans, closing, copy.deepcopy(evaluator), failed=failed)]
    half = len(closing) // 2
    out: list[Built] = []
    for part in (closing[:half], closing[half:]):
        out += build_isolated(build, spans_of(spans, part), part, evaluator)
    return out


def spans_of(spans: pa.Table, part: list[Closing]) -> pa.Table:
    """The rows of `spans` that belong to the traces of `part`."""
    ids = pa.array([item.trace_id for item in part], pa.string())
    return spans.filter(pc.is_in(spans["trace_id"], ids))


def split_round(
    closing: list[Closing], spans: int, workers: int, least: int
) -> list[list[Closing]]:
    """A round's traces in up to `workers` parts of about equal size, each of `least` spans or
    more on average, so that the worker processes build them side by side (a round built by one
    worker left the others idle, and assembly fell behind a load it had the cores for)."""
    count = max(1, min(workers, spans // max(1, least), len(closing)))
    size = -(-len(closing) // count)
    return [closing[i : i + size] for i in range(0, len(closing), size)]


def merged_tables(builds: list[Built]) -> dict[str, pa.Table]:
    """The tables of a round's batches, as one commit."""
    if len(builds) == 1:
        return builds[0].tables
    return {name: pa.concat_tables([b.tables[name] for b in builds]) for name in builds[0].tables}
