"""The OTLP/JSON decoder builds exactly what protobuf's own JSON mapping would."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from collector.errors import MalformedRequest
from collector.normalize.wire import decode_request
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
def test_same_rows_as_the_protobuf_json_mapping(path: Path) -> None:
    body = path.read_bytes()
    as_json = decode_request("traces", "json", body, 1 << 20)
    as_protobuf = decode_request("traces", "protobuf", oracle(body).SerializeToString(), 1 << 20)
    assert (as_json.rows, as_json.rejected) == (as_protobuf.rows, as_protobuf.rejected)
    assert as_json.table.to_pylist() == as_protobuf.table.to_pylist()


def traces_from_json(body: bytes) -> list[dict]:
    decoded = decode_request("traces", "json", body, 1000)
    return decoded.table.to_pylist() if decoded.table is not None else []


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

    def span(v):
        doc = value(v)
        ids = {"traceId": "0af7651916cd43dd8448eb211c80319c", "spanId": "b7ad6b7169203331"}
        doc["resourceSpans"][0]["scopeSpans"] = [{"spans": [ids]}]
        return doc

    # JSON has no NaN or Infinity: the store holds them as null
    for raw, expected in (
        ({"doubleValue": "NaN"}, "null"),
        ({"doubleValue": "Infinity"}, "null"),
        ({"doubleValue": 2}, "2.0"),
        ({"intValue": "123"}, "123"),
        ({"intValue": 123}, "123"),
        ({"intValue": " 1_000 "}, "1000"),
    ):
        (row,) = traces_from_json(json.dumps(span(raw)).encode())
        assert row["resource_attributes"] == '{"k":' + expected + "}"


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
    decoded = decode_request("logs", "json", json.dumps(body).encode(), 1000)
    assert (decoded.rows, decoded.rejected) == (0, {"invalid_span_id": 1})  # not hex: alone
    record = body["resourceLogs"][0]["scopeLogs"][0]["logRecords"][0]
    record["spanId"] = "b7ad6b7169203331"
    (row,) = decode_request("logs", "json", json.dumps(body).encode(), 1000).table.to_pylist()
    assert row["trace_id"] == "0af7651916cd43dd8448eb211c80319c"
    assert (row["event_name"], json.loads(row["body"])) == ("e", {"a": []})


def test_enum_names_are_read_as_well_as_numbers() -> None:
    doc = {
        "resourceSpans": [
            {
                "scopeSpans": [
                    {
                        "spans": [
                            {
                                "traceId": "0af7651916cd43dd8448eb211c80319c",
                                "spanId": "b7ad6b7169203331",
                                "kind": "SPAN_KIND_CLIENT",
                                "status": {"code": "STATUS_CODE_ERROR"},
                            }
                        ]
                    }
                ]
            }
        ]
    }
    (row,) = traces_from_json(json.dumps(doc).encode())
    assert (row["kind"], row["status_code"]) == ("CLIENT", "ERROR")
