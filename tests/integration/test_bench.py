"""`sextant bench` drives a real server; what it reports as accepted is what the store holds."""

from __future__ import annotations

import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from collector.bench.runner import BenchOptions, run_bench
from tests.support.server import RunningServer, serve


@pytest.mark.parametrize("protocol", ["grpc", "http/protobuf", "http/json"])
def test_bench_reports_what_was_stored(server: RunningServer, protocol: str) -> None:
    endpoint = server.grpc_endpoint if protocol == "grpc" else f"{server.http_url}/v1/traces"
    report = run_bench(
        BenchOptions(
            endpoint=endpoint,
            protocol=protocol,
            concurrency=2,
            duration=20,
            traces=30,
            spans_per_request=50,
        )
    )
    assert not report.errors
    assert report.requests_ok == 6
    assert report.spans_accepted == report.spans_sent == 300
    assert server.query("SELECT count(*), count(DISTINCT trace_id) FROM spans")[0] == (300, 30)
    steps = dict(server.query("SELECT step_kind, count(*) FROM spans GROUP BY 1"))
    assert steps == {"agent": 30, "llm": 150, "tool": 120}
    assert len(report.latencies) == 6


def test_bench_command_prints_figures(server: RunningServer) -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "collector.cli",
            "bench",
            "--endpoint",
            server.grpc_endpoint,
            "--duration",
            "1",
            "--concurrency",
            "2",
            "--spans-per-request",
            "10",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert "accepted spans/s" in result.stdout
    assert "p99" in result.stdout
    accepted = int(result.stdout.split("spans accepted")[1].split()[0])
    assert accepted > 0
    assert server.query("SELECT count(*) FROM spans")[0][0] == accepted


def test_bench_against_a_dead_endpoint_reports_errors_and_ends() -> None:
    report = run_bench(
        BenchOptions(endpoint="127.0.0.1:1", protocol="http/protobuf", duration=0.5, concurrency=1)
    )
    assert report.requests_ok == 0
    assert sum(report.errors.values()) >= 1


@pytest.mark.parametrize("protocol", ["grpc", "http/protobuf"])
def test_bench_retries_a_refusal_after_the_wait_it_asks_for(tmp_path, protocol: str) -> None:
    server = serve(tmp_path, ingest={"max_wait_seconds": 0})  # refuse any export beside another
    try:
        endpoint = server.grpc_endpoint if protocol == "grpc" else f"{server.http_url}/v1/traces"
        options = BenchOptions(
            endpoint=endpoint,
            protocol=protocol,
            concurrency=4,
            duration=60,
            traces=40,
            spans_per_request=50,
            retry=True,
        )
        report = run_bench(options)
        assert report.retried > 0  # as an SDK exporter does, told when by RetryInfo/Retry-After
        assert not report.errors
        assert report.spans_accepted == report.spans_sent == 400
        assert server.query("SELECT count(*) FROM spans")[0][0] == 400
    finally:
        server.stop()


class RefusingEndpoint(BaseHTTPRequestHandler):
    """Refuses every export retryably, asking for a wait of a second (an overloaded collector)."""

    requests = 0

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        type(self).requests += 1
        self.send_response(503)
        self.send_header("Retry-After", "1")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


def test_an_exporter_refused_past_the_end_stops_instead_of_resending_at_once() -> None:
    endpoint = ThreadingHTTPServer(("127.0.0.1", 0), RefusingEndpoint)
    threading.Thread(target=endpoint.serve_forever, daemon=True).start()
    try:
        options = BenchOptions(
            endpoint=f"http://127.0.0.1:{endpoint.server_port}/v1/traces",
            protocol="http/protobuf",
            concurrency=3,
            duration=0.5,  # shorter than the wait asked for: no retry fits in the run
            spans_per_request=20,
            retry=True,
        )
        report = run_bench(options)
    finally:
        endpoint.shutdown()
        endpoint.server_close()
    # One refused export per exporter, as SDK exporters (which wait as told) would leave;
    # not a burst of fresh requests, each refused and counted failed, until the run ends.
    assert RefusingEndpoint.requests == 3
    assert report.errors == {"HTTP 503 (refused until the end)": 3}
    assert report.requests_ok == report.retried == 0
