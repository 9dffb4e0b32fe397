"""The round built by the native builder (collector/native/assemble/): the same `trajectories` and
`steps` tables as `build_batch` stores without an evaluator, without a Python object per span.

The Python builder (build.py, records.py) is the specification; the differential test
(tests/unit/assembler/test_native_build.py) holds the two equal. What the native builder does
not read as Python does, it refuses: `Unsupported` is raised for the whole round."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pyarrow as pa

from collector.assembler.spans import SPAN_FIELDS
from collector.assembler.work import Closing, prices_for
from collector.normalize.native import native
from collector.store.tables import ARROW_SCHEMAS

Unsupported = native.Unsupported
EPOCH = datetime(1970, 1, 1)
# The columns the native builder reads, with the types it reads them as.
INPUT_SCHEMA = pa.schema(
    [ARROW_SCHEMAS["spans"].field(name) for name in SPAN_FIELDS]
    + [pa.field("received_at", pa.timestamp("us"))]
)


def micros(at: datetime) -> int:
    """A naive UTC datetime (as the store keeps them) in µs since the epoch."""
    return (at - EPOCH) // timedelta(microseconds=1)


def price_list(overrides: dict[str, Any]) -> list[tuple[str, float, float]]:
    """The price table as (model prefix, input, output), in the order it is looked up."""
    return prices_for(overrides).in_lookup_order()


def build_round(
    spans: pa.Table,
    closing: list[Closing],
    price_overrides: dict[str, Any],
    closed_at: datetime,
    attributes: bool = False,
) -> tuple[dict[str, pa.Table], list[str]]:
    """The round's `trajectories` and `steps` tables and its build errors ("trace id: error"),
    as `build_batch(spans, closing, price_overrides, closed_at)` makes them. With `attributes`,
    also `attributes`: one column of the steps' span attributes (JSON text, the Python
    builder's `Step.attributes_json`), row for row beside `steps`, which the rule interpreter
    reads and the store does not keep."""
    spans = spans.select(INPUT_SCHEMA.names)
    if spans.schema != INPUT_SCHEMA:
        spans = spans.cast(INPUT_SCHEMA)
    items = [
        (c.trace_id, c.reason, c.revision, None if c.covered is None else micros(c.covered))
        for c in closing
    ]
    trajectories, steps, errors, step_attributes = native.build_round(
        spans.to_batches(), items, price_list(price_overrides), micros(closed_at), attributes
    )
    tables = {
        "trajectories": pa.Table.from_batches([pa.record_batch(trajectories)]),
        "steps": pa.Table.from_batches([pa.record_batch(steps)]),
    }
    if step_attributes is not None:
        tables["attributes"] = pa.Table.from_batches([pa.record_batch(step_attributes)])
    return tables, errors
