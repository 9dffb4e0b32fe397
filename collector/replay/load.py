"""Stored trajectories rebuilt as evaluator Trajectory objects, a batch per query."""

from __future__ import annotations

from typing import Any

import orjson
import pyarrow as pa

from collector.replay.sources import Source
from evaluators.model import Step, Trajectory

STEP_COLUMNS = [f for f in Step.__dataclass_fields__ if not f.startswith("_")]
TRAJECTORY_COLUMNS = [f for f in Trajectory.__dataclass_fields__ if f not in ("steps",)]
IDS = "(SELECT unnest(?::VARCHAR[]))"


def columns(table: pa.Table, names: list[str]) -> list[list[Any]]:
    return [table.column(n).to_pylist() for n in names]


def load_trajectories(source: Source, trace_ids: list[str]) -> list[Trajectory]:
    """The current revision of each trace, with its steps and their span attributes."""
    if not trace_ids:
        return []
    head = source.query(
        f"SELECT {', '.join(TRAJECTORY_COLUMNS)} FROM trajectories"
        f" WHERE is_current AND trace_id IN {IDS} ORDER BY trace_id",
        [trace_ids],
    )
    step_fields = [c for c in STEP_COLUMNS if c != "attributes_json"]
    steps = source.query(
        f"SELECT s.trace_id, {', '.join('s.' + c for c in step_fields)},"
        " sp.attributes AS attributes_json"
        " FROM steps s JOIN trajectories t ON t.trace_id = s.trace_id AND t.revision = s.revision"
        f" LEFT JOIN (SELECT trace_id, span_id, attributes FROM spans WHERE trace_id IN {IDS}) sp"
        " ON sp.trace_id = s.trace_id AND sp.span_id = s.span_id"
        f" WHERE t.is_current AND t.trace_id IN {IDS}"
        " ORDER BY s.trace_id, s.seq",
        [trace_ids, trace_ids],
    )
    by_trace: dict[str, list[Step]] = {}
    names = ["trace_id", *step_fields, "attributes_json"]
    for values in zip(*columns(steps, names), strict=True):
        fields = dict(zip(names, values, strict=True))
        trace_id = fields.pop("trace_id")
        for key in ("arguments", "mcp"):
            if fields[key] is not None:
                fields[key] = orjson.loads(fields[key])
        by_trace.setdefault(trace_id, []).append(Step(**fields))
    out = []
    for values in zip(*columns(head, TRAJECTORY_COLUMNS), strict=True):
        fields = dict(zip(TRAJECTORY_COLUMNS, values, strict=True))
        fields["incomplete_reasons"] = fields["incomplete_reasons"] or []
        out.append(Trajectory(steps=by_trace.get(fields["trace_id"], []), **fields))
    return out


def load_results(
    source: Source, trace_ids: list[str]
) -> tuple[dict[str, list[dict[str, Any]]], dict[str, str]]:
    """The live results each trajectory's current revision got when it closed, and its overall
    verdict ("none" when no rule applied)."""
    if not trace_ids:
        return {}, {}
    verdicts = source.query(
        f"SELECT trace_id, coalesce(verdict, 'none') AS verdict FROM trajectories"
        f" WHERE is_current AND trace_id IN {IDS}",
        [trace_ids],
    )
    table = source.query(
        "SELECT r.trace_id, r.pack, r.rule_id, r.verdict, r.reason, r.message,"
        " r.requested_decision FROM results r"
        " JOIN trajectories t ON t.trace_id = r.trace_id AND t.revision = r.revision"
        " AND r.evaluated_at = t.closed_at"
        f" WHERE t.is_current AND r.origin = 'live' AND r.scope = 'trajectory'"
        f" AND t.trace_id IN {IDS} AND r.trace_id IN {IDS}",
        [trace_ids, trace_ids],
    )
    out: dict[str, list[dict[str, Any]]] = {}
    for row in table.to_pylist():
        out.setdefault(row.pop("trace_id"), []).append(row)
    return out, dict(zip(*columns(verdicts, ["trace_id", "verdict"]), strict=True))
