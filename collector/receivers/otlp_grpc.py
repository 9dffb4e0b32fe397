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
from collector.errors import SextantError, StartupError, TransientError, status_label
from collector.guard import wire
from collector.guard.service import Guard
from collector.lifecycle import remaining
from collector.receivers.ingest import Ingest, metered
from collector.receivers.metrics import ReceiverMetrics
from collector.threads import os_thread_name
from collector.tls import grpc_credentials

log = logging.getLogger(__name__)

TRACE_SERVICE = "opentelemetry.proto.collector.trace.v1.TraceService"
LOGS_SERVICE = "opentelemetry.proto.collector.logs.v1.LogsService"
MAX_RESPONSE_BYTES = 4 * 1024 * 1024


def status_details(error: SextantError, code: grpc.StatusCode) -> tuple[tuple[str, bytes], ...]:
    """google.rpc.Status with RetryInfo, so OTLP exporters know a throttle is retryable."""
    if not isinstance(error, TransientError):
        return ()
    detail = any_pb2.Any()
    detail.Pack(
        error_details_pb2.RetryInfo(
            retry_delay=duration_pb2.Duration(seconds=error.retry_after_seconds)
        )
    )
    status = status_pb2.Status(code=code.value[0], message=str(error), details=[detail])
    return (("grpc-status-details-bin", status.SerializeToString()),)


class OtlpGrpcReceiver:
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
        self.server: grpc.aio.Server | None = None
        self.port = 0

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
        try:
            metadata = dict(context.invocation_metadata() or ())
            self.auth.check(metadata.get("authorization"))
            request = wire.request_of(data)
        except SextantError as exc:
            code = getattr(exc, "grpc_code", grpc.StatusCode.INTERNAL)
            await context.abort(code, str(exc))
            raise AssertionError("unreachable: abort raises") from exc
        except (ValueError, DecodeError) as exc:  # pydantic, JSON and protobuf errors
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"bad guard call: {exc}")
            raise AssertionError("unreachable: abort raises") from exc
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
        error: SextantError | None = None
        with metered(self.metrics, "grpc", signal) as outcome:
            try:
                metadata = dict(context.invocation_metadata() or ())
                self.auth.check(metadata.get("authorization"))
                reply = await consume()
                outcome["status"] = "ok"
                return reply
            except SextantError as exc:
                error = exc
            except Exception as exc:  # never let one request take the server down
                log.exception("unexpected error in OTLP/gRPC %s export", signal)
                error = SextantError(f"internal error: {type(exc).__name__}")
            outcome["status"] = status_label(error)
        code = getattr(error, "grpc_code", grpc.StatusCode.INTERNAL)
        if code == grpc.StatusCode.UNAUTHENTICATED:
            agent = dict(context.invocation_metadata() or ()).get("user-agent")
            peer = f"{context.peer()} ({agent})"
            self.metrics.misdirected.note("grpc", "unauthenticated", peer, f"{signal} export")
        await context.abort(code, str(error), trailing_metadata=status_details(error, code))
        raise AssertionError("unreachable: abort raises")
