"""The session pages: the sessions (conversations of many runs) newest first, and one session
with its turns and what its session rules found, each finding linking the turns it names."""

from __future__ import annotations

import asyncio
from typing import Any

from aiohttp import web

from collector.console.render import page
from collector.store.database import Database
from collector.store.sessions import AmbiguousSession, list_sessions, load_session

PAGE_SIZE = 100
STATUSES = ("open", "closed")
VERDICTS = ("pass", "fail", "review", "none")


class SessionPages:
    """GET /sessions (filter by status, verdict, service) and /sessions/{session_id}."""

    def __init__(self, database: Database) -> None:
        self.database = database

    def register(self, app: web.Application) -> None:
        app.router.add_get("/sessions", self._list)
        app.router.add_get("/sessions/{session_id}", self._one)

    async def _list(self, request: web.Request) -> web.Response:
        form = {k: request.query.get(k, "").strip() for k in ("status", "verdict", "service")}
        filters: dict[str, Any] = {k: v for k, v in form.items() if v}
        error = None
        if form["status"] not in ("", *STATUSES) or form["verdict"] not in ("", *VERDICTS):
            error, filters = "unknown status or verdict", {}
        rows = await asyncio.to_thread(self.database.read, list_sessions, filters, PAGE_SIZE)
        return page(
            "sessions.html",
            status=400 if error else 200,
            nav="sessions",
            form=form,
            rows=[] if error else rows,
            error=error,
            statuses=STATUSES,
            verdicts=VERDICTS,
            limit=PAGE_SIZE,
        )

    async def _one(self, request: web.Request) -> web.Response:
        session_id = request.match_info["session_id"]
        service = request.query.get("service") or None
        try:
            found = await asyncio.to_thread(self.database.read, load_session, session_id, service)
        except AmbiguousSession as exc:  # services that share the id: one link each
            return page(
                "session_missing.html",
                status=409,
                nav="sessions",
                session_id=session_id,
                services=exc.services,
            )
        if found is None:
            return page("session_missing.html", status=404, nav="sessions", session_id=session_id)
        turn_of = {t["trace_id"]: i + 1 for i, t in enumerate(found["turns_detail"])}
        return page("session.html", nav="sessions", s=found, turn_of=turn_of)
