"""OTLP/gRPC receiver: TraceService/Export and LogsService/Export on raw bytes."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

import grpc
from google.protobuf import any_pb2, duration_pb2
from google.protobuf.message import DecodeError
from google.rpc import error_details_pb2, status_pb2

from collector.auth import BearerAuth
from collector.config.sections import GrpcConfig, LimitsConfig
from collector.errors import SextantError, StartupError, TransientError
from collector.guard import wire
from collector.guard.call import GuardRequest
from collector.guard.service import Guard
from collector.lifecycle import remaining
from collector.receivers.ingest import Ingest, export_answer
from collector.receivers.metrics import ReceiverMetrics
from collector.threads import os_thread_name
from collector.tls import grpc_credentials

log = logging.getLogger(__name__)

TRACE_SERVICE = "opentelemetry.proto.collector.trace.v1.TraceService"
LOGS_SERVICE = "opentelemetry.proto.collector.logs.v1.LogsService"
MAX_RESPONSE_BYTES = 4 * 1024 * 1024


def status_detail(error: SextantError, code: grpc.StatusCode) -> bytes:
    """google.rpc.Status with RetryInfo, so OTLP exporters know a throttle is retryable; empty
    for an error that is not."""
    if not isinstance(error, TransientError):
        return b""
    detail = any_pb2.Any()
    detail.Pack(
        error_details_pb2.RetryInfo(
            retry_delay=duration_pb2.Duration(seconds=error.retry_after_seconds)
        )
    )
    status = status_pb2.Status(code=code.value[0], message=str(error), details=[detail])
    return status.SerializeToString()


def grpc_code(error: SextantError) -> grpc.StatusCode:
    return getattr(error, "grpc_code", grpc.StatusCode.INTERNAL)


def refusal(
    metrics: ReceiverMetrics, signal: str, error: SextantError, sender: Callable[[], str]
) -> tuple[grpc.StatusCode, bytes]:
    """The status and status details an export is refused with; a refusal for want of a token
    is noted with who sent it (`sender`: peer and user agent), so a misdirected exporter is
    found."""
    code = grpc_code(error)
    if code == grpc.StatusCode.UNAUTHENTICATED:
        metrics.misdirected.note("grpc", "unauthenticated", sender(), f"{signal} export")
    return code, status_detail(error, code)


def guard_request(
    auth: BearerAuth, authorization: str | None, data: bytes
) -> GuardRequest | tuple[grpc.StatusCode, str]:
    """The guard call's request, or the status and message it is refused with."""
    try:
        auth.check(authorization)
        return wire.request_of(data)
    except SextantError as exc:
        return grpc_code(exc), str(exc)
    except (ValueError, DecodeError) as exc:  # pydantic, JSON and protobuf errors
        return grpc.StatusCode.INVALID_ARGUMENT, f"bad guard call: {exc}"


class GrpcReceiver:
    """What an OTLP/gRPC listener answers with, whichever server frames its calls."""

    def __init__(
        self,
        config: GrpcConfig,
        limits: LimitsConfig,
        auth: BearerAuth,
        ingest: Ingest,
        metrics: ReceiverMetrics,
        guard: Guard | None = None,
    ) -> None:
        self.guard = guard
        self.config = config
        self.limits = limits
        self.auth = auth
        self.ingest = ingest
        self.metrics = metrics
        self.port = 0


class OtlpGrpcReceiver(GrpcReceiver):
    """The listener on grpcio's asyncio server (TLS listeners, and `grpc.server: grpcio`)."""

    server: grpc.aio.Server | None = None

    async def start(self) -> None:
        host, port = self.config.host_port
        # gRPC starts its threads here; those it does not name itself inherit this name.
        with os_thread_name("sextant-grpc"):
            server = grpc.aio.server(
                options=(
                    # grpcio shares a port with another process by default; we want EADDRINUSE.
                    ("grpc.so_reuseport", 0),
                    ("grpc.max_receive_message_length", self.limits.max_request_bytes),
                    ("grpc.max_send_message_length", MAX_RESPONSE_BYTES),
                )
            )
        handlers = [
            grpc.method_handlers_generic_handler(
                service, {"Export": grpc.unary_unary_rpc_method_handler(self._handler(signal))}
            )
            for service, signal in ((TRACE_SERVICE, "traces"), (LOGS_SERVICE, "logs"))
        ]
        if self.guard is not None:
            check = grpc.unary_unary_rpc_method_handler(self._check)
            handlers.append(grpc.method_handlers_generic_handler(wire.SERVICE, {"Check": check}))
        server.add_generic_rpc_handlers(tuple(handlers))
        target = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        tls = self.config.tls
        try:
            if tls is None:
                bound = server.add_insecure_port(target)
            else:
                credentials = grpc_credentials(tls, "OTLP/gRPC (grpc.tls)")
                bound = server.add_secure_port(target, credentials)
        except RuntimeError as exc:
            raise StartupError(
                f"cannot listen on {host}:{port} for OTLP/gRPC: address in use or not available"
            ) from exc
        if not bound:
            raise StartupError(f"cannot listen on {host}:{port} for OTLP/gRPC")
        await server.start()
        self.server = server
        self.port = bound

    async def shutdown(self, deadline: float) -> None:
        """Stop taking calls; calls in flight get until the deadline to be answered."""
        if self.server is not None:
            server, self.server = self.server, None
            await server.stop(remaining(deadline))

    async def _check(self, data: bytes, context: grpc.aio.ServicerContext) -> bytes:
        """GuardService/Check: the guard call of POST /v1/guard, over gRPC."""
        assert self.guard is not None
        metadata = dict(context.invocation_metadata() or ())
        request = guard_request(self.auth, metadata.get("authorization"), data)
        if isinstance(request, tuple):
            await context.abort(*request)
            raise AssertionError("unreachable: abort raises")
        return wire.response_of(await self.guard.check(request, "grpc"))

    def _handler(self, signal: str) -> Callable[[bytes, grpc.aio.ServicerContext], Awaitable]:
        async def export(data: bytes, context: grpc.aio.ServicerContext) -> bytes:
            async def consume() -> bytes:
                answer = await self.ingest.consume(signal, "protobuf", data, "grpc")
                return answer.protobuf(signal)

            return await self._answer(signal, context, consume)

        return export

    async def _answer(
        self,
        signal: str,
        context: grpc.aio.ServicerContext,
        consume: Callable[[], Awaitable[bytes]],
    ) -> bytes:
        metadata = dict(context.invocation_metadata() or ())

        async def checked() -> bytes:
            self.auth.check(metadata.get("authorization"))
            return await consume()

        answer = await export_answer(self.metrics, "grpc", signal, checked)
        if isinstance(answer, bytes):
            return answer
        code, details = refusal(
            self.metrics,
            signal,
            answer,
            lambda: f"{context.peer()} ({metadata.get('user-agent')})",
        )
        trailing = (("grpc-status-details-bin", details),) if details else ()
        await context.abort(code, str(answer), trailing_metadata=trailing)
        raise AssertionError("unreachable: abort raises")
