"""The trajectory pages: the filtered, sorted, keyset-paged list and one run's page, as a route
group of their own behind the admin guard."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import datetime
from typing import Any
from urllib.parse import urlencode

import duckdb
from aiohttp import web

from collector.admin.http import MAX_LIST, list_limit
from collector.console.access import CSRF, CSRF_FIELD
from collector.console.render import ago, page
from collector.console.trajectory import trajectory_view
from collector.errors import SextantError
from collector.store.database import Database
from collector.store.listing import SORTS, Cursor, page_query, split_page
from collector.store.queries import rows_as_dicts
from evaluators.durations import parse_time

PAGE_SIZE = 50
LIST_COLUMNS = (
    *("trace_id", "revision", "closed_at", "service_name", "agent_name", "service_version"),
    *("status", "verdict", "verdict_reasons", "case_id", "conversation_id"),
    "left(input, 160) AS input",
    *("steps", "tool_calls", "duration_ms", "input_tokens", "output_tokens", "cost_usd"),
)
# the form's fields, in the order shown; `target` is SERVICE[/AGENT[/VERSION]]
FIELDS = (
    *("target", "verdict", "rule", "reason", "status", "case", "session"),
    *("since", "until", "text"),
)
PASSED_AS_IS = ("verdict", "rule", "reason", "status", "case", "session", "text")


def list_page(
    cursor: duckdb.DuckDBPyConnection,
    filters: dict[str, Any],
    sort: str,
    after: Cursor | None,
    limit: int = PAGE_SIZE,
) -> tuple[list[dict[str, Any]], str | None]:
    """One page of the list (the same keyset query as the API's) and the next page's cursor."""
    sql, params = page_query(filters, limit, after, LIST_COLUMNS, sort)
    cursor.execute(sql, params)
    return split_page(rows_as_dicts(cursor), limit, sort)


def filters_of(form: dict[str, str], now: datetime) -> dict[str, Any]:
    """The store's filters from the form's fields; raises SextantError or ValueError."""
    filters: dict[str, Any] = {k: form[k] for k in PASSED_AS_IS if form.get(k)}
    if form.get("target"):
        parts = form["target"].split("/")
        if len(parts) > 3:
            raise SextantError("target: SERVICE[/AGENT[/VERSION]]")
        filters.update(
            (k, v) for k, v in zip(("service", "agent", "version"), parts, strict=False) if v
        )
    for bound in ("since", "until"):
        if form.get(bound):
            filters[bound] = parse_time(form[bound], now)
    return filters


class TrajectoryPages:
    """GET /trajectories (the list) and /trajectories/{trace_id} (one run)."""

    def __init__(self, database: Database, now: Callable[[], datetime]) -> None:
        self.database = database
        self.now = now

    def register(self, app: web.Application) -> None:
        app.router.add_get("/trajectories", self._list)
        app.router.add_get("/trajectories/{trace_id}", self._one)

    async def _list(self, request: web.Request) -> web.Response:
        form = {k: request.query.get(k, "").strip() for k in FIELDS}
        sort = request.query.get("sort") or "time"
        limit = list_limit(request, PAGE_SIZE)
        now = self.now()
        rows: list[dict[str, Any]] = []
        following = error = None
        try:
            if sort not in SORTS:
                raise SextantError(f"unknown sort {sort!r}")
            if limit is None:
                raise SextantError(f"limit must be an integer from 1 to {MAX_LIST}")
            filters = filters_of(form, now)
            after = Cursor.decode(request.query["cursor"]) if request.query.get("cursor") else None
            rows, following = await asyncio.to_thread(
                self.database.read, list_page, filters, sort, after, limit
            )
        except (SextantError, ValueError) as exc:
            error = str(exc)
        kept = {k: v for k, v in {**form, "sort": sort}.items() if v}
        if "limit" in request.query:
            kept["limit"] = request.query["limit"]
        context = {"form": form, "sort": sort, "sorts": list(SORTS), "rows": rows, "now": now}
        return page(
            "trajectories.html",
            status=400 if error else 200,
            nav="trajectories",
            error=error,
            next_url=f"?{urlencode({**kept, 'cursor': following})}" if following else None,
            first_url=f"?{urlencode(kept)}" if request.query.get("cursor") else None,
            ago=ago,
            **context,
        )

    async def _one(self, request: web.Request) -> web.Response:
        trace_id = request.match_info["trace_id"].lower()
        revision = request.query.get("revision", "")
        if len(trace_id) != 32 or any(c not in "0123456789abcdef" for c in trace_id):
            raise web.HTTPBadRequest(text="trace id must be 32 hex digits")
        if revision and not (revision.isascii() and revision.isdigit() and int(revision) >= 1):
            raise web.HTTPBadRequest(text="revision must be a positive integer")
        view = await asyncio.to_thread(
            self.database.read, trajectory_view, trace_id, int(revision) if revision else None
        )
        if view is None:
            return page(
                "trajectory_missing.html", status=404, nav="trajectories", trace_id=trace_id
            )
        return page(
            "trajectory.html",
            nav="trajectories",
            t=view,
            csrf=request[CSRF],
            csrf_field=CSRF_FIELD,
            now=self.now(),
            ago=ago,
        )
