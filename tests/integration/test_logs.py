"""OTLP logs (GenAI message events, evaluation results) are stored with their trace and span ids."""

from __future__ import annotations

import json

import grpc
import pytest
import requests
from opentelemetry.exporter.otlp.proto.grpc._log_exporter import OTLPLogExporter as GrpcLogs
from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter as HttpLogs
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceResponse
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import SimpleLogRecordProcessor
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider

from tests.support.otlp import LOGS_EXPORT, logs_request, new_span_id, new_trace_id
from tests.support.server import RunningServer


@pytest.mark.parametrize("protocol", ["grpc", "http/protobuf"])
def test_sdk_log_events_are_stored_with_trace_context(server: RunningServer, protocol: str):
    exporter = (
        GrpcLogs(endpoint=server.grpc_endpoint, insecure=True)
        if protocol == "grpc"
        else HttpLogs(endpoint=f"{server.http_url}/v1/logs")
    )
    logs = LoggerProvider(resource=Resource.create({"service.name": "travel-desk"}))
    logs.add_log_record_processor(SimpleLogRecordProcessor(exporter))
    tracer = TracerProvider().get_tracer("t")
    with tracer.start_as_current_span("chat gpt-4.1-mini") as span:
        context = span.get_span_context()
        logs.get_logger("openai_v2").emit(
            event_name="gen_ai.choice",
            body={"index": 0, "finish_reason": "stop", "message": {"content": "Booked."}},
            attributes={"gen_ai.system": "openai"},
        )
        logs.get_logger("evals").emit(
            event_name="gen_ai.evaluation.result",
            attributes={
                "gen_ai.evaluation.name": "relevance",
                "gen_ai.evaluation.score.value": 0.92,
                "gen_ai.evaluation.score.label": "pass",
            },
        )
    logs.shutdown()

    rows = server.query_dicts(
        "SELECT * FROM logs WHERE trace_id = ? ORDER BY event_name",
        [format(context.trace_id, "032x")],
    )
    assert [r["event_name"] for r in rows] == ["gen_ai.choice", "gen_ai.evaluation.result"]
    choice, evaluation = rows
    assert choice["span_id"] == format(context.span_id, "016x")
    assert json.loads(choice["body"])["message"] == {"content": "Booked."}
    assert json.loads(choice["attributes"]) == {"gen_ai.system": "openai"}
    assert choice["service_name"] == "travel-desk"
    assert choice["scope_name"] == "openai_v2"
    assert choice["time"] is not None
    attrs = json.loads(evaluation["attributes"])
    assert attrs["gen_ai.evaluation.score.value"] == 0.92
    assert attrs["gen_ai.evaluation.score.label"] == "pass"


def test_log_records_with_bad_ids_are_rejected_alone(server: RunningServer) -> None:
    trace_id, span_id = new_trace_id(), new_span_id()
    request = logs_request(
        [
            {"trace_id": trace_id, "span_id": span_id, "event_name": "gen_ai.user.message"},
            {"event_name": "no trace context", "body": "startup"},
            {"trace_id": b"\x01" * 5, "event_name": "bad"},
        ]
    )
    with grpc.insecure_channel(server.grpc_endpoint) as channel:
        reply = ExportLogsServiceResponse.FromString(
            channel.unary_unary(LOGS_EXPORT)(request.SerializeToString())
        )
    assert reply.partial_success.rejected_log_records == 1
    assert "invalid_trace_id" in reply.partial_success.error_message
    rows = server.query("SELECT trace_id, span_id, event_name, body FROM logs ORDER BY event_name")
    assert rows == [
        (trace_id.hex(), span_id.hex(), "gen_ai.user.message", "null"),
        (None, None, "no trace context", '"startup"'),
    ]


def test_logs_over_http_json(server: RunningServer) -> None:
    trace_id = new_trace_id().hex()
    body = {
        "resourceLogs": [
            {
                "resource": {
                    "attributes": [{"key": "service.name", "value": {"stringValue": "a"}}]
                },
                "scopeLogs": [
                    {
                        "logRecords": [
                            {
                                "timeUnixNano": "1700000000000000000",
                                "traceId": trace_id,
                                "spanId": "00f067aa0ba902b7",
                                "eventName": "gen_ai.tool.message",
                                "body": {
                                    "kvlistValue": {
                                        "values": [
                                            {"key": "id", "value": {"stringValue": "call_1"}}
                                        ]
                                    }
                                },
                            }
                        ]
                    }
                ],
            }
        ]
    }
    reply = requests.post(f"{server.http_url}/v1/logs", json=body, timeout=10)
    assert reply.status_code == 200
    assert reply.json() == {}
    rows = server.query(
        "SELECT span_id, event_name, body, time FROM logs WHERE trace_id = ?", [trace_id]
    )
    assert rows[0][:3] == ("00f067aa0ba902b7", "gen_ai.tool.message", '{"id":"call_1"}')
    assert rows[0][3].year == 2023
