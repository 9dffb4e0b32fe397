"""Calls to a running collector's admin API from the command line, with clear errors."""

from __future__ import annotations

import contextlib
import os
import urllib.error
import urllib.request

import orjson
import pyarrow as pa

from collector.errors import SextantError

TOKEN_ENV = "SEXTANT_TOKEN"


class AdminClient:
    """The admin API of one collector; the token comes from --token or $SEXTANT_TOKEN."""

    def __init__(self, url: str, token: str | None = None, timeout: float = 300.0) -> None:
        self.url = url.rstrip("/")
        self.token = token or os.environ.get(TOKEN_ENV) or None
        self.timeout = timeout
        self._max_rows: int | None = None

    def _auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"} if self.token else {}

    def post(self, path: str, body: bytes, content_type: str = "application/json") -> bytes:
        headers = {"Content-Type": content_type, **self._auth()}
        request = urllib.request.Request(self.url + path, body, headers, method="POST")
        return self._send(request)

    def get(self, path: str) -> bytes:
        return self._send(urllib.request.Request(self.url + path, headers=self._auth()))

    def _send(self, request: urllib.request.Request) -> bytes:
        with self._open(request) as reply:
            return reply.read()

    @contextlib.contextmanager
    def _open(self, request: urllib.request.Request):  # type: ignore[no-untyped-def]
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as reply:
                yield reply
        except urllib.error.HTTPError as exc:
            raw = exc.read()
            try:
                message = orjson.loads(raw)["error"]
            except (orjson.JSONDecodeError, KeyError, TypeError):
                message = raw.decode(errors="replace")
            raise SextantError(f"{request.full_url}: HTTP {exc.code}: {message}") from exc
        except urllib.error.URLError as exc:
            raise SextantError(f"cannot reach {request.full_url}: {exc.reason}") from exc

    def sql(self, sql: str, params: list | None = None, max_rows: int | None = None) -> pa.Table:
        """A query's rows as Arrow. Without `max_rows`, all of them: an error if the collector's
        row limit (sql.max_rows) would cut them short."""
        doc: dict = {"sql": sql, "format": "arrow", "params": params or None}
        if max_rows:
            doc["max_rows"] = max_rows
        else:
            doc["max_rows"] = self.max_rows()
        request = urllib.request.Request(
            self.url + "/api/v1/sql",
            orjson.dumps(doc, default=str),
            {"Content-Type": "application/json", **self._auth()},
            method="POST",
        )
        with self._open(request) as reply:
            truncated = reply.headers.get("X-Sextant-Truncated") == "true"
            table = pa.ipc.open_stream(reply.read()).read_all()
        if truncated and not max_rows:
            raise SextantError(
                f"{self.url}: more than {doc['max_rows']} rows (the collector's sql.max_rows);"
                " narrow the selection (--since/--until)"
            )
        return table

    def max_rows(self) -> int:
        if self._max_rows is None:
            status = orjson.loads(self.get("/api/v1/sql/limits"))
            self._max_rows = int(status["max_rows"])
        return self._max_rows
