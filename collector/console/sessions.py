"""The session pages: the sessions (conversations of many runs) newest first, a page at a time,
and one session as its transcript — each turn's request, the tools it used, its answer and
verdict, linking to the run — with what its session rules found, each finding linking the turns
it names."""

from __future__ import annotations

import asyncio
from typing import Any
from urllib.parse import urlencode

import duckdb
from aiohttp import web

from collector.admin.http import MAX_LIST, list_limit
from collector.console.render import page
from collector.errors import SextantError
from collector.store.database import Database
from collector.store.queries import rows_as_dicts
from collector.store.sessions import (
    AmbiguousSession,
    SessionCursor,
    load_session,
    page_of_sessions,
)

PAGE_SIZE = 100
STATUSES = ("open", "closed")
VERDICTS = ("pass", "fail", "review", "none")
# Each turn's request, answer and verdict, and the tools it called in order (approvals
# and retrievals a tool call made included) with how many
# calls failed: one query for all of a session's turns (their current revisions).
TRANSCRIPT = """
SELECT t.trace_id, t.input, t.final_output, t.verdict, t.verdict_rules,
       list(s.tool_name ORDER BY s.seq) FILTER (WHERE s.tool_name IS NOT NULL) AS tools,
       list(s.tool_name ORDER BY s.seq) FILTER (WHERE s.tool_name IS NOT NULL
         AND s.status = 'error') AS failed_tools
FROM trajectories t
LEFT JOIN steps s ON s.trace_id = t.trace_id AND s.revision = t.revision
WHERE t.is_current AND t.trace_id IN ?
GROUP BY ALL
"""


def tools_used(names: list[str] | None, failed: list[str] | None) -> list[dict[str, Any]]:
    """Each tool a turn called, in the order of its first call: name, calls, failed calls."""
    used: dict[str, dict[str, Any]] = {}
    for name in names or []:
        used.setdefault(name, {"name": name, "calls": 0, "failed": 0})["calls"] += 1
    for name in failed or []:
        used[name]["failed"] += 1
    return list(used.values())


def with_transcript(
    cursor: duckdb.DuckDBPyConnection, session_id: str, service: str | None
) -> dict[str, Any] | None:
    """The session (load_session) with each turn's request, answer, tools and failing rules."""
    found = load_session(cursor, session_id, service)
    if found is None:
        return None
    cursor.execute(TRANSCRIPT, [[t["trace_id"] for t in found["turns_detail"]]])
    said = {row["trace_id"]: row for row in rows_as_dicts(cursor)}
    for turn in found["turns_detail"]:
        row = said.get(turn["trace_id"], {})
        turn["input"] = row.get("input")
        turn["answer"] = row.get("final_output")
        turn["verdict_rules"] = row.get("verdict_rules") or []
        turn["tools"] = tools_used(row.get("tools"), row.get("failed_tools"))
    return found


class SessionPages:
    """GET /sessions (filter by status, verdict, service; paged) and /sessions/{session_id}."""

    def __init__(self, database: Database) -> None:
        self.database = database

    def register(self, app: web.Application) -> None:
        app.router.add_get("/sessions", self._list)
        app.router.add_get("/sessions/{session_id}", self._one)

    async def _list(self, request: web.Request) -> web.Response:
        form = {k: request.query.get(k, "").strip() for k in ("status", "verdict", "service")}
        filters: dict[str, Any] = {k: v for k, v in form.items() if v}
        limit = list_limit(request, PAGE_SIZE)
        error: str | None = None
        rows: list[dict[str, Any]] = []
        following: SessionCursor | None = None
        try:
            if form["status"] not in ("", *STATUSES) or form["verdict"] not in ("", *VERDICTS):
                raise SextantError("unknown status or verdict")
            if limit is None:
                raise SextantError(f"limit: a number of sessions from 1 to {MAX_LIST}")
            text = request.query.get("cursor")
            after = SessionCursor.decode(text) if text else None
            rows, following = await asyncio.to_thread(
                self.database.read, page_of_sessions, filters, limit, after
            )
        except SextantError as exc:
            error = str(exc)
        kept = {**filters, **({"limit": str(limit)} if "limit" in request.query else {})}
        return page(
            "sessions.html",
            status=400 if error else 200,
            nav="sessions",
            form=form,
            rows=rows,
            error=error,
            statuses=STATUSES,
            verdicts=VERDICTS,
            limit=limit or PAGE_SIZE,
            next_url=f"?{urlencode({**kept, 'cursor': following.encode()})}" if following else None,
            first_url=f"?{urlencode(kept)}" if request.query.get("cursor") else None,
        )

    async def _one(self, request: web.Request) -> web.Response:
        session_id = request.match_info["session_id"]
        service = request.query.get("service") or None
        try:
            found = await asyncio.to_thread(
                self.database.read, with_transcript, session_id, service
            )
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
        return page(
            "session.html",
            nav="sessions",
            s=found,
            turn_of=turn_of,
        )
