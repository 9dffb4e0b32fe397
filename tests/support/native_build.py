"""The native builder held against the Python one: one round built by both, the tables
compared column by column."""

from __future__ import annotations

import math
from datetime import datetime
from typing import Any

import pyarrow as pa

from collector.assembler.native_build import build_round
from collector.assembler.work import Closing, build_batch


def same(a: Any, b: Any) -> bool:
    """Equal values; floats bit for bit (a NaN equals a NaN, -0.0 is not 0.0)."""
    if isinstance(a, float) and isinstance(b, float):
        return (math.isnan(a) and math.isnan(b)) or (
            a == b and math.copysign(1, a) == math.copysign(1, b)
        )
    return type(a) is type(b) and a == b


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
        for row, (p, n) in enumerate(
            zip(python[column].to_pylist(), native[column].to_pylist(), strict=True)
        ):
            if not same(p, n):
                out.append(
                    f"trace {traces[row]}: {name} row {row} column {column}:"
                    f" Python {p!r}, native {n!r}"
                )
    return out


def differences(
    spans: pa.Table, closing: list[Closing], overrides: dict[str, Any], closed_at: datetime
) -> list[str]:
    """What the native builder makes differently from `build_batch` of the same round (no
    evaluator). Raises the native builder's `Unsupported` when it refuses the round."""
    python = build_batch(spans, closing, overrides, closed_at)
    native, errors = build_round(spans, closing, overrides, closed_at)
    out = []
    for name in ("trajectories", "steps"):
        out += table_differences(name, python.tables[name], native[name])
    if python.build_errors != errors:
        out.append(f"build errors: Python {python.build_errors!r}, native {errors!r}")
    return out
