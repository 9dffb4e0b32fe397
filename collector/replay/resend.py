"""Re-send stored spans as OTLP to any collector: another Sextant, Phoenix, an OTel Collector."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import orjson
import pyarrow as pa
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status

from collector.otlp_sender import Sender, key_values
from collector.replay.selection import Selection
from collector.store.runs import Source

# The names the decoder stores for span kinds and status codes, by their protobuf number.
SPAN_KINDS = ("UNSPECIFIED", "INTERNAL", "SERVER", "CLIENT", "PRODUCER", "CONSUMER")
STATUS_CODES = ("UNSET", "OK", "ERROR")
SPANS_PER_REQUEST = 1000
TRACES_PER_QUERY = 2000


def loads(text: str | None) -> Any:
    return orjson.loads(text) if text else None


def enum_value(names: tuple[str, ...], name: str | None) -> int:
    """The enum number back from its stored name (unknown numbers were stored as digits)."""
    if name in names:
        return names.index(name)
    return int(name) if name and name.isdigit() else 0


def span_of(row: dict[str, Any], shift: int) -> Span:
    span = Span(
        trace_id=bytes.fromhex(row["trace_id"]),
        span_id=bytes.fromhex(row["span_id"]),
        parent_span_id=bytes.fromhex(row["parent_span_id"] or ""),
        trace_state=row["trace_state"] or "",
        flags=row["flags"] or 0,
        name=row["name"] or "",
        kind=Span.SpanKind.ValueType(enum_value(SPAN_KINDS, row["kind"])),
        start_time_unix_nano=row["start_time_unix_nano"] + shift,
        end_time_unix_nano=row["end_time_unix_nano"] + shift,
        attributes=key_values(loads(row["attributes"])),
        dropped_attributes_count=row["dropped_attributes_count"] or 0,
        dropped_events_count=row["dropped_events_count"] or 0,
        dropped_links_count=row["dropped_links_count"] or 0,
        status=Status(
            code=Status.StatusCode.ValueType(enum_value(STATUS_CODES, row["status_code"])),
            message=row["status_message"] or "",
        ),
    )
    for e in loads(row["events"]) or []:
        span.events.add(
            time_unix_nano=e["time_unix_nano"] + shift,
            name=e["name"],
            attributes=key_values(e["attributes"]),
            dropped_attributes_count=e.get("dropped_attributes_count") or 0,
        )
    for link in loads(row["links"]) or []:
        span.links.add(
            trace_id=bytes.fromhex(link["trace_id"]),
            span_id=bytes.fromhex(link["span_id"]),
            trace_state=link.get("trace_state") or "",
            attributes=key_values(link["attributes"]),
            dropped_attributes_count=link.get("dropped_attributes_count") or 0,
            flags=link.get("flags") or 0,
        )
    return span


def requests_of(rows: list[dict[str, Any]], shift: int) -> Iterator[ExportTraceServiceRequest]:
    """Spans grouped back under their resource and scope, SPANS_PER_REQUEST at a time."""
    for offset in range(0, len(rows), SPANS_PER_REQUEST):
        request = ExportTraceServiceRequest()
        resources: dict[tuple, Any] = {}
        scopes: dict[tuple, Any] = {}
        for row in rows[offset : offset + SPANS_PER_REQUEST]:
            rkey = (row["resource_attributes"], row["resource_schema_url"])
            if rkey not in resources:
                rs = resources[rkey] = request.resource_spans.add()
                rs.resource.attributes.extend(key_values(loads(row["resource_attributes"])))
                rs.schema_url = row["resource_schema_url"] or ""
            skey = (*rkey, row["scope_name"], row["scope_version"], row["scope_attributes"])
            if skey not in scopes:
                ss = scopes[skey] = resources[rkey].scope_spans.add()
                ss.scope.name = row["scope_name"] or ""
                ss.scope.version = row["scope_version"] or ""
                ss.scope.attributes.extend(key_values(loads(row["scope_attributes"])))
                ss.schema_url = row["scope_schema_url"] or ""
            scopes[skey].spans.append(span_of(row, shift))
        yield request


def resend(
    source: Source,
    selection: Selection,
    endpoint: str,
    protocol: str,
    shift_to_now: bool,
    headers: dict[str, str] | None = None,
) -> tuple[int, int]:
    """Send the selected traces' spans; (spans sent, traces selected)."""
    trace_ids = selection.keys(source)
    tables = [
        source.query(
            "SELECT * FROM spans WHERE trace_id IN (SELECT unnest(?::VARCHAR[]))"
            " ORDER BY trace_id, start_time_unix_nano, span_id",
            [trace_ids[i : i + TRACES_PER_QUERY]],
        )
        for i in range(0, len(trace_ids), TRACES_PER_QUERY)
    ]
    rows = pa.concat_tables(tables).to_pylist() if tables else []
    shift = 0
    if shift_to_now and rows:
        # The whole selection moves together, so traces keep their times relative to each other.
        shift = time.time_ns() - max(r["end_time_unix_nano"] for r in rows)
    sender = Sender(endpoint, protocol, headers or {})
    sent = 0
    try:
        for request in requests_of(rows, shift):
            sender.send(request)
            sent += sum(len(ss.spans) for rs in request.resource_spans for ss in rs.scope_spans)
    finally:
        sender.close()
    return sent, len(trace_ids)
