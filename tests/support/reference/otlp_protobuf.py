"""OTLP protobuf bodies to messages, with a clear error for bytes that are not one."""

from __future__ import annotations

from typing import TypeVar

from google.protobuf.message import DecodeError, Message
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from collector.errors import MalformedRequest

M = TypeVar("M", bound=Message)


def parse(data: bytes, message_type: type[M]) -> M:
    try:
        return message_type.FromString(data)
    except DecodeError as exc:
        raise MalformedRequest(
            f"request body is not a valid {message_type.__name__} protobuf: {exc}"
        ) from exc


def traces_from_protobuf(data: bytes) -> ExportTraceServiceRequest:
    return parse(data, ExportTraceServiceRequest)


def logs_from_protobuf(data: bytes) -> ExportLogsServiceRequest:
    return parse(data, ExportLogsServiceRequest)
