"""Random OTLP export requests for the differential tests: spans shaped like real GenAI traffic
(the keys the normalizer reads, JSON-looking tool arguments and LangChain envelopes) mixed with
what breaks decoders (bad ids, deep or long values, NaN, out-of-range enums), and byte mutations
of encoded requests. Seeded, so a failure replays."""

from __future__ import annotations

import base64
import math
import random
from typing import Any

import orjson
from google.protobuf import json_format
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

from tests.support.reference import semconv

# Every key the normalizer probes, so random spans exercise its precedence rules.
KEYS = sorted(
    {
        *semconv.MODEL_KEYS,
        *semconv.INPUT_TOKEN_KEYS,
        *semconv.OUTPUT_TOKEN_KEYS,
        *semconv.CONVERSATION_KEYS,
        *semconv.USER_KEYS,
        *semconv.TOOL_JSON_KEYS,
        "gen_ai.operation.name",
        "openinference.span.kind",
        "traceloop.span.kind",
        "traceloop.entity.name",
        "llm.request.type",
        "mcp.method.name",
        "gen_ai.tool.name",
        "tool.name",
        "gen_ai.agent.name",
        "agent.name",
        "gen_ai.tool.call.id",
        "tool.id",
        "jsonrpc.request.id",
        "error.type",
        "exception.type",
        "service.name",
        "service.version",
    }
)
LABELS = (
    *semconv.OPERATION_KINDS,
    *semconv.OPENINFERENCE_KINDS,
    "tool",
    "agent",
    "tools/call",
    "chat",
    "unknown",
    "_OTHER",
    "llm",
    "",
)
NAMES = (
    "execute_tool lookup_order",
    "chat gpt-4o",
    "chat unknown",
    "invoke_agent Support",
    "create_agent Planner",
    "handoff to Billing",
    "tools/call search",
    "refund.tool",
    "planner.agent",
    "x.handoff",
    "y.chat",
    "embeddings text-3",
    "retrieval docs",
    "apply_guardrail pii",
    "LangGraph",
    "",
)
LIMIT = 64  # max_attribute_length for these requests: short enough that truncation happens


def json_value(rng: random.Random, depth: int = 0) -> Any:
    roll = rng.random()
    if depth > 3 or roll < 0.3:
        return rng.choice([1, -2, 3.5, 1e16, True, None, "x", "ünï", 2**63 - 1, 0])
    if roll < 0.6:
        return [json_value(rng, depth + 1) for _ in range(rng.randrange(4))]
    return {rng.choice("abcdk"): json_value(rng, depth + 1) for _ in range(rng.randrange(4))}


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


def envelope(rng: random.Random) -> Any:
    """The wrappers instrumentations put around tool arguments and results."""
    inner = json_value(rng)
    return rng.choice(
        [
            {"inputs": inner, "tags": []},
            {"input_str": orjson.dumps(inner).decode()},
            {"input_str": "not json"},
            {"args": [1], "kwargs": {"q": inner}},
            {"kwargs": {"q": inner}},
            {"output": {"lc": 1, "type": "constructor", "kwargs": {"content": "ok"}}},
            {"lc": 1, "type": "constructor", "kwargs": {"content": inner, "tool_call_id": "c9"}},
            {"type": "tool", "data": {"content": "done", "tool_call_id": 7}},
            {"output": "plain", "kwargs": {}},
            inner,
        ]
    )


def text_value(rng: random.Random) -> str:
    roll = rng.random()
    if roll < 0.25:
        return orjson.dumps(envelope(rng)).decode()
    if roll < 0.3:
        return nested(rng.choice([127, 128, 129, 130, 200]))
    if roll < 0.35:
        return "[" * 200 + "x"  # counted deep, not JSON
    if roll < 0.45:
        return rng.choice(LABELS)
    if roll < 0.5:
        return "é" * rng.randrange(LIMIT - 2, LIMIT + 3)  # around the cut, in characters
    if roll < 0.55:
        return '"quoted"'
    if roll < 0.6:
        return rng.choice([" 12 ", "1_000", "+5", "-3", "1.5", "nan", "12"])
    return rng.choice(["lookup_order", "gpt-4o", "u-1", "conv-1", "{bad", "[1,", "", "0"])


def any_value(rng: random.Random, target: AnyValue, depth: int = 0) -> None:
    roll = rng.random()
    if roll < 0.5:
        target.string_value = text_value(rng)
    elif roll < 0.62:
        target.int_value = rng.choice([0, 1, 42, -7, 2**63 - 1, -(2**63), 10**12])
    elif roll < 0.72:
        target.double_value = rng.choice(
            [0.0, -0.0, 1.5, 5.0, 1e16, 1e-5, 1e30, -0.5, math.nan, math.inf, -math.inf]
        )
    elif roll < 0.78:
        target.bool_value = rng.random() < 0.5
    elif roll < 0.84 and depth < 4:
        target.array_value.SetInParent()
        for _ in range(rng.randrange(3)):
            any_value(rng, target.array_value.values.add(), depth + 1)
    elif roll < 0.9 and depth < 4:
        target.kvlist_value.SetInParent()
        attributes(rng, target.kvlist_value.values, rng.randrange(3), depth + 1)
    elif roll < 0.95:
        target.bytes_value = rng.randbytes(rng.randrange(5))
    # else: an AnyValue with no value set


def attributes(rng: random.Random, container: Any, count: int, depth: int = 0) -> None:
    for _ in range(count):
        kv: KeyValue = container.add()
        kv.key = rng.choice(KEYS) if rng.random() < 0.8 else rng.choice(["k", "k", "", "ключ"])
        if rng.random() < 0.95:
            any_value(rng, kv.value, depth)


def some_id(rng: random.Random, size: int) -> bytes:
    roll = rng.random()
    if roll < 0.9:
        return rng.randbytes(size)
    if roll < 0.94:
        return bytes(size)
    return rng.randbytes(rng.choice([0, 1, size - 1, size + 1]))


def fill_span(rng: random.Random, span: Any) -> None:
    span.trace_id = some_id(rng, 16)
    span.span_id = some_id(rng, 8)
    if rng.random() < 0.7:
        span.parent_span_id = some_id(rng, 8)
    span.trace_state = rng.choice(["", "", "k=v"])
    span.flags = rng.choice([0, 1, 257])
    span.name = rng.choice(NAMES)
    span.kind = rng.choice([0, 1, 2, 3, 4, 5, 9])
    span.start_time_unix_nano = rng.randrange(2**64)
    span.end_time_unix_nano = rng.randrange(2**64)
    attributes(rng, span.attributes, rng.randrange(12))
    span.dropped_attributes_count = rng.choice([0, 3])
    for _ in range(rng.choice([0, 0, 1, 2])):
        event = span.events.add()
        event.time_unix_nano = rng.randrange(2**64)
        event.name = rng.choice(["exception", "log", ""])
        attributes(rng, event.attributes, rng.randrange(3))
    for _ in range(rng.choice([0, 0, 1])):
        link = span.links.add()
        link.trace_id = some_id(rng, 16)
        link.span_id = some_id(rng, 8)
        attributes(rng, link.attributes, rng.randrange(2))
        link.flags = rng.choice([0, 1])
    if rng.random() < 0.8:
        span.status.code = rng.choice([0, 1, 2, 2, 5])
        span.status.message = rng.choice(["", "boom"])


def random_traces(rng: random.Random) -> ExportTraceServiceRequest:
    request = ExportTraceServiceRequest()
    for _ in range(rng.randrange(1, 3)):
        rs = request.resource_spans.add()
        if rng.random() < 0.9:
            attributes(rng, rs.resource.attributes, rng.randrange(4))
        rs.schema_url = rng.choice(["", "https://opentelemetry.io/schemas/1.30.0"])
        for _ in range(rng.randrange(1, 3)):
            ss = rs.scope_spans.add()
            ss.scope.name = rng.choice(["", "openinference.instrumentation.langchain"])
            ss.scope.version = rng.choice(["", "1.0"])
            if rng.random() < 0.3:
                attributes(rng, ss.scope.attributes, rng.randrange(1, 3))
            for _ in range(rng.randrange(1, 6)):
                fill_span(rng, ss.spans.add())
    return request


def random_logs(rng: random.Random) -> ExportLogsServiceRequest:
    request = ExportLogsServiceRequest()
    for _ in range(rng.randrange(1, 3)):
        rl = request.resource_logs.add()
        attributes(rng, rl.resource.attributes, rng.randrange(3))
        sl = rl.scope_logs.add()
        sl.scope.name = rng.choice(["", "agent"])
        for _ in range(rng.randrange(1, 5)):
            record = sl.log_records.add()
            record.time_unix_nano = rng.randrange(2**64)
            record.observed_time_unix_nano = rng.randrange(2**64)
            record.severity_number = rng.choice([0, 9, 17, -1])
            record.severity_text = rng.choice(["", "INFO"])
            record.event_name = rng.choice(["", "gen_ai.evaluation.result"])
            if rng.random() < 0.8:
                any_value(rng, record.body)
            attributes(rng, record.attributes, rng.randrange(4))
            record.flags = rng.choice([0, 1])
            if rng.random() < 0.8:
                record.trace_id = some_id(rng, 16)
                record.span_id = some_id(rng, 8)
    return request


def hex_ids(doc: Any) -> Any:
    """MessageToDict writes bytes as base64; OTLP/JSON writes trace and span ids as hex."""
    if isinstance(doc, list):
        return [hex_ids(item) for item in doc]
    if not isinstance(doc, dict):
        return doc
    out = {}
    for key, value in doc.items():
        if key in ("traceId", "spanId", "parentSpanId") and isinstance(value, str):
            out[key] = base64.b64decode(value).hex()
        else:
            out[key] = hex_ids(value)
    return out


# The 64-bit integer fields, which the protobuf JSON mapping writes as strings.
INT64_FIELDS = frozenset(
    ("intValue", "timeUnixNano", "startTimeUnixNano", "endTimeUnixNano", "observedTimeUnixNano")
)


def integers_as_numbers(doc: Any) -> Any:
    """The other OTLP/JSON integer dialect: 64-bit integers as JSON numbers, not strings."""
    if isinstance(doc, list):
        return [integers_as_numbers(item) for item in doc]
    if not isinstance(doc, dict):
        return doc
    return {
        key: int(value) if key in INT64_FIELDS else integers_as_numbers(value)
        for key, value in doc.items()
    }


def to_otlp_json(message: Any, numbers: bool) -> bytes:
    """A request in OTLP/JSON: hex ids, enums as integers, int64s as strings or numbers."""
    doc = hex_ids(json_format.MessageToDict(message, use_integers_for_enums=True))
    return orjson.dumps(integers_as_numbers(doc) if numbers else doc)


def mutate(rng: random.Random, data: bytes) -> bytes:
    """A few random byte edits: flips, inserts, deletes, a cut."""
    buf = bytearray(data)
    for _ in range(rng.randrange(1, 4)):
        op = rng.random()
        at = rng.randrange(len(buf) + 1)
        if op < 0.4 and buf:
            buf[min(at, len(buf) - 1)] = rng.randrange(256)
        elif op < 0.6:
            buf[at:at] = rng.randbytes(rng.randrange(1, 4))
        elif op < 0.8:
            del buf[at : at + rng.randrange(1, 8)]
        else:
            del buf[at:]
    return bytes(buf)
