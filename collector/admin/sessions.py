"""Session routes: list sessions with filters, and read one with its turns and results."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import datetime
from typing import Any

from aiohttp import web

from collector.admin.http import MAX_LIST, json_error, list_limit, reply
from collector.store.database import Database
from collector.store.sessions import (
    SESSION_FILTERS,
    AmbiguousSession,
    list_sessions,
    load_session,
)
from evaluators.durations import parse_time


class SessionRoutes:
    def __init__(self, database: Database, now: Callable[[], datetime]) -> None:
        self.database = database
        self.now = now

    def register(self, app: web.Application) -> None:
        app.router.add_get("/api/v1/sessions", self._list)
        app.router.add_get("/api/v1/sessions/{session_id}", self._one)

    async def _list(self, request: web.Request) -> web.Response:
        """Filters: service, agent, version, status (open|closed), user, verdict, and
        since/until (an ISO time or an age such as `1h`) on the last turn."""
        limit = list_limit(request, 50)
        if limit is None:
            return json_error(400, f"limit must be an integer from 1 to {MAX_LIST}")
        unknown = set(request.query) - set(SESSION_FILTERS) - {"limit"}
        if unknown:
            names = ", ".join(SESSION_FILTERS)
            return json_error(400, f"unknown parameter {sorted(unknown)[0]!r}; filters: {names}")
        filters: dict[str, Any] = dict(request.query)
        filters.pop("limit", None)
        try:
            for bound in ("since", "until"):
                if bound in filters:
                    filters[bound] = parse_time(filters[bound], self.now())
        except ValueError as exc:
            return json_error(400, str(exc))
        found = await asyncio.to_thread(self.database.read, list_sessions, filters, limit)
        return reply({"sessions": found})

    async def _one(self, request: web.Request) -> web.Response:
        """One session; `service` names which, when services share the conversation id."""
        session_id = request.match_info["session_id"]
        unknown = set(request.query) - {"service"}
        if unknown:
            return json_error(400, f"unknown parameter {sorted(unknown)[0]!r}; only: service")
        service = request.query.get("service")
        try:
            found = await asyncio.to_thread(self.database.read, load_session, session_id, service)
        except AmbiguousSession as exc:
            return json_error(409, str(exc))
        if found is None:
            where = f" of service {service!r}" if service is not None else ""
            return json_error(404, f"no session {session_id!r}{where} (yet)")
        return reply(found)
