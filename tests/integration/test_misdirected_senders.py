"""A sender that sends into the void is found from Sextant's side: every such request is counted
by reason, and a warning says who sent what and what to send instead, at most once a minute."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
import requests
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpExporter
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter

from tests.support.server import RunningServer, serve

MISDIRECTED = "sextant_receiver_misdirected_requests_total"
TOKEN = "s3cret-token-0123456789"


@pytest.fixture
def server(tmp_path: Path):
    running = serve(tmp_path, auth={"tokens": [TOKEN]})
    yield running
    running.stop()


def count(server: RunningServer, protocol: str, reason: str) -> float:
    return server.metric(MISDIRECTED, {"protocol": protocol, "reason": reason})


def warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name.endswith("misdirected")]


def export_one(exporter: SpanExporter) -> None:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    provider.get_tracer("t").start_span("agent run").end()
    provider.shutdown()


def test_every_reason_exists_at_zero(server: RunningServer) -> None:
    body = requests.get(f"{server.admin_url}/metrics", timeout=5).text
    for reason in ("not_found", "method_not_allowed", "unauthenticated", "unknown_json_keys"):
        assert f'{MISDIRECTED}{{protocol="http",reason="{reason}"}} 0.0' in body


def test_a_wrong_path_is_counted_and_logged_once_a_minute_with_a_hint(
    server: RunningServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    headers = {"Authorization": f"Bearer {TOKEN}", "User-Agent": "billing-agent/2.1"}
    for _ in range(3):
        reply = requests.post(f"{server.http_url}/", data=b"x", headers=headers, timeout=5)
        assert reply.status_code == 404
    assert requests.get(f"{server.http_url}/v1/traces", timeout=5).status_code == 405
    assert count(server, "http", "not_found") == 3
    assert count(server, "http", "method_not_allowed") == 1
    [wrong_path, wrong_method] = warnings(caplog)
    assert "POST /" in wrong_path and "billing-agent/2.1" in wrong_path
    assert "POST /v1/traces and /v1/logs" in wrong_path
    assert "GET /v1/traces" in wrong_method


def test_exporters_without_the_token_are_counted_per_protocol(
    server: RunningServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    export_one(HttpExporter(endpoint=f"{server.http_url}/v1/traces", timeout=5))
    export_one(GrpcExporter(endpoint=server.grpc_endpoint, insecure=True, timeout=5))
    assert count(server, "http", "unauthenticated") == 1
    assert count(server, "grpc", "unauthenticated") == 1
    assert any("Authorization: Bearer" in w and "OTel-OTLP-Exporter" in w for w in warnings(caplog))


def test_otlp_json_in_the_wrong_shape_is_told_and_counted(server: RunningServer) -> None:
    doc = {"spans": [{"traceId": "00" * 16, "spanId": "11" * 8, "name": "lost"}]}
    reply = requests.post(
        f"{server.http_url}/v1/traces",
        json=doc,
        headers={"Authorization": f"Bearer {TOKEN}"},
        timeout=5,
    )
    assert reply.status_code == 200
    partial = reply.json()["partialSuccess"]
    assert "'spans'" in partial["errorMessage"] and "resourceSpans" in partial["errorMessage"]
    assert count(server, "http", "unknown_json_keys") == 1
