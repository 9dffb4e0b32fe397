"""Calls to a running collector's admin API from the command line, with clear errors."""

from __future__ import annotations

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

    def post(self, path: str, body: bytes, content_type: str = "application/json") -> bytes:
        headers = {"Content-Type": content_type}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        request = urllib.request.Request(self.url + path, body, headers, method="POST")
        return self._send(request)

    def get(self, path: str) -> bytes:
        return self._send(urllib.request.Request(self.url + path))

    def _send(self, request: urllib.request.Request) -> bytes:
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as reply:
                return reply.read()
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
        """A query's rows as Arrow; raises if the collector's row limit cut them short."""
        doc: dict = {"sql": sql, "format": "arrow"}
        if params:
            doc["params"] = params
        if max_rows:
            doc["max_rows"] = max_rows
        body = self.post("/api/v1/sql", orjson.dumps(doc))
        return pa.ipc.open_stream(body).read_all()
