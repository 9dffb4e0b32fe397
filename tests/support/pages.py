"""A page of another origin on loopback: what an attacker's site serves to the browser."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class PageServer:
    """Serves `html` at every path on 127.0.0.1 (a port of its own: another origin than the
    collector's) and remembers the paths browsers asked for."""

    def __init__(self, html: str = "<!doctype html><title>elsewhere</title><p>elsewhere</p>"):
        self.asked: list[str] = []
        served = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                served.asked.append(self.path)
                body = html.encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def url(self, host: str = "127.0.0.1") -> str:
        return f"http://{host}:{self.port}"

    def __enter__(self) -> PageServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
