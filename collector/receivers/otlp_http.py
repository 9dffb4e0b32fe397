"""OTLP/HTTP receiver: POST /v1/traces and /v1/logs, protobuf or JSON, gzip or not; and
POST /v1/guard. `OtlpHttpRoutes` answers a request whichever listener took it: aiohttp's
(`OtlpHttpReceiver`, with TLS) or the native one (collector/receivers/native_http.py)."""

from __future__ import annotations

import logging
import zlib
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

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
CHALLENGE = 'Bearer realm="sextant"'


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


@dataclass(frozen=True)
class HttpCall:
    """A request as a listener hands it over (aiohttp's, or the native one's)."""

    method: str
    path: str
    headers: Mapping[str, str]  # case-insensitive names
    remote: str | None
    chunks: Callable[[], AsyncIterator[bytes]]  # the body as sent (decompression is ours)

    def media(self) -> str:
        """The Content-Type's media type, lower-cased, as aiohttp reads it (none: octet-stream)."""
        given = self.headers.get("Content-Type")
        if given is None:
            return "application/octet-stream"
        return given.split(";", 1)[0].strip().lower()


@dataclass(frozen=True)
class HttpReply:
    status: int
    body: bytes
    content_type: str
    headers: Mapping[str, str] = field(default_factory=dict)


def media_type(call: HttpCall) -> str:
    content_type = call.media()
    if content_type in PROTOBUF_TYPES:
        return PROTOBUF
    if content_type == JSON:
        return JSON
    raise UnsupportedMediaType(
        f"unsupported Content-Type {call.headers.get('Content-Type', '(none)')!r};"
        f" OTLP/HTTP takes {PROTOBUF} or {JSON}"
    )


async def read_body(call: HttpCall, limit: int) -> bytes:
    """The body after decompression, refused once it passes `limit` (chunked bodies included)."""
    encoding = call.headers.get("Content-Encoding", "").strip().lower()
    if encoding not in DECODERS:
        raise UnsupportedMediaType(f"unsupported Content-Encoding {encoding!r}; use gzip or none")
    declared = call.headers.get("Content-Length", "").strip()
    if declared.isdigit() and int(declared) > limit:
        raise RequestTooLarge(f"request body of {declared} bytes exceeds the {limit}-byte limit")
    new_inflater = DECODERS[encoding]
    inflater = new_inflater()
    chunks: list[bytes] = []
    size = 0
    try:
        async for chunk in call.chunks():
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


def error_response(error: SextantError, kind: str) -> HttpReply:
    status = getattr(error, "http_status", 500)
    code = getattr(error, "grpc_code", None)
    body = status_pb2.Status(code=code.value[0] if code else 13, message=str(error))
    headers = {}
    if isinstance(error, TransientError):
        headers["Retry-After"] = str(error.retry_after_seconds)
    if status == 401:
        headers["WWW-Authenticate"] = CHALLENGE
    return HttpReply(status, encode(body, kind), kind, headers)


def json_reply(
    content: dict[str, Any], status: int = 200, headers: Mapping[str, str] | None = None
) -> HttpReply:
    return HttpReply(status, orjson.dumps(content), JSON, headers or {})


def text_reply(status: int, text: str, headers: Mapping[str, str] | None = None) -> HttpReply:
    return HttpReply(status, text.encode(), "text/plain; charset=utf-8", headers or {})


class OtlpHttpRoutes:
    """What OTLP/HTTP answers, whichever listener took the request: POST /v1/traces and
    /v1/logs, and POST /v1/guard when the guard runs."""

    def __init__(
        self,
        limits: LimitsConfig,
        auth: BearerAuth,
        ingest: Ingest,
        metrics: ReceiverMetrics,
        guard: Guard | None,
    ) -> None:
        self.guard = guard
        self.limits = limits
        self.auth = auth
        self.ingest = ingest
        self.metrics = metrics
        self.posts = ("/v1/traces", "/v1/logs", *(("/v1/guard",) if guard is not None else ()))

    async def answer(self, call: HttpCall, waited: float = 0.0) -> HttpReply:
        """The reply to `call`; `waited`: seconds it waited before it got here."""
        if call.method != "POST" or call.path not in self.posts:
            return self._not_found(call)
        if call.path == "/v1/guard":
            return await self._guard(call)
        return await self._export(call, call.path.removeprefix("/v1/"), waited)

    async def _guard(self, call: HttpCall) -> HttpReply:
        """POST /v1/guard: JSON in, JSON out (docs/guard.md); the OTLP listener's auth."""
        assert self.guard is not None
        try:
            self.auth.check(call.headers.get("Authorization"))
            if call.media() != JSON:
                raise UnsupportedMediaType(f"/v1/guard takes {JSON}")
            body = await read_body(call, self.limits.max_request_bytes)
            request = GuardRequest.model_validate_json(body)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or '(body)'}: {e['msg']}"
                for e in exc.errors()
            )
            return json_reply({"error": f"bad guard call: {problems}"}, 400)
        except SextantError as exc:
            status = getattr(exc, "http_status", 500)
            challenge = {"WWW-Authenticate": CHALLENGE} if status == 401 else {}
            return json_reply({"error": str(exc)}, status, challenge)
        answer = await self.guard.check(request, "http")
        return json_reply(answer.as_json())

    def _not_found(self, call: HttpCall) -> HttpReply:
        if call.path in self.posts:
            self._misdirected(call, "method_not_allowed")
            return text_reply(405, f"{call.path} accepts POST only", {"Allow": "POST"})
        self._misdirected(call, "not_found")
        return text_reply(
            404, f"no such path {call.path}; OTLP/HTTP takes POST /v1/traces and /v1/logs"
        )

    def _misdirected(self, call: HttpCall, reason: str) -> None:
        agent = call.headers.get("User-Agent", "no User-Agent")
        what = f"{call.method} {call.path}"
        self.metrics.misdirected.note("http", reason, f"{call.remote} ({agent})", what)

    async def _export(self, call: HttpCall, signal: str, waited: float) -> HttpReply:
        # an error is answered in the media type the request was read as
        kind = JSON if call.media() == JSON else PROTOBUF

        async def respond() -> HttpReply:
            nonlocal kind
            self.auth.check(call.headers.get("Authorization"))
            kind = media_type(call)
            body = await read_body(call, self.limits.max_request_bytes)
            encoding = "json" if kind == JSON else "protobuf"
            answer = await self.ingest.consume(signal, encoding, body, "http")
            if answer.ignored_keys:
                self._misdirected(call, "unknown_json_keys")
            return HttpReply(200, encode(answer.response(signal), kind), kind)

        error = await export_answer(self.metrics, "http", signal, respond, waited)
        if isinstance(error, HttpReply):
            return error
        if misdirected := MISDIRECTED.get(getattr(error, "http_status", 0)):
            self._misdirected(call, misdirected)
        return error_response(error, kind)


class OtlpHttpReceiver:
    """OTLP/HTTP on aiohttp: the listener with TLS, or any when `http.server` is aiohttp."""

    def __init__(
        self,
        config: HttpConfig,
        routes: OtlpHttpRoutes,
        shutdown_timeout: float,
    ) -> None:
        self.routes = routes
        app = web.Application(client_max_size=routes.limits.max_request_bytes)
        app.router.add_route("*", "/{tail:.*}", self._handle)
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

    async def _handle(self, request: web.Request) -> web.Response:
        async def chunks() -> AsyncIterator[bytes]:
            while chunk := await request.content.read(READ_CHUNK):
                yield chunk

        call = HttpCall(request.method, request.path, request.headers, request.remote, chunks)
        reply = await self.routes.answer(call)
        return web.Response(
            status=reply.status,
            body=reply.body,
            headers={"Content-Type": reply.content_type, **reply.headers},
        )
