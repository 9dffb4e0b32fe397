"""The one HTTP client of a running collector's admin API, with errors a person can act on."""

from __future__ import annotations

import contextlib
import os
import urllib.error
import urllib.request
from collections.abc import Iterator
from http.client import HTTPResponse
from typing import Any

import orjson

from collector.cli._errors import NotFound, Unreachable
from collector.cli._flags import DEFAULT_URL, TOKEN_ENV, URL_ENV
from collector.errors import SextantError
from collector.outbound import opener
from collector.redact import redact


class AdminClient:
    """The admin API of one collector; the token is --token, else $SEXTANT_TOKEN."""

    def __init__(self, url: str, token: str | None = None, timeout: float = 300.0) -> None:
        self.url = url.rstrip("/")
        self.token = token or os.environ.get(TOKEN_ENV) or None
        self.timeout = timeout
        self.sql_max_rows: int | None = None

    def headers(self, content_type: str | None = None) -> dict[str, str]:
        found = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        return {**found, "Content-Type": content_type} if content_type else found

    def get(self, path: str) -> bytes:
        request = urllib.request.Request(self.url + path, headers=self.headers())
        with self.open(request) as reply:
            return reply.read()

    def get_json(self, path: str) -> Any:
        return orjson.loads(self.get(path))

    def post(self, path: str, body: bytes, content_type: str = "application/json") -> bytes:
        request = urllib.request.Request(
            self.url + path, body, self.headers(content_type), method="POST"
        )
        with self.open(request) as reply:
            return reply.read()

    def post_json(self, path: str, doc: Any) -> Any:
        return orjson.loads(self.post(path, orjson.dumps(doc, default=str)))

    @contextlib.contextmanager
    def open(self, request: urllib.request.Request) -> Iterator[HTTPResponse]:
        """The reply; HTTP errors carry the API's `error` text, a dead address says so."""
        try:
            with opener().open(request, timeout=self.timeout) as reply:
                yield reply
        except urllib.error.HTTPError as exc:
            if 300 <= exc.code < 400:  # a redirect to another origin, refused (outbound.py)
                raise SextantError(f"{request.full_url}: {exc.msg}") from exc
            raw = exc.read()
            try:
                message = orjson.loads(raw)["error"]
            except (orjson.JSONDecodeError, KeyError, TypeError):
                message = raw.decode(errors="replace")
            message = redact(str(message), [self.token])
            kind = NotFound if exc.code == 404 else SextantError
            hint = self.hint(exc.code)
            raise kind(f"{request.full_url}: HTTP {exc.code}: {message}{hint}") from exc
        except urllib.error.URLError as exc:
            raise Unreachable(self.unreachable(exc.reason)) from exc
        except OSError as exc:  # a reset or a timeout once connected
            raise Unreachable(self.unreachable(exc)) from exc

    def hint(self, status: int) -> str:
        """What to do about a refusal the token explains."""
        if status != 401:
            return ""
        if self.token:
            return (
                f" (the token from --token or ${TOKEN_ENV} is not one of the collector's"
                " auth.tokens)"
            )
        return f"; the collector requires a token: pass --token TOKEN or set ${TOKEN_ENV}"

    def unreachable(self, reason: object) -> str:
        """The collector's address, not the route asked for: that is what the user can check."""
        return (
            f"cannot reach {self.url} ({reason}): no collector's admin API answers there; check"
            f" --url (or ${URL_ENV}, default {DEFAULT_URL}) and that the collector is running:"
            f" curl {self.url}/healthz"
        )

    def sql(self, sql: str, params: list | None = None, max_rows: int | None = None) -> Any:
        """A query's rows as an Arrow table: an error if the collector's byte limit cut them
        short, or (without `max_rows`: all of them) its row limit (sql.max_rows)."""
        table, truncated_by = self.sql_answer(sql, params, max_rows or self.max_rows())
        if truncated_by == "max_bytes":
            raise SextantError(
                f"{self.url}: the answer passed the collector's sql.max_result_mib after"
                f" {table.num_rows} rows; narrow the selection (--since/--until) or read a"
                " stopped collector's file (--db)"
            )
        if truncated_by and not max_rows:
            raise SextantError(
                f"{self.url}: more than {table.num_rows} rows (the collector's sql.max_rows);"
                " narrow the selection (--since/--until)"
            )
        return table

    def sql_answer(self, sql: str, params: list | None, max_rows: int) -> tuple[Any, str | None]:
        """A query's rows as an Arrow table, and which limit cut them short (None: no limit)."""
        import pyarrow as pa

        doc = {"sql": sql, "format": "arrow", "params": params or None, "max_rows": max_rows}
        request = urllib.request.Request(
            self.url + "/api/v1/sql",
            orjson.dumps(doc, default=str),
            self.headers("application/json"),
            method="POST",
        )
        with self.open(request) as reply:
            truncated = reply.headers.get("X-Sextant-Truncated") == "true"
            truncated_by = reply.headers.get("X-Sextant-Truncated-By", "max_rows")
            table = pa.ipc.open_stream(reply.read()).read_all()
        return table, truncated_by if truncated else None

    def max_rows(self) -> int:
        """The collector's sql.max_rows, asked once."""
        if self.sql_max_rows is None:
            self.sql_max_rows = int(self.get_json("/api/v1/sql/limits")["max_rows"])
        return self.sql_max_rows
