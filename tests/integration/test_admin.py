"""The admin port: Prometheus metrics (text and OpenMetrics), liveness and readiness."""

from __future__ import annotations

import grpc
import requests
from prometheus_client.parser import text_string_to_metric_families

from collector.lifecycle import deadline_in
from collector.receivers.ingest import REASONS
from tests.support.otlp import TRACE_EXPORT, simple_spans, trace_request
from tests.support.server import RunningServer, start_server

DOCUMENTED = {
    "sextant_receiver_requests",
    "sextant_receiver_request_duration_seconds",
    "sextant_receiver_items_received",
    "sextant_receiver_items_accepted",
    "sextant_receiver_items_rejected",
    "sextant_receiver_items_truncated",
    "sextant_store_commit_duration_seconds",
    "sextant_store_commit_rows",
    "sextant_store_queue_rows",
    "sextant_store_queue_limit_rows",
    "sextant_store_queue_dropped",
    "sextant_store_rows_written",
    "sextant_store_duplicate_spans",
    "sextant_store_commit_errors",
}


def test_metrics_count_what_happened(server: RunningServer) -> None:
    request = trace_request(simple_spans(3))
    request.resource_spans[0].scope_spans[0].spans[0].trace_id = b"short"
    with grpc.insecure_channel(server.grpc_endpoint) as channel:
        channel.unary_unary(TRACE_EXPORT)(request.SerializeToString())
    server.pipeline.writer.settled().result(5)  # acknowledged from the journal, then loaded

    reply = requests.get(f"{server.admin_url}/metrics", timeout=10)
    assert reply.status_code == 200
    assert reply.headers["Content-Type"].startswith("text/plain")
    families = {f.name: f for f in text_string_to_metric_families(reply.text)}
    assert set(families) >= DOCUMENTED

    def sample(family: str, suffix: str = "_total", **labels: str) -> float:
        for s in families[family].samples:
            if s.name == family + suffix and all(s.labels.get(k) == v for k, v in labels.items()):
                return s.value
        raise AssertionError(f"no sample {family}{suffix} {labels}")

    assert sample("sextant_receiver_items_received", protocol="grpc", signal="traces") == 3
    assert sample("sextant_receiver_items_accepted", protocol="grpc", signal="traces") == 2
    assert sample("sextant_receiver_items_rejected", reason="invalid_trace_id") == 1
    assert sample("sextant_receiver_requests", protocol="grpc", status="ok") == 1
    assert sample("sextant_store_rows_written", table="spans") == 2
    assert sample("sextant_store_commit_duration_seconds", "_count") >= 1
    assert sample("sextant_store_queue_limit_rows", "") == 200_000


def test_openmetrics_is_served_when_asked_for(server: RunningServer) -> None:
    reply = requests.get(
        f"{server.admin_url}/metrics",
        headers={"Accept": "application/openmetrics-text; version=1.0.0"},
        timeout=10,
    )
    assert reply.headers["Content-Type"].startswith("application/openmetrics-text")
    assert reply.text.rstrip().endswith("# EOF")


def test_health_and_readiness(server: RunningServer) -> None:
    assert requests.get(f"{server.admin_url}/healthz", timeout=10).json() == {"status": "ok"}
    assert requests.get(f"{server.admin_url}/readyz", timeout=10).json() == {"status": "ready"}
    # a writer that stopped makes the service unready
    server.pipeline.writer.shutdown(deadline_in(5))
    reply = requests.get(f"{server.admin_url}/readyz", timeout=10)
    assert reply.status_code == 503
    assert reply.json()["reason"] == "store writer is not running"


def test_counters_that_health_alerts_read_are_exposed_at_zero_from_the_start(tmp_path) -> None:
    """A series born at its first increment has no earlier sample, so `increase()` would miss
    a single rejected span or failed delivery; these label sets exist at 0 before anything."""
    channels = {"webhooks": [{"name": "ops-hook", "url": "http://127.0.0.1:9/hook"}]}
    server = start_server(tmp_path, alerts=channels)
    try:
        text = requests.get(f"{server.admin_url}/metrics", timeout=10).text
    finally:
        server.stop()
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }

    def at_zero(name: str, **labels: str) -> bool:
        return samples.get((name, tuple(sorted(labels.items())))) == 0.0

    for protocol in ("grpc", "http"):
        for reason in REASONS:
            assert at_zero(
                "sextant_receiver_items_rejected_total",
                protocol=protocol,
                signal="traces",
                reason=reason,
            ), (protocol, reason)
        assert at_zero("sextant_receiver_items_accepted_total", protocol=protocol, signal="traces")
    assert at_zero("sextant_alerts_failed_attempts_total", channel="ops-hook")
    assert at_zero("sextant_alerts_dropped_total", channel="ops-hook", why="undeliverable")
    assert at_zero("sextant_alerts_queued", channel="ops-hook")
    assert at_zero("sextant_alerts_channel_failing", channel="ops-hook")
    assert at_zero("sextant_rules_reloads_total", result="refused")
    for reason in ("queue_full", "commit_failed"):
        assert at_zero("sextant_store_queue_dropped_total", reason=reason)
    assert at_zero("sextant_store_commit_errors_total")
    assert at_zero("sextant_rules_packs_refused")
    # every rule in force can show its first evaluator error
    assert at_zero("sextant_evaluator_errors_total", pack="default", rule="no-tool-loops")
    assert samples[("sextant_decision_last_round_timestamp_seconds", ())] > 0
