"""Admin error replies: a client told to come back is told when."""

from __future__ import annotations

import orjson

from collector.admin.http import error_reply
from collector.errors import Overloaded, ShuttingDown, UnsupportedMediaType


def test_a_transient_error_is_a_503_with_retry_after() -> None:
    response = error_reply(ShuttingDown("Sextant is shutting down; retry"))
    assert response.status == 503
    assert response.headers["Retry-After"] == "1"
    assert response.body is not None
    assert orjson.loads(bytes(response.body)) == {"error": "Sextant is shutting down; retry"}
    busy = Overloaded("write queue full")
    busy.retry_after_seconds = 5
    assert error_reply(busy).headers["Retry-After"] == "5"


def test_bad_input_is_not_told_to_retry() -> None:
    response = error_reply(UnsupportedMediaType("send application/x-protobuf"))
    assert response.status == 415 and "Retry-After" not in response.headers
