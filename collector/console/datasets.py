"""The console's dataset pages (the list, one dataset's cases) and the "Add to dataset" forms of
a run's, a decision's and a review item's page, which add through the same code as the API
(POST/redirect/GET)."""

from __future__ import annotations

import asyncio
from typing import Any
from urllib.parse import quote, urlencode

from aiohttp import web

from collector.console.access import local_path, see_other
from collector.console.render import page
from collector.datasets.service import Datasets
from collector.errors import SextantError


class DatasetPages:
    """GET /datasets, GET /datasets/{name}, POST /trajectories/{id}/dataset and
    /decisions/{id}/dataset."""

    def __init__(self, datasets: Datasets) -> None:
        self.datasets = datasets

    def register(self, app: web.Application) -> None:
        app.router.add_get("/datasets", self._list)
        app.router.add_get("/datasets/{name}", self._one)
        app.router.add_post("/trajectories/{trace_id}/dataset", self._add_run)
        app.router.add_post("/decisions/{id}/dataset", self._add_evidence)

    async def _list(self, request: web.Request, status: int = 200, error: str = "") -> web.Response:
        found = await asyncio.to_thread(self.datasets.listed)
        return page("datasets.html", status, nav="datasets", datasets=found, error=error)

    async def _one(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        try:
            cases = await asyncio.to_thread(self.datasets.cases, name)
        except SextantError as exc:
            return await self._list(request, 404, str(exc))
        return page("dataset.html", nav="datasets", name=name, cases=cases)

    async def _add_run(self, request: web.Request) -> web.Response:
        return await self._add(request, trace_ids=[request.match_info["trace_id"]])

    async def _add_evidence(self, request: web.Request) -> web.Response:
        return await self._add(request, decision=request.match_info["id"])

    async def _add(self, request: web.Request, **what: Any) -> web.Response:
        form = await request.post()
        name, by, expect = (form.get(k) for k in ("name", "by", "expect"))
        if not (isinstance(name, str) and isinstance(by, str) and by.strip()):
            return await self._list(request, 400, "Say which dataset and who adds (“by”).")
        wanted = expect if isinstance(expect, str) and expect else None
        try:
            await asyncio.to_thread(self.datasets.add, name.strip(), by.strip(), wanted, **what)
        except SextantError as exc:
            return await self._list(request, 400, f"Not added: {exc}")
        back = form.get("next")
        if isinstance(back, str) and back and local_path(back) is not None:
            # the page it was added from (a review item): back to it, saying where it went
            joiner = "&" if "?" in back else "?"
            return see_other(f"{back}{joiner}{urlencode({'added': name.strip()})}")
        return see_other(f"/datasets/{quote(name.strip(), safe='')}")
