"""The SQL page: a query through the SQL endpoint's own sandbox and limits, its answer as an HTML
table or a CSV download, and the shipped views with their columns."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

import duckdb
from aiohttp import web

from collector.admin.answers import CsvAnswer, dumps, streamed
from collector.admin.sql import SqlRoutes, limits_of
from collector.cluster import other_peers
from collector.config.sections import ClusterConfig
from collector.console.access import CSRF, CSRF_FIELD
from collector.console.cluster import ask_peers
from collector.console.render import page
from collector.errors import SextantError
from collector.store.readonly import TableAnswer, truncation_note
from collector.store.views import VIEWS

EXAMPLE = "SELECT verdict, count(*) AS runs FROM trajectories WHERE is_current GROUP BY ALL"
VIEW_COLUMNS = """
SELECT table_name, column_name, data_type FROM duckdb_columns()
WHERE database_name = current_database() AND table_name IN ({names})
ORDER BY table_name, column_index
"""


@dataclass
class QueryAnswer:
    """What the page shows of one query: its columns and rows as text, or why it was refused."""

    sql: str
    max_rows: int
    columns: list[str] = field(default_factory=list)
    rows: list[list[str | None]] = field(default_factory=list)
    truncated_by: str | None = None
    note: str | None = None
    elapsed_ms: float = 0.0
    refused: str | None = None
    missing: list[str] = field(default_factory=list)  # replicas that did not answer, and why
    everywhere: bool = False  # the answer of every replica


def cell(value: Any) -> str | None:
    """None stays None (the page writes NULL); lists and mappings as JSON."""
    if value is None:
        return None
    if isinstance(value, list | dict):
        return dumps(value).decode()
    if isinstance(value, bytes):
        return value.hex()
    return str(value)


def view_columns(cursor: duckdb.DuckDBPyConnection) -> dict[str, list[tuple[str, str]]]:
    names = ", ".join("?" for _ in VIEWS)
    found: dict[str, list[tuple[str, str]]] = {name: [] for name in VIEWS}
    for view, column, kind in cursor.execute(
        VIEW_COLUMNS.format(names=names), list(VIEWS)
    ).fetchall():
        found[view].append((column, kind))
    return found


class SqlPage:
    """GET /sql (the form, the views) and POST /sql (run: the page with the answer; csv: the
    answer as a file). Every query goes through the endpoint's `SqlRoutes.query`."""

    def __init__(
        self, endpoint: SqlRoutes, cluster: ClusterConfig | None = None, token: str | None = None
    ) -> None:
        self.endpoint = endpoint
        self.config = endpoint.config
        self.cluster = cluster or ClusterConfig()
        self.token = token  # for the peers' admin APIs

    def register(self, app: web.Application) -> None:
        app.router.add_get("/sql", self._form)
        app.router.add_post("/sql", self._run)

    async def _form(self, request: web.Request) -> web.Response:
        sql = request.query.get("sql", EXAMPLE)
        return await self._page(request, QueryAnswer(sql, self.config.default_rows), ran=False)

    async def _run(self, request: web.Request) -> web.Response:
        # The one POST of the page, and it only reads; its CSRF token was checked by the guard.
        form = await request.post()
        sql = str(form.get("sql", ""))
        try:
            if not self.config.enabled:
                raise SextantError("SQL is turned off on this collector (sql.enabled: false)")
            max_rows = self._max_rows(str(form.get("max_rows", "")))
            everywhere = bool(form.get("cluster")) and bool(self.cluster.peers)
            if form.get("output") == "csv":
                if everywhere:
                    raise SextantError(
                        "CSV is one replica's answer: untick every replica, or run"
                        " `sextant sql --cluster URLS --format csv`"
                    )
                return await self._csv(sql, max_rows)
            result = await self.endpoint.run(lambda: self._table(sql, max_rows))
            if everywhere:
                result = await self._everywhere(result, max_rows)
        except SextantError as exc:
            result = QueryAnswer(sql, self.config.default_rows, refused=str(exc))
        return await self._page(request, result, ran=True)

    def _max_rows(self, given: str) -> int:
        if not given:
            return self.config.default_rows
        if not given.isdigit() or not 1 <= int(given) <= self.config.max_rows:
            raise SextantError(
                f"max rows must be an integer from 1 to {self.config.max_rows} (sql.max_rows)"
            )
        return int(given)

    def _table(self, sql: str, max_rows: int) -> QueryAnswer:
        """In the worker thread: the query, and its rows turned into text."""
        answer = TableAnswer()
        outcome = self.endpoint.query(sql, None, max_rows, answer)
        table = answer.table()
        columns = [column.to_pylist() for column in table.columns]
        return QueryAnswer(
            sql,
            max_rows,
            columns=table.schema.names,
            rows=[[cell(v) for v in row] for row in zip(*columns, strict=True)],
            truncated_by=outcome.truncated_by,
            note=truncation_note(outcome, limits_of(self.config, max_rows)),
            elapsed_ms=round(outcome.elapsed_seconds * 1000, 1),
        )

    async def _everywhere(self, here: QueryAnswer, max_rows: int) -> QueryAnswer:
        """This replica's answer joined with its peers', each row led by its replica."""
        others = other_peers(self.cluster.peers, self.cluster.replica)
        peers = await ask_peers(others, self.token, here.sql, max_rows)
        name = self.cluster.replica or "this replica"
        joined = QueryAnswer(
            here.sql,
            max_rows,
            columns=["replica", *here.columns],
            rows=[[name, *row] for row in here.rows],
            truncated_by=here.truncated_by,
            note=here.note,
            elapsed_ms=here.elapsed_ms,
            everywhere=True,
        )
        for peer in peers:
            if peer.error is None and peer.columns != here.columns:
                peer.error = f"answered other columns ({', '.join(peer.columns)})"
            if peer.error is not None:
                joined.missing.append(f"{peer.replica}: {peer.error}")
                continue
            joined.rows += [[peer.replica, *(cell(v) for v in row)] for row in peer.rows]
            if peer.truncated_by and joined.truncated_by is None:
                joined.truncated_by = peer.truncated_by
                joined.note = f"{peer.replica}'s answer was cut ({peer.truncated_by})"
        return joined

    async def _csv(self, sql: str, max_rows: int) -> web.Response:
        answer = CsvAnswer()
        outcome = await self.endpoint.run(lambda: self.endpoint.query(sql, None, max_rows, answer))
        headers = {
            "Content-Disposition": 'attachment; filename="sextant-query.csv"',
            "X-Sextant-Truncated": str(outcome.truncated).lower(),
        }
        if outcome.truncated_by:
            headers["X-Sextant-Truncated-By"] = outcome.truncated_by
        return streamed(answer.parts, "text/csv", headers, charset="utf-8")

    async def _page(self, request: web.Request, result: QueryAnswer, ran: bool) -> web.Response:
        views = await asyncio.to_thread(self.endpoint.database.read, view_columns)
        return page(
            "sql.html",
            csrf=request[CSRF],
            csrf_field=CSRF_FIELD,
            status=400 if result.refused else 200,
            nav="sql",
            result=result,
            ran=ran,
            views=views,
            enabled=self.config.enabled,
            max_rows_limit=self.config.max_rows,
            peers=self.cluster.peers,
        )
