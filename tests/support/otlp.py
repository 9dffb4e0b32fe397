"""Small builders of OTLP requests for tests (protobuf and OTLP/JSON), and a raw gRPC export."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

import grpc
import pytest
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import KeyValue

from collector.otlp_sender import any_value

if TYPE_CHECKING:
    from tests.support.server import RunningServer

TRACE_EXPORT = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
LOGS_EXPORT = "/opentelemetry.proto.collector.logs.v1.LogsService/Export"


def kv(key: str, value: Any) -> KeyValue:
    return KeyValue(key=key, value=any_value(value))


def new_trace_id() -> bytes:
    return os.urandom(16)


def new_span_id() -> bytes:
    return os.urandom(8)


def trace_request(
    spans: list[dict[str, Any]], resource: dict[str, Any] | None = None
) -> ExportTraceServiceRequest:
    """spans: dicts with trace_id, span_id, name and optional parent_span_id, attributes..."""
    request = ExportTraceServiceRequest()
    rs = request.resource_spans.add()
    rs.resource.attributes.extend(
        kv(k, v) for k, v in (resource or {"service.name": "test-svc"}).items()
    )
    ss = rs.scope_spans.add()
    ss.scope.name = "tests"
    for spec in spans:
        span = ss.spans.add()
        span.trace_id = spec["trace_id"]
        span.span_id = spec["span_id"]
        span.parent_span_id = spec.get("parent_span_id", b"")
        span.name = spec.get("name", "span")
        span.kind = spec.get("kind", 1)
        span.start_time_unix_nano = spec.get("start", 1_700_000_000_000_000_000)
        span.end_time_unix_nano = spec.get("end", 1_700_000_000_500_000_000)
        span.attributes.extend(kv(k, v) for k, v in spec.get("attributes", {}).items())
    return request


def simple_spans(count: int, trace_id: bytes | None = None) -> list[dict[str, Any]]:
    trace_id = trace_id or new_trace_id()
    return [
        {"trace_id": trace_id, "span_id": new_span_id(), "name": f"span-{i}"} for i in range(count)
    ]


def logs_request(records: list[dict[str, Any]]) -> ExportLogsServiceRequest:
    request = ExportLogsServiceRequest()
    rl = request.resource_logs.add()
    rl.resource.attributes.append(kv("service.name", "test-svc"))
    sl = rl.scope_logs.add()
    sl.scope.name = "tests"
    for spec in records:
        record = sl.log_records.add()
        record.trace_id = spec.get("trace_id", b"")
        record.span_id = spec.get("span_id", b"")
        record.time_unix_nano = spec.get("time", 1_700_000_000_000_000_000)
        record.event_name = spec.get("event_name", "")
        if "body" in spec:
            record.body.CopyFrom(any_value(spec["body"]))
        record.attributes.extend(kv(k, v) for k, v in spec.get("attributes", {}).items())
    return request


def bad_id_request(trace_id: bytes) -> ExportTraceServiceRequest:
    """Three good spans of `trace_id` and five with ids of the wrong length or all zeros."""
    spans = simple_spans(3, trace_id)
    spans.append({"trace_id": b"\x01" * 15, "span_id": b"\x02" * 8, "name": "short trace id"})
    spans.append({"trace_id": bytes(16), "span_id": b"\x02" * 8, "name": "zero trace id"})
    spans.append({"trace_id": trace_id, "span_id": bytes(8), "name": "zero span id"})
    spans.append({"trace_id": trace_id, "span_id": b"\x03" * 7, "name": "short span id"})
    spans.append(
        {"trace_id": trace_id, "span_id": b"\x04" * 8, "parent_span_id": b"\x05" * 3, "name": "p"}
    )
    return trace_request(spans)


def grpc_export(server: RunningServer, body: bytes, metadata=()) -> ExportTraceServiceResponse:
    """Send raw bytes to the trace Export method, as a client with no schema checks would."""
    with grpc.insecure_channel(server.grpc_endpoint) as channel:
        reply = channel.unary_unary(TRACE_EXPORT)(body, timeout=10, metadata=metadata)
    return ExportTraceServiceResponse.FromString(reply)


def grpc_error(server: RunningServer, body: bytes, metadata=()) -> grpc.RpcError:
    """The error the trace Export method answers `body` with (fails if it accepts it)."""
    with pytest.raises(grpc.RpcError) as caught:
        grpc_export(server, body, metadata)
    return caught.value
