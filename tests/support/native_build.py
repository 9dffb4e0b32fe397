"""The native builder held against the Python one: one round built by both, the tables
compared column by column."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import pyarrow as pa

from collector.assembler.native_build import Unsupported, build_round
from collector.assembler.work import Closing, build_batch
from evaluators.base import Result
from evaluators.model import Trajectory
from tests.support.span_trees import Generator


def same(a: Any, b: Any) -> bool:
    """Equal values; floats bit for bit (a NaN equals a NaN, -0.0 is not 0.0)."""
    if isinstance(a, float) and isinstance(b, float):
        return (math.isnan(a) and math.isnan(b)) or (
            a == b and math.copysign(1, a) == math.copysign(1, b)
        )
    return type(a) is type(b) and a == b


def identical(a: pa.ChunkedArray, b: pa.ChunkedArray) -> bool:
    """Whether two columns of one type hold the same values, floats compared bit for bit: a
    quick check that, when it holds, leaves nothing for `same` to find row by row."""
    if pa.types.is_floating(a.type):
        bits = pa.int64() if a.type.bit_width == 64 else pa.int32()
        return a.combine_chunks().view(bits).equals(b.combine_chunks().view(bits))
    if pa.types.is_nested(a.type):
        return False  # floats may hide inside: compared row by row
    return a.equals(b)


def table_differences(name: str, python: pa.Table, native: pa.Table) -> list[str]:
    """Where two tables differ: each difference names the trace, the table, the row, the column
    and both values."""
    if python.schema != native.schema:
        return [f"{name}: schemas differ:\n{python.schema}\n---\n{native.schema}"]
    if python.num_rows != native.num_rows:
        return [f"{name}: {python.num_rows} rows in Python, {native.num_rows} native"]
    out = []
    traces = python["trace_id"].to_pylist()
    for column in python.schema.names:
        if identical(python[column], native[column]):
            continue
        for row, (p, n) in enumerate(
            zip(python[column].to_pylist(), native[column].to_pylist(), strict=True)
        ):
            if not same(p, n):
                out.append(
                    f"trace {traces[row]}: {name} row {row} column {column}:"
                    f" Python {p!r}, native {n!r}"
                )
    return out


@dataclass
class StepAttributes:
    """An evaluator that evaluates nothing and keeps, for each run `build_batch` stores, its
    steps' span attributes as the Python builder gives them (`Step.attributes_json`): what
    the rule evaluators read, so what the native `attributes` column must hold."""

    runs: dict[tuple[str, int], list[str | None]] = field(default_factory=dict)

    @property
    def shas(self) -> dict[str, str]:
        return {}

    def evaluate(self, t: Trajectory) -> list[Result]:
        self.runs[(t.trace_id, t.revision)] = [s.attributes_json for s in t.steps]
        return []

    def column(self, trajectories: pa.Table) -> list[str | None]:
        """The column, row for row beside the `steps` table of these trajectories."""
        keys = zip(
            trajectories["trace_id"].to_pylist(), trajectories["revision"].to_pylist(), strict=True
        )
        return [a for key in keys for a in self.runs[key]]


def differences(
    spans: pa.Table, closing: list[Closing], overrides: dict[str, Any], closed_at: datetime
) -> list[str]:
    """What the native builder makes differently from `build_batch` of the same round (no
    rules evaluated): the tables, the build errors and the steps' span attributes the rule
    interpreter reads. Raises the native builder's `Unsupported` when it refuses the round."""
    attributes = StepAttributes()
    python = build_batch(spans, closing, overrides, closed_at, attributes)
    native, errors = build_round(spans, closing, overrides, closed_at, attributes=True)
    out = []
    for name in ("trajectories", "steps"):
        out += table_differences(name, python.tables[name], native[name])
    if python.build_errors != errors:
        out.append(f"build errors: Python {python.build_errors!r}, native {errors!r}")
    want = python.tables["steps"].append_column(
        "attributes", pa.array(attributes.column(python.tables["trajectories"]), pa.string())
    )
    got = native["steps"].append_column("attributes", native["attributes"]["attributes"])
    if not out:  # the same steps: their attributes compared row by row
        out += table_differences(
            "steps",
            want.select(["trace_id", "span_id", "attributes"]),
            got.select(["trace_id", "span_id", "attributes"]),
        )
    return out


@dataclass
class Fuzzed:
    """What one process's share of the generated rounds found."""

    rounds: int = 0
    traces: int = 0  # compared: closed with spans, each built into a trajectory or an error
    spans: int = 0
    refused: int = 0
    failures: list[str] = field(default_factory=list)


def fuzz_share(worker: int, workers: int, traces: int) -> Fuzzed:
    """Seeded rounds (`span_trees.Generator`) worker, worker + workers, ... until this
    process's part of `traces` is compared. The only refusal allowed is a tool result that
    looks like a Python literal of a form the native reader leaves to Python, and rarely."""
    out = Fuzzed()
    seed = worker
    # Stopped early once it has failed: a few differences say enough, and a builder refusing
    # every round would never reach the count.
    while out.traces < -(-traces // workers) and len(out.failures) < 5:
        if out.refused > 20 + out.rounds // 100:
            out.failures.append(f"{out.refused} of {out.rounds} rounds refused")
            break
        r = Generator(seed).round()
        out.rounds += 1
        seed += workers
        try:
            found = differences(r.spans, r.closing, r.overrides, r.closed_at)
        except Unsupported as exc:
            if "Python literal" not in str(exc):
                out.failures.append(f"seed {seed - workers}: {exc}")
            out.refused += 1
            continue
        if found:
            out.failures.append(f"seed {seed - workers}:\n" + "\n".join(found[:20]))
        out.spans += r.spans.num_rows
        sent = set(r.spans["trace_id"].to_pylist())
        out.traces += sum(c.trace_id in sent for c in r.closing)  # the runs compared
    return out
