"""Dataset routes: list datasets, one dataset's cases, and add runs (or a decision's evidence)."""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
from aiohttp import web

from collector.admin.http import error_reply, json_error, reply
from collector.datasets.service import Datasets
from collector.errors import MalformedRequest, PermanentError, SextantError, TransientError

ADD_FIELDS = {"trace_ids", "decision", "expect", "by", "note"}


class DatasetRoutes:
    def __init__(self, datasets: Datasets) -> None:
        self.datasets = datasets

    def register(self, app: web.Application) -> None:
        app.router.add_get("/api/v1/datasets", self._list)
        app.router.add_get("/api/v1/datasets/{name}", self._one)
        app.router.add_post("/api/v1/datasets/{name}/cases", self._add)

    async def _list(self, request: web.Request) -> web.Response:
        return reply({"datasets": await asyncio.to_thread(self.datasets.listed)})

    async def _one(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        try:
            cases = await asyncio.to_thread(self.datasets.cases, name)
        except SextantError as exc:
            return json_error(404, str(exc))
        return reply({"dataset": name, "cases": cases})

    async def _add(self, request: web.Request) -> web.Response:
        """{"trace_ids": [...]} or {"decision": ID}, with "by", and "expect" pass|fail (none:
        as labelled, else as judged live) and a "note"."""
        try:
            body = orjson.loads(await request.read() or b"{}")
            asked = add_request(body)
            added = await asyncio.to_thread(self.datasets.add, request.match_info["name"], **asked)
        except orjson.JSONDecodeError as exc:
            return json_error(400, f"body is not JSON: {exc}")
        except SextantError as exc:
            return refused(exc)
        return reply({"dataset": request.match_info["name"], "added": added}, status=201)


def refused(exc: SextantError) -> web.Response:
    """What the caller asked cannot be done (an unknown run, a bad name, cases that still
    fail): its own status, 400 for bad input that does not name one."""
    if isinstance(exc, PermanentError | TransientError):
        return error_reply(exc)
    return json_error(400, str(exc))


def add_request(body: Any) -> dict[str, Any]:
    """The add request's fields, checked; a PermanentError naming what is wrong."""
    if not isinstance(body, dict):
        raise MalformedRequest('expected a JSON object: {"trace_ids": [...], "by": "NAME"}')
    unknown = set(body) - ADD_FIELDS
    if unknown:
        raise MalformedRequest(f"unknown field {sorted(unknown)[0]!r}; use {sorted(ADD_FIELDS)}")
    by, ids, decision = body.get("by"), body.get("trace_ids"), body.get("decision")
    if not isinstance(by, str) or not by.strip():
        raise MalformedRequest('say who adds the runs: "by": "NAME"')
    if (ids is None) == (decision is None):
        raise MalformedRequest('give "trace_ids" (a list) or "decision" (an id), one of them')
    if ids is not None and (not isinstance(ids, list) or not all(isinstance(i, str) for i in ids)):
        raise MalformedRequest('"trace_ids" must be a list of trace ids')
    if decision is not None and not isinstance(decision, str):
        raise MalformedRequest('"decision" must be a decision id')
    for key in ("expect", "note"):
        if body.get(key) is not None and not isinstance(body[key], str):
            raise MalformedRequest(f'"{key}" must be text')
    return {
        "by": by.strip(),
        "expect": body.get("expect") or None,
        "trace_ids": ids,
        "decision": decision,
        "note": body.get("note") or None,
    }
