"""Replay routes: store a replay's results beside the originals, never over them."""

from __future__ import annotations

import asyncio

import pyarrow as pa
import pyarrow.compute as pc
from aiohttp import web

from collector.admin.http import error_reply, reply
from collector.errors import SextantError
from collector.store.sqlcheck import QueryRefused
from collector.store.tables import ARROW_SCHEMAS
from collector.store.writer import Writer


class ReplayRoutes:
    """POST /api/v1/replay/results: an Arrow stream of results rows with origin 'replay'."""

    def __init__(self, writer: Writer) -> None:
        self.writer = writer

    def register(self, app: web.Application) -> None:
        app.router.add_post("/api/v1/replay/results", self._store)

    async def _store(self, request: web.Request) -> web.Response:
        try:
            table = replay_results(await request.read())
            await asyncio.wrap_future(self.writer.submit_tables({"results": table}))
        except SextantError as exc:
            return error_reply(exc)
        return reply({"stored": table.num_rows})


def replay_results(body: bytes) -> pa.Table:
    """Results rows from an Arrow stream, checked to be replay results with a replay id."""
    schema = ARROW_SCHEMAS["results"]
    try:
        table = pa.ipc.open_stream(body).read_all()
        table = table.select(schema.names).cast(schema)
    except (pa.ArrowException, KeyError, ValueError) as exc:
        raise QueryRefused(f"the body must be an Arrow stream of results rows: {exc}") from exc
    origins = set(table["origin"].to_pylist())
    if origins - {"replay"}:
        raise QueryRefused("only results with origin 'replay' may be stored through this API")
    if table.num_rows and pc.any(pc.is_null(table["replay_id"])).as_py():
        raise QueryRefused("every replay result needs a replay_id")
    return table
