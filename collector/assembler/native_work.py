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

import orjson
import pyarrow as pa
import pyarrow.compute as pc

from collector.assembler.build import build_trajectory
from collector.assembler.native_build import Unsupported, build_round
from collector.assembler.records import RunKey, objecting_rules
from collector.assembler.work import (
    Built,
    Closing,
    Evaluates,
    build_batch,
    prices_for,
    unbuildable,
)
from collector.evaluation.native_round import Run, round_results
from collector.evaluation.results import trajectory_result_columns
from collector.evaluation.round import RoundEvaluator, Tally
from collector.evaluation.runs import RunFacts
from collector.store.tables import columns_table
from evaluators.base import Result, overall_verdict
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
    tables, errors = build_round(spans, closing, price_overrides, closed_at)
    trajectories, steps = tables["trajectories"], tables["steps"]
    columns = trajectories.select(list(RUN_COLUMNS)).to_pydict()
    if any(v is not None for v in columns["unrepresentable"]):
        raise Unsupported("a total past its column's range")
    results: list[list[Result]] = [[] for _ in range(trajectories.num_rows)]
    if evaluator is not None:
        started = time.perf_counter()
        if evaluator.packs:
            results = evaluated(evaluator, spans, closing, price_overrides, tables, columns)
        count_round(evaluator.tally, columns, steps, results)
        evaluator.tally.seconds += time.perf_counter() - started
    keys = [
        (RunKey(*values), r)
        for *values, r in zip(
            columns["trace_id"],
            columns["revision"],
            columns["service_name"],
            columns["agent_name"],
            columns["service_version"],
            results,
            strict=True,
        )
        if r
    ]
    shas = evaluator.shas if evaluator is not None else {}
    result_columns = trajectory_result_columns(keys, shas, closed_at)
    return Built(
        {
            "trajectories": with_verdicts(trajectories, results),
            "steps": steps,
            "results": columns_table("results", result_columns, len(result_columns["trace_id"])),
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
) -> list[list[Result]]:
    """Each run's results under the evaluator's packs; a run a rule left to Python applies
    to is built in Python from its spans, as `build_batch` builds it."""
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
    steps = with_attributes(spans, tables["steps"])
    return round_results(evaluator.packs, runs, tables["trajectories"], steps, trajectory)


def with_attributes(spans: pa.Table, steps: pa.Table) -> pa.Table:
    """The steps with their span's attributes (JSON text), which the interpreter reads."""
    found: dict[tuple[str, str], str | None] = {}
    keys = zip(spans["trace_id"].to_pylist(), spans["span_id"].to_pylist(), strict=True)
    for key, attributes in zip(keys, spans["attributes"].to_pylist(), strict=True):
        if found.setdefault(key, attributes) != attributes:
            raise Unsupported("a span stored twice with different attributes")
    column = [
        found[key]
        for key in zip(steps["trace_id"].to_pylist(), steps["span_id"].to_pylist(), strict=True)
    ]
    return steps.append_column("attributes", pa.array(column, pa.string()))


def with_verdicts(trajectories: pa.Table, results: list[list[Result]]) -> pa.Table:
    """The `trajectories` table with each run's verdict columns (as `RoundRows.add` sets them)."""
    values = {
        # No rule applied: no verdict (an unevaluated run is not a pass).
        "verdict": [overall_verdict(r).value if r else None for r in results],
        "verdict_reasons": [sorted({x.reason for x in r if x.reason}) or None for r in results],
        "verdict_rules": [objecting_rules(r) for r in results],
    }
    for name, column in values.items():
        index = trajectories.schema.get_field_index(name)
        field = trajectories.schema.field(index)
        trajectories = trajectories.set_column(index, field, pa.array(column, field.type))
    return trajectories


def count_round(
    tally: Tally, columns: dict[str, list[Any]], steps: pa.Table, results: list[list[Result]]
) -> None:
    """The round in the evaluator's tally, as `RoundEvaluator.evaluate` counts each run."""
    services = dict(zip(columns["trace_id"], columns["service_name"], strict=True))
    tool_errors: Counter[str] = Counter()
    facts = steps.select(
        ["trace_id", "span_kind", "tool_name", "status", "mcp", "start_time_unix_nano"]
    )
    errored = pc.and_(pc.equal(facts["span_kind"], "tool"), pc.equal(facts["status"], "error"))
    tool_errors.update(facts.filter(errored)["trace_id"].to_pylist())
    for step in facts.filter(pc.is_valid(facts["mcp"])).to_pylist():
        tool = step["tool_name"] if step["span_kind"] == "tool" else None
        mcp = orjson.loads(step["mcp"])
        service = services[step["trace_id"]] or ""
        tally.mcp.count_step(service, mcp, tool, step["start_time_unix_nano"])
    for i, run_results in enumerate(results):
        trace_id = columns["trace_id"][i]
        run = RunFacts(
            trace_id,
            columns["revision"][i],
            columns["agent_run"][i],
            columns["service_name"][i],
            columns["agent_name"][i],
            columns["service_version"][i],
            (columns["end_time_unix_nano"][i] - columns["start_time_unix_nano"][i]) / 1e6,
            columns["input_tokens"][i],
            columns["output_tokens"][i],
            columns["cost_usd"][i],
            tool_errors[trace_id],
        )
        for pack in dict.fromkeys(r.pack for r in run_results):
            tally.applied[pack] += 1
        tally.count_run(run, run_results)
