"""SQL routes: live read-only SQL against the running store (JSON or Arrow), and its limits."""

from __future__ import annotations

import asyncio
import decimal
from typing import Any

import orjson
import pyarrow as pa
from aiohttp import web

from collector.admin.http import error_reply
from collector.config.sections import SqlConfig
from collector.errors import SextantError
from collector.store.database import Database
from collector.store.readonly import QueryRefused, QueryResult, run_read_only

ARROW_STREAM = "application/vnd.apache.arrow.stream"
# Queries run in threads; a few at a time keeps readers from starving the writer of CPU.
MAX_CONCURRENT_QUERIES = 4


def to_json(value: Any) -> Any:
    if isinstance(value, decimal.Decimal):
        return float(value)
    if isinstance(value, bytes):
        return value.hex()
    return str(value)


def table_json(result: QueryResult) -> bytes:
    table = result.table
    columns = [{"name": f.name, "type": str(f.type)} for f in table.schema]
    rows = [list(row.values()) for row in table.to_pylist()]
    doc = {
        "columns": columns,
        "rows": rows,
        "row_count": len(rows),
        "truncated": result.truncated,
        "elapsed_ms": round(result.elapsed_seconds * 1000, 3),
    }
    return orjson.dumps(doc, default=to_json, option=orjson.OPT_NAIVE_UTC | orjson.OPT_UTC_Z)


def arrow_stream(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


class SqlRoutes:
    """POST /api/v1/sql and GET /api/v1/sql/limits (behind the admin server's guard)."""

    def __init__(self, config: SqlConfig, database: Database) -> None:
        self.config = config
        self.database = database
        self._slots = asyncio.Semaphore(MAX_CONCURRENT_QUERIES)

    def register(self, app: web.Application) -> None:
        if self.config.enabled:
            app.router.add_post("/api/v1/sql", self._sql)
            app.router.add_get("/api/v1/sql/limits", self._limits)

    async def _sql(self, request: web.Request) -> web.Response:
        try:
            sql, params, max_rows, fmt = await self._parse(request)
            async with self._slots:
                result = await asyncio.to_thread(self._run, sql, params, max_rows)
        except SextantError as exc:
            return error_reply(exc)
        if fmt == "arrow":
            return web.Response(
                body=arrow_stream(result.table),
                content_type=ARROW_STREAM,
                headers={"X-Sextant-Truncated": str(result.truncated).lower()},
            )
        return web.Response(body=table_json(result), content_type="application/json")

    async def _limits(self, request: web.Request) -> web.Response:
        limits = {"max_rows": self.config.max_rows, "timeout_seconds": self.config.timeout_seconds}
        return web.json_response(limits)

    async def _parse(self, request: web.Request) -> tuple[str, list | None, int, str]:
        try:
            doc = orjson.loads(await request.read())
        except orjson.JSONDecodeError as exc:
            raise QueryRefused(f'the body must be JSON: {{"sql": "SELECT ..."}} ({exc})') from exc
        if not isinstance(doc, dict) or not isinstance(doc.get("sql"), str):
            raise QueryRefused('the body must be a JSON object with "sql": "SELECT ..."')
        params = doc.get("params")
        if params is not None and not isinstance(params, list):
            raise QueryRefused('"params" must be a list of values for the ? placeholders')
        max_rows = doc.get("max_rows", self.config.default_rows)
        if not isinstance(max_rows, int) or not 1 <= max_rows <= self.config.max_rows:
            raise QueryRefused(
                f'"max_rows" must be an integer from 1 to {self.config.max_rows} (sql.max_rows)'
            )
        fmt = doc.get("format", "json")
        if fmt not in ("json", "arrow"):
            raise QueryRefused('"format" must be "json" or "arrow"')
        return doc["sql"], params, max_rows, fmt

    def _run(self, sql: str, params: list | None, max_rows: int) -> QueryResult:
        timeout = self.config.timeout_seconds
        return self.database.read(run_read_only, sql, params, max_rows, timeout)
