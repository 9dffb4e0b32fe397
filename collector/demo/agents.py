"""Scripted agent runs emitted through the real OpenTelemetry SDK with GenAI attributes: the
demo's simulated agents, and the tests' traffic."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter
from opentelemetry.trace import SpanKind, Status, StatusCode, Tracer


def provider_for(exporter: SpanExporter, service: str = "travel-desk", version: str = "2.3.1"):
    """Simple (per-span) export: every span is its own request, children before parents."""
    provider = TracerProvider(
        resource=Resource.create({"service.name": service, "service.version": version})
    )
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider


def trace_id_of(span: Any) -> str:
    return format(span.get_span_context().trace_id, "032x")


class AgentScript:
    """Writes the spans of a scripted agent run: chat turns, tool calls, nested agents."""

    def __init__(self, tracer: Tracer) -> None:
        self.tracer = tracer
        self.turn = 0
        self.requested: dict[str, list[str]] = {}  # tool name -> call ids asked for, not yet run

    @contextmanager
    def agent(self, name: str, user_input: str, answer: str, **attrs: Any) -> Iterator[Any]:
        with self.tracer.start_as_current_span(
            f"invoke_agent {name}",
            attributes={
                "gen_ai.operation.name": "invoke_agent",
                "gen_ai.agent.name": name,
                "gen_ai.input.messages": json.dumps(
                    [{"role": "user", "parts": [{"type": "text", "content": user_input}]}]
                ),
                "gen_ai.output.messages": json.dumps(
                    [{"role": "assistant", "parts": [{"type": "text", "content": answer}]}]
                ),
                **attrs,
            },
        ) as span:
            yield span

    def chat(self, calls: list[tuple[str, dict]] | None = None, model: str = "gpt-4.1-mini"):
        parts = [
            {"type": "tool_call", "id": f"call_{self.turn}_{i}", "name": n, "arguments": a}
            for i, (n, a) in enumerate(calls or [])
        ]
        for i, (n, _) in enumerate(calls or []):
            self.requested.setdefault(n, []).append(f"call_{self.turn}_{i}")
        with self.tracer.start_as_current_span(
            f"chat {model}",
            kind=SpanKind.CLIENT,
            attributes={
                "gen_ai.operation.name": "chat",
                "gen_ai.request.model": model,
                "gen_ai.usage.input_tokens": 400 + 100 * self.turn,
                "gen_ai.usage.output_tokens": 20,
                "gen_ai.output.messages": json.dumps(
                    [{"role": "assistant", "parts": parts or [{"type": "text", "content": "ok"}]}]
                ),
            },
        ):
            self.turn += 1

    def tool(
        self, name: str, arguments: dict, result: str = "ok", error: str | None = None, **attrs: Any
    ) -> None:
        # the id of the model's request for this tool, as an instrumented tool span carries it
        asked = self.requested.get(name)
        call_id = {"gen_ai.tool.call.id": asked.pop(0)} if asked else {}
        with self.tracer.start_as_current_span(
            f"execute_tool {name}",
            attributes={
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": name,
                **call_id,
                "gen_ai.tool.call.arguments": json.dumps(arguments),
                **({} if error else {"gen_ai.tool.call.result": result}),
                **attrs,
            },
        ) as span:
            if error:
                span.set_attribute("error.type", error)
                span.set_status(Status(StatusCode.ERROR, f"{error}: failed"))
