"""Record `tests/testdata/otlp-multi/python_sdk-genai_semconv-two_services.otlp.json`: two
services that reuse one conversation id, each exporting through its own OTel SDK tracer provider
(its own `service.name`) with the official OTLP/HTTP exporter to a loopback receiver that keeps
the body of every Export request.

Not run by the tests. Needs opentelemetry-sdk and opentelemetry-exporter-otlp-proto-http
(the versions used are in the README beside the capture):

    python scripts/record-captures/two_services.py tests/testdata/otlp-multi
"""

from __future__ import annotations

import base64
import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from google.protobuf.json_format import MessageToDict
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.trace import Status, StatusCode

CONVERSATION = "user-4711-9f2c"
DAY_NS = 86400 * 10**9
BODIES: list[bytes] = []


class Receiver(BaseHTTPRequestHandler):
    """OTLP/HTTP: keeps each body as received, answers an empty success."""

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        BODIES.append(body)
        reply = ExportTraceServiceResponse().SerializeToString()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def log_message(self, *args: object) -> None:
        pass


def provider(endpoint: str, service: str, version: str) -> TracerProvider:
    resource = Resource.create(
        {
            "service.name": service,
            "service.version": version,
            "deployment.environment.name": "staging",
        }
    )
    p = TracerProvider(resource=resource)
    p.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint)))
    return p


def turn(
    p: TracerProvider,
    agent: str,
    question: str,
    calls: list[tuple[str, dict, str | None, str | None]],
    answer: str,
    skew_ns: int = 0,
) -> None:
    """One turn, its own trace: `invoke_agent` and one `execute_tool` span per call (name,
    arguments, result, error type), stamped by a clock `skew_ns` off; flushed as one request."""
    tracer = p.get_tracer("agent_loop", "1.0.0")
    clock = time.time_ns() + skew_ns
    conv = {"gen_ai.conversation.id": CONVERSATION}
    root = tracer.start_span(
        f"invoke_agent {agent}",
        start_time=clock,
        attributes={
            **conv,
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": agent,
            "gen_ai.input.messages": json.dumps(
                [{"role": "user", "parts": [{"type": "text", "content": question}]}]
            ),
        },
    )
    inside = trace.set_span_in_context(root)
    for n, (name, arguments, result, error) in enumerate(calls):
        clock += 3_000_000
        attrs = {
            **conv,
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": name,
            "gen_ai.tool.call.id": f"call_{agent[:4]}_{n}",
            "gen_ai.tool.call.arguments": json.dumps(arguments),
        }
        if result is not None:
            attrs["gen_ai.tool.call.result"] = result
        span = tracer.start_span(f"execute_tool {name}", context=inside, start_time=clock)
        span.set_attributes(attrs)
        if error is not None:
            span.set_attribute("error.type", error)
            span.set_status(Status(StatusCode.ERROR, error))
        clock += 4_000_000
        span.end(end_time=clock)
    root.set_attribute(
        "gen_ai.output.messages",
        json.dumps([{"role": "assistant", "parts": [{"type": "text", "content": answer}]}]),
    )
    root.end(end_time=clock + 2_000_000)
    p.force_flush()
    time.sleep(0.3)  # turns a user takes one after another, never in the same request


def rendered(body: bytes) -> dict:
    """The protobuf JSON mapping, ids as lowercase hex (as in the other captures)."""
    request = ExportTraceServiceRequest.FromString(body)
    doc = MessageToDict(request, use_integers_for_enums=True)
    for rs in doc["resourceSpans"]:
        for ss in rs["scopeSpans"]:
            for span in ss["spans"]:
                for key in ("traceId", "spanId", "parentSpanId"):
                    if key in span:
                        span[key] = base64.b64decode(span[key]).hex()
    return doc


def main(out: Path) -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    endpoint = f"http://127.0.0.1:{server.server_address[1]}/v1/traces"
    support = provider(endpoint, "support-desk", "3.1.0")
    billing = provider(endpoint, "billing-desk", "1.4.0")
    customer = {"customer_id": "C-1042"}
    turn(
        billing,
        "billing-agent",
        "Refund my last invoice.",
        [
            ("request_approval", {"action": "refund", **customer}, '{"approved": true}', None),
            ("charge_card", {**customer, "amount": -49.0}, None, "CardDeclined"),
        ],
        "The refund was approved but the card refused it; we will retry.",
    )
    turn(
        support,
        "support-agent",
        "Change my e-mail to mira@example.org.",
        [
            ("lookup_customer", customer, '{"tier": "gold"}', None),
            ("update_account", {**customer, "email": "mira@example.org"}, "ok", None),
        ],
        "Done: your e-mail is now mira@example.org.",
    )
    turn(
        billing,
        "billing-agent",
        "Try the refund again.",
        [("charge_card", {**customer, "amount": -49.0}, None, "CardDeclined")],
        "The card refused the refund again.",
    )
    turn(  # a billing host whose clock runs a day fast
        billing,
        "billing-agent",
        "Any news?",
        [("lookup_customer", customer, '{"tier": "gold"}', None)],
        "Nothing new yet.",
        skew_ns=DAY_NS,
    )
    support.shutdown()
    billing.shutdown()
    server.shutdown()
    spans = [rs for body in BODIES for rs in rendered(body)["resourceSpans"]]
    lines = ['{"resourceSpans":[']
    for i, rs in enumerate(spans):
        head = {k: v for k, v in rs.items() if k != "scopeSpans"}
        lines.append(json.dumps(head, separators=(",", ":"))[:-1] + ',"scopeSpans":[')
        for j, ss in enumerate(rs["scopeSpans"]):
            scope = {k: v for k, v in ss.items() if k != "spans"}
            lines.append(json.dumps(scope, separators=(",", ":"))[:-1] + ',"spans":[')
            for k, span in enumerate(ss["spans"]):
                comma = "," if k < len(ss["spans"]) - 1 else ""
                lines.append(json.dumps(span, separators=(",", ":")) + comma)
            lines.append("]}" + ("," if j < len(rs["scopeSpans"]) - 1 else ""))
        lines.append("]}" + ("," if i < len(spans) - 1 else ""))
    lines.append("]}")
    path = out / "python_sdk-genai_semconv-two_services.otlp.json"
    path.write_text("\n".join(lines) + "\n")
    print(f"{path}: {len(BODIES)} Export requests")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
