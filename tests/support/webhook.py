"""A local HTTP endpoint that receives webhook and Alertmanager deliveries."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Receiver:
    """An HTTP endpoint that answers with the next status of a script, then 200."""

    def __init__(self, statuses: list[int]) -> None:
        self.statuses = list(statuses)
        self.received: list[dict] = []
        self.lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                with outer.lock:
                    status = outer.statuses.pop(0) if outer.statuses else 200
                    outer.received.append(
                        {"status": status, "headers": dict(self.headers), "body": body}
                    )
                self.send_response(status)
                self.end_headers()

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/hook"

    def delivered(self) -> list[dict]:
        with self.lock:
            return [json.loads(r["body"]) for r in self.received if r["status"] == 200]

    def close(self) -> None:
        self.server.shutdown()
