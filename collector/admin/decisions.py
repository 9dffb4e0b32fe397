"""Decision routes of the admin API: read current and history, acknowledge, resolve, test alerts.

Reads come from the store; acknowledging and resolving go through the engine so the state
machine, the history and the alert all change together. The admin server's guard asks for the
token on every route here.
"""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
from aiohttp import web

from collector.admin.datasets import refused
from collector.admin.http import MAX_LIST, list_limit, reply
from collector.admin.http import json_error as error
from collector.alerts.notifier import Notifier
from collector.datasets import recertify
from collector.datasets.recertify import Recertifier
from collector.decisions.engine import DecisionEngine
from collector.decisions.history import DECISION_FILTERS, STATES, decision_history, list_decisions
from collector.errors import SextantError
from collector.store.database import Database


class DecisionRoutes:
    def __init__(
        self,
        engine: DecisionEngine,
        notifier: Notifier,
        database: Database,
        recertifier: Recertifier,
    ) -> None:
        self.engine = engine
        self.recertifier = recertifier
        self.notifier = notifier
        self.database = database
        # One alert test at a time: each holds a worker thread of the event loop's pool for up
        # to alerts.timeout_seconds per channel, and that pool also serves /metrics and reads.
        self._testing = asyncio.Lock()

    def register(self, app: web.Application) -> None:
        app.router.add_get("/api/v1/decisions", self._list)
        app.router.add_get("/api/v1/decisions/{id}", self._one)
        app.router.add_post("/api/v1/decisions/{id}/ack", self._ack)
        app.router.add_post("/api/v1/decisions/{id}/resolve", self._resolve)
        app.router.add_get("/api/v1/targets", self._targets)
        app.router.add_post("/api/v1/alerts/test", self._test)

    async def _list(self, request: web.Request) -> web.Response:
        allowed = {*DECISION_FILTERS, "state", "limit"}
        unknown = set(request.query) - allowed
        if unknown:
            return error(400, f"unknown parameter {sorted(unknown)[0]!r}; use {sorted(allowed)}")
        state = request.query.get("state")
        if state is not None and state not in STATES:
            return error(400, f"state must be one of {', '.join(STATES)}")
        limit = list_limit(request, 100)
        if limit is None:
            return error(400, f"limit must be an integer from 1 to {MAX_LIST}")
        filters = {k: v for k, v in request.query.items() if k != "limit"}
        found = await asyncio.to_thread(self.database.read, list_decisions, filters, limit)
        return reply({"decisions": found})

    async def _one(self, request: web.Request) -> web.Response:
        history = await asyncio.to_thread(
            self.database.read, decision_history, request.match_info["id"]
        )
        if not history:
            return error(404, f"no decision {request.match_info['id']}")
        return reply({"decision": history[-1], "history": history})

    async def _ack(self, request: web.Request) -> web.Response:
        return await self._by_person(request, self.engine.acknowledge)

    async def _resolve(self, request: web.Request) -> web.Response:
        """Resolve by hand; where a recertification is needed (`decisions.recertify`, or a
        `dataset` named in the body), only once its dataset replays clean: 409 until then."""
        try:
            body = orjson.loads(await request.read() or b"{}")
        except orjson.JSONDecodeError as exc:
            return error(400, f"body is not JSON: {exc}")
        dataset = body.get("dataset") if isinstance(body, dict) else None
        if dataset is not None and not isinstance(dataset, str):
            return error(400, "dataset must be a dataset's name")

        def action(decision_id: str, by: str, note: str) -> Any:
            return recertify.resolve(
                self.engine, self.recertifier, decision_id, by, note, dataset or None
            )

        try:
            return await self._by_person(request, action, body)
        except SextantError as exc:
            return refused(exc)

    async def _by_person(self, request: web.Request, action: Any, body: Any = None) -> web.Response:
        if body is None:
            try:
                body = orjson.loads(await request.read() or b"{}")
            except orjson.JSONDecodeError as exc:
                return error(400, f"body is not JSON: {exc}")
        by = body.get("by") if isinstance(body, dict) else None
        if not isinstance(by, str) or not by.strip():
            return error(400, 'give who acts: {"by": "NAME", "note": "..."}')
        note = body.get("note") or ""
        if not isinstance(note, str):
            return error(400, "note must be text")
        try:
            state = await asyncio.to_thread(action, request.match_info["id"], by.strip(), note)
        except LookupError as exc:
            return error(404, str(exc))
        return reply({"decision_id": state.id, "state": state.state, "by": by, "note": note})

    async def _targets(self, request: web.Request) -> web.Response:
        snap = self.engine.snapshot()
        targets = []
        for target, last in sorted(snap.targets.items(), key=lambda kv: kv[0].label()):
            decision, reasons = snap.decision_of(target)
            targets.append(
                {
                    "service": target.service,
                    "agent": target.agent,
                    "version": target.version,
                    "decision": decision.value,
                    "reasons": reasons,
                    "last_trajectory_at": last.isoformat() + "Z",
                }
            )
        return reply({"targets": targets})

    async def _test(self, request: web.Request) -> web.Response:
        if self._testing.locked():
            response = error(409, "an alert test is already running; try again once it answers")
            response.headers["Retry-After"] = "5"
            return response
        async with self._testing:
            report = await asyncio.to_thread(self.notifier.test)
        return reply({"channels": report})
