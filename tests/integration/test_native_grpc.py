"""The native OTLP/gRPC listener, as exporters and operators meet it: gzip as the Collector and
the SDKs send it, a port already taken, a call in flight through a shutdown, and grpcio still
there when chosen (or when the listener serves TLS)."""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path
from typing import Any

import grpc
import pytest
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from collector.errors import StartupError
from collector.receivers.native_grpc import NativeGrpcReceiver
from collector.receivers.otlp_grpc import OtlpGrpcReceiver
from tests.support.otlp import TRACE_EXPORT, grpc_export, new_trace_id, simple_spans, trace_request
from tests.support.server import RunningServer, hold_journal, start_server, stored_spans

TOKEN = "native-grpc-token-0123456789abcdef"


def test_the_native_listener_is_the_default(server: RunningServer) -> None:
    assert isinstance(server.pipeline.grpc, NativeGrpcReceiver)


def test_a_gzip_export_from_the_sdk_is_stored(server: RunningServer) -> None:
    exporter = OTLPSpanExporter(
        endpoint=server.grpc_endpoint, insecure=True, compression=grpc.Compression.Gzip
    )
    provider = TracerProvider(resource=Resource.create({"service.name": "gzipped"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("test")
    with tracer.start_as_current_span("agent.run") as root:
        for n in range(3):
            with tracer.start_as_current_span(f"tool.{n}"):
                pass
    provider.shutdown()
    trace_id = root.get_span_context().trace_id.to_bytes(16, "big")
    assert stored_spans(server, trace_id) == 4
    labels = {"protocol": "grpc", "signal": "traces", "status": "ok"}
    assert server.metric("sextant_receiver_requests_total", labels) == 4


def test_a_port_in_use_is_refused_at_start(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(StartupError, match=f"127.0.0.1:{port} for OTLP/gRPC: address in use"):
            start_server(tmp_path / "data", grpc={"addr": f"127.0.0.1:{port}"})


def test_a_call_in_flight_is_answered_through_a_shutdown(tmp_path: Path) -> None:
    server = start_server(tmp_path / "data")
    entered, release = hold_journal(server)
    trace_id = new_trace_id()
    out: list[Any] = []

    def send() -> None:
        try:
            out.append(
                grpc_export(server, trace_request(simple_spans(5, trace_id)).SerializeToString())
            )
        except grpc.RpcError as exc:
            out.append(exc)

    sender = threading.Thread(target=send)
    sender.start()
    assert entered.wait(10)
    stopping = threading.Thread(target=server.stop)
    stopping.start()
    time.sleep(0.5)  # the listener has stopped taking calls; this one is still waiting
    with (
        pytest.raises(grpc.RpcError) as refused,
        grpc.insecure_channel(server.grpc_endpoint) as channel,
    ):
        channel.unary_unary(TRACE_EXPORT)(b"", timeout=5)
    assert refused.value.code() == grpc.StatusCode.UNAVAILABLE
    release.set()
    sender.join(20)
    stopping.join(60)
    (reply,) = out
    assert not isinstance(reply, grpc.RpcError), reply
    assert not reply.HasField("partial_success")


@pytest.mark.parametrize("server_kind", ["grpcio", "native"])
def test_both_listeners_answer_auth_and_exports_alike(tmp_path: Path, server_kind: str) -> None:
    server = start_server(tmp_path / "data", grpc={"server": server_kind}, auth={"tokens": [TOKEN]})
    try:
        kind = NativeGrpcReceiver if server_kind == "native" else OtlpGrpcReceiver
        assert isinstance(server.pipeline.grpc, kind)
        body = trace_request(simple_spans(2, new_trace_id())).SerializeToString()
        with grpc.insecure_channel(server.grpc_endpoint) as channel:
            with pytest.raises(grpc.RpcError) as denied:
                channel.unary_unary(TRACE_EXPORT)(body, timeout=10)
            assert denied.value.code() == grpc.StatusCode.UNAUTHENTICATED
            metadata = (("authorization", f"Bearer {TOKEN}"),)
            assert channel.unary_unary(TRACE_EXPORT)(body, timeout=10, metadata=metadata) == b""
        denied_labels = {"protocol": "grpc", "signal": "traces", "status": "unauthenticated"}
        assert server.metric("sextant_receiver_requests_total", denied_labels) == 1
    finally:
        server.stop()


def test_a_gzip_body_over_the_limit_once_inflated_is_resource_exhausted(tmp_path: Path) -> None:
    server = start_server(tmp_path / "data", limits={"max_request_bytes": 20_000})
    try:
        inflated = trace_request(simple_spans(400)).SerializeToString()
        assert len(inflated) > 20_000
        with (
            grpc.insecure_channel(
                server.grpc_endpoint, compression=grpc.Compression.Gzip
            ) as channel,
            pytest.raises(grpc.RpcError) as refused,
        ):
            channel.unary_unary(TRACE_EXPORT)(inflated, timeout=10)
        assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        trace_id = new_trace_id()
        grpc_export(server, trace_request(simple_spans(2, trace_id)).SerializeToString())
        assert stored_spans(server, trace_id) == 2
    finally:
        server.stop()


def test_a_client_that_leaves_mid_call_leaves_the_listener_serving(tmp_path: Path) -> None:
    server = start_server(tmp_path / "data")
    try:
        entered, release = hold_journal(server)
        left = trace_request(simple_spans(3, new_trace_id())).SerializeToString()
        with (
            grpc.insecure_channel(server.grpc_endpoint) as channel,
            pytest.raises(grpc.RpcError) as gave_up,
        ):
            channel.unary_unary(TRACE_EXPORT)(left, timeout=0.5)
        # the client's deadline, or the listener's own cut at the deadline it was sent
        ended = (grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.CANCELLED)
        assert gave_up.value.code() in ended
        assert entered.wait(10)  # the call goes on without its client
        release.set()  # its answer now finds no one waiting
        trace_id = new_trace_id()
        grpc_export(server, trace_request(simple_spans(4, trace_id)).SerializeToString())
        assert stored_spans(server, trace_id) == 4
    finally:
        server.stop()
