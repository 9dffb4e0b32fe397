"""What every admin route shares: its registration shape, replies, limits and the token check."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

import orjson
from aiohttp import web

from collector.admin.throttle import FailedLogins, client_of, too_many
from collector.auth import BearerAuth
from collector.errors import PermanentError, SextantError, TransientError, Unauthenticated

MAX_LIST = 1000
MAX_BODY_BYTES = 64 * 1024 * 1024  # a chunk of replay results as Arrow
# Open by design: Prometheus scrapes and the kubelet's probes carry no token. They tell nothing
# about the agents' runs (metrics are counts by target), so everything else needs the token.
OPEN_PATHS = frozenset({"/metrics", "/healthz", "/readyz"})
API_PREFIX = "/api/"  # the API; every other path is the console's
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class RouteGroup(Protocol):
    """A group of admin endpoints; the admin server registers each group the same way."""

    def register(self, app: web.Application) -> None: ...


def list_limit(request: web.Request, default: int) -> int | None:
    """The `limit` query parameter, or None when it is not an integer from 1 to MAX_LIST."""
    limit = request.query.get("limit", str(default))
    if not (limit.isascii() and limit.isdigit()) or not 1 <= int(limit) <= MAX_LIST:
        return None
    return int(limit)


def json_error(status: int, message: str) -> web.Response:
    return web.json_response({"error": message}, status=status)


def error_reply(exc: SextantError) -> web.Response:
    """A Sextant error as its HTTP status: bad input 4xx, transient 503, anything else 500."""
    status = exc.http_status if isinstance(exc, PermanentError | TransientError) else 500
    response = json_error(status, str(exc))
    if isinstance(exc, TransientError):  # shutting down, overloaded: say when to come back
        response.headers["Retry-After"] = str(exc.retry_after_seconds)
    return response


def reply(doc: Any, status: int = 200) -> web.Response:
    return web.Response(body=orjson.dumps(doc), status=status, content_type="application/json")


def authorize(auth: BearerAuth, request: web.Request, certificates: bool = False) -> None:
    """Raises Unauthenticated (401) unless the request carries a configured bearer token or, when
    `certificates`, came on a connection whose client certificate the TLS handshake verified."""
    if certificates and request.transport is not None:
        if request.transport.get_extra_info("peercert"):
            return
        if not auth.enabled:
            raise Unauthenticated("a client certificate (or a bearer token) is needed")
    auth.check(request.headers.get("Authorization"))


class ConsoleGate(Protocol):
    """Who may see the console: every path outside /api/ and OPEN_PATHS. It is handed what the
    token check found and answers with a refusal (a redirect to its login page, 401, 403, 404)
    or None to let the request through."""

    async def admit(
        self, request: web.Request, failure: Unauthenticated | None, bearer: bool
    ) -> web.StreamResponse | None: ...


def bearer_checked(auth: BearerAuth, request: web.Request) -> bool:
    """Whether the request itself carries a configured token (not a cookie nor a certificate,
    which a browser sends on its own, so a form from another site could use them)."""
    header = request.headers.get("Authorization")
    if not auth.enabled or not header:
        return False
    try:
        auth.check(header)
    except Unauthenticated:
        return False
    return True


def guard(
    auth: BearerAuth,
    certificates: bool = False,
    console: ConsoleGate | None = None,
    throttle: FailedLogins | None = None,
) -> Any:
    """Middleware: every path but OPEN_PATHS needs the token (deny by default, so a new route
    is never open by mistake); 401 with a Bearer challenge otherwise. The console's paths (all
    outside API_PREFIX) are handed to `console`, which also accepts its login's cookie. A
    client that sent too many wrong tokens is answered 429 before its token is read."""

    @web.middleware
    async def check(request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.path in OPEN_PATHS:
            return await handler(request)
        guessing = throttle is not None and "Authorization" in request.headers
        if throttle is not None and guessing:
            wait = throttle.wait_seconds(client_of(request))
            if wait is not None:
                return too_many(wait)
        failure = None
        try:
            authorize(auth, request, certificates)
        except Unauthenticated as exc:
            failure = exc
            if throttle is not None and guessing:
                throttle.failed(client_of(request))
        if console is not None and not request.path.startswith(API_PREFIX):
            refused = await console.admit(request, failure, bearer_checked(auth, request))
            return refused if refused is not None else await handler(request)
        if failure is not None:
            return unauthorized(failure)
        return await handler(request)

    return check


# The longest a read waits for the acknowledged requests to be loaded before it answers anyway
# (a store that cannot commit shows in /readyz, not as hanging reads).
SETTLE_SECONDS = 2.0


def read_your_writes(settled: Callable[[], concurrent.futures.Future[None]]) -> Any:
    """Middleware: a read waits until every request acknowledged before it came is in DuckDB
    (acknowledgements come from the ingest journal, ahead of the load), so an exporter that
    got its ack and then asks finds its spans."""

    @web.middleware
    async def settle(request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.path not in OPEN_PATHS:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.wrap_future(settled()), SETTLE_SECONDS)
        return await handler(request)

    return settle


def missing_routes(page: Callable[[web.Request], web.StreamResponse] | None = None) -> Any:
    """Middleware: an address nothing serves answers 404 as its side of the port does: JSON
    (`{"error": ...}`) under API_PREFIX, where clients parse the answer, and `page` (the
    console's own) elsewhere. Inside the guard, so the login comes first."""

    @web.middleware
    async def answer(request: web.Request, handler: Handler) -> web.StreamResponse:
        try:
            return await handler(request)
        except web.HTTPNotFound as exc:
            if request.path.startswith(API_PREFIX):
                said = exc.text if exc.text and exc.text != "404: Not Found" else ""
                return json_error(404, said or f"no API path {request.path}")
            if page is None:
                raise
            return page(request)

    return answer


def unauthorized(exc: Unauthenticated) -> web.Response:
    response = error_reply(exc)
    response.headers["WWW-Authenticate"] = 'Bearer realm="sextant"'
    return response
