"""What every admin route shares: its registration shape, replies, limits and the token check."""

from __future__ import annotations

from typing import Any, Protocol

import orjson
from aiohttp import web

from collector.auth import BearerAuth
from collector.errors import PermanentError, SextantError, TransientError

MAX_LIST = 1000
MAX_BODY_BYTES = 64 * 1024 * 1024  # a chunk of replay results as Arrow
STORE_TIMEOUT_SECONDS = 30.0


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


def authorize(auth: BearerAuth, request: web.Request) -> None:
    """Raises Unauthenticated (401) unless the request carries a configured bearer token."""
    auth.check(request.headers.get("Authorization"))
