"""Conversations sent by the real OTel SDK: each turn its own trace, from one service's tracer
provider, stamped by that service's clock (which may be behind or ahead of ours)."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass

from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.trace import Status, StatusCode

from tests.support.agents import provider_for
from tests.support.server import RunningServer


@dataclass(frozen=True)
class Call:
    """One tool call of a turn: its arguments and result, or the error it raised."""

    name: str
    arguments: dict
    result: str = "ok"
    error: str | None = None


class Service:
    """One service's agent, exporting through its own provider (its own service.name)."""

    def __init__(
        self,
        server: RunningServer,
        service: str,
        version: str,
        agent: str = "support-agent",
        names: str = "gen_ai.conversation.id",
    ) -> None:
        exporter = OTLPSpanExporter(endpoint=server.grpc_endpoint, insecure=True)
        self.provider = provider_for(exporter, service=service, version=version)
        self.agent = agent
        self.names = names  # the attribute naming the conversation on every span

    def turn(self, conversation: str, calls: list[Call], ago: float = 0.0) -> str:
        """One turn of `conversation`, stamped `ago` seconds in the past (negative: ahead);
        its trace id once exported."""
        tracer = self.provider.get_tracer("agent_loop")
        clock = time.time_ns() - int(ago * 1e9)
        attrs = {self.names: conversation}
        root = tracer.start_span(
            f"invoke_agent {self.agent}",
            start_time=clock,
            attributes={
                **attrs,
                "gen_ai.operation.name": "invoke_agent",
                "gen_ai.agent.name": self.agent,
            },
        )
        inside = trace.set_span_in_context(root)
        for call in calls:
            clock += 2_000_000
            span = tracer.start_span(
                f"execute_tool {call.name}",
                context=inside,
                start_time=clock,
                attributes={
                    **attrs,
                    "gen_ai.operation.name": "execute_tool",
                    "gen_ai.tool.name": call.name,
                    "gen_ai.tool.call.arguments": json.dumps(call.arguments),
                    **({} if call.error else {"gen_ai.tool.call.result": call.result}),
                },
            )
            if call.error:
                span.set_attribute("error.type", call.error)
                span.set_status(Status(StatusCode.ERROR, call.error))
            clock += 2_000_000
            span.end(end_time=clock)
        root.end(end_time=clock + 1_000_000)
        self.provider.force_flush()
        return format(root.get_span_context().trace_id, "032x")

    def shutdown(self) -> None:
        self.provider.shutdown()
