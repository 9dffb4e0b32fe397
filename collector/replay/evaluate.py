"""A batch of stored runs re-evaluated under a replay's packs: by the native rule interpreter
over the tables the store returns, as the live rounds are, or with `--reference` by the Python
evaluators, the specification, one `Trajectory` at a time.

The native path builds `Trajectory` objects only when the Python evaluators are needed: a rule
it leaves to Python (one with a regex condition) applies to a run of the batch, or it defers a
result to them; the whole batch is then built, once. Both give each run the results `evaluate_pack`
gives it, pack after pack, field for field (tests/integration/test_replay_native.py holds the
two equal on every capture under every shipped and example pack)."""

from __future__ import annotations

from typing import Any, NamedTuple

import pyarrow as pa

from collector.evaluation.native_round import Run, round_results
from collector.evaluation.packs import PackText
from collector.store.runs import trajectories_of
from collector.store.tables import ARROW_SCHEMAS
from evaluators.base import Decision, Result, Severity, Verdict
from evaluators.evaluate import evaluate_pack
from evaluators.model import Trajectory
from evaluators.rulepack import LoadedPack


class Head(NamedTuple):
    """What a replay reports and stores of a run (`results.Run`)."""

    trace_id: str
    revision: int
    service_name: str | None
    agent_name: str | None
    service_version: str | None


# The `trajectories` columns of each, in their fields' order.
HEAD_COLUMNS = ("trace_id", "revision", "service_name", "agent_name", "service_version")
RUN_COLUMNS = ("trace_id", "agent_run", "service_name", "agent_name", "service_version")


def evaluated(
    head: pa.Table, steps: pa.Table, packs: list[LoadedPack], reference: bool = False
) -> list[tuple[Head | Trajectory, list[Result]]]:
    """Each run of a `run_tables` batch, in its order, with its results under `packs`."""
    if reference:
        return [
            (t, [r for p in packs for r in evaluate_pack(t, p.pack)])
            for t in trajectories_of(head, steps)
        ]
    built: list[Trajectory] = []

    def trajectory(i: int) -> Trajectory:
        if not built:
            built.extend(trajectories_of(head, steps))
        return built[i]

    texts = tuple(PackText(p.source, p.sha256, p.text) for p in packs)
    runs = [Run(*values) for values in rows_of(head, RUN_COLUMNS)]
    table = round_results(
        texts, runs, stored(head, "trajectories"), stored(steps, "steps"), trajectory
    )
    results: list[list[Result]] = [[] for _ in runs]
    for row in table.to_pylist():
        results[row["run"]].append(result_of(row))
    heads = [Head(*values) for values in rows_of(head, HEAD_COLUMNS)]
    return list(zip(heads, results, strict=True))


def rows_of(table: pa.Table, names: tuple[str, ...]) -> zip[tuple[Any, ...]]:
    return zip(*(table[name].to_pylist() for name in names), strict=True)


def stored(table: pa.Table, name: str) -> pa.Table:
    """`run_tables`' columns with the types of the store's batches, which the interpreter
    reads (a source over HTTP or Parquet may give others); the steps' span attributes as the
    `attributes` column the interpreter reads them from."""
    if name == "steps":
        table = table.rename_columns(
            ["attributes" if c == "attributes_json" else c for c in table.column_names]
        )
    schema = ARROW_SCHEMAS[name]
    fields = [
        pa.field(c, pa.string()) if c == "attributes" else schema.field(c)
        for c in table.column_names
    ]
    return table.cast(pa.schema(fields))


# Each enum's members by value, looked up without the enum's own call (a tenth of a replay).
VERDICTS = {v.value: v for v in Verdict}
SEVERITIES = {s.value: s for s in Severity}
DECISIONS: dict[str | None, Decision | None] = {d.value: d for d in Decision} | {None: None}


def result_of(row: dict[str, Any]) -> Result:
    """A row of `native_results.RESULTS` as the `Result` the Python evaluators give."""
    return Result(
        pack=row["pack"],
        pack_version=row["pack_version"],
        rule_id=row["rule_id"],
        rule_type=row["rule_type"],
        verdict=VERDICTS[row["verdict"]],
        severity=SEVERITIES[row["severity"]],
        reason=row["reason"],
        message=row["message"],
        evidence=tuple(row["evidence_span_ids"] or ()),
        score=row["score"],
        requested_decision=DECISIONS[row["requested_decision"]],
        audit=row["audit"],
    )
