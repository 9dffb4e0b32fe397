"""MCP evidence on the steps: which calls went through an MCP server, which server, and one
tool step per call however many layers traced it.

What real instrumentations write (tests/testdata/otlp-multi/README.md):
- the OTel MCP conventions (the Python `mcp` SDK's own spans): `mcp.method.name`,
  `mcp.protocol.version`, `mcp.session.id`, `jsonrpc.request.id`, `server.address`; a client
  span `MCP send tools/call {tool}` whose child is the server's `tools/call {tool}` (SERVER);
- OpenLLMetry's MCP instrumentation (scope `opentelemetry.instrumentation.mcp...`, every span
  INTERNAL): a `{tool}.tool` span under the framework's own tool span, `tools/list.mcp` with the
  listed tools in `traceloop.entity.output`, and `ResponseStreamWriter` spans with
  `mcp.request.id`. The client's writer sends the request; the server's writer, a child of it
  through the context carried in the request's `_meta` (a remote parent), sends the answer.

Who the server is: what the server's own spans in the trace say (its `mcp.server.name`, the
name OpenLLMetry's FastMCP spans give it, else its resource's service.name unless that is its
caller's too), never what the client claims when the server speaks for itself. A client's
claim (`mcp.server.name`) that the server's own spans contradict is kept as `claimed_server`:
the MCP rules fail it. Without a server span, the client's claim, else its
`server.address[:port]`, is the server (`server_source: client`); None when nothing in the
trace says (stdio without server spans), or when the server's spans give no name apart.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import orjson

from collector.assembler.spans import SpanView, remote_parent
from evaluators.model import Step

OPENLLMETRY_SCOPE = "opentelemetry.instrumentation.mcp"
SDK_SCOPE = "mcp-python-sdk"
FACTS = (
    ("mcp.session.id", "session_id"),
    ("mcp.protocol.version", "protocol_version"),
    ("jsonrpc.request.id", "request_id"),
    ("mcp.request.id", "request_id"),
)
# A process that sets no service.name gets the SDK's default: it names nobody.
UNNAMED_SERVICES = ("unknown_service",)


def openllmetry(span: SpanView) -> bool:
    return (span.row.get("scope_name") or "").startswith(OPENLLMETRY_SCOPE)


def method_of(span: SpanView) -> str | None:
    method = span.attrs.get("mcp.method.name")
    if isinstance(method, str) and method:
        return method
    name = span.row["name"] or ""
    if openllmetry(span):
        if name.endswith(".mcp"):
            return name.removesuffix(".mcp")  # initialize.mcp, tools/list.mcp
        if name.endswith(".tool"):
            return "tools/call"
    if span.row.get("step_kind") == "tool" and span.attrs.get("mcp.server.name"):
        return "tools/call"  # an agent's own tool span naming the MCP server it calls
    return None


def is_mcp_span(span: SpanView) -> bool:
    """A span of the MCP protocol (a request, its answer, a stream writer)."""
    scope = span.row.get("scope_name") or ""
    return method_of(span) is not None or openllmetry(span) or scope == SDK_SCOPE


def server_side(span: SpanView) -> bool:
    """A span the MCP server wrote about itself: the SDK's SERVER spans, OpenLLMetry's FastMCP
    server span, and OpenLLMetry's answer writer (the one stream writer whose parent is the
    client's, in another process)."""
    if span.row.get("kind") == "SERVER":
        return method_of(span) is not None
    if not openllmetry(span):
        return False
    if span.attrs.get("traceloop.span.kind") == "server":
        return True
    return span.row["name"] == "ResponseStreamWriter" and remote_parent(span.row)


def own_name(span: SpanView, spans: dict[str, SpanView]) -> str:
    """The name a server-side span gives its server; "" when it gives none apart from its
    caller's: a resource named like the client that called it (the same process, or a server
    left under the agent's own service.name) cannot tell the server from the agent."""
    attrs = span.attrs
    named = attrs.get("mcp.server.name")
    if isinstance(named, str) and named:
        return named
    workflow = attrs.get("traceloop.workflow.name")  # OpenLLMetry FastMCP: "{name}.mcp"
    if isinstance(workflow, str) and workflow.endswith(".mcp") and len(workflow) > 4:
        return workflow.removesuffix(".mcp")
    service = span.row.get("service_name")
    caller = spans.get(span.row.get("parent_span_id") or "")
    if caller is not None and caller.row.get("service_name") == service:
        return ""
    if isinstance(service, str) and service and not service.startswith(UNNAMED_SERVICES):
        return service
    return ""


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
    """What one span says of its MCP call; None for a span that is not an MCP request."""
    method = method_of(span)
    if method is None:
        return None
    attrs = span.attrs
    facts: dict[str, Any] = {"method": method}
    for key, name in FACTS:
        if attrs.get(key) not in (None, "") and name not in facts:
            facts[name] = str(attrs[key])
    if not server_side(span):
        if attrs.get("mcp.server.name"):
            facts["claimed_server"] = str(attrs["mcp.server.name"])
        if attrs.get("server.address"):
            port = attrs.get("server.port")
            address = attrs["server.address"]
            facts["address"] = f"{address}:{port}" if port else str(address)
    if method == "tools/list":
        tools = listed_tools(span)
        if tools is not None:
            facts["tools"] = tools
    return facts


def merge_mcp_calls(steps: list[Step], spans: dict[str, SpanView]) -> None:
    """Put each MCP span's facts on its step, the server's own name on the calls it answered,
    and fold an MCP tool step into the tool step above it of the same tool (the framework's
    tool, then the MCP client, then the server: one call). The folded step stays in the tree
    as `other`, so the call is counted once."""
    by_span = {s.span_id: s for s in steps}
    for step in steps:
        facts = facts_of(spans[step.span_id])
        if facts is not None:
            step.mcp = facts
    for step in steps:
        span = spans[step.span_id]
        if server_side(span):
            answered_by(step, own_name(span, spans), by_span, spans)
    for step in steps:
        if step.mcp is None:
            continue
        outer = tool_above(step, by_span)
        if step.is_tool_call and outer is not None and outer.tool_name == step.tool_name:
            outer.mcp = {**step.mcp, **(outer.mcp or {})}  # the outer step's own facts first
            step.kind = step.span_kind = "other"
    for step in steps:
        if step.mcp is not None:
            resolve_server(step.mcp)


def answered_by(step: Step, name: str, by_span: dict[str, Step], spans: dict[str, SpanView]):
    """Name the server on the MCP requests above its own span, up to the call that made them:
    the client's request spans and the framework's tool span of the same tool over them, no
    further (not the agent, not a tool of another name, and not another server's span when
    one server calls another). An empty `name` says the server answered without a name apart."""
    if step.mcp is not None:
        step.mcp.setdefault("own_server", name)
    tool = step.tool_name if step.is_tool_call else None
    for parent in ancestors(step, by_span):
        if server_side(spans[parent.span_id]) or parent.kind in ("agent", "llm"):
            return
        if parent.is_tool_call:
            if tool is not None and parent.tool_name != tool:
                return
            tool = parent.tool_name
            parent.mcp = parent.mcp or {"method": "tools/call"}
        if parent.mcp is not None:
            parent.mcp.setdefault("own_server", name)


def resolve_server(facts: dict[str, Any]) -> None:
    """`server`: the server's own name when its spans say it, else (no server span in the
    trace) the client's claim, else its address. A claim the server's own name contradicts
    stays as `claimed_server`. A server that answered without a name apart from its caller's
    is unnamed, whatever the client claims: the claim could not be checked."""
    if "own_server" in facts:
        own = facts.pop("own_server")
        if own:
            facts["server"], facts["server_source"] = own, "server"
            if facts.get("claimed_server") == own:
                facts.pop("claimed_server")
        return
    claimed = facts.pop("claimed_server", None)
    if claimed or facts.get("address"):
        facts["server"], facts["server_source"] = claimed or facts["address"], "client"


def ancestors(step: Step, by_span: dict[str, Step]) -> Iterator[Step]:
    """The step's parent, its parent's... up to the root (a parent cycle in bad data ends it)."""
    seen = {step.span_id}
    parent = by_span.get(step.parent_span_id or "")
    while parent is not None and parent.span_id not in seen:
        seen.add(parent.span_id)
        yield parent
        parent = by_span.get(parent.parent_span_id or "")


def tool_above(step: Step, by_span: dict[str, Step]) -> Step | None:
    return next((p for p in ancestors(step, by_span) if p.is_tool_call), None)


def housekeeping(spans: list[SpanView], steps: list[Step]) -> bool:
    """A trace of MCP protocol chatter only (`initialize`, `tools/list`,
    `notifications/initialized`, a lone stream writer): no agent, no model, no tool called.
    It is no agent run; what it says of a server's tools still counts for the inventory."""
    if not spans or not all(is_mcp_span(s) for s in spans):
        return False
    return not any((s.mcp or {}).get("method") == "tools/call" or s.is_tool_call for s in steps)
