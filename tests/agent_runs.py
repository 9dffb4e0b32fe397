"""Agent runs for tests: the demo's scripted agents, plus runs only tests use."""

from __future__ import annotations

from opentelemetry.sdk.trace import TracerProvider

from collector.demo.agents import AgentScript, provider_for, trace_id_of

__all__ = ["AgentScript", "booking_run", "provider_for", "trace_id_of"]


def booking_run(provider: TracerProvider) -> str:
    script = AgentScript(provider.get_tracer("agent_loop"))
    with script.agent("travel-agent", "Book LIS-OSL", "Booked SK0836.") as root:
        script.chat([("search_flights", {"origin": "LIS", "destination": "OSL"})])
        script.tool("search_flights", {"origin": "LIS", "destination": "OSL"}, '["SK0836"]')
        script.chat([("hold_seat", {"flight_id": "SK0836"})])
        script.tool("hold_seat", {"flight_id": "SK0836"}, "HLD-1")
        script.chat()
    return trace_id_of(root)
