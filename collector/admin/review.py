"""The review queue's JSON API, for scripts: list items, claim one, label it."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import datetime
from typing import Any

import orjson
from aiohttp import web

from collector.admin.http import error_reply, json_error, list_limit, reply
from collector.errors import PermanentError, SextantError
from collector.review import queue
from collector.review.desk import ReviewDesk
from collector.review.identity import Identities
from collector.review.queue import Filters
from collector.store.queries import jsonable

DEFAULT_LIMIT = 100
RECENT_LABELS = 20


async def body_of(request: web.Request) -> dict[str, Any]:
    try:
        body = orjson.loads(await request.read())
    except orjson.JSONDecodeError as exc:
        raise PermanentError(f"the body is not JSON: {exc}") from exc
    if not isinstance(body, dict):
        raise PermanentError("the body is a JSON object")
    return body


def key_in(body: dict[str, Any]) -> tuple[str, str, str]:
    """The item a body names: trace_id, pack and rule_id, all three."""
    key = tuple(body.get(k) for k in queue.KEY_COLUMNS)
    if not all(isinstance(part, str) and part for part in key):
        raise PermanentError("name the item with trace_id, pack and rule_id")
    trace_id, pack, rule_id = (str(part) for part in key)
    return trace_id.lower(), pack, rule_id


def text_fields(body: dict[str, Any]) -> dict[str, str]:
    return {k: v for k, v in body.items() if isinstance(v, str)}


class ReviewRoutes:
    """GET /api/v1/review/queue, POST /api/v1/review/claim and /api/v1/review/label."""

    def __init__(
        self, desk: ReviewDesk, identities: Identities, now: Callable[[], datetime]
    ) -> None:
        self.desk = desk
        self.identities = identities
        self.now = now

    def register(self, app: web.Application) -> None:
        app.router.add_get("/api/v1/review/queue", self._queue)
        app.router.add_post("/api/v1/review/claim", self._claim)
        app.router.add_post("/api/v1/review/label", self._label)

    async def _queue(self, request: web.Request) -> web.Response:
        """?queue= (a pack owner) &pack= &rule= &reason= &target=SERVICE[/AGENT[/VERSION]]
        &age=1h (waiting at most) &kind=review|audit &limit=: the items (REVIEW items, then
        audits, each oldest first) and every queue's counts."""
        limit = list_limit(request, DEFAULT_LIMIT)
        if limit is None:
            return json_error(400, "limit must be an integer from 1 to 1000")
        try:
            filters = Filters.parse(dict(request.query))
        except SextantError as exc:
            return error_reply(exc)
        now = self.now()
        read = self.desk.database.read
        items, queues = await asyncio.gather(
            asyncio.to_thread(read, queue.items, filters, now, limit),
            asyncio.to_thread(read, queue.queues, now),
        )
        return reply(
            {
                "reviewer": self.identities.who(request) or None,
                "queues": [jsonable(q) for q in queues],
                "items": [jsonable(i) for i in items],
            }
        )

    async def _claim(self, request: web.Request) -> web.Response:
        """{trace_id, pack, rule_id}: that item; or filters ({queue, pack, rule, reason,
        target, age, kind}): the first nobody else holds. `item` null: nothing waits."""
        try:
            body = await body_of(request)
            reviewer = self.identities.who(request)
            item: dict[str, Any] | None
            if "trace_id" in body:
                item = await asyncio.to_thread(self.desk.claim, reviewer, key_in(body))
            else:
                filters = Filters.parse(text_fields(body))
                item = await asyncio.to_thread(self.desk.claim_next, reviewer, filters)
        except SextantError as exc:
            return error_reply(exc)
        return reply({"item": jsonable(item) if item is not None else None})

    async def _label(self, request: web.Request) -> web.Response:
        """{trace_id, pack, rule_id, verdict: pass|fail|not_applicable, comment}: 201 with
        the label as stored."""
        try:
            body = await body_of(request)
            reviewer = self.identities.who(request)
            key, verdict = key_in(body), body.get("verdict")
            if not isinstance(verdict, str):
                raise PermanentError("verdict is one of pass, fail, not_applicable")
            comment = body.get("comment")
            if comment is not None and not isinstance(comment, str):
                raise PermanentError("comment is text")
            row = await asyncio.to_thread(self.desk.label, reviewer, key, verdict, comment)
        except SextantError as exc:
            return error_reply(exc)
        return reply({"label": jsonable(row)}, status=201)
