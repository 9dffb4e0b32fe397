"""The OTLP/JSON decoder builds exactly what protobuf's own JSON mapping would."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from collector.errors import MalformedRequest
from collector.normalize.otlp_json import logs_from_json, traces_from_json
from tests.support.paths import TESTDATA

FILES = sorted(
    [
        *(TESTDATA / "otlp").glob("*[!n].json"),
        *(TESTDATA / "otlp-captures").glob("*.otlp.json"),
        *(TESTDATA / "otlp-captures").glob("*.body.json"),
    ]
)


def oracle(body: bytes) -> ExportTraceServiceRequest:
    """protobuf's ParseDict after turning the hex ids into base64."""
    doc = json.loads(body)
    for rs in doc.get("resourceSpans", []):
        for ss in rs.get("scopeSpans", []):
            for span in ss.get("spans", []):
                for holder in [span, *span.get("links", [])]:
                    for key in ("traceId", "spanId", "parentSpanId"):
                        if holder.get(key):
                            holder[key] = base64.b64encode(bytes.fromhex(holder[key])).decode()
    return json_format.ParseDict(doc, ExportTraceServiceRequest(), ignore_unknown_fields=True)


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_same_message_as_the_protobuf_json_mapping(path: Path) -> None:
    body = path.read_bytes()
    assert traces_from_json(body) == oracle(body)


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ({"resourceSpans": "x"}, "resourceSpans: expected a list"),
        (
            {"resourceSpans": [{"scopeSpans": [{"spans": [{"name": 5}]}]}]},
            "resourceSpans[0].scopeSpans[0].spans[0].name: expected a string",
        ),
        (
            {"resourceSpans": [{"scopeSpans": [{"spans": [{"kind": "SERVER"}]}]}]},
            "spans[0].kind: expected an integer, got 'SERVER'",
        ),
        (
            {"resourceSpans": [{"scopeSpans": [{"spans": [{"startTimeUnixNano": "-1"}]}]}]},
            "startTimeUnixNano: -1 is out of range",
        ),
        (
            {
                "resourceSpans": [
                    {"resource": {"attributes": [{"key": "k", "value": {"intValue": 1.5}}]}}
                ]
            },
            "resource.attributes[0].value.intValue: expected an integer, got 1.5",
        ),
        (
            {
                "resourceSpans": [
                    {"resource": {"attributes": [{"key": "k", "value": {"bytesValue": "!"}}]}}
                ]
            },
            "bytesValue: expected base64",
        ),
    ],
)
def test_wrong_types_name_the_field(doc: dict, message: str) -> None:
    with pytest.raises(MalformedRequest) as caught:
        traces_from_json(json.dumps(doc).encode())
    assert message in str(caught.value)


def test_special_doubles_and_numeric_strings() -> None:
    def value(v):
        return {"resourceSpans": [{"resource": {"attributes": [{"key": "k", "value": v}]}}]}

    for raw, expected in (
        ({"doubleValue": "NaN"}, "nan"),
        ({"doubleValue": "Infinity"}, "inf"),
        ({"doubleValue": 2}, "2.0"),
        ({"intValue": "123"}, "123"),
    ):
        request = traces_from_json(json.dumps(value(raw)).encode())
        (kv,) = request.resource_spans[0].resource.attributes
        field = kv.value.WhichOneof("value")
        assert str(getattr(kv.value, field)) == expected


def test_logs_ids_and_body() -> None:
    body = {
        "resourceLogs": [
            {
                "scopeLogs": [
                    {
                        "logRecords": [
                            {
                                "traceId": "0af7651916cd43dd8448eb211c80319c",
                                "spanId": "zz",
                                "eventName": "e",
                                "body": {
                                    "kvlistValue": {
                                        "values": [{"key": "a", "value": {"arrayValue": {}}}]
                                    }
                                },
                            }
                        ]
                    }
                ]
            }
        ]
    }
    request = logs_from_json(json.dumps(body).encode())
    record = request.resource_logs[0].scope_logs[0].log_records[0]
    assert record.trace_id.hex() == "0af7651916cd43dd8448eb211c80319c"
    assert len(record.span_id) == 1  # not hex: the record is rejected alone later
    assert record.body.kvlist_value.values[0].value.WhichOneof("value") == "array_value"


def test_enum_names_are_read_as_well_as_numbers() -> None:
    doc = {
        "resourceSpans": [
            {
                "scopeSpans": [
                    {
                        "spans": [
                            {"kind": "SPAN_KIND_CLIENT", "status": {"code": "STATUS_CODE_ERROR"}}
                        ]
                    }
                ]
            }
        ]
    }
    (span,) = traces_from_json(json.dumps(doc).encode()).resource_spans[0].scope_spans[0].spans
    assert (span.kind, span.status.code) == (3, 2)
