"""OTLP/HTTP receiver: POST /v1/traces and /v1/logs, protobuf or JSON, gzip or not."""

from __future__ import annotations

import logging
import zlib
from collections.abc import Awaitable, Callable
from typing import Protocol

import orjson
from aiohttp import web
from google.protobuf import json_format
from google.protobuf.message import Message
from google.rpc import status_pb2
from pydantic import ValidationError

from collector.auth import BearerAuth
from collector.config.sections import HttpConfig, LimitsConfig
from collector.errors import (
    MalformedRequest,
    PermanentError,
    RequestTooLarge,
    SextantError,
    TransientError,
    UnsupportedMediaType,
)
from collector.guard.call import GuardRequest
from collector.guard.service import Guard
from collector.httpserver import HttpServer
from collector.receivers.ingest import Ingest, export_answer
from collector.receivers.metrics import ReceiverMetrics
from collector.tls import reloading_context

log = logging.getLogger(__name__)

PROTOBUF = "application/x-protobuf"
JSON = "application/json"
PROTOBUF_TYPES = {PROTOBUF, "application/protobuf"}
# refusals that mean the sender is misconfigured: HTTP status -> reason
MISDIRECTED = {401: "unauthenticated", 415: "unsupported_media_type"}


# Decompression is ours (aiohttp's is switched off) so the size limit applies to inflated bytes.
class Inflater(Protocol):
    """What `zlib.decompressobj()` returns (its class is private to zlib)."""

    @property
    def eof(self) -> bool: ...

    @property
    def unused_data(self) -> bytes: ...

    @property
    def unconsumed_tail(self) -> bytes: ...

    def decompress(self, data: bytes, max_length: int = 0, /) -> bytes: ...


DECODERS: dict[str, Callable[[], Inflater | None]] = {
    "": lambda: None,
    "identity": lambda: None,
    "gzip": lambda: zlib.decompressobj(wbits=31),
    "deflate": lambda: zlib.decompressobj(),
}
READ_CHUNK = 256 * 1024


def media_type(request: web.Request) -> str:
    content_type = request.content_type
    if content_type in PROTOBUF_TYPES:
        return PROTOBUF
    if content_type == JSON:
        return JSON
    raise UnsupportedMediaType(
        f"unsupported Content-Type {request.headers.get('Content-Type', '(none)')!r};"
        f" OTLP/HTTP takes {PROTOBUF} or {JSON}"
    )


async def read_body(request: web.Request, limit: int) -> bytes:
    """The body after decompression, refused once it passes `limit` (chunked bodies included)."""
    encoding = request.headers.get("Content-Encoding", "").strip().lower()
    if encoding not in DECODERS:
        raise UnsupportedMediaType(f"unsupported Content-Encoding {encoding!r}; use gzip or none")
    declared = request.content_length
    if declared is not None and declared > limit:
        raise RequestTooLarge(f"request body of {declared} bytes exceeds the {limit}-byte limit")
    new_inflater = DECODERS[encoding]
    inflater = new_inflater()
    chunks: list[bytes] = []
    size = 0
    try:
        while chunk := await request.content.read(READ_CHUNK):
            if inflater is None:
                pieces = [chunk]
            else:
                pieces, inflater = inflate(chunk, inflater, new_inflater, limit - size + 1)
            for piece in pieces:
                size += len(piece)
                if size > limit:
                    raise RequestTooLarge(f"request body exceeds the {limit}-byte limit")
                chunks.append(piece)
        if inflater is not None and not inflater.eof:
            raise MalformedRequest(f"truncated {encoding} request body")
    except zlib.error as exc:
        raise MalformedRequest(f"request body is not valid {encoding}: {exc}") from exc
    return b"".join(chunks)


def inflate(
    data: bytes, inflater: Inflater, new_inflater: Callable[[], Inflater | None], budget: int
) -> tuple[list[bytes], Inflater]:
    """Inflate one chunk, following gzip members that start inside it (a body may hold several).

    `budget` caps the output (max_length), so a small chunk cannot expand without bound.
    """
    pieces = []
    while data:
        piece = inflater.decompress(data, budget)
        pieces.append(piece)
        budget -= len(piece)
        if budget <= 0:
            break  # over the limit: the caller refuses the request
        successor = new_inflater() if inflater.eof and inflater.unused_data else None
        if successor is not None:  # a further gzip member
            data, inflater = inflater.unused_data, successor
        else:
            data = inflater.unconsumed_tail
    return pieces, inflater


def encode(message: Message, kind: str) -> bytes:
    if kind == JSON:
        # the protobuf JSON mapping: int64 as strings, lowerCamelCase
        return orjson.dumps(json_format.MessageToDict(message))
    return message.SerializeToString()


def error_response(error: SextantError, kind: str) -> web.Response:
    status = getattr(error, "http_status", 500)
    code = getattr(error, "grpc_code", None)
    body = status_pb2.Status(code=code.value[0] if code else 13, message=str(error))
    headers = {}
    if isinstance(error, TransientError):
        headers["Retry-After"] = str(error.retry_after_seconds)
    return web.Response(status=status, body=encode(body, kind), content_type=kind, headers=headers)


class OtlpHttpReceiver:
    def __init__(
        self,
        config: HttpConfig,
        limits: LimitsConfig,
        auth: BearerAuth,
        ingest: Ingest,
        metrics: ReceiverMetrics,
        shutdown_timeout: float,
        guard: Guard | None = None,
    ) -> None:
        self.guard = guard
        self.limits = limits
        self.auth = auth
        self.ingest = ingest
        self.metrics = metrics
        app = web.Application(client_max_size=limits.max_request_bytes)
        app.router.add_post("/v1/traces", self._handler("traces"))
        app.router.add_post("/v1/logs", self._handler("logs"))
        if guard is not None:
            app.router.add_post("/v1/guard", self._guard)
        app.router.add_route("*", "/{tail:.*}", self._not_found)
        host, port = config.host_port
        tls = reloading_context(config.tls, "OTLP/HTTP (http.tls)") if config.tls else None
        self.server = HttpServer(
            app, host, port, "OTLP/HTTP", shutdown_timeout, tls, auto_decompress=False
        )

    @property
    def port(self) -> int:
        return self.server.port

    async def start(self) -> None:
        await self.server.start()

    async def shutdown(self, deadline: float) -> None:
        await self.server.shutdown(deadline)

    async def _guard(self, request: web.Request) -> web.Response:
        """POST /v1/guard: JSON in, JSON out (docs/guard.md); the OTLP listener's auth."""
        assert self.guard is not None
        try:
            self.auth.check(request.headers.get("Authorization"))
            if request.content_type != JSON:
                raise UnsupportedMediaType(f"/v1/guard takes {JSON}")
            body = await read_body(request, self.limits.max_request_bytes)
            call = GuardRequest.model_validate_json(body)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or '(body)'}: {e['msg']}"
                for e in exc.errors()
            )
            return web.json_response({"error": f"bad guard call: {problems}"}, status=400)
        except SextantError as exc:
            status = getattr(exc, "http_status", 500)
            headers = {"WWW-Authenticate": 'Bearer realm="sextant"'} if status == 401 else None
            return web.json_response({"error": str(exc)}, status=status, headers=headers)
        answer = await self.guard.check(call, "http")
        return web.Response(body=orjson.dumps(answer.as_json()), content_type=JSON)

    async def _not_found(self, request: web.Request) -> web.Response:
        posts = ("/v1/traces", "/v1/logs", *(("/v1/guard",) if self.guard is not None else ()))
        if request.path in posts:
            self._misdirected(request, "method_not_allowed")
            return web.Response(
                status=405, text=f"{request.path} accepts POST only", headers={"Allow": "POST"}
            )
        self._misdirected(request, "not_found")
        return web.Response(
            status=404,
            text=f"no such path {request.path}; OTLP/HTTP takes POST /v1/traces and /v1/logs",
        )

    def _misdirected(self, request: web.Request, reason: str) -> None:
        agent = request.headers.get("User-Agent", "no User-Agent")
        what = f"{request.method} {request.path}"
        self.metrics.misdirected.note("http", reason, f"{request.remote} ({agent})", what)

    def _handler(self, signal: str) -> Callable[[web.Request], Awaitable[web.Response]]:
        async def export(request: web.Request) -> web.Response:
            async def consume(body: bytes, kind: str) -> bytes:
                encoding = "json" if kind == JSON else "protobuf"
                answer = await self.ingest.consume(signal, encoding, body, "http")
                if answer.ignored_keys:
                    self._misdirected(request, "unknown_json_keys")
                return encode(answer.response(signal), kind)

            return await self._answer(request, signal, consume)

        return export

    async def _answer(
        self,
        request: web.Request,
        signal: str,
        consume: Callable[[bytes, str], Awaitable[bytes]],
    ) -> web.Response:
        kind = JSON if request.content_type == JSON else PROTOBUF

        async def respond() -> web.Response:
            nonlocal kind  # an error is answered in the media type the request was read as
            self.auth.check(request.headers.get("Authorization"))
            kind = media_type(request)
            body = await read_body(request, self.limits.max_request_bytes)
            return web.Response(body=await consume(body, kind), content_type=kind)

        error = await export_answer(self.metrics, "http", signal, respond)
        if isinstance(error, web.Response):
            return error
        if misdirected := MISDIRECTED.get(getattr(error, "http_status", 0)):
            self._misdirected(request, misdirected)
        if isinstance(error, PermanentError) and error.http_status == 401:
            response = error_response(error, kind)
            response.headers["WWW-Authenticate"] = 'Bearer realm="sextant"'
            return response
        return error_response(error, kind)
