"""OTLP/JSON bodies to protobuf messages: hex ids to bytes, then the protobuf JSON mapping."""

from __future__ import annotations

import base64
from typing import Any

import orjson
from google.protobuf import json_format
from google.protobuf.message import Message
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from collector.errors import MalformedRequest

# An id that is not hex becomes a value of the wrong length, so the span alone is rejected
# (counted in partial_success) instead of the whole request.
EMPTY = ""
WRONG_LENGTH = base64.b64encode(b"\x00").decode()


def hex_to_base64(value: Any, invalid: str) -> Any:
    if not isinstance(value, str):
        return value
    try:
        return base64.b64encode(bytes.fromhex(value)).decode()
    except ValueError:
        return invalid


def items(parent: Any, key: str) -> list[Any]:
    value = parent.get(key) if isinstance(parent, dict) else None
    return value if isinstance(value, list) else []


def fix_ids(record: dict[str, Any], keys: tuple[tuple[str, str], ...]) -> None:
    for key, invalid in keys:
        if key in record:
            record[key] = hex_to_base64(record[key], invalid)


SPAN_IDS = (("traceId", EMPTY), ("spanId", EMPTY), ("parentSpanId", WRONG_LENGTH))
LINK_IDS = (("traceId", WRONG_LENGTH), ("spanId", WRONG_LENGTH))
LOG_IDS = (("traceId", WRONG_LENGTH), ("spanId", WRONG_LENGTH))


def load(body: bytes) -> dict[str, Any]:
    try:
        doc = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise MalformedRequest(f"request body is not valid JSON: {exc}") from exc
    if not isinstance(doc, dict):
        raise MalformedRequest("request body must be a JSON object (an OTLP export request)")
    return doc


def parse(doc: dict[str, Any], message: Message) -> Message:
    try:
        return json_format.ParseDict(doc, message, ignore_unknown_fields=True)
    except RecursionError as exc:
        raise MalformedRequest("OTLP/JSON request is nested too deeply") from exc
    except (json_format.ParseError, ValueError, TypeError) as exc:
        name = type(message).__name__
        raise MalformedRequest(f"not a valid OTLP/JSON {name}: {exc}") from exc


def traces_from_json(body: bytes) -> ExportTraceServiceRequest:
    doc = load(body)
    for rs in items(doc, "resourceSpans"):
        for ss in items(rs, "scopeSpans"):
            for span in items(ss, "spans"):
                if isinstance(span, dict):
                    fix_ids(span, SPAN_IDS)
                    for link in items(span, "links"):
                        if isinstance(link, dict):
                            fix_ids(link, LINK_IDS)
    return parse(doc, ExportTraceServiceRequest())  # type: ignore[return-value]


def logs_from_json(body: bytes) -> ExportLogsServiceRequest:
    doc = load(body)
    for rl in items(doc, "resourceLogs"):
        for sl in items(rl, "scopeLogs"):
            for record in items(sl, "logRecords"):
                if isinstance(record, dict):
                    fix_ids(record, LOG_IDS)
    return parse(doc, ExportLogsServiceRequest())  # type: ignore[return-value]


def to_json(message: Message) -> bytes:
    """A response in the protobuf JSON mapping (int64 as strings, lowerCamelCase)."""
    return orjson.dumps(json_format.MessageToDict(message))
