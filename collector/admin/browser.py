"""What the admin port refuses from a browser that another site drives: a Host name it does not
own (DNS rebinding), a cross-site write to the API, and the headers every answer carries so that
its pages cannot be framed, sniffed or given scripts from elsewhere."""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from typing import Any
from urllib.parse import urlsplit

from aiohttp import web

from collector.admin.http import API_PREFIX, OPEN_PATHS, Handler, json_error
from collector.config.access import host_name

LOOPBACK_NAMES = frozenset({"localhost"})
UNSAFE = frozenset({"POST", "PUT", "PATCH", "DELETE"})
# The bodies the API's writes take. A browser sends any other type cross-site only after a
# preflight, which this server never grants (it sends no CORS headers).
JSON = "application/json"
ARROW_STREAM = "application/vnd.apache.arrow.stream"
BODY_TYPES = {"/api/v1/replay/results": ARROW_STREAM}
# Sec-Fetch-Site values of a request a page of this very origin (or the person) started.
OWN_FETCHES = frozenset({"same-origin", "none"})
SECURITY_HEADERS = {
    # No script, style, frame or form target from anywhere else; no page of ours in a frame.
    "Content-Security-Policy": "default-src 'self'; frame-ancestors 'none'; base-uri 'none';"
    " form-action 'self'; object-src 'none'",
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    # `same-origin`, not `no-referrer`: under no-referrer a browser sends `Origin: null` with
    # its own forms, which the Origin check would then refuse.
    "Referrer-Policy": "same-origin",
}


def is_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def allowed_hosts(listen_host: str, peers: Iterable[str], extra: Iterable[str]) -> frozenset[str]:
    """The names a browser may use: localhost, admin.addr's host, the peers' hosts (they call
    each other by those), and admin.allowed_hosts. Any IP address is allowed as well (see
    `host_allowed`)."""
    names = set(LOOPBACK_NAMES) | {host_name(listen_host)} | set(extra)
    names |= {host_name(urlsplit(peer).netloc.rpartition("@")[2]) for peer in peers}
    return frozenset(n for n in names if n)


def host_allowed(host: str | None, names: frozenset[str]) -> bool:
    """A missing Host (not a browser: every browser sends one), one of `names`, or an IP
    address: rebinding needs a DNS name the attacker controls, and a page whose origin is an
    address was served by whatever listens there, that is by this server."""
    if host is None:
        return True
    name = host_name(host)
    return name in names or is_ip(name)


def host_check(names: frozenset[str]) -> Any:
    """Middleware: 403 for a Host this server does not answer to, except on OPEN_PATHS
    (Prometheus and probes reach those by any name; they hold counts, never a run)."""

    @web.middleware
    async def check(request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.path in OPEN_PATHS or host_allowed(request.headers.get("Host"), names):
            return await handler(request)
        return web.Response(
            status=403,
            text=f"This server does not answer to the name {host_name(request.host)!r}: add it"
            " to admin.allowed_hosts if people reach the admin port by it.",
        )

    return check


def same_origin(request: web.Request) -> bool:
    """No Origin header (an old client, curl) or the Origin of this very host; `null` (a
    sandboxed frame, a redirect from elsewhere) is not."""
    origin = request.headers.get("Origin")
    if origin is None:
        return True
    return origin.partition("://")[2] == request.host


def cross_site(request: web.Request) -> bool:
    """Whether a browser sent this request for a page of another origin (ports count: another
    service on 127.0.0.1 is another origin, though the same site)."""
    fetched = request.headers.get("Sec-Fetch-Site")
    return (fetched is not None and fetched not in OWN_FETCHES) or not same_origin(request)


def api_writes() -> Any:
    """Middleware: a write to the API must come from no other site and carry the body type its
    route takes (JSON but for the replay's Arrow stream), so that no page can send it with a
    form or a `no-cors` fetch, tokens or not."""

    @web.middleware
    async def check(request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.method not in UNSAFE or not request.path.startswith(API_PREFIX):
            return await handler(request)
        if cross_site(request):
            return json_error(403, "a write to the API from a page of another site is refused")
        wanted = BODY_TYPES.get(request.path, JSON)
        if request.content_type != wanted:
            return json_error(415, f"Content-Type must be {wanted}")
        return await handler(request)

    return check


async def security_headers(request: web.Request, response: web.StreamResponse) -> None:
    """on_response_prepare: every answer, errors included, carries SECURITY_HEADERS."""
    for name, value in SECURITY_HEADERS.items():
        response.headers.setdefault(name, value)
