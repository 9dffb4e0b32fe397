"""Small exports sent together over gRPC and OTLP/HTTP share one decode and one journal frame,
and each still gets its own answer: the right status, its own partial success, auth; none is
acknowledged before its batch is on disk."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
import requests

from tests.support.otlp import (
    bad_id_request,
    grpc_error,
    grpc_export,
    new_trace_id,
    simple_spans,
    trace_request,
)
from tests.support.server import RunningServer, hold_journal, start_server, stored_spans
from tests.support.wait import wait_for

TOKEN = "small-requests-token-0123456789"
AUTH = (("authorization", f"Bearer {TOKEN}"),)
PROTOBUF = {"Content-Type": "application/x-protobuf", "Authorization": f"Bearer {TOKEN}"}
GARBAGE_INSIDE = b"\x0a\x04\xff\xff\xff\xff"  # a whole field 1 that is no ResourceSpans


@pytest.fixture
def held(tmp_path: Path) -> Iterator[tuple[RunningServer, threading.Event, threading.Event]]:
    """A server whose journal holds its next append until released."""
    server = start_server(tmp_path / "data", auth={"tokens": [TOKEN]})
    entered, release = hold_journal(server)
    try:
        yield server, entered, release
    finally:
        release.set()
        server.stop()


def in_thread(send: Callable[[], Any]) -> tuple[threading.Thread, list[Any]]:
    """Run `send` in a thread; its result (or the exception it raised) lands in the list."""
    out: list[Any] = []

    def run() -> None:
        try:
            out.append(send())
        except Exception as exc:  # the test looks at it
            out.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    return thread, out


def body(spans: int, trace_id: bytes) -> bytes:
    return trace_request(simple_spans(spans, trace_id)).SerializeToString()


def test_each_request_of_a_batch_gets_its_own_answer_once_durable(held) -> None:
    server, entered, release = held
    first_id, good_id, mixed_id, http_id = (new_trace_id() for _ in range(4))
    first, _ = in_thread(lambda: grpc_export(server, body(2, first_id), AUTH))
    assert entered.wait(10)  # the first request's frame is being appended

    sends = {
        "good": in_thread(lambda: grpc_export(server, body(4, good_id), AUTH)),
        "mixed": in_thread(
            lambda: grpc_export(server, bad_id_request(mixed_id).SerializeToString(), AUTH)
        ),
        "malformed": in_thread(lambda: grpc_export(server, GARBAGE_INSIDE, AUTH)),
        "http": in_thread(
            lambda: requests.post(
                f"{server.http_url}/v1/traces", data=body(3, http_id), headers=PROTOBUF, timeout=20
            )
        ),
    }
    ingest = server.pipeline.ingest
    wait_for(lambda: ingest.waiting_to_batch("traces", "grpc") == 3)

    # Answered at once while the others wait: a torn request is never joined, nor one without
    # the token.
    torn = grpc_error(server, body(2, new_trace_id())[:-2], AUTH)
    assert torn.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert grpc_error(server, body(2, new_trace_id())).code() == grpc.StatusCode.UNAUTHENTICATED
    assert all(not out for _, out in sends.values())  # nothing acknowledged before the fsync

    release.set()
    first.join(20)
    for thread, _ in sends.values():
        thread.join(20)
    (good,) = sends["good"][1]
    assert not good.HasField("partial_success")
    (mixed,) = sends["mixed"][1]
    assert mixed.partial_success.rejected_spans == 5
    assert "invalid_trace_id" in mixed.partial_success.error_message
    (malformed,) = sends["malformed"][1]
    assert isinstance(malformed, grpc.RpcError)
    assert malformed.code() == grpc.StatusCode.INVALID_ARGUMENT
    (http,) = sends["http"][1]
    assert http.status_code == 200

    assert stored_spans(server, first_id) == 2
    assert stored_spans(server, good_id) == 4
    assert stored_spans(server, mixed_id) == 3
    assert stored_spans(server, http_id) == 3
    traces = {"protocol": "grpc", "signal": "traces"}
    assert server.metric("sextant_receiver_items_accepted_total", traces) == 2 + 4 + 3
    malformed_status = {**traces, "status": "malformed_request"}
    assert server.metric("sextant_receiver_requests_total", malformed_status) == 2


def test_clean_requests_waiting_together_are_one_batch(held) -> None:
    server, entered, release = held
    first, _ = in_thread(lambda: grpc_export(server, body(1, new_trace_id()), AUTH))
    assert entered.wait(10)
    ids = [new_trace_id() for _ in range(5)]
    sends = [
        in_thread(lambda trace_id=trace_id: grpc_export(server, body(3, trace_id), AUTH))
        for trace_id in ids
    ]
    wait_for(lambda: server.pipeline.ingest.waiting_to_batch("traces", "grpc") == 5)
    release.set()
    first.join(20)
    for thread, out in sends:
        thread.join(20)
        assert not out[0].HasField("partial_success")
    assert [stored_spans(server, trace_id) for trace_id in ids] == [3] * 5
    traces = {"protocol": "grpc", "signal": "traces"}
    # the first alone, then the five together
    assert server.metric("sextant_receiver_batch_requests_count", traces) == 2
    assert server.metric("sextant_receiver_batch_requests_sum", traces) == 6
