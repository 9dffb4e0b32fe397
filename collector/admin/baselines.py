"""Drift routes: the reliability report (pass@k, pass^k) and frozen baselines."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import datetime
from typing import Any

import orjson
from aiohttp import web

from collector.admin.http import json_error, reply
from collector.drift import baselines
from collector.drift.requests import ReliabilityQuery, baseline_spec
from collector.errors import SextantError
from collector.store.database import Database
from collector.store.queries import jsonable, rows_as_dicts
from collector.store.writer import STORE_TIMEOUT_SECONDS, Writer


class BaselineRoutes:
    """Saving a baseline writes to the store; reading the report and listing only read."""

    def __init__(self, database: Database, writer: Writer, now: Callable[[], datetime]) -> None:
        self.database = database
        self.writer = writer
        self.now = now

    def register(self, app: web.Application) -> None:
        app.router.add_get("/api/v1/reliability", self._reliability)
        app.router.add_post("/api/v1/baselines", self._save)
        app.router.add_get("/api/v1/baselines", self._list)

    async def _reliability(self, request: web.Request) -> web.Response:
        try:
            query = ReliabilityQuery.parse(dict(request.query), self.now())
        except SextantError as exc:
            return json_error(400, str(exc))
        return reply(await asyncio.to_thread(self.database.read, query.run))

    async def _save(self, request: web.Request) -> web.Response:
        try:
            body = await request.json(loads=orjson.loads)
            if not isinstance(body, dict):
                raise SextantError("expected a JSON object: name, target, since, until")
            spec = baseline_spec(body, self.now())
            tables = await asyncio.to_thread(self.database.read, baselines.build, spec, self.now())
        except (SextantError, orjson.JSONDecodeError) as exc:
            return json_error(400, str(exc))
        future = self.writer.submit_tables(tables)
        await asyncio.to_thread(future.result, STORE_TIMEOUT_SECONDS)
        return reply(baselines.describe(tables["baselines"]), status=201)

    async def _list(self, request: web.Request) -> web.Response:
        found = await asyncio.to_thread(self.database.read, stored_baselines)
        return reply({"baselines": found})


def stored_baselines(cursor: Any) -> list[dict[str, Any]]:
    cursor.execute("SELECT * FROM baselines ORDER BY created_at")
    return [jsonable(row) for row in rows_as_dicts(cursor)]
