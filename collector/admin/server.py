"""Admin HTTP server: /metrics, /healthz, /readyz and the trajectories API."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from typing import Any

import orjson
from aiohttp import web
from prometheus_client import CollectorRegistry
from prometheus_client.exposition import choose_encoder

from collector.config import AdminConfig
from collector.httpserver import HttpServer
from collector.store.database import Database
from collector.store.queries import FILTERS, list_trajectories, load_trajectory


class AdminServer:
    def __init__(
        self,
        config: AdminConfig,
        registry: CollectorRegistry,
        ready: Callable[[], str | None],
        database: Database,
        rules_status: Callable[[], dict[str, Any]],
        routes: Iterable[Callable[[web.Application], None]] = (),
    ) -> None:
        """`ready` returns None when the service is ready, else the reason it is not;
        `routes` register the other stages' endpoints (decisions, SQL, replay) on the app."""
        self.registry = registry
        self.ready = ready
        self.database = database
        self.rules_status = rules_status
        app = web.Application(client_max_size=MAX_BODY_BYTES)
        app.router.add_get("/api/v1/rules", self._rules)
        app.router.add_get("/metrics", self._metrics)
        app.router.add_get("/api/v1/trajectories", self._trajectories)
        app.router.add_get("/api/v1/trajectories/{trace_id}", self._trajectory)
        app.router.add_get("/healthz", self._healthz)
        app.router.add_get("/readyz", self._readyz)
        for register in routes:
            register(app)
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
        # Collectors take locks a busy stage may hold; the event loop also serves OTLP/HTTP.
        body = await asyncio.to_thread(encoder, self.registry)
        return web.Response(body=body, headers={"Content-Type": content_type})

    async def _rules(self, request: web.Request) -> web.Response:
        return web.Response(body=orjson.dumps(self.rules_status()), content_type="application/json")

    async def _trajectories(self, request: web.Request) -> web.Response:
        limit = list_limit(request, 50)
        if limit is None:
            return json_error(400, f"limit must be an integer from 1 to {MAX_LIST}")
        unknown = set(request.query) - set(FILTERS) - {"limit"}
        if unknown:
            return json_error(
                400, f"unknown parameter {sorted(unknown)[0]!r}; filters: {', '.join(FILTERS)}"
            )
        filters = {k: v for k, v in request.query.items() if k in FILTERS}
        found = await asyncio.to_thread(self._with_cursor, list_trajectories, filters, limit)
        return web.Response(
            body=orjson.dumps({"trajectories": found}), content_type="application/json"
        )

    def _with_cursor(self, query, *args):  # type: ignore[no-untyped-def]
        cursor = self.database.cursor()
        try:
            return query(cursor, *args)
        finally:
            cursor.close()

    async def _trajectory(self, request: web.Request) -> web.Response:
        trace_id = request.match_info["trace_id"]
        if len(trace_id) != 32 or any(c not in "0123456789abcdefABCDEF" for c in trace_id):
            return json_error(400, "trace id must be 32 hex digits")
        revision = request.query.get("revision")
        if revision is not None and not (
            revision.isascii() and revision.isdigit() and int(revision) >= 1
        ):
            return json_error(400, "revision must be a positive integer")

        found = await asyncio.to_thread(
            self._with_cursor, load_trajectory, trace_id, int(revision) if revision else None
        )
        if found is None:
            return json_error(404, f"no trajectory for trace {trace_id.lower()} (yet)")
        return web.Response(body=orjson.dumps(found), content_type="application/json")

    async def _healthz(self, request: web.Request) -> web.Response:
        return web.json_response({"status": "ok"})

    async def _readyz(self, request: web.Request) -> web.Response:
        reason = self.ready()
        if reason is None:
            return web.json_response({"status": "ready"})
        return web.json_response({"status": "not ready", "reason": reason}, status=503)


MAX_LIST = 1000
MAX_BODY_BYTES = 64 * 1024 * 1024  # a chunk of replay results as Arrow


def list_limit(request: web.Request, default: int) -> int | None:
    """The `limit` query parameter, or None when it is not an integer from 1 to MAX_LIST."""
    limit = request.query.get("limit", str(default))
    if not (limit.isascii() and limit.isdigit()) or not 1 <= int(limit) <= MAX_LIST:
        return None
    return int(limit)


def json_error(status: int, message: str) -> web.Response:
    return web.json_response({"error": message}, status=status)
