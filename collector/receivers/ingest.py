"""The work both receivers share: decode (on decode threads), queue for commit, wait, count."""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

import pyarrow as pa
from google.protobuf.message import Message
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceResponse
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from collector.config.sections import IngestConfig, LimitsConfig
from collector.errors import MalformedRequest, Overloaded, SextantError, status_label
from collector.normalize.wire import Decoded, decode_request
from collector.receivers.admission import Admission
from collector.receivers.coalesce import Coalescer, whole_fields
from collector.receivers.metrics import ReceiverMetrics
from collector.store.tables import SIGNAL_TABLES
from collector.store.writer import Writer
from collector.threads import named_executor

REASONS = {
    "invalid_trace_id": "trace_id must be 16 bytes (32 hex digits) and not all zero",
    "invalid_span_id": "span_id must be 8 bytes (16 hex digits) and not all zero",
    "invalid_parent_span_id": "parent_span_id must be empty or 8 bytes (16 hex digits)",
    "unprocessable_span": "the span's content could not be read",
}
NOUNS = {"traces": "spans", "logs": "log records"}
PROTOCOLS = ("grpc", "http")
T = TypeVar("T")
log = logging.getLogger(__name__)


PROTOCOL_NAMES = {"grpc": "gRPC", "http": "HTTP"}


async def export_answer(
    metrics: ReceiverMetrics,
    protocol: str,
    signal: str,
    consume: Callable[[], Awaitable[T]],
    waited: float = 0.0,
) -> T | SextantError:
    """The reply of an export, or the error it is answered with, counted by outcome either way
    (a call abandoned midway counts as `cancelled`; `waited`: seconds it waited before it got
    here, part of its duration). Both receivers answer every export through it."""
    started = time.perf_counter() - waited
    status = "cancelled"
    try:
        reply = await consume()
        status = "ok"
        return reply
    except SextantError as exc:
        error = exc
        status = status_label(error)
    except Exception as exc:  # never let one request take the server down
        log.exception("unexpected error in OTLP/%s %s export", PROTOCOL_NAMES[protocol], signal)
        error = SextantError(f"internal error: {type(exc).__name__}")
        status = status_label(error)
    finally:
        metrics.requests.labels(protocol, signal, status).inc()
        metrics.request_duration.labels(protocol, signal).observe(time.perf_counter() - started)
    return error


@dataclass(frozen=True)
class ExportReply:
    """What the client is told: how many items were rejected and why (OTLP partial success)."""

    rejected: int = 0
    message: str = ""
    ignored_keys: tuple[str, ...] = ()  # of an OTLP/JSON body: the sender is told, and noted

    def response(self, signal: str) -> Message:
        """The OTLP export response of `signal`, with partial_success set only when needed."""
        if signal == "traces":
            traces = ExportTraceServiceResponse()
            if self.message:
                traces.partial_success.rejected_spans = self.rejected
                traces.partial_success.error_message = self.message
            return traces
        logs = ExportLogsServiceResponse()
        if self.message:
            logs.partial_success.rejected_log_records = self.rejected
            logs.partial_success.error_message = self.message
        return logs

    def protobuf(self, signal: str) -> bytes:
        """The response serialized; one with nothing to say is empty, zero bytes."""
        return self.response(signal).SerializeToString() if self.message else b""


def describe(decoded: Decoded, noun: str, limit: int) -> str:
    parts = []
    if decoded.rejected:
        reasons = "; ".join(
            f"{count} {reason} ({REASONS.get(reason, reason)})"
            for reason, count in sorted(decoded.rejected.items())
        )
        parts.append(f"rejected {decoded.rejected_total} {noun}: {reasons}")
    if decoded.truncated_rows:
        # OTLP: a message with nothing rejected is a warning the client may log.
        parts.append(
            f"{decoded.truncated_rows} {noun} stored with attribute values truncated to"
            f" {limit} characters"
        )
    if decoded.ignored_keys:
        keys = ", ".join(repr(k) for k in decoded.ignored_keys)
        parts.append(
            f"ignored unknown top-level keys {keys}: OTLP/JSON sends resourceSpans or resourceLogs"
        )
    return "; ".join(parts)


def start_at_zero(metrics: ReceiverMetrics) -> None:
    """Create every span label set the health rules and panels read at 0, so that `increase()`
    sees the first rejected span (a series born at 1 has no earlier sample to increase from)."""
    for protocol in PROTOCOLS:
        for signal in NOUNS:
            metrics.received.labels(protocol, signal)
            metrics.accepted.labels(protocol, signal)
        for reason in REASONS:
            metrics.rejected.labels(protocol, "traces", reason)


class Ingest:
    """Turns one export request's bytes into committed rows and the OTLP reply.

    The native decoder releases the GIL, so requests decode on a pool of threads of the
    receiving process (`sextant-decode_N`), side by side with gRPC, HTTP and the writer, with no
    copy of the request or its rows to another process. Small requests decode on the event
    loop: the hop to a thread would cost more than the decode. Small protobuf requests waiting
    at the same moment are decoded, journaled and queued as one batch (coalesce.py), each still
    answered on its own.
    """

    def __init__(
        self,
        writer: Writer,
        config: IngestConfig,
        limits: LimitsConfig,
        metrics: ReceiverMetrics,
        assembly_lag: Callable[[], float] = lambda: 0.0,
    ) -> None:
        self.writer = writer
        self.assembly_lag = assembly_lag
        # Told of every acknowledged span batch and who sent it (the guard: what is
        # acknowledged and may not be loaded yet); runs on the event loop, so stays cheap.
        self.on_acknowledged: Callable[[pa.Table, str], None] | None = None
        self._decoders: concurrent.futures.ThreadPoolExecutor | None = None
        self.admission = Admission(config.max_wait_seconds)
        self._coalescer: Coalescer[ExportReply] = Coalescer(self._together, config.coalesce_bytes)
        start_at_zero(metrics)
        self.config = config
        self.limits = limits
        self.metrics = metrics
        # per signal: rejected items by sender's service.name since start; "" = cannot be told
        self._senders: dict[str, Counter[str]] = {s: Counter() for s in NOUNS}

    def rejected_by_service(self, signal: str) -> dict[str, int]:
        """Rejections of `signal` since start by the service that sent them, so coverage is lost
        for that service alone; "" holds those whose sender cannot be told: items of a resource
        without service.name, and requests that could not be decoded at all (one each)."""
        return dict(self._senders[signal])

    def waiting_to_batch(self, signal: str, protocol: str) -> int:
        """Small requests queued for the next batch while the previous one is on its way."""
        return self._coalescer.waiting((signal, protocol))

    def start(self) -> None:
        self._decoders = named_executor("sextant-decode", self.config.decode_threads)

    def shutdown(self, deadline: float) -> None:
        """Requests in flight finish decoding (their callers wait for them)."""
        decoders, self._decoders = self._decoders, None
        if decoders is not None:
            decoders.shutdown(wait=True)

    def threads(self) -> list[threading.Thread]:
        return []  # the pool's threads end with shutdown(); none holds a DuckDB connection

    def _refuse_while_assembly_is_behind(self) -> None:
        """Back-pressure from evaluation: spans accepted faster than runs are assembled and
        evaluated would leave their runs unjudged for ever longer (and held in memory); the
        exporter retries instead, before the request costs a decode."""
        limit = self.config.max_assembly_lag_seconds
        if limit is None:
            return
        lag = self.assembly_lag()
        if lag > limit:
            self.metrics.refused.labels("assembly_behind").inc()
            error = Overloaded(
                f"assembly and evaluation are {lag:.1f} s behind (over"
                f" ingest.max_assembly_lag_seconds = {limit:g}); retry later"
            )
            error.retry_after_seconds = 1
            raise error

    async def _decode(
        self, signal: str, encoding: str, data: bytes, inline: bool = True
    ) -> Decoded:
        """`data` decoded; in the receiver when it is a small request (`inline`: a hop to a
        decoder thread costs more), else in a decoder thread, beside the event loop."""
        limit = self.limits.max_attribute_length
        decoders = self._decoders
        if decoders is None or (inline and len(data) < self.config.inline_decode_bytes):
            return decode_request(signal, encoding, data, limit)
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(decoders, decode_request, signal, encoding, data, limit)

    async def _submit(
        self, signal: str, encoding: str, data: bytes, protocol: str
    ) -> tuple[Decoded, concurrent.futures.Future[None] | None]:
        """Decode and queue the rows; the writer lingers for requests on their way here."""
        with self.writer.incoming():
            try:
                decoded = await self._decode(signal, encoding, data)
            except MalformedRequest:
                self._senders[signal][""] += 1
                raise
            return decoded, self._queue(signal, encoding, data, protocol, decoded)

    def _queue(
        self, signal: str, encoding: str, data: bytes, protocol: str, decoded: Decoded
    ) -> concurrent.futures.Future[None] | None:
        """Count what `data` decoded to and queue its rows (with `data` for the journal)."""
        m = self.metrics
        self._senders[signal].update(decoded.rejected_by_service)
        m.received.labels(protocol, signal).inc(decoded.rows + decoded.rejected_total)
        for reason, count in decoded.rejected.items():
            m.rejected.labels(protocol, signal, reason).inc(count)
        if decoded.table is None:
            return None
        request = (signal, encoding, self.limits.max_attribute_length, data)
        return self.writer.submit(SIGNAL_TABLES[signal], decoded.table, request)

    async def _acknowledge(
        self,
        signal: str,
        protocol: str,
        decoded: Decoded,
        committed: concurrent.futures.Future[None] | None,
    ) -> None:
        """Wait until the rows are durable, then count them accepted."""
        if committed is None:
            return
        # shield: a client that disconnects must not cancel the commit others share.
        await asyncio.shield(asyncio.wrap_future(committed))
        self.metrics.accepted.labels(protocol, signal).inc(decoded.rows)
        if self.on_acknowledged is not None and signal == "traces" and decoded.table is not None:
            self.on_acknowledged(decoded.table, protocol)
        if decoded.truncated_rows:
            self.metrics.truncated.labels(signal).inc(decoded.truncated_rows)

    def _coalesced(self, encoding: str, data: bytes) -> bool:
        """Whether the request may share a batch with others (small protobuf, whole fields)."""
        return (
            self.config.coalesce_bytes > 0
            and encoding == "protobuf"
            and len(data) < min(self.config.inline_decode_bytes, self.config.coalesce_bytes)
            and whole_fields(data)
        )

    async def consume(self, signal: str, encoding: str, data: bytes, protocol: str) -> ExportReply:
        if signal == "traces":
            self._refuse_while_assembly_is_behind()
        with self.admission.admitted(len(data)):  # until the commit: its wait counts too
            if self._coalesced(encoding, data):
                return await self._coalescer.submit((signal, protocol), data)
            return await self._alone(signal, encoding, data, protocol)

    async def _alone(self, signal: str, encoding: str, data: bytes, protocol: str) -> ExportReply:
        decoded, committed = await self._submit(signal, encoding, data, protocol)
        await self._acknowledge(signal, protocol, decoded, committed)
        message = describe(decoded, NOUNS[signal], self.limits.max_attribute_length)
        return ExportReply(decoded.rejected_total, message, decoded.ignored_keys)

    async def _together(
        self, key: tuple[str, str], bodies: list[bytes]
    ) -> list[ExportReply | BaseException]:
        """The coalescer's batch: one decode, one journal frame and one queued batch of rows
        for all of `bodies` when none of them has anything of its own to be told; otherwise
        each request alone."""
        signal, protocol = key
        if len(bodies) > 1:
            data = b"".join(bodies)
            with self.writer.incoming():
                decoded = await self._decode_clean(signal, data)
                if decoded is not None and not self.writer.fits(decoded.rows):
                    decoded = None  # refused together, some would have been taken alone
                if decoded is not None:
                    committed = self._queue(signal, "protobuf", data, protocol, decoded)
            if decoded is not None:
                self.metrics.batch_requests.labels(protocol, signal).observe(len(bodies))
                await self._acknowledge(signal, protocol, decoded, committed)
                return [ExportReply()] * len(bodies)
        for _ in bodies:
            self.metrics.batch_requests.labels(protocol, signal).observe(1)
        alone = [self._alone(signal, "protobuf", body, protocol) for body in bodies]
        return list(await asyncio.gather(*alone, return_exceptions=True))

    async def _decode_clean(self, signal: str, data: bytes) -> Decoded | None:
        """`data` decoded, or None when it is malformed or any item in it would be reported
        (rejected, truncated)."""
        try:
            # requests joined: many decodes' work, off the event loop that answers them
            decoded = await self._decode(signal, "protobuf", data, inline=False)
        except MalformedRequest:
            return None
        if decoded.rejected or decoded.truncated_rows or decoded.ignored_keys:
            return None
        return decoded
