"""The console's pages on the admin port, as one route group behind the admin guard."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import datetime
from importlib import resources

from aiohttp import web

from collector.console.canary import target_url
from collector.console.render import ago, page
from collector.console.targets import DEFAULT_RANGE, RANGES, REFRESHES, spark, target_rows
from collector.decisions.engine import DecisionEngine
from collector.store.database import Database

STATIC = resources.files("collector.console") / "static"


class ConsoleRoutes:
    """GET / (targets) and /static/*; the other pages register here as they come."""

    def __init__(
        self, engine: DecisionEngine, database: Database, now: Callable[[], datetime]
    ) -> None:
        self.engine = engine
        self.database = database
        self.now = now

    def register(self, app: web.Application) -> None:
        app.router.add_get("/", self._targets)
        app.router.add_get("/static/{name}", self._static)

    async def _targets(self, request: web.Request) -> web.Response:
        """?range= how far back the counts and the chart look; ?refresh= how often the page
        reloads itself (a <meta> refresh: no script)."""
        shown = RANGES.get(request.query.get("range") or DEFAULT_RANGE)
        refresh = request.query.get("refresh") or "off"
        if shown is None or refresh not in REFRESHES:
            ranges, refreshes = ", ".join(RANGES), ", ".join(REFRESHES)
            raise web.HTTPBadRequest(text=f"range is one of {ranges}; refresh one of {refreshes}")
        now = self.now()
        snapshot = self.engine.snapshot()
        rows = await asyncio.to_thread(self.database.read, target_rows, snapshot, now, shown)
        return page(
            "targets.html",
            nav="targets",
            rows=rows,
            now=now,
            ago=ago,
            spark=spark,
            target_url=target_url,
            shown=shown,
            ranges=RANGES,
            refresh=refresh,
            refreshes=REFRESHES,
        )

    async def _static(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        kinds = {".css": "text/css", ".js": "text/javascript"}
        kind = next((k for suffix, k in kinds.items() if name.endswith(suffix)), None)
        item = STATIC / name
        if kind is None or "/" in name or not item.is_file():
            raise web.HTTPNotFound()
        headers = {"Cache-Control": "max-age=300"}
        return web.Response(body=item.read_bytes(), content_type=kind, headers=headers)
