"""The admin HTTP server: one aiohttp app on the admin port with every route group on it."""

from __future__ import annotations

from collections.abc import Iterable

from aiohttp import web

from collector.admin.http import MAX_BODY_BYTES, RouteGroup
from collector.config.sections import AdminConfig
from collector.httpserver import HttpServer


class AdminServer:
    """Serves the route groups it is handed (health, trajectories, rules, decisions, SQL,
    replay, baselines); it knows no stage itself."""

    def __init__(
        self, config: AdminConfig, routes: Iterable[RouteGroup], shutdown_timeout: float
    ) -> None:
        app = web.Application(client_max_size=MAX_BODY_BYTES)
        for group in routes:
            group.register(app)
        host, port = config.host_port
        self.server = HttpServer(app, host, port, "the admin API", shutdown_timeout)

    @property
    def port(self) -> int:
        return self.server.port

    async def start(self) -> None:
        await self.server.start()

    async def shutdown(self, deadline: float) -> None:
        await self.server.shutdown(deadline)
