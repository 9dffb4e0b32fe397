"""MCP evidence on the steps: which calls went through an MCP server, which server, and one
tool step per call however many layers traced it.

What real instrumentations write (tests/testdata/otlp-multi/README.md):
- the OTel MCP conventions (the Python `mcp` SDK's own spans): `mcp.method.name`,
  `mcp.protocol.version`, `mcp.session.id`, `jsonrpc.request.id`, `server.address`; a client
  span `MCP send tools/call {tool}` whose child is the server's `tools/call {tool}`;
- OpenLLMetry's MCP instrumentation (scope `opentelemetry.instrumentation.mcp...`): a `{tool}.tool`
  span under the framework's own tool span, `tools/list.mcp` with the listed tools in
  `traceloop.entity.output`, and `ResponseStreamWriter` spans with `mcp.request.id`.
The server is `mcp.server.name`, else `server.address[:server.port]`, else the service.name of
the server's own span in the trace (an MCP server that traces itself names itself by its
resource); None when the trace does not say (stdio without server spans).
"""

from __future__ import annotations

from typing import Any

import orjson

from collector.assembler.spans import SpanView
from evaluators.model import Step

OPENLLMETRY_SCOPE = "opentelemetry.instrumentation.mcp"
FACTS = (
    ("mcp.session.id", "session_id"),
    ("mcp.protocol.version", "protocol_version"),
    ("jsonrpc.request.id", "request_id"),
    ("mcp.request.id", "request_id"),
)


def method_of(span: SpanView) -> str | None:
    method = span.attrs.get("mcp.method.name")
    if isinstance(method, str) and method:
        return method
    name = span.row["name"] or ""
    if (span.row.get("scope_name") or "").startswith(OPENLLMETRY_SCOPE):
        if name.endswith(".mcp"):
            return name.removesuffix(".mcp")  # initialize.mcp, tools/list.mcp
        if name.endswith(".tool"):
            return "tools/call"
    return None


def listed_tools(span: SpanView) -> list[str] | None:
    """The tool names a `tools/list` answer held, when the span recorded the answer."""
    for key in ("traceloop.entity.output", "mcp.response.value"):
        value = span.attrs.get(key)
        try:
            answer = orjson.loads(value) if isinstance(value, str) else value
        except orjson.JSONDecodeError:
            continue
        if isinstance(answer, dict) and isinstance(answer.get("tools"), list):
            return sorted(
                {t["name"] for t in answer["tools"] if isinstance(t, dict) and "name" in t}
            )
    return None


def facts_of(span: SpanView) -> dict[str, Any] | None:
    """What one span says of its MCP call; None for a span that is not MCP."""
    method = method_of(span)
    if method is None:
        return None
    attrs = span.attrs
    facts: dict[str, Any] = {"method": method}
    for key, name in FACTS:
        if attrs.get(key) not in (None, "") and name not in facts:
            facts[name] = str(attrs[key])
    server = attrs.get("mcp.server.name")
    if not server and attrs.get("server.address"):
        port = attrs.get("server.port")
        server = f"{attrs['server.address']}:{port}" if port else attrs["server.address"]
    if not server and span.row.get("kind") == "SERVER":
        server = span.row["service_name"]
    if server:
        facts["server"] = str(server)
    if method == "tools/list":
        tools = listed_tools(span)
        if tools is not None:
            facts["tools"] = tools
    return facts


def merge_mcp_calls(steps: list[Step], spans: dict[str, SpanView]) -> None:
    """Put each MCP span's facts on its step, and fold an MCP tool step into the tool step
    above it of the same tool (the framework's tool, then the MCP client, then the server: one
    call). The folded step stays in the tree as `other`, so the call is counted once."""
    by_span = {s.span_id: s for s in steps}
    for step in steps:
        facts = facts_of(spans[step.span_id])
        if facts is None:
            continue
        step.mcp = facts
        outer = tool_above(step, by_span)
        if step.is_tool_call and outer is not None and outer.tool_name == step.tool_name:
            outer.mcp = {**facts, **(outer.mcp or {})}  # the outer step's own facts first
            step.kind = step.span_kind = "other"


def tool_above(step: Step, by_span: dict[str, Step]) -> Step | None:
    parent = by_span.get(step.parent_span_id or "")
    while parent is not None:
        if parent.is_tool_call:
            return parent
        parent = by_span.get(parent.parent_span_id or "")
    return None
