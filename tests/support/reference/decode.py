"""Decoded OTLP export requests to column arrays: one pass over each span, attributes read once."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import orjson

from collector.store.schema import LOGS, SPANS, batch_columns
from tests.support.reference.anyvalue import AttributeReader
from tests.support.reference.semconv import normalized, text

SPAN_KINDS = ("UNSPECIFIED", "INTERNAL", "SERVER", "CLIENT", "PRODUCER", "CONSUMER")
STATUS_CODES = ("UNSET", "OK", "ERROR")
ZERO_TRACE_ID = bytes(16)
ZERO_SPAN_ID = bytes(8)

# The columns the decoder fills, in the store's order (the rest are computed in SQL).
SPAN_COLUMNS = batch_columns(SPANS)
LOG_COLUMNS = batch_columns(LOGS)


@dataclass
class Batch:
    """Columns of one request's accepted rows plus what was rejected, why, and from whom."""

    columns: dict[str, list[Any]]
    rows: int = 0
    rejected: Counter[str] = field(default_factory=Counter)
    truncated_rows: int = 0
    # Rejected items by their resource's service.name; "" where the resource names none.
    rejected_by_service: Counter[str] = field(default_factory=Counter)

    @property
    def rejected_total(self) -> int:
        return sum(self.rejected.values())


def dumps(value: Any) -> str:
    return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS).decode()


def invalid_span_ids(span: Any) -> str | None:
    """The rejection reason for a span whose ids cannot identify it, or None."""
    tid = span.trace_id
    if len(tid) != 16 or tid == ZERO_TRACE_ID:
        return "invalid_trace_id"
    sid = span.span_id
    if len(sid) != 8 or sid == ZERO_SPAN_ID:
        return "invalid_span_id"
    if len(span.parent_span_id) not in (0, 8):
        return "invalid_parent_span_id"
    return None


def resource_fields(resource: Any, reader: AttributeReader) -> tuple[dict[str, Any], str]:
    attrs = reader.attributes(resource.attributes)
    return attrs, dumps(attrs)


def events_of(span: Any, reader: AttributeReader) -> list[dict[str, Any]]:
    return [
        {
            "time_unix_nano": e.time_unix_nano,
            "name": e.name,
            "attributes": reader.attributes(e.attributes),
            "dropped_attributes_count": e.dropped_attributes_count,
        }
        for e in span.events
    ]


def links_of(span: Any, reader: AttributeReader) -> list[dict[str, Any]]:
    return [
        {
            "trace_id": link.trace_id.hex(),
            "span_id": link.span_id.hex(),
            "trace_state": link.trace_state,
            "attributes": reader.attributes(link.attributes),
            "dropped_attributes_count": link.dropped_attributes_count,
            "flags": link.flags,
        }
        for link in span.links
    ]


def enum_name(names: tuple[str, ...], value: int) -> str:
    return names[value] if 0 <= value < len(names) else str(value)


def decode_spans(request: Any, max_attribute_length: int) -> Batch:
    """Columns for every valid span of an ExportTraceServiceRequest.

    Each span becomes one row tuple; the rows are transposed into columns once at the end, which
    costs far less than appending to forty lists per span. A span that cannot be read is
    rejected alone (`unprocessable_span`), never the request.
    """
    rows: list[tuple[Any, ...]] = []
    rejected: Counter[str] = Counter()
    senders: Counter[str] = Counter()
    truncated_rows = 0
    reader = AttributeReader(max_attribute_length)
    read = reader.attributes
    for rs in request.resource_spans:
        reader.truncated = []
        res_attrs, res_json = resource_fields(rs.resource, reader)
        service = (text(res_attrs.get("service.name")), text(res_attrs.get("service.version")))
        res_schema = rs.schema_url or None
        resource_truncated = reader.truncated
        for ss in rs.scope_spans:
            scope = ss.scope
            reader.truncated = list(resource_truncated)
            scope_json = dumps(read(scope.attributes)) if scope.attributes else None
            origin: tuple[Any, ...] = (res_json, res_schema, scope.name or None)
            origin += (scope.version or None, scope_json, ss.schema_url or None)
            # Keys cut in the resource or scope are flagged on every span that carries them.
            shared_truncated = reader.truncated
            for span in ss.spans:
                tid, sid, parent = span.trace_id, span.span_id, span.parent_span_id
                if (
                    len(tid) != 16
                    or len(sid) != 8
                    or len(parent) not in (0, 8)
                    or tid == ZERO_TRACE_ID
                    or sid == ZERO_SPAN_ID
                ):
                    rejected[invalid_span_ids(span) or "invalid_span_id"] += 1
                    senders[service[0] or ""] += 1
                    continue
                reader.truncated = truncated = list(shared_truncated)
                try:
                    row = span_row(span, reader, origin, service)
                except Exception:  # one unreadable span costs that span, not the request
                    rejected["unprocessable_span"] += 1
                    senders[service[0] or ""] += 1
                    continue
                if truncated:
                    truncated_rows += 1
                rows.append(row)
    columns = transpose(rows, SPAN_COLUMNS)
    return Batch(columns, len(rows), rejected, truncated_rows, senders)


def span_row(
    span: Any, reader: AttributeReader, origin: tuple[Any, ...], service: tuple[Any, ...]
) -> tuple[Any, ...]:
    """One valid span as a row in SPAN_COLUMNS order; `origin` holds the resource and scope
    columns, `service` its service name and version (shared by every span of the resource)."""
    tid, sid, parent = span.trace_id, span.span_id, span.parent_span_id
    attrs = reader.attributes(span.attributes)
    events = events_of(span, reader) if span.events else []
    name = span.name
    status = span.status
    code = status.code
    return (
        tid.hex(),
        sid.hex(),
        parent.hex() if parent and parent != ZERO_SPAN_ID else None,
        span.trace_state or None,
        span.flags,
        name,
        enum_name(SPAN_KINDS, span.kind),
        span.start_time_unix_nano,
        span.end_time_unix_nano,
        enum_name(STATUS_CODES, code),
        status.message or None,
        *origin,
        dumps(attrs),
        dumps(events) if events else "[]",
        dumps(links_of(span, reader)) if span.links else "[]",
        span.dropped_attributes_count,
        span.dropped_events_count,
        span.dropped_links_count,
        reader.truncated or None,
        *service,
        *normalized(attrs, name, events, code),
    )


def transpose(rows: list[tuple[Any, ...]], names: tuple[str, ...]) -> dict[str, list[Any]]:
    if not rows:
        return {name: [] for name in names}
    return dict(zip(names, (list(col) for col in zip(*rows, strict=True)), strict=True))


def decode_logs(request: Any, max_attribute_length: int) -> Batch:
    """Columns for every valid log record of an ExportLogsServiceRequest."""
    cols: dict[str, list[Any]] = {name: [] for name in LOG_COLUMNS}
    batch = Batch(cols)
    reader = AttributeReader(max_attribute_length)
    for rl in request.resource_logs:
        reader.truncated = []
        res_attrs, res_json = resource_fields(rl.resource, reader)
        service_name = text(res_attrs.get("service.name"))
        shared_truncated = reader.truncated
        for sl in rl.scope_logs:
            scope = sl.scope
            for record in sl.log_records:
                tid, sid = record.trace_id, record.span_id
                if len(tid) not in (0, 16):
                    batch.rejected["invalid_trace_id"] += 1
                    continue
                if len(sid) not in (0, 8):
                    batch.rejected["invalid_span_id"] += 1
                    continue
                reader.truncated = list(shared_truncated)
                cols["trace_id"].append(tid.hex() if tid and tid != ZERO_TRACE_ID else None)
                cols["span_id"].append(sid.hex() if sid and sid != ZERO_SPAN_ID else None)
                cols["time_unix_nano"].append(record.time_unix_nano)
                cols["observed_time_unix_nano"].append(record.observed_time_unix_nano)
                cols["severity_number"].append(record.severity_number)
                cols["severity_text"].append(record.severity_text or None)
                cols["event_name"].append(getattr(record, "event_name", "") or None)
                body = reader.value(record.body, "body") if record.HasField("body") else None
                cols["body"].append(dumps(body))
                cols["attributes"].append(dumps(reader.attributes(record.attributes)))
                cols["flags"].append(record.flags)
                cols["dropped_attributes_count"].append(record.dropped_attributes_count)
                cols["resource_attributes"].append(res_json)
                cols["scope_name"].append(scope.name or None)
                cols["scope_version"].append(scope.version or None)
                cols["service_name"].append(service_name)
                cols["truncated_attributes"].append(reader.truncated or None)
                if reader.truncated:
                    batch.truncated_rows += 1
                batch.rows += 1
    return batch
