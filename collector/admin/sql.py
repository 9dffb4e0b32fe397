"""Admin API for SREs: live read-only SQL, and storing a replay's results beside the originals."""

from __future__ import annotations

import asyncio
import decimal
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.compute as pc
from aiohttp import web

from collector.config import SqlConfig
from collector.errors import PermanentError, SextantError, TransientError
from collector.receivers.auth import BearerAuth
from collector.store.database import Database
from collector.store.readonly import QueryRefused, QueryResult, run_read_only
from collector.store.tables import ARROW_SCHEMAS
from collector.store.writer import Writer

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


class SqlApi:
    """POST /api/v1/sql and POST /api/v1/replay/results, behind the receivers' bearer tokens."""

    def __init__(
        self, config: SqlConfig, database: Database, writer: Writer, auth: BearerAuth
    ) -> None:
        self.config = config
        self.database = database
        self.writer = writer
        self.auth = auth
        self._slots = asyncio.Semaphore(MAX_CONCURRENT_QUERIES)

    def register(self, app: web.Application) -> None:
        if self.config.enabled:
            app.router.add_post("/api/v1/sql", self._sql)
            app.router.add_get("/api/v1/sql/limits", self._limits)
        app.router.add_post("/api/v1/replay/results", self._replay_results)

    async def _sql(self, request: web.Request) -> web.Response:
        try:
            self.auth.check(request.headers.get("Authorization"))
            sql, params, max_rows, fmt = await self._parse(request)
            async with self._slots:
                result = await asyncio.to_thread(self._run, sql, params, max_rows)
        except SextantError as exc:
            return error(exc)
        if fmt == "arrow":
            return web.Response(
                body=arrow_stream(result.table),
                content_type=ARROW_STREAM,
                headers={"X-Sextant-Truncated": str(result.truncated).lower()},
            )
        return web.Response(body=table_json(result), content_type="application/json")

    async def _limits(self, request: web.Request) -> web.Response:
        try:
            self.auth.check(request.headers.get("Authorization"))
        except SextantError as exc:
            return error(exc)
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
        cursor = self.database.cursor()
        try:
            return run_read_only(cursor, sql, params, max_rows, self.config.timeout_seconds)
        finally:
            cursor.close()

    async def _replay_results(self, request: web.Request) -> web.Response:
        """Results a replay computed, stored with origin 'replay': never over the originals."""
        try:
            self.auth.check(request.headers.get("Authorization"))
            table = replay_results(await request.read())
            await asyncio.wrap_future(self.writer.submit_tables({"results": table}))
        except SextantError as exc:
            return error(exc)
        return web.json_response({"stored": table.num_rows})


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


def error(exc: SextantError) -> web.Response:
    status = exc.http_status if isinstance(exc, PermanentError | TransientError) else 500
    return web.json_response({"error": str(exc)}, status=status)
