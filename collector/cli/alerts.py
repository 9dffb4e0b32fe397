"""`sextant alerts test` and `sextant alerts sink`: try every alert channel; receive alerts and
print them (the compose stack's receiver, or a stand-in while wiring Alertmanager)."""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from collector.cli._flags import add_command, add_format, add_url_token
from collector.clock import SystemClock

CHANNEL_COLUMNS = ["channel", "kind", "result", "http_status", "error"]
MAX_BODY_BYTES = 4 * 1024 * 1024


def register(sub: Any) -> None:
    alerts = add_command(sub, "alerts", "alert channels", "sextant alerts test")
    asub = alerts.add_subparsers(dest="alerts_command", required=True, metavar="COMMAND")
    test = add_command(
        asub,
        "test",
        "send a test alert through every configured channel; exit 1 when one fails",
        "sextant alerts test --url http://localhost:9464",
    )
    add_url_token(test)
    add_format(test)
    test.set_defaults(func=alerts_test)
    sink = add_command(
        asub,
        "sink",
        "receive webhooks (Alertmanager's or Sextant's) and print each as one JSON line",
        "sextant alerts sink --addr 0.0.0.0:5001",
    )
    sink.add_argument("--addr", default="127.0.0.1:5001", help="host:port to listen on")
    sink.set_defaults(func=alerts_sink)


def alerts_test(args: argparse.Namespace) -> int:
    from collector.cli._client import AdminClient
    from collector.cli._output import Table, emit

    doc = AdminClient(args.url, args.token, timeout=30).post_json("/api/v1/alerts/test", {})
    channels = [{**c, "result": "ok" if c["ok"] else "FAILED"} for c in doc["channels"]]
    if not channels and args.format == "table":
        print("no alert channels configured (alerts.alertmanager, alerts.webhooks)")
        return 1
    headers = ["CHANNEL", "KIND", "RESULT", "HTTP", "ERROR"]
    emit(Table(channels, CHANNEL_COLUMNS, headers), args.format, doc=doc)
    return 0 if channels and all(c["ok"] for c in channels) else 1


class SinkHandler(BaseHTTPRequestHandler):
    """Answers every POST 200 and prints `{"received_at", "path", "body"}` on one line."""

    lock = threading.Lock()

    def do_POST(self) -> None:
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            self.send_error(400, "bad Content-Length")
            return
        if length > MAX_BODY_BYTES:
            self.send_error(413, "body too large")
            return
        body = self.rfile.read(length)
        try:
            doc: Any = json.loads(body)
        except ValueError:
            doc = body.decode(errors="replace")
        received = SystemClock().now().isoformat() + "Z"  # naive UTC, as every Sextant time
        line = json.dumps({"received_at": received, "path": self.path, "body": doc})
        with self.lock:  # one whole line per request, however many arrive at once
            print(line, flush=True)
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_GET(self) -> None:
        """A liveness answer for health checks and tests."""
        body = b"sextant alert sink: POST alerts here\n"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass  # the JSON lines are the log


def alerts_sink(args: argparse.Namespace) -> int:
    from collector.config.sections import parse_addr
    from collector.errors import ConfigError

    try:
        host, port = parse_addr(args.addr)
    except ValueError as exc:
        raise ConfigError(f"--addr: {exc}") from exc
    server = ThreadingHTTPServer((host, port), SinkHandler)
    bound = server.server_address[1]
    print(f"alert sink listening on {host}:{bound}", file=sys.stderr, flush=True)
    # SIGTERM (docker stop) ends it like Ctrl-C, with exit 0.
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=server.shutdown).start())
    try:
        server.serve_forever()
    finally:
        server.server_close()
    return 0
