"""Synthetic agent traces shaped like real GenAI instrumentation, for load tests and benchmarks."""

from __future__ import annotations

import json
import os
import random
import re
import time

import numpy as np
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status

TOOLS = (
    ("search_flights", {"origin": "LIS", "destination": "OSL", "date": "2025-03-14"}),
    ("get_fare_rules", {"fare_id": "FR-SK0836-YLITE"}),
    ("hold_seat", {"flight_id": "SK0836", "passenger": "Mira Sato"}),
    ("confirm_booking", {"hold_id": "HLD-4Q7Z2", "payment_token": "tok_test_5521"}),
)
SYSTEM = json.dumps(
    [
        {
            "type": "text",
            "content": "You book flights for travellers. Use the tools; never invent fares,"
            " seats or booking references, and confirm the passenger before paying.",
        }
    ]
)
PROMPT = "Book the cheapest LIS-OSL flight on 2025-03-14 for Mira Sato, pay with tok_test_5521."


def kv(key: str, value: str | int | float | bool) -> KeyValue:
    if isinstance(value, bool):
        return KeyValue(key=key, value=AnyValue(bool_value=value))
    if isinstance(value, int):
        return KeyValue(key=key, value=AnyValue(int_value=value))
    if isinstance(value, float):
        return KeyValue(key=key, value=AnyValue(double_value=value))
    return KeyValue(key=key, value=AnyValue(string_value=value))


def agent_trace(
    trace_id: bytes, start_ns: int, rng: random.Random, spans: int = 10, conversation: str = ""
) -> list[Span]:
    """One `invoke_agent` run, a turn of `conversation` (a random one when not given):
    alternating chat and execute_tool spans under the root."""
    root_id = rng.randbytes(8)
    children: list[Span] = []
    t = start_ns + 1_000
    conversation = conversation or f"conv-{rng.getrandbits(48):012x}"
    for i in range(spans - 1):
        span_id = rng.randbytes(8)
        if i % 2 == 0:
            turn = i // 2
            attrs = [
                kv("gen_ai.operation.name", "chat"),
                kv("gen_ai.provider.name", "openai"),
                kv("gen_ai.request.model", "gpt-4.1-mini"),
                kv("gen_ai.response.model", "gpt-4.1-mini-2025-04-14"),
                kv("gen_ai.request.temperature", 0.0),
                kv("gen_ai.request.max_tokens", 1024),
                kv("gen_ai.agent.name", "travel-agent"),
                kv("gen_ai.response.id", f"chatcmpl-{rng.getrandbits(64):016x}"),
                kv("gen_ai.usage.input_tokens", 412 + 137 * turn),
                kv("gen_ai.usage.output_tokens", 22),
                kv("gen_ai.conversation.id", conversation),
                kv("server.address", "api.openai.com"),
                kv("server.port", 443),
                kv("gen_ai.system_instructions", SYSTEM),
                kv(
                    "gen_ai.input.messages",
                    json.dumps([{"role": "user", "parts": [{"type": "text", "content": PROMPT}]}]),
                ),
                kv(
                    "gen_ai.output.messages",
                    json.dumps(
                        [
                            {
                                "role": "assistant",
                                "parts": [
                                    {
                                        "type": "text",
                                        "content": "Searching LIS-OSL flights on 2025-03-14"
                                        " and comparing fares before holding a seat.",
                                    }
                                ],
                                "finish_reason": "tool_call",
                            }
                        ]
                    ),
                ),
            ]
            name, kind, duration = "chat gpt-4.1-mini", Span.SPAN_KIND_CLIENT, 60_000_000
        else:
            tool, args = TOOLS[(i // 2) % len(TOOLS)]
            attrs = [
                kv("gen_ai.operation.name", "execute_tool"),
                kv("gen_ai.tool.name", tool),
                kv("gen_ai.tool.call.id", f"call_{rng.getrandbits(96):024x}"),
                kv("gen_ai.tool.type", "function"),
                kv("gen_ai.tool.description", f"{tool.replace('_', ' ').capitalize()}."),
                kv("gen_ai.tool.call.arguments", json.dumps(args)),
                kv(
                    "gen_ai.tool.call.result",
                    json.dumps(
                        [
                            {"flight_id": "TP1187", "fare_id": "FR-TP1187-YFLEX", "price": 214.0},
                            {"flight_id": "SK0836", "fare_id": "FR-SK0836-YLITE", "price": 189.0},
                            {"flight_id": "DY1301", "fare_id": "FR-DY1301-LOWFR", "price": 201.5},
                            {"flight_id": "KL1692", "fare_id": "FR-KL1692-ECONS", "price": 243.0},
                        ]
                    ),
                ),
            ]
            name, kind, duration = f"execute_tool {tool}", Span.SPAN_KIND_INTERNAL, 12_000_000
        children.append(
            Span(
                trace_id=trace_id,
                span_id=span_id,
                parent_span_id=root_id,
                name=name,
                kind=kind,
                start_time_unix_nano=t,
                end_time_unix_nano=t + duration,
                attributes=attrs,
                flags=256,
            )
        )
        t += duration + 500_000
    root = Span(
        trace_id=trace_id,
        span_id=root_id,
        name="invoke_agent travel-agent",
        kind=Span.SPAN_KIND_INTERNAL,
        start_time_unix_nano=start_ns,
        end_time_unix_nano=t,
        attributes=[
            kv("gen_ai.operation.name", "invoke_agent"),
            kv("gen_ai.agent.name", "travel-agent"),
            kv("gen_ai.provider.name", "openai"),
            kv("gen_ai.conversation.id", conversation),
            kv("enduser.id", "user-4711"),
        ],
        status=Status(),
        flags=256,
    )
    return [*children, root]


def export_request(
    trace_ids: list[bytes], rng: random.Random, spans_per_trace: int = 10
) -> ExportTraceServiceRequest:
    request = ExportTraceServiceRequest()
    rs = request.resource_spans.add()
    rs.resource.attributes.extend(
        [
            kv("service.name", "travel-desk"),
            kv("service.version", "2.3.1"),
            kv("deployment.environment.name", "bench"),
            kv("telemetry.sdk.language", "python"),
        ]
    )
    ss = rs.scope_spans.add()
    ss.scope.name = "sextant.bench"
    ss.scope.version = "1"
    now = time.time_ns()
    for tid in trace_ids:
        ss.spans.extend(agent_trace(tid, now, rng, spans_per_trace))
    return request


# Turns a conversation of the benchmark's has (the last of a request's may have fewer).
TURNS = 4


def salted_template(
    spans_per_request: int, spans_per_trace: int = 10, seed: int = 7
) -> tuple[ExportTraceServiceRequest, bytes]:
    """A request of whole traces, as many as fit in `spans_per_request` (at least one), whose
    trace ids share a random 8-byte salt, as do their conversation ids (its hex text): every
    `TURNS` traces are the turns of one conversation.

    Replacing the salt in the serialized bytes gives a request with fresh, unique trace ids and
    new conversations at the cost of a `bytes.replace` or two (`salted_copy`), so the load
    generator spends its CPU sending, not building. Conversations a copy never continues keep
    sessions as short as real ones: copies of fixed conversation ids made 51 sessions of 10,000
    turns in three minutes, and measured the cost of those instead.
    Only whole traces: a remainder cut off as its own short trace would close as a fragment
    (512 spans of 10-span traces used to end each request with a 2-span trajectory).
    """
    rng = random.Random(seed)
    salt = rng.randbytes(8)
    sizes = [spans_per_trace] * max(1, spans_per_request // spans_per_trace)
    request = export_request([], rng)
    spans = request.resource_spans[0].scope_spans[0].spans
    now = time.time_ns()
    for i, size in enumerate(sizes, start=1):
        conversation = f"conv-{salt.hex()}-{(i - 1) // TURNS}"
        spans.extend(agent_trace(salt + i.to_bytes(8, "big"), now, rng, size, conversation))
    return request, salt


def salted_copy(template: bytes, salt: bytes, new: bytes | None = None) -> bytes:
    """The serialized template with a fresh salt (`new`, 8 random bytes unless given): raw in
    protobuf's trace ids, hex text in JSON's and in every conversation id (`salt` is given in
    the template's encoding)."""
    new = new or os.urandom(8)
    if len(salt) == 8:  # protobuf: the trace ids' raw bytes, then the conversations' text
        template, salt = template.replace(salt, new), salt.hex().encode()
    return template.replace(salt, new.hex().encode())


# Tags of Span.start_time_unix_nano (field 7) and end_time_unix_nano (field 8), both fixed64.
TIME_TAGS = frozenset((0x39, 0x41))
JSON_TIMES = re.compile(rb'"(?:start|end)TimeUnixNano":\s*"(\d+)"')


class Restamp:
    """Moves a template's span times to the moment a copy of it is sent, as an exporter stamps
    its spans, so a store bounded by age (`storage.retention.max_age`) keeps what it would keep
    of real traffic. Every time is rewritten in place at an offset found once, so the copy
    stays valid protobuf (fixed64, little-endian) or JSON (19 digits) of the same length."""

    def __init__(self, payload: bytes, made_ns: int, as_json: bool) -> None:
        self.made_ns, self.as_json = made_ns, as_json
        latest = made_ns + 3600 * 10**9  # the template's spans start at made_ns, last seconds
        if as_json:
            found = ((m.start(1), int(m.group(1))) for m in JSON_TIMES.finditer(payload))
        else:
            found = (
                (i + 1, int.from_bytes(payload[i + 1 : i + 9], "little"))
                for i, byte in enumerate(payload[:-8])
                if byte in TIME_TAGS
            )
        times = [(offset, value) for offset, value in found if made_ns <= value <= latest]
        width = 19 if as_json else 8
        self.at = np.array([o for o, _ in times], dtype=np.int64)[:, None] + np.arange(width)
        self.values = np.array([v for _, v in times], dtype=np.int64)
        self.powers = 10 ** np.arange(18, -1, -1, dtype=np.int64)

    def fresh(self, payload: bytes, now_ns: int) -> bytes:
        """`payload` (the template with anything else replaced) with its times moved to now."""
        values = self.values + (now_ns - self.made_ns)
        if self.as_json:
            encoded = (values[:, None] // self.powers % 10 + ord("0")).astype(np.uint8)
        else:
            encoded = values.astype("<i8").view(np.uint8).reshape(-1, 8)
        copy = np.frombuffer(payload, dtype=np.uint8).copy()
        copy[self.at] = encoded
        return copy.tobytes()
