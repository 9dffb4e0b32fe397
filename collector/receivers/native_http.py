"""OTLP/HTTP served by the native listener: HTTP/1.1 in native threads (hyper), off the loop.

On aiohttp a `POST /v1/guard` cost the event loop about 600 µs and waited behind every other
request there: p99 20-35 ms beside ingest. The native listener (collector/native/http_server.rs)
answers a guard call about a run the guard keeps natively in its own threads, as the gRPC
listener answers `GuardService/Check`, and hands every other request, read whole up to the size
limit, to the loop in batches, woken by a byte on a pipe. Each is then answered exactly as on
aiohttp, by `OtlpHttpRoutes`. TLS listeners stay on aiohttp.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable

from multidict import CIMultiDict

from collector.config.sections import HttpConfig
from collector.errors import RequestTooLarge
from collector.normalize.native import native
from collector.receivers.native_listener import NativeListener
from collector.receivers.otlp_http import HttpCall, HttpReply, OtlpHttpRoutes

log = logging.getLogger(__name__)

THREADS = 2  # the listener's threads: HTTP/1.1 of every connection, and guard calls


class NativeHttpReceiver(NativeListener):
    """POST /v1/traces, /v1/logs and /v1/guard on the native listener."""

    server: native.HttpServer | None = None

    def __init__(self, config: HttpConfig, routes: OtlpHttpRoutes) -> None:
        self.guard = routes.guard
        self.config = config
        self.routes = routes

    async def start(self) -> None:
        limit = self.routes.limits.max_request_bytes
        address = self.config.host_port

        def serve(woken: int) -> native.HttpServer:
            return native.HttpServer(*address, THREADS, woken, limit)

        self.listen("OTLP/HTTP", address, self.routes.auth.tokens, serve)

    def _start_calls(self, loop: asyncio.AbstractEventLoop) -> None:
        server = self.server
        if server is None:
            return
        for call_id, method, path, headers, body, peer, waited in server.take():
            call = HttpCall(method, path, CIMultiDict(headers), peer, self._chunks(body))
            self.started(loop.create_task(self._answer(server, call_id, call, waited)))

    def _chunks(self, body: bytes | None) -> Callable[[], AsyncIterator[bytes]]:
        limit = self.routes.limits.max_request_bytes

        async def chunks() -> AsyncIterator[bytes]:
            if body is None:  # the listener stopped reading it at the limit
                raise RequestTooLarge(f"request body exceeds the {limit}-byte limit")
            yield body

        return chunks

    async def _answer(
        self, server: native.HttpServer, call_id: int, call: HttpCall, waited: float
    ) -> None:
        try:
            reply = await self.routes.answer(call, waited)
        except Exception as exc:  # never let one request take the server down
            log.exception("unexpected error answering OTLP/HTTP %s %s", call.method, call.path)
            reply = HttpReply(500, f"internal error: {type(exc).__name__}".encode(), "text/plain")
        headers = [("Content-Type", reply.content_type), *reply.headers.items()]
        server.reply(call_id, reply.status, headers, reply.body)
