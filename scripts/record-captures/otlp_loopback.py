"""Loopback helpers for recording OTLP captures: a receiver that keeps the raw body of every
OTLP/HTTP Export request and writes them as OTLP/JSON (protobuf JSON mapping, hex ids), and a
scripted OpenAI-compatible Chat Completions endpoint. Not run by the tests."""

from __future__ import annotations

import base64
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from google.protobuf.json_format import MessageToDict
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)


class Receiver:
    """OTLP/HTTP protobuf receiver on 127.0.0.1 keeping every request body in arrival order."""

    def __init__(self) -> None:
        self.bodies: list[bytes] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                receiver.bodies.append(body)
                answer = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.endpoint = f"http://127.0.0.1:{self.server.server_port}/v1/traces"

    def write(self, path: Path) -> dict[str, Any]:
        """All requests as one OTLP/JSON document, one `resourceSpans` element per request."""
        resource_spans = []
        for body in self.bodies:
            request = ExportTraceServiceRequest()
            request.ParseFromString(body)
            doc = MessageToDict(request, use_integers_for_enums=True)
            for rs in doc.get("resourceSpans", []):
                for ss in rs.get("scopeSpans", []):
                    for span in ss.get("spans", []):
                        for key in ("traceId", "spanId", "parentSpanId"):
                            if key in span:
                                span[key] = base64.b64decode(span[key]).hex()
                resource_spans.append(rs)
        out = {"resourceSpans": resource_spans}
        path.write_text(layout(out))
        return out


def compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def layout(doc: dict[str, Any]) -> str:
    """Compact JSON with one span per line, as the other captures."""
    parts = []
    for rs in doc["resourceSpans"]:
        scopes = []
        for ss in rs["scopeSpans"]:
            head = {k: v for k, v in ss.items() if k != "spans"}
            spans = ",\n".join(compact(span) for span in ss["spans"])
            scopes.append(compact(head)[:-1] + ',"spans":[\n' + spans + "]}")
        head = {k: v for k, v in rs.items() if k != "scopeSpans"}
        parts.append(compact(head)[:-1] + ',"scopeSpans":[\n' + ",\n".join(scopes) + "]}")
    return '{"resourceSpans":[\n' + ",\n".join(parts) + "]}\n"


class ScriptedModel:
    """Chat Completions on 127.0.0.1 answering each request with the next scripted message."""

    def __init__(self, script: list[dict[str, Any]]) -> None:
        self.script = list(script)
        self.calls = 0
        model = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers["Content-Length"]))
                message = model.script[model.calls]
                n = model.calls
                model.calls += 1
                calls = len(message.get("tool_calls") or [])
                usage = {
                    "prompt_tokens": 412 + 137 * n,
                    "completion_tokens": 17 * calls + 5 if calls else 46,
                }
                usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
                answer = json.dumps(
                    {
                        "id": f"chatcmpl-mcp{n:02d}scripted",
                        "object": "chat.completion",
                        "created": 1780000000 + n,
                        "model": "gpt-4.1-mini-2025-04-14",
                        "choices": [
                            {
                                "index": 0,
                                "message": {"role": "assistant", "content": None, **message},
                                "finish_reason": "tool_calls" if calls else "stop",
                            }
                        ],
                        "usage": usage,
                    }
                ).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.base_url = f"http://127.0.0.1:{self.server.server_port}/v1"


def tool_call(n: int, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": f"call_mcp{n:02d}",
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(arguments)},
    }
