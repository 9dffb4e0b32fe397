"""Re-send stored spans as OTLP to any collector: another Sextant, Phoenix, an OTel Collector."""

from __future__ import annotations

import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import grpc
import orjson
import pyarrow as pa
from google.protobuf.message import Message
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status

from collector.errors import SextantError
from collector.outbound import opener
from collector.redact import header_secrets, redact, shown_url, url_secrets
from collector.replay.selection import Selection
from collector.replay.sources import Source

# The names the decoder stores for span kinds and status codes, by their protobuf number.
SPAN_KINDS = ("UNSPECIFIED", "INTERNAL", "SERVER", "CLIENT", "PRODUCER", "CONSUMER")
STATUS_CODES = ("UNSET", "OK", "ERROR")
SPANS_PER_REQUEST = 1000
TRACES_PER_QUERY = 2000


def any_value(value: Any) -> AnyValue:
    """The inverse of the store's attribute JSON (bytes were kept as base64 text, and stay so)."""
    if isinstance(value, bool):
        return AnyValue(bool_value=value)
    if isinstance(value, int):
        return AnyValue(int_value=value)
    if isinstance(value, float):
        return AnyValue(double_value=value)
    if isinstance(value, str):
        return AnyValue(string_value=value)
    if isinstance(value, bytes):
        return AnyValue(bytes_value=value)
    out = AnyValue()
    if isinstance(value, list):
        out.array_value.values.extend(any_value(v) for v in value)
    elif isinstance(value, dict):
        out.kvlist_value.values.extend(key_values(value))
    return out


def key_values(attributes: dict[str, Any] | None) -> list[KeyValue]:
    return [KeyValue(key=k, value=any_value(v)) for k, v in (attributes or {}).items()]


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


GRPC_EXPORTS = {
    "traces": "/opentelemetry.proto.collector.trace.v1.TraceService/Export",
    "logs": "/opentelemetry.proto.collector.logs.v1.LogsService/Export",
}
# What OTLP says a client may retry (the rest is refused for good).
RETRYABLE_GRPC = {"CANCELLED", "DEADLINE_EXCEEDED", "ABORTED", "OUT_OF_RANGE", "UNAVAILABLE",
                  "DATA_LOSS", "RESOURCE_EXHAUSTED"}  # fmt: skip
RETRYABLE_HTTP = {429, 502, 503, 504}


class SendError(SextantError):
    def __init__(self, message: str, retryable: bool) -> None:
        super().__init__(message)
        self.retryable = retryable


class Sender:
    """One OTLP export request at a time, over gRPC or HTTP/protobuf, for traces or logs."""

    def __init__(
        self, endpoint: str, protocol: str, headers: dict[str, str], signal: str = "traces"
    ) -> None:
        self.endpoint = endpoint
        self.protocol = protocol
        self.headers = headers
        if protocol == "grpc":
            target = endpoint.split("://", 1)[-1].rstrip("/")
            self.channel = grpc.insecure_channel(target)
            self.export = self.channel.unary_unary(GRPC_EXPORTS[signal])
        else:
            url = endpoint if "://" in endpoint else f"http://{endpoint}"
            path = f"/v1/{signal}"
            self.url = url if url.rstrip("/").endswith(path) else url.rstrip("/") + path

    def send(self, request: Message, timeout: float = 30) -> None:
        """Send it; a SendError says whether trying again may succeed."""
        body = request.SerializeToString()
        if self.protocol == "grpc":
            try:
                self.export(body, metadata=list(self.headers.items()), timeout=timeout)
            except grpc.RpcError as exc:
                code = exc.code().name
                message = f"{shown_url(self.endpoint)}: {code}: {exc.details()}"
                raise SendError(self._redacted(message), code in RETRYABLE_GRPC) from exc
            return
        headers = {"Content-Type": "application/x-protobuf", **self.headers}
        request_ = urllib.request.Request(self.url, body, headers, method="POST")
        try:
            # Redirects to another origin are refused: urllib would send the configured
            # headers (API keys) on to whatever host the answer names.
            with opener().open(request_, timeout=timeout) as reply:
                reply.read()
        except urllib.error.HTTPError as exc:
            message = f"{shown_url(self.url)}: HTTP {exc.code}: {exc.reason}: {exc.read()[:300]!r}"
            raise SendError(self._redacted(message), exc.code in RETRYABLE_HTTP) from exc
        except urllib.error.URLError as exc:
            message = f"cannot reach {shown_url(self.url)}: {exc.reason}"
            raise SendError(self._redacted(message), True) from exc

    def _redacted(self, text: str) -> str:
        """Error text without the configured header values: a server may echo its request."""
        secrets = [*self.headers.values(), *header_secrets(self.headers)]
        return redact(text, [*secrets, *url_secrets(self.url if self.protocol != "grpc" else "")])

    def close(self) -> None:
        if self.protocol == "grpc":
            self.channel.close()


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
