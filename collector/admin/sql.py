"""SQL routes: live read-only SQL against the running store (JSON or Arrow), and its limits."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TypeVar

import orjson
from aiohttp import web

from collector.admin.answers import ArrowAnswer, JsonAnswer, streamed
from collector.admin.http import error_reply
from collector.config.sections import SqlConfig
from collector.errors import SextantError
from collector.store.database import Database
from collector.store.readonly import (
    MIB,
    Answer,
    QueryOutcome,
    SqlLimits,
    run_read_only,
    truncation_note,
)
from collector.store.sqlcheck import QueryRefused

ARROW_STREAM = "application/vnd.apache.arrow.stream"
# Queries run in threads; a few at a time keeps readers from starving the writer of CPU.
MAX_CONCURRENT_QUERIES = 4
T = TypeVar("T")


def limits_of(config: SqlConfig, max_rows: int | None = None) -> SqlLimits:
    return SqlLimits(
        max_rows=max_rows or config.max_rows,
        max_bytes=config.max_result_mib * MIB,
        memory_limit=config.memory_limit,
        timeout_seconds=config.timeout_seconds,
    )


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
            # The query and its encoding both run in the thread: the event loop only sends.
            body, content_type, headers = await self.run(
                lambda: self._answer(sql, params, max_rows, fmt)
            )
        except SextantError as exc:
            return error_reply(exc)
        return streamed(body, content_type, headers)

    async def run(self, work: Callable[[], T]) -> T:
        """`work` (which calls `query`) in a worker thread, a few at a time: the endpoint's
        queries and the console's SQL page's share these slots."""
        async with self._slots:
            return await asyncio.to_thread(work)

    def query(self, sql: str, params: list | None, max_rows: int, answer: Answer) -> QueryOutcome:
        """One query through the sandbox, under the configured limits (in a worker thread)."""
        limits = limits_of(self.config, max_rows)
        return self.database.read(run_read_only, sql, params, limits, answer)

    async def _limits(self, request: web.Request) -> web.Response:
        limits = {
            "max_rows": self.config.max_rows,
            "max_result_mib": self.config.max_result_mib,
            "memory_limit": self.config.memory_limit,
            "timeout_seconds": self.config.timeout_seconds,
        }
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

    def _answer(
        self, sql: str, params: list | None, max_rows: int, fmt: str
    ) -> tuple[list[bytes | memoryview], str, dict[str, str]]:
        """The reply's body (in parts), content type and headers."""
        if fmt == "arrow":
            arrow = ArrowAnswer()
            outcome = self.query(sql, params, max_rows, arrow)
            headers = {"X-Sextant-Truncated": str(outcome.truncated).lower()}
            if outcome.truncated_by:
                headers["X-Sextant-Truncated-By"] = outcome.truncated_by
            return [arrow.body()], ARROW_STREAM, headers
        json = JsonAnswer()
        outcome = self.query(sql, params, max_rows, json)
        note = truncation_note(outcome, limits_of(self.config, max_rows))
        return list(json.parts_of_body(outcome, note)), "application/json", {}
