"""The gRPC messages of collector/guard/guard.proto, built from their descriptor at import (the
project compiles no protos; the .proto file is what clients compile, and a test holds the two
equal field by field)."""

from __future__ import annotations

from typing import Any

import orjson
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from collector.guard.call import GuardAnswer, GuardRequest

PACKAGE = "sextant.guard.v1"
SERVICE = f"{PACKAGE}.GuardService"
STRING = descriptor_pb2.FieldDescriptorProto.TYPE_STRING
MESSAGE = descriptor_pb2.FieldDescriptorProto.TYPE_MESSAGE
OPTIONAL = descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL
REPEATED = descriptor_pb2.FieldDescriptorProto.LABEL_REPEATED

# message -> [(field, number, repeated, message type or None)]
FIELDS: dict[str, list[tuple[str, int, bool, str | None]]] = {
    "ProposedCall": [
        ("name", 1, False, None),
        ("arguments_json", 2, False, None),
        ("kind", 3, False, None),
        ("tool_call_id", 4, False, None),
        ("mcp_server", 5, False, None),
    ],
    "CheckRequest": [
        ("trace_id", 1, False, None),
        ("parent_span_id", 2, False, None),
        ("service", 3, False, None),
        ("agent", 4, False, None),
        ("version", 5, False, None),
        ("tool", 6, False, "ProposedCall"),
        ("conversation_id", 7, False, None),
    ],
    "CheckResponse": [
        ("answer", 1, False, None),
        ("reasons", 2, True, None),
        ("evidence", 3, True, None),
        ("messages", 4, True, None),
        ("span_id", 5, False, None),
        ("decision", 6, False, None),
    ],
}


def file_descriptor() -> descriptor_pb2.FileDescriptorProto:
    proto = descriptor_pb2.FileDescriptorProto(
        name="sextant/guard/v1/guard.proto", package=PACKAGE, syntax="proto3"
    )
    for name, fields in FIELDS.items():
        message = proto.message_type.add(name=name)
        for field, number, repeated, kind in fields:
            message.field.add(
                name=field,
                number=number,
                label=REPEATED if repeated else OPTIONAL,
                type=MESSAGE if kind else STRING,
                type_name=f".{PACKAGE}.{kind}" if kind else None,
                json_name="".join(
                    w if i == 0 else w.title() for i, w in enumerate(field.split("_"))
                ),
            )
    service = proto.service.add(name="GuardService")
    service.method.add(
        name="Check",
        input_type=f".{PACKAGE}.CheckRequest",
        output_type=f".{PACKAGE}.CheckResponse",
    )
    return proto


_pool = descriptor_pool.DescriptorPool()
_pool.Add(file_descriptor())
CheckRequest: Any = message_factory.GetMessageClass(
    _pool.FindMessageTypeByName(f"{PACKAGE}.CheckRequest")
)
CheckResponse: Any = message_factory.GetMessageClass(
    _pool.FindMessageTypeByName(f"{PACKAGE}.CheckResponse")
)
ProposedCall: Any = message_factory.GetMessageClass(
    _pool.FindMessageTypeByName(f"{PACKAGE}.ProposedCall")
)


def request_of(data: bytes) -> GuardRequest:
    """A CheckRequest's bytes as the call the guard judges (pydantic checks it as for HTTP)."""
    message = CheckRequest.FromString(data)
    tool = message.tool
    arguments = orjson.loads(tool.arguments_json) if tool.arguments_json else {}
    return GuardRequest.model_validate(
        {
            "trace_id": message.trace_id,
            "parent_span_id": message.parent_span_id or None,
            "service": message.service,
            "agent": message.agent or None,
            "version": message.version or None,
            "conversation_id": message.conversation_id or None,
            "tool": {
                "name": tool.name,
                "arguments": arguments,
                "kind": tool.kind or "tool",
                "tool_call_id": tool.tool_call_id or None,
                "mcp_server": tool.mcp_server or None,
            },
        }
    )


def response_of(answer: GuardAnswer) -> bytes:
    return CheckResponse(
        answer=answer.answer.value,
        reasons=answer.reasons,
        evidence=answer.evidence,
        messages=answer.messages,
        span_id=answer.span_id,
        decision=answer.decision,
    ).SerializeToString()
