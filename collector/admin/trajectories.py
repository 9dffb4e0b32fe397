"""Trajectory routes: list stored trajectories with filters, and read one with its steps."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import datetime
from typing import Any

from aiohttp import web

from collector.admin.http import MAX_LIST, json_error, list_limit, reply
from collector.errors import SextantError
from collector.store.database import Database
from collector.store.listing import CONDITIONS, Cursor
from collector.store.queries import list_trajectories, load_trajectory
from evaluators.durations import parse_time


class TrajectoryRoutes:
    def __init__(self, database: Database, now: Callable[[], datetime]) -> None:
        self.database = database
        self.now = now

    def register(self, app: web.Application) -> None:
        app.router.add_get("/api/v1/trajectories", self._list)
        app.router.add_get("/api/v1/trajectories/{trace_id}", self._one)

    async def _list(self, request: web.Request) -> web.Response:
        """Filters as `sextant trajectories` takes them; `since`/`until` an ISO time or an age
        (`1h`); `cursor` the `next_cursor` of the previous page."""
        limit = list_limit(request, 50)
        if limit is None:
            return json_error(400, f"limit must be an integer from 1 to {MAX_LIST}")
        unknown = set(request.query) - set(CONDITIONS) - {"limit", "cursor"}
        if unknown:
            names = ", ".join([*CONDITIONS, "cursor"])
            return json_error(400, f"unknown parameter {sorted(unknown)[0]!r}; filters: {names}")
        filters: dict[str, Any] = {k: v for k, v in request.query.items() if k in CONDITIONS}
        try:
            for bound in ("since", "until"):
                if bound in filters:
                    filters[bound] = parse_time(filters[bound], self.now())
            after = Cursor.decode(request.query["cursor"]) if "cursor" in request.query else None
        except (ValueError, SextantError) as exc:
            return json_error(400, str(exc))
        found, following = await asyncio.to_thread(
            self.database.read, list_trajectories, filters, limit, after
        )
        page: dict[str, Any] = {"trajectories": found}
        if following is not None:  # only when another page follows
            page["next_cursor"] = following
        return reply(page)

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
