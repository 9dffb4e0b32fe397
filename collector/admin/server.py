"""The admin HTTP server: one aiohttp app on the admin port with every route group on it."""

from __future__ import annotations

import concurrent.futures
from collections.abc import Callable, Iterable

from aiohttp import web

from collector.admin.browser import allowed_hosts, api_writes, host_check, security_headers
from collector.admin.http import (
    MAX_BODY_BYTES,
    ConsoleGate,
    RouteGroup,
    guard,
    missing_routes,
    read_your_writes,
)
from collector.admin.throttle import FailedLogins
from collector.auth import BearerAuth
from collector.config.sections import AdminConfig
from collector.httpserver import HttpServer
from collector.tls import reloading_context


class AdminServer:
    """Serves the route groups it is handed (health, trajectories, rules, decisions, SQL,
    replay, baselines) behind one guard: the token on every path but /metrics, /healthz and
    /readyz, or, with `admin.tls.client_ca_file`, a client certificate it verified; with
    `settled`, each read waits for the acknowledged requests to be loaded. In front of the
    guard, what a browser driven by another site may not do (collector.admin.browser), and
    `throttle` for clients that guess tokens. It knows no stage itself."""

    def __init__(
        self,
        config: AdminConfig,
        routes: Iterable[RouteGroup],
        auth: BearerAuth,
        shutdown_timeout: float,
        console: ConsoleGate | None = None,
        settled: Callable[[], concurrent.futures.Future[None]] | None = None,
        throttle: FailedLogins | None = None,
        peers: Iterable[str] = (),
        not_found: Callable[[web.Request], web.StreamResponse] | None = None,
    ) -> None:
        tls = config.tls
        certificates = tls is not None and tls.client_ca_file is not None
        hosts = allowed_hosts(config.host_port[0], peers, config.allowed_hosts)
        middlewares = [
            host_check(hosts),
            guard(auth, certificates, console, throttle),
            api_writes(),
        ]
        if settled is not None:
            middlewares.append(read_your_writes(settled))
        middlewares.append(missing_routes(not_found))
        app = web.Application(client_max_size=MAX_BODY_BYTES, middlewares=middlewares)
        app.on_response_prepare.append(security_headers)
        for group in routes:
            group.register(app)
        host, port = config.host_port
        context = reloading_context(tls, "the admin API (admin.tls)") if tls else None
        self.server = HttpServer(app, host, port, "the admin API", shutdown_timeout, context)

    @property
    def port(self) -> int:
        return self.server.port

    async def start(self) -> None:
        await self.server.start()

    async def shutdown(self, deadline: float) -> None:
        await self.server.shutdown(deadline)
