"""The native load clients against a real server. gRPC (collector/bench/grpc_load.py): what
`sextant bench` reports with it is what the store holds, refusals are counted by name as the
grpcio client counts them, an open-loop rate is kept, and a call past its deadline ends.
HTTP/1.1 (collector/bench/http_load.py, the guard benchmark's): each call's status and body,
refusals as the server answered them, the open-loop rate, and a call past its timeout."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.protobuf.any_pb2 import Any as ProtoAny
from google.rpc import error_details_pb2, status_pb2

from collector.bench.grpc_load import grpc_load
from collector.bench.http_load import http_load
from collector.bench.runner import BenchOptions, run_bench
from tests.support.otlp import TRACE_EXPORT, new_trace_id, simple_spans, trace_request
from tests.support.server import RunningServer, hold_journal, start_server

TOKEN = "native-load-token-0123456789abcdef"


def test_bench_reports_what_was_stored(server: RunningServer) -> None:
    options = BenchOptions(
        endpoint=server.grpc_endpoint, concurrency=3, duration=20, traces=40, spans_per_request=50
    )
    report = run_bench(options)
    assert not report.errors
    assert report.requests_ok == len(report.latencies) == 8
    assert report.spans_accepted == report.spans_sent == 400
    assert server.query("SELECT count(*), count(DISTINCT trace_id) FROM spans")[0] == (400, 40)


@pytest.mark.parametrize("client", ["native", "grpcio"])
def test_a_refused_token_is_counted_as_grpcio_counts_it(tmp_path: Path, client: str) -> None:
    server = start_server(tmp_path / "data", auth={"tokens": [TOKEN]})
    try:
        refused = BenchOptions(
            endpoint=server.grpc_endpoint,
            duration=20,
            traces=20,
            spans_per_request=10,
            concurrency=2,
            headers={"Authorization": "Bearer not-the-token"},
            client=client,
        )
        report = run_bench(refused)
        assert report.errors == {"gRPC UNAUTHENTICATED": 20}
        assert report.requests_ok == report.spans_accepted == 0
        assert report.spans_sent == 200 and not report.latencies
        allowed = BenchOptions(**{**refused.__dict__, "headers": server.auth_headers})
        report = run_bench(allowed)
        assert not report.errors and report.spans_accepted == 200
        assert server.query("SELECT count(*) FROM spans")[0][0] == 200
    finally:
        server.stop()


class Refusing(grpc.GenericRpcHandler):
    """Refuses every export with RESOURCE_EXHAUSTED and RetryInfo of a second (an overloaded
    collector), counting the calls."""

    def __init__(self) -> None:
        self.calls = 0

    def service(self, details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler:
        return grpc.unary_unary_rpc_method_handler(self.refuse)

    def refuse(self, request: bytes, context: Any) -> bytes:
        self.calls += 1
        wait = error_details_pb2.RetryInfo()
        wait.retry_delay.FromSeconds(1)
        detail = ProtoAny()
        detail.Pack(wait)
        status = status_pb2.Status(code=8, message="busy", details=[detail])
        context.set_trailing_metadata((("grpc-status-details-bin", status.SerializeToString()),))
        context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, "busy")


@pytest.mark.parametrize("client", ["native", "grpcio"])
def test_a_sender_refused_past_the_end_stops(client: str) -> None:
    """A refusal whose wait outlasts the run ends its sender, counted once, as with HTTP."""
    refusing = Refusing()
    endpoint = grpc.server(ThreadPoolExecutor(4), handlers=[refusing])
    port = endpoint.add_insecure_port("127.0.0.1:0")
    endpoint.start()
    try:
        options = BenchOptions(
            endpoint=f"127.0.0.1:{port}",
            concurrency=3,
            duration=0.5,  # shorter than the wait asked for: no retry fits in the run
            spans_per_request=20,
            retry=True,
            client=client,
        )
        report = run_bench(options)
    finally:
        endpoint.stop(None)
    assert refusing.calls == 3
    assert report.errors == {"gRPC RESOURCE_EXHAUSTED (refused until the end)": 3}
    assert report.requests_ok == report.retried == 0 and report.spans_sent == 60


def test_an_open_loop_rate_is_kept(server: RunningServer) -> None:
    """200 requests a second for 2 s: never more than the 400 due, and (generously) not far
    fewer; a closed loop would send thousands."""
    options = BenchOptions(
        endpoint=server.grpc_endpoint,
        concurrency=4,
        duration=2,
        spans_per_request=10,
        rate=2000,
    )
    report = run_bench(options)
    assert not report.errors
    assert 200 <= report.requests_ok <= 400
    assert report.spans_accepted == server.query("SELECT count(*) FROM spans")[0][0]


def test_fixed_bodies_are_sent_in_turn_and_answered_as_bytes(server: RunningServer) -> None:
    traces = [new_trace_id() for _ in range(2)]
    bodies = [trace_request(simple_spans(3, t)).SerializeToString() for t in traces]
    run = grpc_load(server.grpc_endpoint, TRACE_EXPORT, bodies=bodies, requests=4, duration=20)
    assert [(code, reply) for _, code, _, reply in run.calls] == [(0, b"")] * 4
    assert run.retried == 0 and not run.gave_up
    labels = {"protocol": "grpc", "signal": "traces", "status": "ok"}
    assert server.metric("sextant_receiver_requests_total", labels) == 4
    stored = server.query("SELECT DISTINCT trace_id FROM spans")
    assert sorted(t for (t,) in stored) == sorted(t.hex() for t in traces)  # the same spans twice


def test_a_call_past_its_deadline_is_deadline_exceeded(tmp_path: Path) -> None:
    server = start_server(tmp_path / "data")
    entered, release = hold_journal(server)
    try:
        body = trace_request(simple_spans(2)).SerializeToString()
        run = grpc_load(
            server.grpc_endpoint, TRACE_EXPORT, bodies=[body], requests=1, duration=20, timeout=0.5
        )
        assert entered.is_set()
        ((latency, code, _, reply),) = run.calls
        assert (code, reply) == (4, None)  # DEADLINE_EXCEEDED
        assert 0.4 < latency < 5
    finally:
        release.set()
        server.stop()


def http_address(server: RunningServer) -> str:
    return f"127.0.0.1:{server.pipeline.http.port}"


PROTOBUF = {"Content-Type": "application/x-protobuf"}


def test_http_bodies_are_posted_in_turn_and_answered_with_status_and_body(
    server: RunningServer,
) -> None:
    traces = [new_trace_id() for _ in range(2)]
    bodies = [trace_request(simple_spans(3, t)).SerializeToString() for t in traces]
    calls = http_load(
        http_address(server), "/v1/traces", bodies=bodies, requests=4, duration=20, headers=PROTOBUF
    )
    assert [(status, message, reply) for _, status, message, reply in calls] == [(200, "", b"")] * 4
    assert all(0 < latency < 10 for latency, *_ in calls)
    labels = {"protocol": "http", "signal": "traces", "status": "ok"}
    assert server.metric("sextant_receiver_requests_total", labels) == 4
    stored = server.query("SELECT DISTINCT trace_id FROM spans")
    assert sorted(t for (t,) in stored) == sorted(t.hex() for t in traces)


def test_http_refusals_come_back_with_their_status_and_body(tmp_path: Path) -> None:
    server = start_server(tmp_path / "data", auth={"tokens": [TOKEN]})
    try:
        body = trace_request(simple_spans(2)).SerializeToString()
        wrong = {**PROTOBUF, "Authorization": "Bearer not-the-token"}
        calls = http_load(
            http_address(server),
            "/v1/traces",
            bodies=[body],
            requests=3,
            duration=20,
            headers=wrong,
            connections=2,
        )
        assert [status for _, status, _, _ in calls] == [401] * 3
        assert all(reply for *_, reply in calls)  # the server's reason, as it wrote it
        right = {**PROTOBUF, **server.auth_headers}
        calls = http_load(
            http_address(server),
            "/v1/traces",
            bodies=[body],
            requests=2,
            duration=20,
            headers=right,
        )
        assert [status for _, status, _, _ in calls] == [200] * 2
    finally:
        server.stop()


def test_an_http_open_loop_rate_is_kept_and_a_late_call_waits_for_a_connection(
    server: RunningServer,
) -> None:
    """100 calls a second for 2 s: never more than the 200 due, not far fewer, and no call
    measured before it was due; a closed loop on one connection sends thousands."""
    body = trace_request(simple_spans(1)).SerializeToString()
    calls = http_load(
        http_address(server), "/v1/traces", bodies=[body], duration=2, rate=100, headers=PROTOBUF
    )
    assert 150 <= len(calls) <= 200
    assert all(status == 200 and latency >= 0 for latency, status, _, _ in calls)


def test_an_http_call_past_its_timeout_has_no_status(tmp_path: Path) -> None:
    server = start_server(tmp_path / "data")
    entered, release = hold_journal(server)
    try:
        body = trace_request(simple_spans(2)).SerializeToString()
        ((latency, status, message, reply),) = http_load(
            http_address(server),
            "/v1/traces",
            bodies=[body],
            requests=1,
            duration=20,
            timeout=0.5,
            headers=PROTOBUF,
        )
        assert entered.is_set()
        assert (status, message, reply) == (0, "timed out", None)
        assert 0.4 < latency < 5
    finally:
        release.set()
        server.stop()
