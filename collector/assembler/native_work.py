"""A batch of a round built and evaluated natively (`assembler.native`): the native builder
makes the `trajectories` and `steps` tables, the rule interpreter evaluates the rules it
supports over them, and Python builds a trajectory only for the runs a rule it does not
support applies to. The rows are those `build_batch` makes; the differential test
(tests/unit/assembler/test_native_work.py) holds the two paths equal.

A batch the native path cannot build as Python does (`Unsupported`), a retry that names
traces to store as build errors, or any error of the native path, is built by `build_batch`
instead, with the reason in `Built.fallback` (sextant_assembler_native_fallbacks_total)."""

from __future__ import annotations

import copy
import logging
import time
from collections import Counter
from datetime import datetime
from typing import Any

import pyarrow as pa

from collector.assembler.build import build_trajectory
from collector.assembler.native_build import Unsupported, build_round
from collector.assembler.work import (
    Built,
    Closing,
    Evaluates,
    build_batch,
    prices_for,
    unbuildable,
)
from collector.evaluation.native_results import (
    empty_results,
    results_table,
    run_verdicts,
    with_verdicts,
)
from collector.evaluation.native_round import Run, round_results
from collector.evaluation.native_tally import count_round
from collector.evaluation.round import RoundEvaluator
from evaluators.model import Trajectory

log = logging.getLogger(__name__)

RUN_COLUMNS = (
    "trace_id",
    "revision",
    "close_reason",
    "agent_run",
    "service_name",
    "agent_name",
    "service_version",
    "late_spans",
    "start_time_unix_nano",
    "end_time_unix_nano",
    "input_tokens",
    "output_tokens",
    "cost_usd",
    "build_error",
    "unrepresentable",
)


def assemble_batch(
    spans: pa.Table,
    closing: list[Closing],
    price_overrides: dict[str, Any],
    closed_at: datetime,
    evaluator: Evaluates | None = None,
    failed: dict[str, str] | None = None,
    native: bool = False,
) -> Built:
    """The batch's rows: natively when `native` and the native path can, else `build_batch`."""
    if not native:
        return build_batch(spans, closing, price_overrides, closed_at, evaluator, failed)
    if failed:
        reason = "retry"  # the traces that stopped a batch are stored as build errors
    else:
        try:  # a fresh copy: a native attempt that fails leaves nothing in the tally
            return native_batch(
                spans, closing, price_overrides, closed_at, copy.deepcopy(evaluator)
            )
        except Unsupported:
            reason = "unsupported"
        except BaseException as exc:  # a panic in the native code is no Exception (pyo3)
            if not isinstance(exc, Exception) and type(exc).__name__ != "PanicException":
                raise
            log.exception("native assembly failed; the batch is built in Python")
            reason = "error"
    built = build_batch(spans, closing, price_overrides, closed_at, evaluator, failed)
    built.fallback = reason
    return built


def native_batch(
    spans: pa.Table,
    closing: list[Closing],
    price_overrides: dict[str, Any],
    closed_at: datetime,
    evaluator: Evaluates | None = None,
) -> Built:
    """The batch as `build_batch` makes it (raises `Unsupported` for what is not built
    natively)."""
    if evaluator is not None and not isinstance(evaluator, RoundEvaluator):
        raise Unsupported("only a round's evaluator is evaluated natively")
    evaluating = evaluator is not None and bool(evaluator.packs)
    tables, errors = build_round(spans, closing, price_overrides, closed_at, evaluating)
    trajectories, steps = tables["trajectories"], tables["steps"]
    columns = trajectories.select(list(RUN_COLUMNS)).to_pydict()
    if trajectories["unrepresentable"].null_count < trajectories.num_rows:
        raise Unsupported("a total past its column's range")
    if len(set(columns["trace_id"])) != trajectories.num_rows:
        raise Unsupported("a trace closed twice in one batch")
    results = empty_results()
    if evaluator is not None:
        started = time.perf_counter()
        if evaluating:
            read = steps.append_column("attributes", tables["attributes"]["attributes"])
            results = evaluated(evaluator, spans, closing, price_overrides, tables, columns, read)
        verdicts = run_verdicts(results, trajectories.num_rows)
        count_round(evaluator.tally, columns, steps, results, verdicts.tolist())
        evaluator.tally.seconds += time.perf_counter() - started
        trajectories = with_verdicts(trajectories, results, verdicts)
    shas = evaluator.shas if evaluator is not None else {}
    return Built(
        {
            "trajectories": trajectories,
            "steps": steps,
            "results": results_table(results, trajectories, shas, closed_at),
        },
        list(
            zip(
                columns["trace_id"],
                columns["close_reason"],
                columns["revision"],
                columns["late_spans"],
                strict=True,
            )
        ),
        Counter(steps["kind"].to_pylist()),
        list(errors),
        evaluator,
        native=True,
    )


def evaluated(
    evaluator: RoundEvaluator,
    spans: pa.Table,
    closing: list[Closing],
    price_overrides: dict[str, Any],
    tables: dict[str, pa.Table],
    columns: dict[str, list[Any]],
    steps: pa.Table,
) -> pa.Table:
    """The round's results under the evaluator's packs (`native_results.RESULTS`); `steps`
    with their span attributes. A run a rule left to Python applies to is built in Python
    from its spans, as `build_batch` builds it."""
    items = {c.trace_id: c for c in closing}
    prices = prices_for(price_overrides)
    positions: dict[str, list[int]] = {}  # each trace's span rows, found once for all

    def trajectory(i: int) -> Trajectory:
        item = items[columns["trace_id"][i]]
        if not positions:
            for at, trace_id in enumerate(spans["trace_id"].to_pylist()):
                positions.setdefault(trace_id, []).append(at)
        rows = spans.take(positions[item.trace_id]).to_pylist()
        late = columns["late_spans"][i]
        if columns["build_error"][i] is not None:
            return unbuildable(item, rows, late)
        return build_trajectory(item.trace_id, rows, prices, item.revision, item.reason, late)

    runs = [
        Run(*values)
        for values in zip(
            columns["trace_id"],
            columns["agent_run"],
            columns["service_name"],
            columns["agent_name"],
            columns["service_version"],
            strict=True,
        )
    ]
    return round_results(evaluator.packs, runs, tables["trajectories"], steps, trajectory)
