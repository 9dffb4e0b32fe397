"""OTLP/gRPC served by the native listener: HTTP/2, gRPC framing and gzip in native threads.

grpcio's asyncio server costs the event loop about 360 µs a call before a handler runs: with
10-span requests from many exporters that, not the work, bounded the spans a second. The
native listener (collector/native/grpc_server.rs) takes the calls off the GIL and hands the
ones that arrived since the loop last looked to it together, woken by a byte on a pipe. Each
call is then answered exactly as `OtlpGrpcReceiver` answers it: the same authentication,
ingest, status codes, RetryInfo details, metrics and guard. A guard call about a run the guard
keeps natively is answered in the listener's threads (collector/native/guard_listen.rs); the
loop records its step when it next looks. TLS listeners stay on grpcio.
"""

from __future__ import annotations

import asyncio
import logging

import grpc

from collector.guard import wire
from collector.normalize.native import native
from collector.receivers.ingest import export_answer
from collector.receivers.native_listener import NativeListener
from collector.receivers.otlp_grpc import MAX_RESPONSE_BYTES, GrpcReceiver, guard_request, refusal

log = logging.getLogger(__name__)

SIGNALS = ("traces", "logs")  # the native listener's method numbers 0 and 1; 2 is the guard
GUARD = 2
THREADS = 2  # the listener's threads: HTTP/2, framing and gzip of every connection
INTERNAL = grpc.StatusCode.INTERNAL.value[0]


class NativeGrpcReceiver(GrpcReceiver, NativeListener):
    """TraceService/Export, LogsService/Export and GuardService/Check on the native listener."""

    server: native.GrpcServer | None = None

    async def start(self) -> None:
        address, guard = self.config.host_port, self.guard is not None
        limits = (self.limits.max_request_bytes, MAX_RESPONSE_BYTES)

        def serve(woken: int) -> native.GrpcServer:
            return native.GrpcServer(*address, THREADS, woken, guard, *limits)

        self.listen("OTLP/gRPC", address, self.auth.tokens, serve)

    def _start_calls(self, loop: asyncio.AbstractEventLoop) -> None:
        server = self.server
        if server is None:
            return
        calls = server.take()  # clears the wake-up: what the listener answers after wakes again
        for call_id, method, body, authorization, agent, peer, waited in calls:
            if method == GUARD:
                work = self._check(server, call_id, body, authorization)
            else:
                work = self._export(
                    server, call_id, SIGNALS[method], body, authorization, agent, peer, waited
                )
            self.started(loop.create_task(work))

    async def _export(
        self,
        server: native.GrpcServer,
        call_id: int,
        signal: str,
        data: bytes,
        authorization: str | None,
        agent: str | None,
        peer: str,
        waited: float,
    ) -> None:
        async def consume() -> bytes:
            self.auth.check(authorization)
            answer = await self.ingest.consume(signal, "protobuf", data, "grpc")
            return answer.protobuf(signal)

        answer = await export_answer(self.metrics, "grpc", signal, consume, waited)
        if isinstance(answer, bytes):
            server.reply(call_id, 0, answer)
            return
        code, details = refusal(self.metrics, signal, answer, lambda: f"{peer} ({agent})")
        server.reply(call_id, code.value[0], b"", str(answer), details)

    async def _check(
        self, server: native.GrpcServer, call_id: int, data: bytes, authorization: str | None
    ) -> None:
        """GuardService/Check: the guard call of POST /v1/guard, over gRPC."""
        assert self.guard is not None
        request = guard_request(self.auth, authorization, data)
        if isinstance(request, tuple):
            code, message = request
            server.reply(call_id, code.value[0], b"", message)
            return
        try:
            answer = await self.guard.check(request, "grpc")
        except Exception as exc:  # never let one call take the server down
            log.exception("unexpected error in a guard call over gRPC")
            server.reply(call_id, INTERNAL, b"", f"internal error: {type(exc).__name__}")
            return
        server.reply(call_id, 0, wire.response_of(answer))
