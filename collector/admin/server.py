"""The admin HTTP server: one aiohttp app on the admin port with every route group on it."""

from __future__ import annotations

import concurrent.futures
from collections.abc import Callable, Iterable

from aiohttp import web

from collector.admin.http import (
    MAX_BODY_BYTES,
    ConsoleGate,
    RouteGroup,
    guard,
    read_your_writes,
)
from collector.auth import BearerAuth
from collector.config.sections import AdminConfig
from collector.httpserver import HttpServer
from collector.tls import reloading_context


class AdminServer:
    """Serves the route groups it is handed (health, trajectories, rules, decisions, SQL,
    replay, baselines) behind one guard: the token on every path but /metrics, /healthz and
    /readyz, or, with `admin.tls.client_ca_file`, a client certificate it verified; with
    `settled`, each read waits for the acknowledged requests to be loaded. It knows no stage
    itself."""

    def __init__(
        self,
        config: AdminConfig,
        routes: Iterable[RouteGroup],
        auth: BearerAuth,
        shutdown_timeout: float,
        console: ConsoleGate | None = None,
        settled: Callable[[], concurrent.futures.Future[None]] | None = None,
    ) -> None:
        tls = config.tls
        certificates = tls is not None and tls.client_ca_file is not None
        middlewares = [guard(auth, certificates, console)]
        if settled is not None:
            middlewares.append(read_your_writes(settled))
        app = web.Application(client_max_size=MAX_BODY_BYTES, middlewares=middlewares)
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
