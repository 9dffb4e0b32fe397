"""Agent runs for tests: the demo's scripted agents, plus runs only tests use, sent by the real
OTel SDK span by span."""

from __future__ import annotations

from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import TracerProvider

from collector.demo.agents import AgentScript, provider_for, trace_id_of
from tests.support.server import RunningServer

__all__ = [
    "AgentScript",
    "booking_run",
    "provider_for",
    "refund_run",
    "support_run",
    "trace_id_of",
]


def booking_run(provider: TracerProvider) -> str:
    script = AgentScript(provider.get_tracer("agent_loop"))
    with script.agent("travel-agent", "Book LIS-OSL", "Booked SK0836.") as root:
        script.chat([("search_flights", {"origin": "LIS", "destination": "OSL"})])
        script.tool("search_flights", {"origin": "LIS", "destination": "OSL"}, '["SK0836"]')
        script.chat([("hold_seat", {"flight_id": "SK0836"})])
        script.tool("hold_seat", {"flight_id": "SK0836"}, "HLD-1")
        script.chat()
    return trace_id_of(root)


def support_run(server: RunningServer, approve: bool = True, user: str = "mira") -> str:
    """A support-desk run that changes an account, asking for approval first unless told not to."""
    headers = {k.lower(): v for k, v in server.auth_headers.items()}
    exporter = OTLPSpanExporter(endpoint=server.grpc_endpoint, insecure=True, headers=headers)
    provider = provider_for(exporter, service="support-desk")
    script = AgentScript(provider.get_tracer("support"))
    with script.agent(
        "support-agent", "Change my e-mail", "Done.", **{"enduser.id": "mira"}
    ) as root:
        script.chat([("lookup_customer", {"customer_id": "C-1"})])
        script.tool("lookup_customer", {"customer_id": "C-1"}, **{"enduser.id": user})
        if approve:
            asked = {"change": "email", "customer_id": "C-1"}
            script.chat([("request_approval", asked)])
            script.tool(
                "request_approval",
                asked,
                "approved",
                **{"sextant.approval.status": "approved", "enduser.id": user},
            )
        write = {"customer_id": "C-1", "email": "new"}
        script.chat([("update_account", write)])
        script.tool("update_account", write, **{"enduser.id": user})
        script.chat()
    provider.shutdown()
    return trace_id_of(root)


def refund_run(server: RunningServer, approve: bool) -> str:
    """A support-desk run that issues a refund, approved first or not."""
    provider = provider_for(
        OTLPSpanExporter(endpoint=server.grpc_endpoint, insecure=True), service="support-desk"
    )
    script = AgentScript(provider.get_tracer("support"))
    with script.agent("support-agent", "Refund order 42", "Refunded.") as root:
        script.chat([("lookup_customer", {"order": 42})])
        script.tool("lookup_customer", {"order": 42}, "C-1")
        if approve:
            script.tool(
                "request_approval",
                {"refund": 42},
                "approved",
                **{"sextant.approval.status": "approved"},
            )
        script.tool("issue_refund", {"order": 42, "amount": 120})
        script.chat()
    provider.shutdown()
    return trace_id_of(root)
