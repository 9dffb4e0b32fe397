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
import contextlib
import logging
import os

import grpc

from collector.errors import StartupError
from collector.guard import wire
from collector.lifecycle import remaining
from collector.normalize.native import native
from collector.receivers.ingest import export_answer
from collector.receivers.otlp_grpc import MAX_RESPONSE_BYTES, GrpcReceiver, guard_request, refusal

log = logging.getLogger(__name__)

SIGNALS = ("traces", "logs")  # the native listener's method numbers 0 and 1; 2 is the guard
GUARD = 2
THREADS = 2  # the listener's threads: HTTP/2, framing and gzip of every connection
INTERNAL = grpc.StatusCode.INTERNAL.value[0]


class NativeGrpcReceiver(GrpcReceiver):
    """TraceService/Export, LogsService/Export and GuardService/Check on the native listener."""

    server: native.GrpcServer | None = None
    _wake = -1  # the loop's end of the wake-up pipe
    _tasks: set[asyncio.Task[None]]  # calls being answered

    async def start(self) -> None:
        host, port = self.config.host_port
        wake, woken = os.pipe()
        os.set_blocking(wake, False)
        os.set_blocking(woken, False)
        try:
            # `woken` is the server's from here on, also when it fails.
            server = native.GrpcServer(
                host,
                port,
                THREADS,
                woken,
                self.guard is not None,
                self.limits.max_request_bytes,
                MAX_RESPONSE_BYTES,
            )
        except OSError as exc:
            os.close(wake)
            raise StartupError(
                f"cannot listen on {host}:{port} for OTLP/gRPC: address in use or not available"
                f" ({exc})"
            ) from exc
        self.server, self.port, self._wake = server, server.port, wake
        runs = None if self.guard is None else self.guard.listener(self.auth.tokens)
        if runs is not None:
            server.answer_guard_calls(runs)
        self._tasks = set()
        asyncio.get_running_loop().add_reader(wake, self._take)

    async def shutdown(self, deadline: float) -> None:
        """Stop taking calls; calls in flight, also those handed over meanwhile, get until the
        deadline to be answered."""
        server = self.server
        if server is None:
            return
        server.stop()
        while not server.stopped() and remaining(deadline) > 0:
            await asyncio.sleep(0.02)
        if self.guard is not None:
            self.guard.answered_by_listener()  # the steps of the last calls answered natively
        self.server = None
        asyncio.get_running_loop().remove_reader(self._wake)
        os.close(self._wake)
        await asyncio.to_thread(server.close)

    def _take(self) -> None:
        """The calls that arrived since the loop last looked, each started as a task."""
        with contextlib.suppress(BlockingIOError):
            os.read(self._wake, 4096)
        server = self.server
        if server is None:
            return
        calls = server.take()  # clears the wake-up: what the listener answers after wakes again
        loop = asyncio.get_running_loop()
        for call_id, method, body, authorization, agent, peer, waited in calls:
            if method == GUARD:
                work = self._check(server, call_id, body, authorization)
            else:
                work = self._export(
                    server, call_id, SIGNALS[method], body, authorization, agent, peer, waited
                )
            task = loop.create_task(work)
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        if self.guard is not None:
            try:
                self.guard.answered_by_listener()  # calls the listener answered: their steps
            except Exception:  # never let recording take the calls' hand-over down
                log.exception("recording the guard steps answered natively failed")

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
