"""Health routes: /metrics, /healthz, /readyz and /api/v1/rules (evaluator health)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from aiohttp import web
from prometheus_client import CollectorRegistry
from prometheus_client.exposition import choose_encoder

from collector.admin.http import reply
from collector.threads import named_executor


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
        # Scrapes have a thread of their own: the shared pool of `asyncio.to_thread` also runs
        # the API's and the console's store reads, which wait behind a busy store (a drift or
        # decision round), and a scrape queued behind them missed Prometheus' 10 s timeout.
        # The collectors read state the stages publish, so one thread answers every scrape.
        self._scrapes = named_executor("sextant-metrics", 1)

    def register(self, app: web.Application) -> None:
        app.on_cleanup.append(self._close)
        app.router.add_get("/metrics", self._metrics)
        app.router.add_get("/healthz", self._healthz)
        app.router.add_get("/readyz", self._readyz)
        app.router.add_get("/api/v1/rules", self._rules)

    async def _metrics(self, request: web.Request) -> web.Response:
        encoder, content_type = choose_encoder(request.headers.get("Accept", ""))
        # Off the event loop, which also serves OTLP/HTTP.
        loop = asyncio.get_running_loop()
        body = await loop.run_in_executor(self._scrapes, encoder, self.registry)
        return web.Response(body=body, headers={"Content-Type": content_type})

    async def _close(self, app: web.Application) -> None:
        self._scrapes.shutdown(wait=False, cancel_futures=True)

    async def _rules(self, request: web.Request) -> web.Response:
        return reply(self.rules_status())

    async def _healthz(self, request: web.Request) -> web.Response:
        return web.json_response({"status": "ok"})

    async def _readyz(self, request: web.Request) -> web.Response:
        reason = self.ready()
        if reason is None:
            return web.json_response({"status": "ready"})
        return web.json_response({"status": "not ready", "reason": reason}, status=503)
