"""The review pages: the queues and their items (REVIEW results and audits), one item beside its
run with the rule's evidence steps marked, the forms (claim the next, skip, label) that the keys
drive, and "Add to dataset" for the runs of the items a filter selects."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import datetime
from typing import Any
from urllib.parse import quote, urlencode

import duckdb
from aiohttp import web

from collector.console.access import CSRF, CSRF_FIELD, see_other
from collector.console.render import page
from collector.console.trajectory import trajectory_view
from collector.datasets.service import Datasets
from collector.errors import SextantError
from collector.review import queue
from collector.review.desk import ReviewDesk
from collector.review.identity import Identities
from collector.review.queue import FIELDS, Filters
from collector.store.queries import rows_as_dicts

MAX_ITEMS = 200
RECENT = """
SELECT trace_id, pack, rule_id, verdict, reviewer, message, evaluated_at
FROM results WHERE source = 'human' AND origin = 'live'
ORDER BY evaluated_at DESC LIMIT 20
"""
ITEM_FIELDS = ("item_trace", "item_pack", "item_rule")  # the forms' item, beside the filters


def item_url(key: tuple[str, str, str], filters: Filters) -> str:
    path = "/review/items/" + "/".join(quote(part, safe="") for part in key)
    return path + (f"?{urlencode(filters.fields)}" if filters.fields else "")


def queue_url(filters: Filters, **extra: str) -> str:
    given = {**filters.fields, **extra}
    return "/review" + (f"?{urlencode(given)}" if given else "")


def recent_labels(cursor: duckdb.DuckDBPyConnection) -> list[dict[str, Any]]:
    cursor.execute(RECENT)
    return rows_as_dicts(cursor)


def overview(cursor: duckdb.DuckDBPyConnection, filters: Filters, now: datetime) -> dict[str, Any]:
    return {
        "queues": queue.queues(cursor, now),
        "items": queue.items(cursor, filters, now, MAX_ITEMS),
        "labels": recent_labels(cursor),
    }


def item_page(
    cursor: duckdb.DuckDBPyConnection, key: tuple[str, str, str], now: datetime
) -> dict[str, Any] | None:
    found = queue.item(cursor, key, now)
    if found is None:
        return None
    return {"item": found, "t": trajectory_view(cursor, key[0], found["revision"])}


class ReviewPages:
    """GET /review, GET /review/items/{trace}/{pack}/{rule}; POST /review/next, /review/label,
    /review/dataset."""

    def __init__(
        self,
        desk: ReviewDesk,
        identities: Identities,
        now: Callable[[], datetime],
        datasets: Datasets | None = None,
    ) -> None:
        self.desk = desk
        self.identities = identities
        self.now = now
        self.datasets = datasets

    def register(self, app: web.Application) -> None:
        app.router.add_get("/review", self._queue)
        app.router.add_get("/review/items/{trace_id}/{pack}/{rule_id}", self._item)
        app.router.add_post("/review/next", self._next)
        app.router.add_post("/review/label", self._label)
        app.router.add_post("/review/dataset", self._add_to_dataset)

    def _common(self, request: web.Request, filters: Filters) -> dict[str, Any]:
        return {
            "nav": "review",
            "reviewer": self.identities.who(request),
            "filters": filters,
            "fields": FIELDS,
            "csrf": request[CSRF],
            "csrf_field": CSRF_FIELD,
            "now": self.now(),
            "item_url": item_url,
        }

    async def _queue(self, request: web.Request) -> web.Response:
        try:
            filters = Filters.parse(dict(request.query))
        except SextantError as exc:
            return await self._render(request, Filters(), str(exc), 400)
        return await self._render(request, filters)

    async def _render(
        self, request: web.Request, filters: Filters, error: str = "", status: int = 200
    ) -> web.Response:
        read = self.desk.database.read
        shown = await asyncio.to_thread(read, overview, filters, self.now())
        said = {k: request.query.get(k, "") for k in ("done", "gone")}
        context = self._common(request, filters)
        return page("review.html", status=status, error=error, **said, **shown, **context)

    async def _item(self, request: web.Request) -> web.Response:
        key = tuple(request.match_info[k] for k in queue.KEY_COLUMNS)
        trace_id, pack, rule_id = key
        try:
            filters = Filters.parse(dict(request.query))
        except SextantError:
            filters = Filters()
        read = self.desk.database.read
        found = await asyncio.to_thread(
            read, item_page, (trace_id.lower(), pack, rule_id), self.now()
        )
        if found is None:
            raise web.HTTPFound(queue_url(filters, gone=f"{pack}/{rule_id} {trace_id}"))
        context = self._common(request, filters)
        item = found["item"]
        added = request.query.get("added", "")
        return page("review_item.html", evidence=item["evidence_span_ids"] or [], added=added,
                    **found, **context)  # fmt: skip

    async def _form(self, request: web.Request) -> tuple[dict[str, str], Filters]:
        form = {k: v for k, v in (await request.post()).items() if isinstance(v, str)}
        try:
            return form, Filters.parse(form)
        except SextantError:
            return form, Filters()

    async def _next(self, request: web.Request) -> web.StreamResponse:
        """Claims the next item (`direction` next or previous of the form's item, or the first
        one) and shows it; back to the queue when none is left."""
        form, filters = await self._form(request)
        reviewer = self.identities.who(request)
        after = None
        if form.get("item_trace"):
            after = await asyncio.to_thread(self.desk.item, key_of_form(form))
        backwards = form.get("direction") == "previous"
        try:
            chosen = await asyncio.to_thread(
                self.desk.claim_next, reviewer, filters, after, backwards
            )
        except SextantError as exc:
            return await self._refused(request, filters, exc)
        return self._show(chosen, filters)

    async def _label(self, request: web.Request) -> web.StreamResponse:
        form, filters = await self._form(request)
        reviewer = self.identities.who(request)
        key = key_of_form(form)
        try:
            found = await asyncio.to_thread(self.desk.item, key)
            await asyncio.to_thread(self.desk.label, reviewer, key, form.get("verdict", ""),
                                    form.get("comment"))  # fmt: skip
            chosen = await asyncio.to_thread(self.desk.claim_next, reviewer, filters, found)
        except SextantError as exc:
            return await self._refused(request, filters, exc)
        return self._show(chosen, filters)

    async def _add_to_dataset(self, request: web.Request) -> web.StreamResponse:
        """The runs of the items the form's filters select (as the queue lists them, at most
        MAX_ITEMS items), added to the dataset as a run's page adds one."""
        form, filters = await self._form(request)
        name, by = form.get("name", "").strip(), form.get("by", "").strip()
        if self.datasets is None or not name or not by:
            error = SextantError("Say which dataset and who adds (“by”).")
            return await self._refused(request, filters, error)
        read = self.desk.database.read
        listed = await asyncio.to_thread(read, queue.items, filters, self.now(), MAX_ITEMS)
        runs = list(dict.fromkeys(i["trace_id"] for i in listed))
        try:
            if not runs:
                raise SextantError("no item matches these filters: no run to add")
            await asyncio.to_thread(
                self.datasets.add, name, by, form.get("expect") or None, trace_ids=runs
            )
        except SextantError as exc:
            return await self._refused(request, filters, SextantError(f"Not added: {exc}"))
        return see_other(f"/datasets/{quote(name, safe='')}")

    def _show(self, chosen: dict[str, Any] | None, filters: Filters) -> web.Response:
        if chosen is None:
            return see_other(queue_url(filters, done="1"))
        return see_other(item_url(queue.key_of(chosen), filters))

    async def _refused(
        self, request: web.Request, filters: Filters, exc: SextantError
    ) -> web.Response:
        return await self._render(request, filters, str(exc), getattr(exc, "http_status", 400))


def key_of_form(form: dict[str, str]) -> tuple[str, str, str]:
    trace_id, pack, rule_id = (form.get(k, "") for k in ITEM_FIELDS)
    return trace_id.lower(), pack, rule_id
