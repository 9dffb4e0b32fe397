"""Trajectory routes: list stored trajectories with filters, and read one with its steps."""

from __future__ import annotations

import asyncio

from aiohttp import web

from collector.admin.http import MAX_LIST, json_error, list_limit, reply
from collector.store.database import Database
from collector.store.queries import FILTERS, list_trajectories, load_trajectory


class TrajectoryRoutes:
    def __init__(self, database: Database) -> None:
        self.database = database

    def register(self, app: web.Application) -> None:
        app.router.add_get("/api/v1/trajectories", self._list)
        app.router.add_get("/api/v1/trajectories/{trace_id}", self._one)

    async def _list(self, request: web.Request) -> web.Response:
        limit = list_limit(request, 50)
        if limit is None:
            return json_error(400, f"limit must be an integer from 1 to {MAX_LIST}")
        unknown = set(request.query) - set(FILTERS) - {"limit"}
        if unknown:
            return json_error(
                400, f"unknown parameter {sorted(unknown)[0]!r}; filters: {', '.join(FILTERS)}"
            )
        filters = {k: v for k, v in request.query.items() if k in FILTERS}
        found = await asyncio.to_thread(self.database.read, list_trajectories, filters, limit)
        return reply({"trajectories": found})

    async def _one(self, request: web.Request) -> web.Response:
        trace_id = request.match_info["trace_id"]
        if len(trace_id) != 32 or any(c not in "0123456789abcdefABCDEF" for c in trace_id):
            return json_error(400, "trace id must be 32 hex digits")
        revision = request.query.get("revision")
        if revision is not None and not (
            revision.isascii() and revision.isdigit() and int(revision) >= 1
        ):
            return json_error(400, "revision must be a positive integer")
        found = await asyncio.to_thread(
            self.database.read, load_trajectory, trace_id, int(revision) if revision else None
        )
        if found is None:
            return json_error(404, f"no trajectory for trace {trace_id.lower()} (yet)")
        return reply(found)
