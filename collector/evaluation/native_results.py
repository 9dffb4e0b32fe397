"""A natively evaluated round's results as Arrow columns, never a Python object per result: the
interpreter's rows and the few results the Python evaluators gave, merged in the order
`evaluate_pack` gives them, made into the `results` table and each run's verdict columns as
`RoundRows` makes them from `Result` objects (collector/assembler/records.py, results.py).

A round's results (`RESULTS`): one row per result, runs in the round's order, each run's packs
in the order evaluated and each pack's rules in its own order; `run` is the run's row in the
round's `trajectories` table, `reason` the `Result.reason` (never NULL: "" when none),
`evidence_span_ids` NULL when there is no evidence, `audit` whether the pack's review audits
it. The differential test (tests/unit/assembler/test_native_work.py) holds the tables made from
them equal to the Python path's."""

from __future__ import annotations

from datetime import datetime

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from collector.store.tables import ARROW_SCHEMAS
from evaluators.base import Result
from evaluators.review_sla import AuditSettings, audit_sampled

TEXT_LIST = pa.list_(pa.string())
RESULTS = pa.schema(
    [
        pa.field("run", pa.int64()),
        pa.field("pack", pa.string()),
        pa.field("pack_version", pa.string()),
        pa.field("rule_id", pa.string()),
        pa.field("rule_type", pa.string()),
        pa.field("verdict", pa.string()),
        pa.field("score", pa.float64()),
        pa.field("severity", pa.string()),
        pa.field("reason", pa.string()),
        pa.field("message", pa.string()),
        pa.field("evidence_span_ids", TEXT_LIST),
        pa.field("requested_decision", pa.string()),
        pa.field("audit", pa.bool_()),
    ]
)
OBJECTING = ("fail", "review")  # records.OBJECTING's values
# The columns of a result's row that are its run's (`RunKey`).
RUN_KEY = ("trace_id", "revision", "service_name", "agent_name", "service_version")


def python_results(results: list[tuple[int, Result]]) -> pa.Table:
    """`Result` objects the Python evaluators gave, with the run each is of, as rows."""
    columns = {
        "run": [run for run, _ in results],
        "pack": [r.pack for _, r in results],
        "pack_version": [r.pack_version for _, r in results],
        "rule_id": [r.rule_id for _, r in results],
        "rule_type": [r.rule_type for _, r in results],
        "verdict": [r.verdict.value for _, r in results],
        "score": [r.score for _, r in results],
        "severity": [r.severity.value for _, r in results],
        "reason": [r.reason for _, r in results],
        "message": [r.message for _, r in results],
        "evidence_span_ids": [list(r.evidence) or None for _, r in results],
        "requested_decision": [
            r.requested_decision.value if r.requested_decision else None for _, r in results
        ],
        "audit": [r.audit for _, r in results],
    }
    return pa.Table.from_pydict(columns, schema=RESULTS)


def empty_results() -> pa.Table:
    return RESULTS.empty_table()


def audited(
    results: pa.Table, trace_ids: pa.ChunkedArray, pack: str, audit: AuditSettings
) -> pa.Table:
    """`ReviewSettings.marked` over the rows of `pack`: those its audit takes marked as such
    (the sample is drawn per run, by `audit_sampled`)."""
    taken = pc.and_(
        pc.equal(results["pack"], pack),
        pc.is_in(results["verdict"], pa.array(audit.verdicts, pa.string())),
    )
    if audit.rules is not None:
        taken = pc.and_(taken, pc.is_in(results["rule_id"], pa.array(audit.rules, pa.string())))
    taken_np = taken.to_numpy(zero_copy_only=False)
    runs = results["run"].to_numpy()
    sampled = np.zeros(len(trace_ids), dtype=bool)
    traces = trace_ids.to_pylist()
    for run in np.unique(runs[taken_np]).tolist():
        sampled[run] = audit_sampled(traces[run], pack, audit.sample)
    marked = pc.or_(results["audit"], pa.array(taken_np & sampled[runs]))
    return results.set_column(results.schema.get_field_index("audit"), "audit", marked)


def results_table(
    results: pa.Table, trajectories: pa.Table, shas: dict[str, str], at: datetime
) -> pa.Table:
    """The `results` rows, as `trajectory_result_columns` makes them for a live round."""
    rows = results.num_rows
    runs = results["run"].combine_chunks() if rows else pa.array([], pa.int64())
    packs = list(shas)
    sha_index = pc.index_in(results["pack"], value_set=pa.array(packs, pa.string()))
    columns: dict[str, pa.Array | pa.ChunkedArray] = {
        name: trajectories[name].take(runs) for name in RUN_KEY
    }
    columns.update(
        {
            name: results[name]
            for name in ("pack", "pack_version", "rule_id", "rule_type", "verdict", "score")
        }
    )
    columns.update(
        {
            "pack_sha256": pa.array(list(shas.values()), pa.string()).take(sha_index),
            "severity": results["severity"],
            "reason": pc.if_else(pc.equal(results["reason"], ""), None, results["reason"]),
            "message": results["message"],
            "evidence_span_ids": results["evidence_span_ids"],
            "requested_decision": results["requested_decision"],
            "evaluated_at": pa.repeat(pa.scalar(at, pa.timestamp("us")), rows),
            "scope": pa.repeat(pa.scalar("trajectory"), rows),
            "origin": pa.repeat(pa.scalar("live"), rows),
            "audit": pc.if_else(results["audit"], True, None),
        }
    )
    schema = ARROW_SCHEMAS["results"]
    arrays = [
        # Not `pa.nulls` for the columns left NULL: its strings and lists pickle at twice the
        # size (the table travels back from the worker process).
        pa.array([None] * rows, f.type) if f.name not in columns else as_array(columns[f.name])
        for f in schema
    ]
    return pa.Table.from_arrays(arrays, schema=schema)


def as_array(values: pa.Array | pa.ChunkedArray) -> pa.Array:
    return values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values


def sorted_sets(runs: np.ndarray, values: pa.Array, count: int) -> pa.Array:
    """Per run (0 .. count - 1), the sorted distinct `values` of its rows (`runs`), NULL for a
    run without any: `sorted({...}) or None` over each run's values. Text sorts by code point
    in Python and by UTF-8 bytes in Arrow: the same order."""
    if len(values) == 0:
        return pa.array([None] * count, TEXT_LIST)
    pairs = pa.table({"run": runs, "value": values})
    pairs = pairs.take(pc.sort_indices(pairs, [("run", "ascending"), ("value", "ascending")]))
    run = pairs["run"].to_numpy()
    value = pairs["value"].combine_chunks()
    new = np.ones(len(run), dtype=bool)
    if len(run) > 1:
        changed = pc.not_equal(value.slice(1), value.slice(0, len(run) - 1))
        new[1:] = (run[1:] != run[:-1]) | changed.to_numpy(zero_copy_only=False)
    counts = np.bincount(run[new], minlength=count)
    offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int32)
    return pa.ListArray.from_arrays(
        pa.array(offsets), value.filter(pa.array(new)), mask=pa.array(counts == 0)
    )


def run_verdicts(results: pa.Table, count: int) -> np.ndarray:
    """Each run's `overall_verdict` ("pass", "fail", "review"), None for a run without
    results (an unevaluated run is not a pass)."""
    runs = results["run"].to_numpy()
    verdict = results["verdict"]
    objecting = pc.is_in(verdict, pa.array(OBJECTING, pa.string()))
    requested = results["requested_decision"]
    # FAIL if a failed rule asks for more than a review
    strong = pc.and_(
        pc.equal(verdict, "fail"),
        pc.and_(pc.is_valid(requested), pc.not_equal(requested, "REVIEW").fill_null(True)),
    )
    seen = np.bincount(runs, minlength=count) > 0
    failed = np.bincount(runs, weights=strong.to_numpy(zero_copy_only=False), minlength=count)
    reviewed = np.bincount(runs, weights=objecting.to_numpy(zero_copy_only=False), minlength=count)
    out = np.where(failed > 0, "fail", np.where(reviewed > 0, "review", "pass")).astype(object)
    out[~seen] = None
    return out


def verdict_columns(results: pa.Table, verdicts: np.ndarray) -> dict[str, pa.Array]:
    """The `trajectories` verdict columns, as `RoundRows.add` sets them from each run's
    results; `verdicts` are the runs' `run_verdicts`."""
    count = len(verdicts)
    runs = results["run"].to_numpy()
    reasons = pc.not_equal(results["reason"], "").to_numpy(zero_copy_only=False)
    objecting = pc.is_in(results["verdict"], pa.array(OBJECTING, pa.string()))
    objecting_np = objecting.to_numpy(zero_copy_only=False)
    rules = pc.binary_join_element_wise(results["pack"], results["rule_id"], "/")
    return {
        "verdict": pa.array(verdicts, pa.string()),
        "verdict_reasons": sorted_sets(
            runs[reasons], as_array(results["reason"]).filter(pa.array(reasons)), count
        ),
        "verdict_rules": sorted_sets(
            runs[objecting_np], as_array(rules).filter(pa.array(objecting_np)), count
        ),
    }


def with_verdicts(trajectories: pa.Table, results: pa.Table, verdicts: np.ndarray) -> pa.Table:
    """The `trajectories` table with each run's verdict columns."""
    for name, column in verdict_columns(results, verdicts).items():
        index = trajectories.schema.get_field_index(name)
        field = trajectories.schema.field(index)
        trajectories = trajectories.set_column(index, field, column.cast(field.type))
    return trajectories
