"""Spans sent by the real OpenTelemetry SDK exporters land in DuckDB whole and normalized."""

from __future__ import annotations

import json

import pytest
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (
    OTLPSpanExporter as GrpcSpanExporter,
)
from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
    OTLPSpanExporter as HttpSpanExporter,
)
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.trace import Link, SpanKind, Status, StatusCode

from tests.support.server import RunningServer


def exporter_for(server: RunningServer, protocol: str, compression: str | None):
    from opentelemetry.exporter.otlp.proto.grpc.exporter import Compression as GrpcCompression
    from opentelemetry.exporter.otlp.proto.http import Compression as HttpCompression

    if protocol == "grpc":
        return GrpcSpanExporter(
            endpoint=server.grpc_endpoint,
            insecure=True,
            compression=GrpcCompression.Gzip if compression else None,
        )
    return HttpSpanExporter(
        endpoint=f"{server.http_url}/v1/traces",
        compression=HttpCompression.Gzip if compression else HttpCompression.NoCompression,
    )


def emit_agent_run(provider: TracerProvider) -> dict[str, str]:
    """An agent run with a chat call, a tool call (with an event and a link) and a failed tool."""
    tracer = provider.get_tracer("travel_desk.agent_loop", "2.3.1")
    ids: dict[str, str] = {}
    with tracer.start_as_current_span(
        "invoke_agent travel-agent",
        kind=SpanKind.INTERNAL,
        attributes={
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": "travel-agent",
            "gen_ai.conversation.id": "conv-42",
            "enduser.id": "mira",
        },
    ) as root:
        ids["root"] = format(root.get_span_context().span_id, "016x")
        ids["trace"] = format(root.get_span_context().trace_id, "032x")
        with tracer.start_as_current_span(
            "chat gpt-4.1-mini",
            kind=SpanKind.CLIENT,
            attributes={
                "gen_ai.operation.name": "chat",
                "gen_ai.request.model": "gpt-4.1-mini",
                "gen_ai.response.model": "gpt-4.1-mini-2025-04-14",
                "gen_ai.usage.input_tokens": 412,
                "gen_ai.usage.output_tokens": 22,
                "gen_ai.request.temperature": 0.2,
                "gen_ai.response.finish_reasons": ["tool_call"],
                "gen_ai.request.stream": False,
            },
        ) as chat:
            ids["chat"] = format(chat.get_span_context().span_id, "016x")
        with tracer.start_as_current_span(
            "execute_tool search_flights",
            attributes={
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "search_flights",
                "gen_ai.tool.call.id": "call_1",
                "gen_ai.tool.call.arguments": json.dumps({"origin": "LIS", "destination": "OSL"}),
                "gen_ai.tool.call.result": '[{"flight_id": "SK0836"}]',
            },
            links=[Link(chat.get_span_context(), {"link.reason": "requested_by"})],
        ) as tool:
            tool.add_event("cache.miss", {"cache.key": "LIS-OSL"})
            ids["tool"] = format(tool.get_span_context().span_id, "016x")
        with tracer.start_as_current_span(
            "execute_tool hold_seat",
            attributes={"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "hold_seat"},
        ) as failed:
            failed.set_attribute("error.type", "SeatInventoryUnavailable")
            failed.set_status(Status(StatusCode.ERROR, "no seats left"))
            ids["failed"] = format(failed.get_span_context().span_id, "016x")
    return ids


@pytest.mark.parametrize(
    ("protocol", "compression"),
    [("grpc", None), ("grpc", "gzip"), ("http/protobuf", None), ("http/protobuf", "gzip")],
)
def test_sdk_exporter_spans_are_stored_whole(
    server: RunningServer, protocol: str, compression: str | None
) -> None:
    resource = Resource.create(
        {"service.name": "travel-desk", "service.version": "2.3.1", "deployment.environment": "t"}
    )
    provider = TracerProvider(resource=resource)
    provider.add_span_processor(SimpleSpanProcessor(exporter_for(server, protocol, compression)))
    ids = emit_agent_run(provider)
    provider.shutdown()

    rows = {
        r["span_id"]: r
        for r in server.query_dicts(
            "SELECT * FROM spans WHERE trace_id = ? ORDER BY start_time_unix_nano", [ids["trace"]]
        )
    }
    assert set(rows) == {ids["root"], ids["chat"], ids["tool"], ids["failed"]}

    root = rows[ids["root"]]
    assert root["parent_span_id"] is None
    assert root["name"] == "invoke_agent travel-agent"
    assert root["kind"] == "INTERNAL"
    assert root["step_kind"] == "agent"
    assert root["agent_name"] == "travel-agent"
    assert root["conversation_id"] == "conv-42"
    assert root["user_id"] == "mira"
    assert root["service_name"] == "travel-desk"
    assert root["service_version"] == "2.3.1"
    assert root["scope_name"] == "travel_desk.agent_loop"
    assert root["scope_version"] == "2.3.1"
    resource_attrs = json.loads(root["resource_attributes"])
    assert resource_attrs["service.name"] == "travel-desk"
    assert resource_attrs["telemetry.sdk.language"] == "python"
    assert root["end_time_unix_nano"] >= root["start_time_unix_nano"] > 0
    assert root["start_time"].year >= 2024
    assert root["status_code"] == "UNSET"

    chat = rows[ids["chat"]]
    assert chat["parent_span_id"] == ids["root"]
    assert chat["kind"] == "CLIENT"
    assert chat["step_kind"] == "llm"
    assert chat["model"] == "gpt-4.1-mini-2025-04-14"
    assert (chat["input_tokens"], chat["output_tokens"]) == (412, 22)
    attrs = json.loads(chat["attributes"])
    assert attrs["gen_ai.usage.input_tokens"] == 412
    assert attrs["gen_ai.request.temperature"] == 0.2
    assert attrs["gen_ai.response.finish_reasons"] == ["tool_call"]
    assert attrs["gen_ai.request.stream"] is False

    tool = rows[ids["tool"]]
    assert tool["step_kind"] == "tool"
    assert tool["tool_name"] == "search_flights"
    assert tool["tool_call_id"] == "call_1"
    assert json.loads(tool["tool_arguments"]) == {"origin": "LIS", "destination": "OSL"}
    assert tool["tool_result"] == '[{"flight_id": "SK0836"}]'
    (event,) = json.loads(tool["events"])
    assert event["name"] == "cache.miss"
    assert event["attributes"] == {"cache.key": "LIS-OSL"}
    assert event["time_unix_nano"] >= tool["start_time_unix_nano"]
    (link,) = json.loads(tool["links"])
    assert (link["trace_id"], link["span_id"]) == (ids["trace"], ids["chat"])
    assert link["attributes"] == {"link.reason": "requested_by"}

    failed = rows[ids["failed"]]
    assert failed["status_code"] == "ERROR"
    assert failed["status_message"] == "no seats left"
    assert failed["error_type"] == "SeatInventoryUnavailable"

    proto = "grpc" if protocol == "grpc" else "http"
    labels = {"protocol": proto, "signal": "traces"}
    assert server.metric("sextant_receiver_items_accepted_total", labels) == 4
    assert server.metric("sextant_store_rows_written_total", {"table": "spans"}) == 4
