"""Admin HTTP server: /metrics (Prometheus and OpenMetrics), /healthz, /readyz."""

from __future__ import annotations

from collections.abc import Callable

from aiohttp import web
from prometheus_client import CollectorRegistry
from prometheus_client.exposition import choose_encoder

from collector.config import AdminConfig
from collector.httpserver import HttpServer


class AdminServer:
    def __init__(
        self, config: AdminConfig, registry: CollectorRegistry, ready: Callable[[], str | None]
    ) -> None:
        """`ready` returns None when the service is ready, else the reason it is not."""
        self.registry = registry
        self.ready = ready
        app = web.Application()
        app.router.add_get("/metrics", self._metrics)
        app.router.add_get("/healthz", self._healthz)
        app.router.add_get("/readyz", self._readyz)
        host, port = config.host_port
        self.server = HttpServer(app, host, port, "the admin API")

    @property
    def port(self) -> int:
        return self.server.port

    async def start(self, shutdown_timeout: float) -> None:
        await self.server.start(shutdown_timeout)

    async def stop(self) -> None:
        await self.server.stop()

    async def _metrics(self, request: web.Request) -> web.Response:
        encoder, content_type = choose_encoder(request.headers.get("Accept", ""))
        body = encoder(self.registry)
        return web.Response(body=body, headers={"Content-Type": content_type})

    async def _healthz(self, request: web.Request) -> web.Response:
        return web.json_response({"status": "ok"})

    async def _readyz(self, request: web.Request) -> web.Response:
        reason = self.ready()
        if reason is None:
            return web.json_response({"status": "ready"})
        return web.json_response({"status": "not ready", "reason": reason}, status=503)
