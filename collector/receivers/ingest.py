"""The work both receivers share: decode, normalize, queue for commit, wait, count."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from collector.config import LimitsConfig
from collector.errors import MalformedRequest
from collector.normalize.decode import Batch, decode_logs, decode_spans
from collector.store.writer import Writer, arrow_batch
from collector.telemetry import ReceiverMetrics

REASONS = {
    "invalid_trace_id": "trace_id must be 16 bytes (32 hex digits) and not all zero",
    "invalid_span_id": "span_id must be 8 bytes (16 hex digits) and not all zero",
    "invalid_parent_span_id": "parent_span_id must be empty or 8 bytes (16 hex digits)",
}


@dataclass(frozen=True)
class Outcome:
    """What the client is told: how many items were rejected and why (OTLP partial success)."""

    rejected: int = 0
    message: str = ""


def parse_protobuf(data: bytes, message_type: type) -> object:
    try:
        return message_type.FromString(data)
    except DecodeError as exc:
        raise MalformedRequest(
            f"request body is not a valid {message_type.__name__} protobuf: {exc}"
        ) from exc


def traces_from_protobuf(data: bytes) -> ExportTraceServiceRequest:
    return parse_protobuf(data, ExportTraceServiceRequest)  # type: ignore[return-value]


def logs_from_protobuf(data: bytes) -> ExportLogsServiceRequest:
    return parse_protobuf(data, ExportLogsServiceRequest)  # type: ignore[return-value]


def describe_rejections(batch: Batch, noun: str) -> str:
    if not batch.rejected:
        return ""
    parts = [
        f"{count} {reason} ({REASONS.get(reason, reason)})"
        for reason, count in sorted(batch.rejected.items())
    ]
    return f"rejected {batch.rejected_total} {noun}: " + "; ".join(parts)


class Ingest:
    """Turns one decoded export request into committed rows and an OTLP outcome."""

    def __init__(self, writer: Writer, limits: LimitsConfig, metrics: ReceiverMetrics) -> None:
        self.writer = writer
        self.limits = limits
        self.metrics = metrics

    async def consume_traces(self, request: ExportTraceServiceRequest, protocol: str) -> Outcome:
        batch = decode_spans(request, self.limits.max_attribute_length)
        return await self._store(batch, "spans", "spans", protocol)

    async def consume_logs(self, request: ExportLogsServiceRequest, protocol: str) -> Outcome:
        batch = decode_logs(request, self.limits.max_attribute_length)
        return await self._store(batch, "logs", "log records", protocol)

    async def _store(self, batch: Batch, table: str, noun: str, protocol: str) -> Outcome:
        signal = "traces" if table == "spans" else "logs"
        m = self.metrics
        m.received.labels(protocol, signal).inc(batch.rows + batch.rejected_total)
        for reason, count in batch.rejected.items():
            m.rejected.labels(protocol, signal, reason).inc(count)
        if batch.rows:
            future = self.writer.submit(table, arrow_batch(table, batch.columns))
            await asyncio.wrap_future(future)
            m.accepted.labels(protocol, signal).inc(batch.rows)
            if batch.truncated_rows:
                m.truncated.labels(signal).inc(batch.truncated_rows)
        message = describe_rejections(batch, noun)
        if batch.truncated_rows:
            # OTLP: a message with nothing rejected is a warning the client may log.
            limit = self.limits.max_attribute_length
            warning = f"{batch.truncated_rows} {noun} stored with attribute values truncated to"
            message = "; ".join(filter(None, (message, f"{warning} {limit} characters")))
        return Outcome(batch.rejected_total, message)
