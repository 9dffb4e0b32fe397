"""Asking a running collector's guard, as an agent does: plain HTTP, or gRPC."""

from __future__ import annotations

from typing import Any

import grpc
import requests

from collector.guard import wire
from tests.support.server import RunningServer


def ask(
    server: RunningServer,
    trace_id: str,
    tool: str,
    arguments: dict[str, Any] | None = None,
    *,
    tool_call_id: str | None = None,
    parent: str | None = None,
    service: str = "support-desk",
    agent: str | None = "support-agent",
    version: str | None = None,
    conversation: str | None = None,
    headers: dict[str, str] | None = None,
) -> requests.Response:
    """POST /v1/guard on the OTLP/HTTP port."""
    body: dict[str, Any] = {
        "trace_id": trace_id,
        "service": service,
        "tool": {"name": tool, "arguments": arguments or {}},
    }
    given = (
        ("agent", agent),
        ("version", version),
        ("parent_span_id", parent),
        ("conversation_id", conversation),
    )
    for key, value in given:
        if value is not None:
            body[key] = value
    if tool_call_id is not None:
        body["tool"]["tool_call_id"] = tool_call_id
    return requests.post(
        f"{server.http_url}/v1/guard",
        json=body,
        headers=server.auth_headers if headers is None else headers,
        timeout=10,
    )


def answer(server: RunningServer, trace_id: str, tool: str, **kw: Any) -> dict[str, Any]:
    reply = ask(server, trace_id, tool, **kw)
    assert reply.status_code == 200, reply.text
    return reply.json()


def ask_grpc(server: RunningServer, request: Any, token: str | None) -> Any:
    """GuardService/Check on the OTLP/gRPC port."""
    with grpc.insecure_channel(server.grpc_endpoint) as channel:
        check = channel.unary_unary(
            f"/{wire.SERVICE}/Check",
            request_serializer=lambda m: m.SerializeToString(),
            response_deserializer=wire.CheckResponse.FromString,
        )
        metadata = [("authorization", f"Bearer {token}")] if token else []
        return check(request, metadata=metadata, timeout=10)
