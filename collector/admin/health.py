"""Health routes: /metrics, /healthz, /readyz and /api/v1/rules (evaluator health)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from aiohttp import web
from prometheus_client import CollectorRegistry
from prometheus_client.exposition import choose_encoder

from collector.admin.http import reply


class HealthRoutes:
    """`ready` returns None when the service is ready, else the reason it is not."""

    def __init__(
        self,
        registry: CollectorRegistry,
        ready: Callable[[], str | None],
        rules_status: Callable[[], dict[str, Any]],
    ) -> None:
        self.registry = registry
        self.ready = ready
        self.rules_status = rules_status

    def register(self, app: web.Application) -> None:
        app.router.add_get("/metrics", self._metrics)
        app.router.add_get("/healthz", self._healthz)
        app.router.add_get("/readyz", self._readyz)
        app.router.add_get("/api/v1/rules", self._rules)

    async def _metrics(self, request: web.Request) -> web.Response:
        encoder, content_type = choose_encoder(request.headers.get("Accept", ""))
        # Collectors take locks a busy stage may hold; the event loop also serves OTLP/HTTP.
        body = await asyncio.to_thread(encoder, self.registry)
        return web.Response(body=body, headers={"Content-Type": content_type})

    async def _rules(self, request: web.Request) -> web.Response:
        return reply(self.rules_status())

    async def _healthz(self, request: web.Request) -> web.Response:
        return web.json_response({"status": "ok"})

    async def _readyz(self, request: web.Request) -> web.Response:
        reason = self.ready()
        if reason is None:
            return web.json_response({"status": "ready"})
        return web.json_response({"status": "not ready", "reason": reason}, status=503)
