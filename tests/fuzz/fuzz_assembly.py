"""Fuzz target: spans of a real capture with fuzzed values (text, JSON nested deep, integers
and times at and past their limits) are assembled and evaluated under the shipped packs; every
trace closes exactly once, in rows of the store's schema, and nothing raises past the round's
isolation. Run: python tests/fuzz/fuzz_assembly.py CORPUS_DIR -runs=N"""

from __future__ import annotations

import contextlib
import hashlib
import sys
from datetime import datetime
from typing import Any

import atheris
import duckdb  # noqa: F401
import grpc  # noqa: F401  (third-party code imported uninstrumented: only ours is traced)
import orjson
import pyarrow as pa
import pydantic  # noqa: F401
import yaml  # noqa: F401
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2  # noqa: F401

with atheris.instrument_imports():
    from collector.assembler.spans import SPAN_FIELDS
    from collector.assembler.work import Closing, build_batch, build_isolated, merged_tables
    from collector.config.sections import BUILTIN_RULES
    from collector.evaluation.packs import PackText
    from collector.evaluation.round import RoundEvaluator
    from collector.normalize.wire import decode_request
    from collector.store.tables import ARROW_SCHEMAS

NOW = datetime(2026, 1, 1)
SCHEMA = pa.schema(
    [ARROW_SCHEMAS["spans"].field(f) for f in SPAN_FIELDS]
    + [pa.field("received_at", pa.timestamp("us"))]
)
PACKS = tuple(
    PackText(p.stem, hashlib.sha256(p.read_bytes()).hexdigest(), p.read_text())
    for p in sorted(BUILTIN_RULES.glob("*.yaml"))
)
INT_LIMITS = (0, 1, 2**31, 2**32 - 1, 2**53 + 1, 2**63 - 1, 2**64 - 1)
KEYS = (
    "gen_ai.tool.call.arguments",
    "gen_ai.tool.call.result",
    "gen_ai.usage.cost",
    "gen_ai.input.messages",
    "gen_ai.output.messages",
    "sextant.approval.status",
    "sextant.policy.decision",
    "gen_ai.agent.name",
    "input.value",
)


def fuzzed_value(fdp: atheris.FuzzedDataProvider) -> Any:
    choice = fdp.ConsumeIntInRange(0, 5)
    if choice == 0:
        depth = fdp.ConsumeIntInRange(0, 1100)
        return '{"a":' * depth + "1" + "}" * depth
    if choice == 1:
        return fdp.PickValueInList(list(INT_LIMITS)) * fdp.PickValueInList([1, 2, -1])
    if choice == 2:
        return fdp.ConsumeFloat()
    if choice == 3:
        return [fdp.ConsumeUnicodeNoSurrogates(8), {"k": fdp.ConsumeInt(8)}]
    return fdp.ConsumeUnicodeNoSurrogates(fdp.ConsumeIntInRange(0, 64))


def mutate(rows: list[dict[str, Any]], fdp: atheris.FuzzedDataProvider) -> None:
    for _ in range(fdp.ConsumeIntInRange(1, 6)):
        row = rows[fdp.ConsumeIntInRange(0, len(rows) - 1)]
        field = fdp.PickValueInList([*SPAN_FIELDS[4:], "attributes"])
        typ = SCHEMA.field(field).type
        if field == "attributes":
            attrs = orjson.loads(row["attributes"] or "{}")
            attrs[fdp.PickValueInList(list(KEYS))] = fuzzed_value(fdp)
            with contextlib.suppress(orjson.JSONEncodeError):  # never stored by the decoder
                row["attributes"] = orjson.dumps(attrs).decode()
        elif pa.types.is_integer(typ):
            value = fdp.PickValueInList(list(INT_LIMITS))
            low, high = (0, 2**64 - 1) if pa.types.is_unsigned_integer(typ) else (0, 2**63 - 1)
            row[field] = min(max(value, low), high if typ.bit_width == 64 else 2**32 - 1)
        elif pa.types.is_string(typ):
            value = fuzzed_value(fdp)
            row[field] = value if isinstance(value, str) else orjson.dumps(value).decode()


def load(data: bytes) -> list[dict[str, Any]] | None:
    encoding = "json" if data[:1] == b"{" else "protobuf"
    try:
        table = decode_request("traces", encoding, data, 65536).table
    except Exception:
        return None
    return None if table is None else table.to_pylist()


def test_one_input(data: bytes) -> None:
    fdp = atheris.FuzzedDataProvider(data)
    seed = fdp.ConsumeBytes(fdp.ConsumeIntInRange(0, len(data)))
    rows = load(seed) or load(data)
    if not rows:
        return
    for row in rows:
        row["received_at"] = NOW
    mutate(rows, fdp)
    spans = pa.Table.from_pylist(rows, schema=SCHEMA)
    ids = sorted({r["trace_id"] for r in rows})
    closing = [Closing(t, "complete", 1) for t in ids]

    def build(part: pa.Table, items: list[Closing], evaluator: Any, **kw: Any) -> Any:
        return build_batch(part, items, {}, NOW, evaluator, kw.get("failed"))

    tables = merged_tables(build_isolated(build, spans, closing, RoundEvaluator(PACKS)))
    assert sorted(tables["trajectories"]["trace_id"].to_pylist()) == ids
    for name, table in tables.items():
        assert table.schema == ARROW_SCHEMAS[name]


if __name__ == "__main__":
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()
