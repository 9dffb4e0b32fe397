"""Seeded random rounds of agent traces for the native builder's differential test: span trees
of agents, model calls, tool calls, retrievals and MCP layers with the attributes real
instrumentations write (OTel GenAI, OpenInference, OpenLLMetry, the MCP SDK), random
arguments, results, errors, Unicode, deep JSON, huge numbers,
missing and remote parents, cycles and clock skew; encoded as OTLP protobuf and decoded by the
collector's decoder, as the pipeline stores spans. A few rows are then changed as the store
could hold them (spans stored by an earlier version): deep argument JSON, a span without a name,
a span sent twice (with the same or other attributes)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import pyarrow as pa
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from collector.assembler.spans import SPAN_FIELDS
from collector.assembler.work import Closing
from collector.normalize.wire import decode_request
from tests.support.otlp import kv
from tests.support.picking import QuickRandom, pick

BASE_TIME = 1_790_000_000_000_000_000
NOW = datetime(2026, 12, 1, 12, 0, 0)
MODELS = ["gpt-4o-mini", "gpt-4.1", "claude-3-5-sonnet-latest", "GPT-4O", "mystery-model", ""]
TOOLS = ["search_flights", "hold_seat", "request_approval", "get_Approval_status", "lookup", "ß"]
SCOPES = [
    "tests",
    "openinference.instrumentation.langchain",
    "opentelemetry.instrumentation.openai",
    "opentelemetry.instrumentation.mcp.fastmcp",
    "mcp-python-sdk",
]
WORDS = ["approved", "Denied", " pending ", "granted", "reject", "ok", "é\u0301", "日本", "😀", ""]
INT64_MAX = 2**63 - 1


@dataclass
class Round:
    """One generated round: its stored spans and the traces to close."""

    spans: pa.Table
    closing: list[Closing]
    closed_at: datetime
    overrides: dict[str, Any] = field(default_factory=dict)


def put_all(into: Any, attributes: dict[str, Any]) -> None:
    """Attributes added to a repeated `KeyValue` field in place (quicker than building each
    message and copying it in)."""
    for key, value in attributes.items():
        item = into.add()
        item.key = key
        put(item.value, value)


def put(into: Any, value: Any) -> None:
    """A value into an `AnyValue`, as an exporter sends it; integers past int64 are sent as
    doubles, as OTLP cannot carry them."""
    if isinstance(value, bool):
        into.bool_value = value
    elif isinstance(value, int):
        if -(2**63) <= value < 2**63:
            into.int_value = value
        else:
            into.double_value = float(value)
    elif isinstance(value, float):
        into.double_value = value
    elif isinstance(value, str):
        into.string_value = value
    elif isinstance(value, list):
        into.array_value.SetInParent()
        values = into.array_value.values
        for v in value:
            put(values.add(), v)
    elif isinstance(value, dict):
        into.kvlist_value.SetInParent()
        put_all(into.kvlist_value.values, value)
    elif value is None:
        into.SetInParent()  # an empty value
    else:
        raise TypeError(f"no OTLP value for {type(value).__name__}")


class Generator:
    def __init__(self, seed: int) -> None:
        self.r = QuickRandom(seed)

    # ---- values ----------------------------------------------------------------------
    def text(self) -> str:
        r = self.r
        return pick(
            r,
            lambda: r.choice(WORDS),
            lambda: "".join(
                r.choice("abcXYZ _-\n\t\"'\\{}[]é日😀\u00a0\u2028") for _ in range(r.randint(0, 12))
            ),
            lambda: f"word{r.randint(0, 99)}",
        )

    def scalar(self) -> Any:
        r = self.r
        return pick(
            r,
            *(None, True, False, 0, 1, -1, lambda: r.randint(-(2**70), 2**70), INT64_MAX),
            *(2**64, 1.5, -0.0, 1e16, 1e-7, lambda: r.random() * 10 ** r.randint(-10, 30)),
            self.text,
        )

    def value(self, depth: int = 0) -> Any:
        r = self.r
        if depth > 3 or r.random() < 0.4:
            return self.scalar()
        if r.random() < 0.5:
            return [self.value(depth + 1) for _ in range(r.randint(0, 3))]
        return {self.text() or "k": self.value(depth + 1) for _ in range(r.randint(0, 3))}

    def deep(self, levels: int) -> str:
        text = "{}" if self.r.random() < 0.5 else "[1]"
        for _ in range(levels):
            text = '{"a":' + text + "}" if self.r.random() < 0.7 else "[" + text + "]"
        return text

    def arguments(self) -> Any:
        r = self.r
        pick = r.random()
        if pick < 0.5:
            return json.dumps({"q": self.text(), "n": self.scalar(), "nested": self.value()})
        if pick < 0.6:
            return self.text()  # a one-argument tool's bare value
        if pick < 0.7:
            return json.dumps(self.value())
        if pick < 0.75:
            return self.deep(r.choice([50, 130, 200, 260]))
        if pick < 0.8:
            return {"city": self.text()}  # an object value, not JSON text
        return json.dumps({"city": r.choice(["Paris", "Zürich"])})

    def result(self) -> Any:
        r = self.r
        word = r.choice(WORDS)
        return pick(
            r,
            word,
            lambda: json.dumps({"approved": r.choice([True, False, 1, "yes"])}),
            lambda: json.dumps({"status": word}),
            lambda: json.dumps({"decision": word}),
            lambda: f"{{'approved': {r.choice(['True', 'False', 'None'])}}}",
            lambda: f"{{'status': '{r.choice(['approved', 'denied'])}', 'n': [1, 2.5, -3]}}",
            lambda: json.dumps({"output": json.dumps({"decision": word}), "kwargs": {}}),
            lambda: json.dumps({"type": "tool", "data": {"content": json.dumps({"status": word})}}),
            lambda: json.dumps({"lc": 1, "type": "constructor", "kwargs": {"content": word}}),
            lambda: json.dumps({"content": [{"type": "text", "text": word}], "isError": False}),
            lambda: json.dumps({"structuredContent": {"approved": True}, "content": []}),
            lambda: json.dumps([{"type": "text", "text": "approved"}]),
            "[APPROVED] by manager",
            "{not json",
            lambda: json.dumps(self.value()),
            f'"{word}"',
        )

    # ---- spans ---------------------------------------------------------------------------
    def new_id(self, n: int) -> bytes:
        return (self.r.getrandbits(8 * n) | 1).to_bytes(n, "big")  # never all zeros

    def trace(self) -> list[dict[str, Any]]:
        """One trace's span specs (each with a resource and scope)."""
        r = self.r
        trace_id = self.new_id(16)
        services = [r.choice(["travel-desk", "crm-server", "unknown_service:python", ""])]
        services.append(r.choice(["crm-server", services[0]]))
        count = r.choice([1, 2, 3, 5, 8, 12, 20, 30])
        specs: list[dict[str, Any]] = []
        t0 = BASE_TIME + r.randint(0, 10**12)
        call_ids: list[tuple[str, str, Any]] = []
        for _ in range(count):
            parent = None
            if specs and r.random() < 0.92:
                parent = r.choice(specs)
            kind = r.choices(
                ["agent", "llm", "tool", "tools_node", "retrieval", "mcp", "other", "create"],
                [3, 5, 6, 1, 1, 3, 2, 0.3],
            )[0]
            start = (parent["start"] if parent else t0) + r.randint(-(10**6), 10**9)
            if r.random() < 0.1 and specs:
                start = specs[-1]["start"]  # same start: order by end, then id
            spec: dict[str, Any] = {
                "trace_id": trace_id,
                "span_id": self.new_id(8),
                "parent_span_id": parent["span_id"] if parent else b"",
                "start": max(0, start),
                "end": max(0, start + r.randint(0, 10**9)),
                "kind": 1,
                "status": 0,
                "flags": 0,
                "attributes": {},
                "events": [],
                "scope": r.choice(SCOPES),
                "service": services[0],
            }
            getattr(self, f"span_{kind}")(spec, call_ids)
            self.decorate(spec)
            specs.append(spec)
        self.break_tree(specs)
        return specs

    def break_tree(self, specs: list[dict[str, Any]]) -> None:
        r = self.r
        if r.random() < 0.1:
            r.choice(specs)["parent_span_id"] = self.new_id(8)  # a parent never received
        if r.random() < 0.05 and len(specs) > 1:
            a, b = r.sample(specs, 2)
            a["parent_span_id"], b["parent_span_id"] = b["span_id"], a["span_id"]  # a cycle
        if r.random() < 0.03:
            s = r.choice(specs)
            s["parent_span_id"] = s["span_id"]
        if r.random() < 0.1:
            s = r.choice(specs)
            s["parent_span_id"] = s["parent_span_id"] or self.new_id(8)
            s["flags"] = 0x301  # its parent is remote

    def decorate(self, spec: dict[str, Any]) -> None:
        r = self.r
        attrs = spec["attributes"]
        if r.random() < 0.1:
            spec["status"] = 2  # ERROR
        if r.random() < 0.05:
            attrs["sextant.approval.status"] = r.choice(["Approved", "DENIED", 1, True, ""])
        if r.random() < 0.05:
            attrs["sextant.policy.decision"] = r.choice(["Deny", "allow", 0])
            attrs["sextant.policy.name"] = r.choice(["refunds", 42, "", ["a", 1]])
        if r.random() < 0.04:
            attrs["sextant.state.target"] = r.choice(["db.orders", 3.5, {"t": "x"}])
        if r.random() < 0.04:
            spec["events"].append(
                {"name": "decision", "attributes": {"sextant.approval.status": r.choice(WORDS)}}
            )
        if r.random() < 0.04:
            spec["events"].append(
                {"name": "policy", "attributes": {"sextant.policy.decision": "deny"}}
            )
        if r.random() < 0.05:
            attrs["sextant.case.id"] = r.choice(["case-7", 7, ""])
        if r.random() < 0.05:
            attrs["metadata"] = json.dumps(
                r.choice([{"case_id": "c-1"}, {"example_id": 3}, {"langgraph_node": "agent"}])
            )
        if r.random() < 0.05:
            attrs["dataset.example.id"] = self.scalar()
        if r.random() < 0.08:
            attrs["gen_ai.conversation.id"] = r.choice(["conv-1", "conv-2", ""])
        if r.random() < 0.05:
            attrs["user.id"] = r.choice(["u1", "", 5])
        if r.random() < 0.05:
            attrs["note"] = self.text() + " cost example create_agent langgraph_node"
        if r.random() < 0.03:
            spec["service"] = r.choice(["other-svc", "crm-server"])

    def messages(self, role: str) -> str:
        r = self.r
        out = []
        for _ in range(r.randint(0, 3)):
            m: dict[str, Any] = {"role": r.choice([role, role, "system", None])}
            if m["role"] is None:
                del m["role"]
            if r.random() < 0.8:
                m["parts"] = [
                    {"type": "text", "content": r.choice([self.text(), ""])}
                    for _ in range(r.randint(0, 2))
                ]
            else:
                m["content"] = self.text()
            out.append(m)
        return json.dumps(out)

    def span_agent(self, spec: dict[str, Any], _calls: list) -> None:
        r = self.r
        name = r.choice(["travel-agent", "paper_agent", "", "Ag\u00e9nt"])
        spec["name"] = r.choice(
            [f"invoke_agent {name}", f"{name}.agent", "Agent workflow", "LangGraph", "agent"]
        )
        attrs = spec["attributes"]
        attrs["gen_ai.operation.name"] = "invoke_agent"
        if r.random() < 0.5:
            attrs["gen_ai.agent.name"] = name
        if r.random() < 0.3:
            attrs["openinference.span.kind"] = "AGENT"
            if r.random() < 0.5:
                attrs["metadata"] = json.dumps({"langgraph_node": "agent", "langgraph_step": 1})
        if r.random() < 0.4:
            attrs["gen_ai.input.messages"] = self.messages("user")
        if r.random() < 0.4:
            attrs["gen_ai.output.messages"] = self.messages("assistant")
        if r.random() < 0.2:
            attrs["input.value"] = self.text()

    def span_create(self, spec: dict[str, Any], _calls: list) -> None:
        spec["name"] = self.r.choice(["create_agent travel", "setup"])
        spec["attributes"]["gen_ai.operation.name"] = "create_agent"

    def span_llm(self, spec: dict[str, Any], calls: list) -> None:
        r = self.r
        model = r.choice(MODELS)
        spec["name"] = f"chat {model}"
        attrs = spec["attributes"]
        style = r.choice(["genai", "openinference", "legacy"])
        if style == "openinference":
            attrs["openinference.span.kind"] = "LLM"
            attrs["llm.model_name"] = model
            attrs["llm.token_count.prompt"] = r.choice([10, 0, INT64_MAX, 412])
            attrs["llm.token_count.completion"] = r.choice([5, 17, INT64_MAX])
        else:
            attrs["gen_ai.operation.name"] = "chat"
            attrs["gen_ai.request.model"] = model
            if r.random() < 0.9:
                attrs["gen_ai.usage.input_tokens"] = r.choice([412, 0, 1, INT64_MAX, 10**6])
            if r.random() < 0.8:
                attrs["gen_ai.usage.output_tokens"] = r.choice([17, 5, INT64_MAX])
        if r.random() < 0.15:
            key = r.choice(["llm.cost.total", "gen_ai.usage.cost", "gen_ai.usage.cost_usd"])
            attrs[key] = r.choice([0.0123, 1, True, "0.5", 10**20])
        if r.random() < 0.1:
            attrs["llm.cost.prompt"] = r.choice([0.01, 2, False])
            attrs["llm.cost.completion"] = r.choice([0.02, 3, 0.1])
        requested = []
        for _ in range(r.choice([0, 0, 1, 1, 2, 3])):
            tool = r.choice(TOOLS)
            call_id = r.choice([f"call_{r.randint(0, 30)}", f"call_{r.randint(0, 30)}", 123, ""])
            args = r.choice([{"q": self.text()}, {"city": "Paris"}, {"n": 1}, "x", None])
            requested.append((call_id, tool, args))
            calls.append((call_id, tool, args))
        if style == "genai":
            attrs["gen_ai.input.messages"] = self.messages("user")
            out = json.loads(self.messages("assistant"))
            if requested:
                out.append(
                    {
                        "role": "assistant",
                        "parts": [
                            {
                                "type": "tool_call",
                                "id": c,
                                "name": t,
                                "arguments": r.choice([a, json.dumps(a)]),
                            }
                            for c, t, a in requested
                        ],
                    }
                )
            attrs["gen_ai.output.messages"] = json.dumps(out)
        elif style == "openinference":
            for i in range(r.randint(0, 2)):
                attrs[f"llm.input_messages.{i}.message.role"] = r.choice(["user", "system"])
                attrs[f"llm.input_messages.{i}.message.content"] = self.text()
            attrs["llm.output_messages.0.message.role"] = "assistant"
            attrs["llm.output_messages.0.message.content"] = self.text()
            for j, (c, t, a) in enumerate(requested):
                index = r.choice([str(j), f"0{j}", "٣" if j == 3 else str(j)])
                head = f"llm.output_messages.0.message.tool_calls.{index}.tool_call"
                attrs[f"{head}.id"] = c
                attrs[f"{head}.function.name"] = t
                attrs[f"{head}.function.arguments"] = json.dumps(a)
        else:
            for j, (c, t, a) in enumerate(requested):
                attrs[f"gen_ai.completion.0.tool_calls.{j}.id"] = c
                attrs[f"gen_ai.completion.0.tool_calls.{j}.name"] = t
                attrs[f"gen_ai.completion.0.tool_calls.{j}.arguments"] = json.dumps(a)
            attrs["gen_ai.completion.0.content"] = self.text()

    def span_tool(self, spec: dict[str, Any], calls: list) -> None:
        r = self.r
        call = r.choice(calls) if calls and r.random() < 0.7 else None
        tool = call[1] if call else r.choice(TOOLS)
        spec["name"] = f"execute_tool {tool}"
        attrs = spec["attributes"]
        if r.random() < 0.3:
            attrs["openinference.span.kind"] = "TOOL"
            attrs["tool.name"] = tool
            attrs["input.value"] = self.arguments() if not call else json.dumps(call[2])
            if r.random() < 0.8:
                attrs["output.value"] = self.result()
        else:
            attrs["gen_ai.operation.name"] = "execute_tool"
            attrs["gen_ai.tool.name"] = tool
            if r.random() < 0.6:
                attrs["gen_ai.tool.call.id"] = str(call[0]) if call else f"call_{r.randint(0, 30)}"
            if r.random() < 0.8:
                attrs["gen_ai.tool.call.arguments"] = (
                    json.dumps(call[2]) if call and r.random() < 0.5 else self.arguments()
                )
            if r.random() < 0.8:
                attrs["gen_ai.tool.call.result"] = self.result()
        if r.random() < 0.1:
            attrs["mcp.server.name"] = r.choice(["crm", ""])

    def span_tools_node(self, spec: dict[str, Any], calls: list) -> None:
        r = self.r
        call = r.choice(calls) if calls else ("call_1", r.choice(TOOLS), {"q": "x"})
        spec["name"] = "tools"
        holder = {"tool_call": {"name": call[1], "id": call[0], "args": call[2]}}
        value = {"inputs": holder} if r.random() < 0.5 else holder
        key = r.choice(["input.value", "traceloop.entity.input"])
        spec["attributes"][key] = json.dumps(value)
        spec["attributes"]["openinference.span.kind"] = "CHAIN"

    def span_retrieval(self, spec: dict[str, Any], _calls: list) -> None:
        spec["name"] = "retrieve docs"
        spec["attributes"]["gen_ai.operation.name"] = "retrieval"
        spec["attributes"]["gen_ai.data_source.id"] = "kb"

    def span_other(self, spec: dict[str, Any], _calls: list) -> None:
        spec["name"] = self.r.choice(["step", "", "handoff to paper", "chain"])
        if self.r.random() < 0.3:
            spec["attributes"]["traceloop.span.kind"] = self.r.choice(["task", "workflow", "tool"])

    def span_mcp(self, spec: dict[str, Any], _calls: list) -> None:
        r = self.r
        tool = r.choice(TOOLS)
        attrs = spec["attributes"]
        flavour = r.choice(["sdk_client", "sdk_server", "oll_tool", "oll_list", "oll_writer"])
        if flavour == "sdk_client":
            spec["scope"] = "mcp-python-sdk"
            spec["name"] = f"MCP send tools/call {tool}"
            spec["kind"] = 3
            attrs.update(
                {
                    "mcp.method.name": r.choice(["tools/call", "initialize", "tools/list"]),
                    "gen_ai.tool.name": tool,
                    "mcp.session.id": r.choice(["s1", ""]),
                    "jsonrpc.request.id": r.choice([1, "2", 0]),
                    "mcp.protocol.version": "2025-06-18",
                }
            )
            if r.random() < 0.6:
                attrs["server.address"] = r.choice(["crm.internal", "10.0.0.1"])
                if r.random() < 0.5:
                    attrs["server.port"] = r.choice([8080, 0, "443"])
            if r.random() < 0.5:
                attrs["mcp.server.name"] = r.choice(["crm", "impostor"])
        elif flavour == "sdk_server":
            spec["scope"] = "mcp-python-sdk"
            spec["name"] = f"tools/call {tool}"
            spec["kind"] = 2
            spec["service"] = r.choice(["crm-server", "unknown_service", spec["service"]])
            attrs.update({"mcp.method.name": "tools/call", "gen_ai.tool.name": tool})
            if r.random() < 0.4:
                attrs["mcp.server.name"] = r.choice(["crm", ""])
        elif flavour == "oll_tool":
            spec["scope"] = "opentelemetry.instrumentation.mcp.fastmcp"
            spec["name"] = f"{tool}.tool"
            attrs["traceloop.span.kind"] = r.choice(["tool", "server"])
            attrs["traceloop.workflow.name"] = r.choice(["crm.mcp", ".mcp", "x"])
            attrs["traceloop.entity.input"] = json.dumps({"tool_call": {"name": tool}})
        elif flavour == "oll_list":
            spec["scope"] = "opentelemetry.instrumentation.mcp.fastmcp"
            spec["name"] = r.choice(["tools/list.mcp", "initialize.mcp"])
            tools = [{"name": t} for t in r.sample(TOOLS, 3)] + [{"x": 1}, "no"]
            attrs["traceloop.entity.output"] = r.choice(
                [json.dumps({"tools": tools}), "{bad", json.dumps({"tools": "none"})]
            )
        else:
            spec["scope"] = "opentelemetry.instrumentation.mcp.fastmcp"
            spec["name"] = "ResponseStreamWriter"
            attrs["mcp.request.id"] = r.choice(["7", 8])
            if r.random() < 0.5:
                spec["flags"] = 0x301
                spec["parent_span_id"] = spec["parent_span_id"] or self.new_id(8)

    # ---- a round -------------------------------------------------------------------------
    def request(self, specs: list[dict[str, Any]]) -> bytes:
        request = ExportTraceServiceRequest()
        groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
        for s in specs:
            groups.setdefault((s["service"], s["scope"]), []).append(s)
        for (service, scope), group in groups.items():
            rs = request.resource_spans.add()
            if service:
                rs.resource.attributes.append(kv("service.name", service))
            rs.resource.attributes.append(kv("service.version", "1.0"))
            ss = rs.scope_spans.add()
            ss.scope.name = scope
            for spec in group:
                span = ss.spans.add()
                span.trace_id = spec["trace_id"]
                span.span_id = spec["span_id"]
                span.parent_span_id = spec["parent_span_id"]
                span.name = spec["name"]
                span.kind = spec["kind"]
                span.flags = spec["flags"]
                span.start_time_unix_nano = spec["start"]
                span.end_time_unix_nano = spec["end"]
                span.status.code = spec["status"]
                put_all(span.attributes, spec["attributes"])
                for e in spec["events"]:
                    event = span.events.add()
                    event.name = e["name"]
                    event.time_unix_nano = spec["start"]
                    put_all(event.attributes, e["attributes"])
        return request.SerializeToString()

    def round(self, traces: int | None = None) -> Round:
        """A round of traces sent in one request (their spans interleaved by resource and
        scope, as a batch of several agents arrives), each span received up to 5 s after the
        round began."""
        r = self.r
        traces = traces or r.choice([1, 2, 4, 8, 16, 24, 48, 96])
        specs = [s for _ in range(traces) for s in self.trace()]
        decoded = decode_request("traces", "protobuf", self.request(specs), 4096).table
        assert decoded is not None
        received = pa.array(
            [
                NOW + timedelta(microseconds=r.randint(0, 5_000_000))
                for _ in range(decoded.num_rows)
            ],
            pa.timestamp("us"),
        )
        spans = self.as_stored(
            decoded.append_column("received_at", received).select([*SPAN_FIELDS, "received_at"])
        )
        ids = list(dict.fromkeys(spans["trace_id"].to_pylist()))
        closing = [
            Closing(
                t,
                r.choice(["complete", "complete", "incomplete_timeout", "incomplete_bound"]),
                r.choice([1, 1, 2, 3]),
                r.choice([None, None, NOW + timedelta(microseconds=r.randint(0, 5_000_000))]),
            )
            for t in ids
            if r.random() < 0.95
        ]
        if r.random() < 0.1:
            closing.append(Closing("0" * 32, "complete", 1))  # deleted by retention meanwhile
        overrides = {}
        if r.random() < 0.3:
            overrides = {r.choice(["gpt-4o", "myst", "GPT"]): {"input": 1.25, "output": 3}}
        return Round(spans, closing, NOW + timedelta(seconds=30), overrides)

    def as_stored(self, spans: pa.Table) -> pa.Table:
        """A few rows as the store may hold them from an earlier version: changed column by
        column, so a round that keeps every row as decoded costs nothing here."""
        r = self.r
        rows = spans.num_rows
        deep = {i: self.deep(r.choice([200, 300, 700])) for i in range(rows) if r.random() < 0.01}
        unnamed = {i for i in range(rows) if r.random() < 0.005}
        if deep:
            arguments = spans["tool_arguments"].to_pylist()
            for i, text in deep.items():
                arguments[i] = text
            spans = replace_column(spans, "tool_arguments", arguments)
        if unnamed:
            names = spans["name"].to_pylist()
            for i in unnamed:
                names[i] = None
            spans = replace_column(spans, "name", names)
        if r.random() < 0.05:  # the same span twice
            row = r.randrange(rows)
            at = r.randrange(rows + 1)
            twice = spans.slice(row, 1)
            if r.random() < 0.5:  # sent again with other attributes
                other = r.choice([None, "{}", json.dumps({"retry": self.text()})])
                twice = replace_column(twice, "attributes", [other])
            spans = pa.concat_tables([spans.slice(0, at), twice, spans.slice(at)])
        return spans


def replace_column(table: pa.Table, name: str, values: list[Any]) -> pa.Table:
    index = table.schema.get_field_index(name)
    return table.set_column(index, table.schema.field(index), pa.array(values, table[name].type))
