"""One span (or log record) through the decoder, for tests of what it stores."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from opentelemetry.proto.common.v1.common_pb2 import KeyValue

from collector.normalize.wire import decode_request
from tests.support.otlp import kv, logs_request, new_span_id, new_trace_id, trace_request


def decoded_span(
    attributes: dict[str, Any] | Iterable[KeyValue],
    name: str = "span",
    *,
    events: Iterable[tuple[str, dict[str, Any]]] = (),
    status_code: int = 0,
    limit: int = 1000,
) -> dict[str, Any]:
    """The stored row of one span with these attributes (a dict, or KeyValues as sent)."""
    request = trace_request([{"trace_id": new_trace_id(), "span_id": new_span_id(), "name": name}])
    span = request.resource_spans[0].scope_spans[0].spans[0]
    if isinstance(attributes, dict):
        span.attributes.extend(kv(k, v) for k, v in attributes.items())
    else:
        span.attributes.extend(attributes)
    for event_name, event_attributes in events:
        event = span.events.add()
        event.name = event_name
        event.attributes.extend(kv(k, v) for k, v in event_attributes.items())
    span.status.code = status_code  # type: ignore[assignment]
    decoded = decode_request("traces", "protobuf", request.SerializeToString(), limit)
    (row,) = decoded.table.to_pylist()
    return row


def decoded_log(record: dict[str, Any], limit: int = 1000) -> dict[str, Any]:
    """The stored row of one log record (see `logs_request` for the keys)."""
    decoded = decode_request("logs", "protobuf", logs_request([record]).SerializeToString(), limit)
    (row,) = decoded.table.to_pylist()
    return row


def tool_fields(attrs: dict[str, Any]) -> tuple[str | None, str | None, str | None]:
    """(call id, arguments, result) as stored for a tool span with these attributes."""
    row = decoded_span(attrs, "execute_tool t")
    return row["tool_call_id"], row["tool_arguments"], row["tool_result"]
