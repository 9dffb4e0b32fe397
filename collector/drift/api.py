"""Admin API routes: the reliability report and frozen baselines."""

from __future__ import annotations

import asyncio

import orjson
from aiohttp import web

from collector.drift import baselines
from collector.drift.requests import ReliabilityQuery, baseline_spec, utcnow
from collector.errors import SextantError, Unauthenticated
from collector.receivers.auth import BearerAuth
from collector.store.database import Database
from collector.store.queries import jsonable, rows_as_dicts
from collector.store.writer import Writer

STORE_TIMEOUT_SECONDS = 30.0


def add_routes(app: web.Application, database: Database, writer: Writer, auth: BearerAuth) -> None:
    """Saving a baseline writes to the store: it needs the bearer token when one is set."""

    def with_cursor(work):  # type: ignore[no-untyped-def]
        cursor = database.cursor()
        try:
            return work(cursor)
        finally:
            cursor.close()

    async def reliability(request: web.Request) -> web.Response:
        try:
            query = ReliabilityQuery.parse(dict(request.query), utcnow())
        except SextantError as exc:
            return web.json_response({"error": str(exc)}, status=400)
        found = await asyncio.to_thread(with_cursor, query.run)
        return web.Response(body=orjson.dumps(found), content_type="application/json")

    async def save_baseline(request: web.Request) -> web.Response:
        try:
            auth.check(request.headers.get("Authorization"))
        except Unauthenticated as exc:
            return web.json_response({"error": str(exc)}, status=401)
        try:
            body = await request.json(loads=orjson.loads)
            if not isinstance(body, dict):
                raise SextantError("expected a JSON object: name, target, since, until")
            spec = baseline_spec(body, utcnow())
            tables = await asyncio.to_thread(
                with_cursor, lambda c: baselines.build(c, spec, utcnow())
            )
        except (SextantError, orjson.JSONDecodeError) as exc:
            return web.json_response({"error": str(exc)}, status=400)
        future = writer.submit_tables(tables)
        await asyncio.to_thread(future.result, STORE_TIMEOUT_SECONDS)
        return web.json_response(baselines.describe(tables["baselines"]), status=201)

    async def list_baselines(request: web.Request) -> web.Response:
        def read(cursor):  # type: ignore[no-untyped-def]
            cursor.execute("SELECT * FROM baselines ORDER BY created_at")
            return [jsonable(row) for row in rows_as_dicts(cursor)]

        found = await asyncio.to_thread(with_cursor, read)
        return web.Response(
            body=orjson.dumps({"baselines": found}), content_type="application/json"
        )

    app.router.add_get("/api/v1/reliability", reliability)
    app.router.add_post("/api/v1/baselines", save_baseline)
    app.router.add_get("/api/v1/baselines", list_baselines)
