"""OTLP/HTTP sends (`sextant replay`'s resend, the evaluation-events exporter) against real
loopback servers: redirects elsewhere are refused, and error text keeps no credential."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from collector.otlp_sender import Sender, SendError

KEY = "team-key-6f1c2a9e"


class Recorder:
    """A loopback HTTP server that records each request's path and headers and answers with
    `answer(handler)`."""

    def __init__(self, answer: Callable[[BaseHTTPRequestHandler], None]) -> None:
        self.seen: list[tuple[str, str, dict[str, str]]] = []
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            def do_any(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                self.rfile.read(length)
                recorder.seen.append((self.command, self.path, dict(self.headers)))
                answer(self)

            do_GET = do_POST = do_any

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def servers() -> Iterator[list[Recorder]]:
    made: list[Recorder] = []
    yield made
    for server in made:
        server.close()


def ok(handler: BaseHTTPRequestHandler) -> None:
    handler.send_response(200)
    handler.send_header("Content-Length", "0")
    handler.end_headers()


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
def test_a_redirect_to_another_port_is_not_followed(servers: list[Recorder], status: int) -> None:
    elsewhere = Recorder(ok)
    servers.append(elsewhere)

    def redirect(handler: BaseHTTPRequestHandler) -> None:
        handler.send_response(status)
        handler.send_header("Location", f"{elsewhere.url}/v1/traces")
        handler.send_header("Content-Length", "0")
        handler.end_headers()

    first = Recorder(redirect)
    servers.append(first)
    sender = Sender(first.url, "http/protobuf", {"Authorization": f"Bearer {KEY}"})
    with pytest.raises(SendError, match="another origin") as raised:
        sender.send(ExportTraceServiceRequest(), timeout=5)
    assert len(first.seen) == 1
    assert first.seen[0][2]["Authorization"] == f"Bearer {KEY}"
    assert elsewhere.seen == []  # neither the request nor its headers reached the other port
    assert not raised.value.retryable


def test_an_error_echoing_the_headers_keeps_none_of_their_values(
    servers: list[Recorder],
) -> None:
    def echo(handler: BaseHTTPRequestHandler) -> None:
        body = f"bad request: {dict(handler.headers)}".encode()
        handler.send_response(400)
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)

    server = Recorder(echo)
    servers.append(server)
    headers = {"X-Honeycomb-Team": KEY, "Authorization": "Bearer tok-81b7d0c4"}
    with pytest.raises(SendError) as raised:
        Sender(server.url, "http/protobuf", headers).send(ExportTraceServiceRequest(), timeout=5)
    message = str(raised.value)
    assert "HTTP 400" in message and "bad request" in message
    assert KEY not in message and "tok-81b7d0c4" not in message


@pytest.mark.parametrize("status", [301, 302, 303])
def test_a_redirect_that_would_drop_the_body_is_not_followed(
    servers: list[Recorder], status: int
) -> None:
    def answer(handler: BaseHTTPRequestHandler) -> None:
        if handler.path == "/v1/traces":
            handler.send_response(status)
            handler.send_header("Location", "/moved/v1/traces")
        else:
            handler.send_response(200)
        handler.send_header("Content-Length", "0")
        handler.end_headers()

    server = Recorder(answer)
    servers.append(server)
    with pytest.raises(SendError, match="would turn the POST into a GET"):
        Sender(server.url, "http/protobuf", {}).send(ExportTraceServiceRequest(), timeout=5)
    assert [(method, path) for method, path, _ in server.seen] == [("POST", "/v1/traces")]
