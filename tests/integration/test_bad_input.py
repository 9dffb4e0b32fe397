"""Every kind of bad input gets the right status and message, and the server keeps serving."""

from __future__ import annotations

import gzip
import http.client
import json
import threading
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
import requests
from google.rpc import error_details_pb2, status_pb2
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from tests.support.otlp import (
    bad_id_request,
    grpc_error,
    grpc_export,
    new_trace_id,
    simple_spans,
    trace_request,
)
from tests.support.server import RunningServer, serve, start_server, stored_spans
from tests.support.wait import wait_for

PROTOBUF = {"Content-Type": "application/x-protobuf"}
HTTP_SERVERS = ["native", "aiohttp"]


@pytest.fixture(params=HTTP_SERVERS)
def http_server(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[RunningServer]:
    """A server with the default config on each OTLP/HTTP listener: both answer alike."""
    running = serve(tmp_path, http={"server": request.param})
    yield running
    running.stop()


def assert_still_serving(server: RunningServer) -> None:
    """The next good request, over both protocols, is accepted and stored."""
    request = trace_request(simple_spans(2))
    assert not grpc_export(server, request.SerializeToString()).HasField("partial_success")
    trace_id = new_trace_id()
    reply = requests.post(
        f"{server.http_url}/v1/traces",
        data=trace_request(simple_spans(3, trace_id)).SerializeToString(),
        headers=PROTOBUF,
        timeout=10,
    )
    assert reply.status_code == 200
    assert stored_spans(server, trace_id) == 3


def test_malformed_protobuf_over_grpc_is_invalid_argument(server: RunningServer) -> None:
    error = grpc_error(server, b"\xff\xff\xff not a protobuf")
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "not a valid ExportTraceServiceRequest protobuf" in error.details()
    assert_still_serving(server)
    labels = {"protocol": "grpc", "signal": "traces", "status": "malformed_request"}
    assert server.metric("sextant_receiver_requests_total", labels) == 1


def test_malformed_protobuf_over_http_is_400_with_status_body(http_server: RunningServer) -> None:
    reply = requests.post(
        f"{http_server.http_url}/v1/traces", data=b"\xff\xff\xff junk", headers=PROTOBUF, timeout=10
    )
    assert reply.status_code == 400
    status = status_pb2.Status.FromString(reply.content)
    assert status.code == grpc.StatusCode.INVALID_ARGUMENT.value[0]
    assert "not a valid ExportTraceServiceRequest protobuf" in status.message
    assert_still_serving(http_server)


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (b"{not json", "not valid JSON"),
        (b"[1, 2]", "must be a JSON object"),
        (
            b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"startTimeUnixNano": "soon"}]}]}]}',
            "startTimeUnixNano",
        ),
        (b'{"resourceSpans": "nope"}', "resourceSpans"),
    ],
)
def test_malformed_json_is_400_with_a_reason(
    http_server: RunningServer, body: bytes, expected: str
):
    reply = requests.post(
        f"{http_server.http_url}/v1/traces",
        data=body,
        headers={"Content-Type": "application/json"},
        timeout=10,
    )
    assert reply.status_code == 400
    assert reply.headers["Content-Type"].startswith("application/json")
    assert expected in reply.json()["message"]
    assert_still_serving(http_server)


def test_invalid_ids_are_rejected_alone_over_grpc(server: RunningServer) -> None:
    trace_id = new_trace_id()
    reply = grpc_export(server, bad_id_request(trace_id).SerializeToString())
    assert reply.partial_success.rejected_spans == 5
    message = reply.partial_success.error_message
    assert "2 invalid_trace_id" in message
    assert "2 invalid_span_id" in message
    assert "1 invalid_parent_span_id" in message
    assert stored_spans(server, trace_id) == 3
    labels = {"protocol": "grpc", "signal": "traces", "reason": "invalid_trace_id"}
    assert server.metric("sextant_receiver_items_rejected_total", labels) == 2


def test_invalid_hex_ids_in_json_are_rejected_alone(server: RunningServer) -> None:
    trace_id = new_trace_id().hex()
    good = {"traceId": trace_id, "spanId": "00f067aa0ba902b7", "name": "good"}
    body = {
        "resourceSpans": [
            {
                "scopeSpans": [
                    {
                        "spans": [
                            good,
                            {"traceId": "zz" * 16, "spanId": "00f067aa0ba902b8", "name": "bad"},
                            {"traceId": trace_id, "spanId": "123", "name": "odd hex"},
                            {"traceId": trace_id, "spanId": "aa" * 8, "parentSpanId": "xyz"},
                        ]
                    }
                ]
            }
        ]
    }
    reply = requests.post(f"{server.http_url}/v1/traces", json=body, timeout=10)
    assert reply.status_code == 200
    partial = reply.json()["partialSuccess"]
    assert partial["rejectedSpans"] == "3"  # int64 as a string, per the protobuf JSON mapping
    assert "invalid_trace_id" in partial["errorMessage"]
    assert stored_spans(server, bytes.fromhex(trace_id)) == 1


@pytest.mark.parametrize("listener", HTTP_SERVERS)
def test_oversized_requests_are_refused(tmp_path: Path, listener: str) -> None:
    server = start_server(
        tmp_path / "data", limits={"max_request_bytes": 20_000}, http={"server": listener}
    )
    try:
        big = trace_request(simple_spans(400)).SerializeToString()
        assert len(big) > 20_000
        error = grpc_error(server, big)
        assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED

        reply = requests.post(f"{server.http_url}/v1/traces", data=big, headers=PROTOBUF)
        assert reply.status_code == 413
        assert "exceeds the 20000-byte limit" in status_pb2.Status.FromString(reply.content).message

        # The limit applies after decompression, so a small gzip body that inflates past it fails.
        reply = requests.post(
            f"{server.http_url}/v1/traces",
            data=gzip.compress(big),
            headers={**PROTOBUF, "Content-Encoding": "gzip"},
        )
        assert reply.status_code == 413

        # And to chunked bodies, which carry no Content-Length.
        reply = requests.post(
            f"{server.http_url}/v1/traces",
            data=iter([big[i : i + 4096] for i in range(0, len(big), 4096)]),
            headers=PROTOBUF,
        )
        assert reply.status_code == 413
        assert_still_serving(server)
    finally:
        server.stop()


def test_chunked_body_without_content_length_is_accepted(http_server: RunningServer) -> None:
    trace_id = new_trace_id()
    body = trace_request(simple_spans(5, trace_id)).SerializeToString()
    conn = http.client.HTTPConnection("127.0.0.1", http_server.pipeline.http.port, timeout=10)
    conn.request(
        "POST",
        "/v1/traces",
        body=iter([body[:100], body[100:]]),
        headers=PROTOBUF,
        encode_chunked=True,
    )
    response = conn.getresponse()
    assert response.status == 200
    assert response.getheader("Content-Type") == "application/x-protobuf"
    ExportTraceServiceResponse.FromString(response.read())
    assert stored_spans(http_server, trace_id) == 5


def test_wrong_content_type_is_415(http_server: RunningServer) -> None:
    reply = requests.post(
        f"{http_server.http_url}/v1/traces", data=b"x", headers={"Content-Type": "text/plain"}
    )
    assert reply.status_code == 415
    assert "unsupported Content-Type 'text/plain'" in reply.text


def test_unknown_content_encoding_is_415(http_server: RunningServer) -> None:
    reply = requests.post(
        f"{http_server.http_url}/v1/traces",
        data=b"x",
        headers={**PROTOBUF, "Content-Encoding": "br"},
    )
    assert reply.status_code == 415
    assert "Content-Encoding 'br'" in status_pb2.Status.FromString(reply.content).message


def test_corrupt_gzip_is_400(http_server: RunningServer) -> None:
    reply = requests.post(
        f"{http_server.http_url}/v1/traces",
        data=b"\x1f\x8b\x08\x00garbage-not-deflate",
        headers={**PROTOBUF, "Content-Encoding": "gzip"},
    )
    assert reply.status_code == 400
    assert_still_serving(http_server)


def test_wrong_path_is_404_and_wrong_method_405(http_server: RunningServer) -> None:
    reply = requests.post(f"{http_server.http_url}/v1/tracez", data=b"", headers=PROTOBUF)
    assert reply.status_code == 404
    assert "POST /v1/traces" in reply.text
    reply = requests.get(f"{http_server.http_url}/v1/traces")
    assert reply.status_code == 405
    assert reply.headers["Allow"] == "POST"


def test_bearer_token_auth(tmp_path: Path) -> None:
    server = start_server(
        tmp_path / "data", auth={"tokens": ["s3cret-0123456789", "other-0123456789"]}
    )
    try:
        body = trace_request(simple_spans(1)).SerializeToString()
        assert grpc_error(server, body).code() == grpc.StatusCode.UNAUTHENTICATED
        error = grpc_error(server, body, metadata=(("authorization", "Bearer wrong"),))
        assert error.code() == grpc.StatusCode.UNAUTHENTICATED
        assert "invalid bearer token" in error.details()
        grpc_export(server, body, metadata=(("authorization", "Bearer s3cret-0123456789"),))

        url = f"{server.http_url}/v1/traces"
        reply = requests.post(url, data=body, headers=PROTOBUF)
        assert reply.status_code == 401
        assert reply.headers["WWW-Authenticate"].startswith("Bearer")
        reply = requests.post(url, data=body, headers={**PROTOBUF, "Authorization": "Basic x"})
        assert reply.status_code == 401
        other = trace_request(simple_spans(1)).SerializeToString()
        reply = requests.post(
            url, data=other, headers={**PROTOBUF, "Authorization": "Bearer other-0123456789"}
        )
        assert reply.status_code == 200
        assert server.query("SELECT count(*) FROM spans")[0][0] == 2
    finally:
        server.stop()


def test_long_attribute_values_are_truncated_and_flagged(tmp_path: Path) -> None:
    server = start_server(tmp_path / "data", limits={"max_attribute_length": 100})
    try:
        trace_id = new_trace_id()
        spans = simple_spans(1, trace_id)
        spans[0]["attributes"] = {
            "gen_ai.input.messages": "x" * 5000,
            "nested": {"inner": ["y" * 300]},
            "short": "ok",
        }
        reply = grpc_export(server, trace_request(spans).SerializeToString())
        assert reply.partial_success.rejected_spans == 0
        assert "truncated to 100 characters" in reply.partial_success.error_message
        (row,) = server.query_dicts(
            "SELECT attributes, truncated_attributes FROM spans WHERE trace_id = ?",
            [trace_id.hex()],
        )
        attrs = json.loads(row["attributes"])
        assert attrs["gen_ai.input.messages"] == "x" * 100
        assert attrs["nested"]["inner"] == ["y" * 100]
        assert attrs["short"] == "ok"
        assert sorted(row["truncated_attributes"]) == ["gen_ai.input.messages", "inner"]
    finally:
        server.stop()


def test_duplicate_delivery_stores_each_span_once(server: RunningServer) -> None:
    trace_id = new_trace_id()
    body = trace_request(simple_spans(4, trace_id)).SerializeToString()
    grpc_export(server, body)
    grpc_export(server, body)  # a client retry
    reply = requests.post(f"{server.http_url}/v1/traces", data=body, headers=PROTOBUF)
    assert reply.status_code == 200
    assert stored_spans(server, trace_id) == 4
    assert server.metric("sextant_store_duplicate_spans_total") == 8


def test_full_write_queue_asks_clients_to_retry(tmp_path: Path) -> None:
    """With the writer held, requests beyond the queue bound get RESOURCE_EXHAUSTED / 503 with a
    retry delay, and every request that was answered OK is in the store afterwards."""
    server = start_server(tmp_path / "data", writer={"max_queue_rows": 10})
    writer = server.pipeline.writer
    original = writer.committer.commit
    entered, release = threading.Event(), threading.Event()

    def held_commit(taken):
        entered.set()
        release.wait(20)
        original(taken)

    writer.committer.commit = held_commit
    answered: list[str] = []
    first_id, second_id = new_trace_id(), new_trace_id()

    def send(trace_id: bytes) -> None:
        grpc_export(server, trace_request(simple_spans(6, trace_id)).SerializeToString())
        answered.append(trace_id.hex())

    senders = [threading.Thread(target=send, args=(first_id,))]
    senders[0].start()
    try:
        entered.wait(10)  # the writer holds the first request in its commit
        senders.append(threading.Thread(target=send, args=(second_id,)))
        senders[1].start()
        wait_for(lambda: server.metric("sextant_store_queue_rows") == 6)  # second one queued

        third = trace_request(simple_spans(6)).SerializeToString()
        error = grpc_error(server, third)
        assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert "write queue full" in error.details()
        status = status_pb2.Status.FromString(
            dict(error.trailing_metadata())["grpc-status-details-bin"]
        )
        retry = error_details_pb2.RetryInfo()
        assert status.details[0].Unpack(retry)
        assert retry.retry_delay.seconds == 1

        reply = requests.post(f"{server.http_url}/v1/traces", data=third, headers=PROTOBUF)
        assert reply.status_code == 503
        assert reply.headers["Retry-After"] == "1"
        assert server.metric("sextant_store_queue_dropped_total", {"reason": "queue_full"}) == 12
    finally:
        release.set()
        for sender in senders:
            sender.join(20)
    try:
        assert sorted(answered) == sorted([first_id.hex(), second_id.hex()])
        assert stored_spans(server, first_id) == 6
        assert stored_spans(server, second_id) == 6
    finally:
        server.stop()


def test_random_garbage_never_kills_the_server(server: RunningServer) -> None:
    import random

    rng = random.Random(5)
    valid = trace_request(simple_spans(3)).SerializeToString()
    for i in range(60):
        if i % 2:
            body = bytearray(valid)
            for _ in range(5):
                body[rng.randrange(len(body))] = rng.randrange(256)
            body = bytes(body)
        else:
            body = rng.randbytes(rng.randrange(1, 400))
        try:
            grpc_export(server, body)
        except grpc.RpcError as exc:
            assert exc.code() == grpc.StatusCode.INVALID_ARGUMENT
        reply = requests.post(f"{server.http_url}/v1/traces", data=body, headers=PROTOBUF)
        assert reply.status_code in (200, 400)
        reply = requests.post(
            f"{server.http_url}/v1/traces",
            data=body,
            headers={"Content-Type": "application/json"},
        )
        assert reply.status_code in (200, 400)
    for depth in (600, 3000):  # beyond the protobuf nesting limit; beyond the JSON parser's
        nested = '{"key":"k","value":{"kvlistValue":{"values":[' * depth
        nested += '{"key":"k","value":{}}' + "]}}}" * depth
        deep = '{"resourceSpans":[{"resource":{"attributes":[' + nested + "]}}]}"
        reply = requests.post(
            f"{server.http_url}/v1/traces",
            data=deep,
            headers={"Content-Type": "application/json"},
        )
        assert reply.status_code == 400
    assert_still_serving(server)


def test_empty_requests_succeed(server: RunningServer) -> None:
    assert not grpc_export(server, b"").HasField("partial_success")
    reply = requests.post(f"{server.http_url}/v1/traces", data=b"", headers=PROTOBUF)
    assert reply.status_code == 200
    reply = requests.post(f"{server.http_url}/v1/traces", json={}, timeout=10)
    assert (reply.status_code, reply.json()) == (200, {})


def test_unknown_grpc_method_is_unimplemented(server: RunningServer) -> None:
    with grpc.insecure_channel(server.grpc_endpoint) as channel:
        call = channel.unary_unary(
            "/opentelemetry.proto.collector.metrics.v1.MetricsService/Export"
        )
        with pytest.raises(grpc.RpcError) as caught:
            call(b"", timeout=10)
    assert caught.value.code() == grpc.StatusCode.UNIMPLEMENTED
    assert_still_serving(server)


def test_oddly_typed_attributes_are_stored_not_fatal(server: RunningServer) -> None:
    """Values of unexpected types where the normalizer looks are kept whole; nothing is lost."""
    trace_id = new_trace_id()
    spans = simple_spans(4, trace_id)
    spans[0]["attributes"] = {"gen_ai.operation.name": ["chat", "x"], "gen_ai.request.model": [1]}
    spans[1]["attributes"] = {
        "gen_ai.operation.name": "chat",
        "gen_ai.usage.input_tokens": 1e30,
        "gen_ai.usage.output_tokens": "9" * 30,
    }
    spans[2]["attributes"] = {"gen_ai.operation.name": 7, "error.type": {"nested": True}}
    spans[3]["attributes"] = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": 42,
        "gen_ai.tool.call.id": 123,
        "gen_ai.tool.call.arguments": [1, 2],
    }
    request = trace_request(spans, resource={"service.name": 12345, "service.version": 2.5})
    reply = grpc_export(server, request.SerializeToString())
    assert reply.partial_success.rejected_spans == 0
    rows = {
        r["name"]: r
        for r in server.query_dicts("SELECT * FROM spans WHERE trace_id = ?", [trace_id.hex()])
    }
    assert len(rows) == 4
    assert rows["span-0"]["step_kind"] == "other" and rows["span-0"]["model"] is None
    assert json.loads(rows["span-0"]["attributes"])["gen_ai.operation.name"] == ["chat", "x"]
    assert (rows["span-1"]["input_tokens"], rows["span-1"]["output_tokens"]) == (None, None)
    assert rows["span-2"]["operation_name"] == "7"
    tool = rows["span-3"]
    assert (tool["tool_name"], tool["tool_call_id"]) == ("42", "123")
    assert json.loads(tool["tool_arguments"]) == [1, 2]
    assert (tool["service_name"], tool["service_version"]) == ("12345", "2.5")


def test_a_body_of_several_gzip_members_is_read_whole(http_server: RunningServer) -> None:
    trace_id = new_trace_id()
    body = trace_request(simple_spans(6, trace_id)).SerializeToString()
    members = gzip.compress(body[:50]) + gzip.compress(body[50:])
    reply = requests.post(
        f"{http_server.http_url}/v1/traces",
        data=members,
        headers={**PROTOBUF, "Content-Encoding": "gzip"},
    )
    assert reply.status_code == 200
    assert stored_spans(http_server, trace_id) == 6
