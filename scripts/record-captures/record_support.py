"""Record support-desk agent runs as OTLP captures, with real frameworks and instrumentations.

Not run by the tests. Run it with a separate venv holding the packages listed in
tests/testdata/otlp-captures/README.md (never the project's venv):

    python scripts/record-captures/record_support.py --family langgraph-openinference \
        --scenario one_turn_approval --runs 10 --out /tmp/captures

Families: langgraph-openinference, langgraph-openllmetry, openai_agents-openinference,
python_sdk-genai_semconv, node_sdk-genai_semconv (needs --node-dir: a directory whose
node_modules holds the Node.js packages; `support_loop.mjs` is copied there and run). Each run
drives the family's real agent loop against a scripted loopback OpenAI-compatible endpoint (Chat
Completions; Responses API for the Agents SDK; the Node.js loop scripts its model in-process)
and exports through the real OTLP exporter to a loopback receiver that keeps every Export
request's body; the run's trace is then written as OTLP/JSON (the protobuf JSON mapping, ids in
hex, one span per line) with its `*.expected.json`.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import secrets
import shutil
import subprocess
import threading
import time
import uuid
from concurrent import futures
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import grpc
from google.protobuf.json_format import MessageToDict
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2

USER_INPUTS = {
    "wrong_subject": "Change the e-mail of customer C-2002 to mira@example.org.",
    "one_turn_approval": "Change the e-mail of customer C-1042 to mira@example.org.",
}
MODEL = "gpt-4.1-mini"
RESPONSE_MODEL = "gpt-4.1-mini-2025-04-14"
SYSTEM_LANGGRAPH = "You handle customer account changes. Use the tools; get approval before writes."
SYSTEM_SDK = "You handle customer account requests. Use the tools."
RESOURCE = {
    "service.name": "support-desk",
    "service.version": "3.1.0",
    "deployment.environment.name": "staging",
}
CUSTOMERS = {
    "C-1042": {"name": "Mira Sato", "email": "mira.sato@old-mail.example", "tier": "gold"},
    "C-2002": {"name": "Jonas Berg", "email": "j.berg@old-mail.example", "tier": "silver"},
    "C-1001": {"name": "Ana Ruiz", "email": "ana.ruiz@old-mail.example", "tier": "gold"},
}
TOOL_DESCRIPTIONS = {
    "lookup_customer": "Look up a customer record by id.",
    "request_approval": "Ask a team lead to approve an account action for a customer.",
    "update_account": "Update a customer's account (e-mail address).",
}


# ---------------------------------------------------------------- scenarios and the scripted model


def turns_of(scenario: str) -> list[list[tuple[str, dict[str, Any]]] | str]:
    """The model's answers, turn by turn: tool calls to request, or the final text."""
    if scenario == "wrong_subject":
        return [
            [("lookup_customer", {"customer_id": "C-2002"})],
            [("request_approval", {"action": "update_email", "customer_id": "C-1001"})],
            [("update_account", {"customer_id": "C-2002", "email": "mira@example.org"})],
            "Done: the e-mail of customer C-2002 is now mira@example.org (approved by lead-7).",
        ]
    if scenario == "one_turn_approval":
        return [
            [("lookup_customer", {"customer_id": "C-1042"})],
            [
                ("request_approval", {"action": "update_email", "customer_id": "C-1042"}),
                ("update_account", {"customer_id": "C-1042", "email": "mira@example.org"}),
            ],
            "Done: the e-mail of customer C-1042 is now mira@example.org (approved by lead-7).",
        ]
    raise SystemExit(f"unknown scenario {scenario}")


def usage(n: int, turn: list | str) -> tuple[int, int]:
    """Token counts the scripted model reports for its n-th call (README: same formula)."""
    out = 46 + len(turn) // 16 if isinstance(turn, str) else 17 * len(turn) + 5
    return 412 + 137 * n, out


@dataclass
class Script:
    scenario: str = ""
    calls: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def reset(self, scenario: str) -> None:
        with self.lock:
            self.scenario, self.calls = scenario, 0

    def next_turn(self) -> tuple[int, list | str]:
        with self.lock:
            n = self.calls
            self.calls += 1
        return n, turns_of(self.scenario)[n]


def call_id() -> str:
    return "call_" + secrets.token_hex(12)


def chat_completion(n: int, turn: list | str) -> dict[str, Any]:
    prompt, completion = usage(n, turn)
    if isinstance(turn, str):
        message: dict[str, Any] = {"role": "assistant", "content": turn, "refusal": None}
        finish = "stop"
    else:
        message = {
            "role": "assistant",
            "content": None,
            "refusal": None,
            "tool_calls": [
                {
                    "id": call_id(),
                    "type": "function",
                    "function": {"name": name, "arguments": json.dumps(args)},
                }
                for name, args in turn
            ],
        }
        finish = "tool_calls"
    return {
        "id": "chatcmpl-" + secrets.token_hex(14),
        "object": "chat.completion",
        "created": int(time.time()),
        "model": RESPONSE_MODEL,
        "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": finish}],
        "usage": {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
            "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
            "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0},
        },
        "service_tier": "default",
        "system_fingerprint": "fp_scripted",
    }


def response_object(n: int, turn: list | str, request: dict[str, Any]) -> dict[str, Any]:
    prompt, completion = usage(n, turn)
    if isinstance(turn, str):
        output: list[dict[str, Any]] = [
            {
                "type": "message",
                "id": "msg_" + secrets.token_hex(12),
                "status": "completed",
                "role": "assistant",
                "content": [{"type": "output_text", "text": turn, "annotations": []}],
            }
        ]
    else:
        output = [
            {
                "type": "function_call",
                "id": "fc_" + secrets.token_hex(12),
                "call_id": call_id(),
                "name": name,
                "arguments": json.dumps(args),
                "status": "completed",
            }
            for name, args in turn
        ]
    return {
        "id": "resp_" + secrets.token_hex(12),
        "object": "response",
        "created_at": int(time.time()),
        "status": "completed",
        "model": RESPONSE_MODEL,
        "output": output,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": request.get("tools", []),
        "temperature": request.get("temperature"),
        "top_p": 1.0,
        "instructions": request.get("instructions"),
        "metadata": {},
        "error": None,
        "incomplete_details": None,
        "text": {"format": {"type": "text"}},
        "truncation": "disabled",
        "usage": {
            "input_tokens": prompt,
            "output_tokens": completion,
            "total_tokens": prompt + completion,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens_details": {"reasoning_tokens": 0},
        },
    }


def model_server(script: Script) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            n, turn = script.next_turn()
            if self.path.endswith("/responses"):
                body = response_object(n, turn, request)
            else:
                body = chat_completion(n, turn)
            data = json.dumps(body).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


# ---------------------------------------------------------------- the OTLP receiver


class Receiver:
    """Keeps the body of every Export request, over gRPC and over HTTP, in arrival order."""

    def __init__(self) -> None:
        self.bodies: list[bytes] = []
        self.lock = threading.Lock()
        empty = trace_service_pb2.ExportTraceServiceResponse().SerializeToString()

        def export(body: bytes, context: Any) -> bytes:
            with self.lock:
                self.bodies.append(body)
            return empty

        handler = grpc.method_handlers_generic_handler(
            "opentelemetry.proto.collector.trace.v1.TraceService",
            {"Export": grpc.unary_unary_rpc_method_handler(export)},
        )
        self.grpc = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
        self.grpc.add_generic_rpc_handlers((handler,))
        self.grpc_port = self.grpc.add_insecure_port("127.0.0.1:0")
        self.grpc.start()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                with receiver.lock:
                    receiver.bodies.append(body)
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(empty)))
                self.end_headers()
                self.wfile.write(empty)

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.http.serve_forever, daemon=True).start()

    def take(self) -> list[bytes]:
        with self.lock:
            taken, self.bodies = self.bodies, []
        return taken


def hex_ids(node: Any) -> None:
    if isinstance(node, dict):
        for key in ("traceId", "spanId", "parentSpanId"):
            if key in node:
                node[key] = base64.b64decode(node[key]).hex()
        for value in node.values():
            hex_ids(value)
    elif isinstance(node, list):
        for value in node:
            hex_ids(value)


def agent_trace(requests: list[trace_service_pb2.ExportTraceServiceRequest]) -> str:
    """The run's trace: the one whose root is not a build-time `create_agent` span."""
    for request in requests:
        for rs in request.resource_spans:
            for ss in rs.scope_spans:
                for span in ss.spans:
                    if not span.parent_span_id and not span.name.startswith("create_agent"):
                        return span.trace_id.hex()
    raise SystemExit("no agent run trace received")


def otlp_json(bodies: list[bytes]) -> tuple[str, str, int, int]:
    """(trace id, the file's text, span count, Export requests that carried the trace)."""
    requests = []
    for body in bodies:
        request = trace_service_pb2.ExportTraceServiceRequest()
        request.ParseFromString(body)
        requests.append(request)
    trace_id = agent_trace(requests)
    lines: list[str] = []
    spans_total = carrying = 0
    for request in requests:
        carried = False
        for rs in request.resource_spans:
            scopes = []
            for ss in rs.scope_spans:
                spans = [s for s in ss.spans if s.trace_id.hex() == trace_id]
                if not spans:
                    continue
                scope = MessageToDict(ss, use_integers_for_enums=True)
                scope.pop("spans", None)
                rendered = []
                for span in spans:
                    d = MessageToDict(span, use_integers_for_enums=True)
                    hex_ids(d)
                    rendered.append(json.dumps(d, separators=(",", ":"), ensure_ascii=False))
                head = json.dumps(scope, separators=(",", ":"), ensure_ascii=False)[:-1]
                scopes.append(head + ',"spans":[\n' + ",\n".join(rendered) + "]}")
                spans_total += len(spans)
            if scopes:
                carried = True
                resource = json.dumps(
                    MessageToDict(rs.resource), separators=(",", ":"), ensure_ascii=False
                )
                extra = {"schemaUrl": rs.schema_url} if rs.schema_url else {}
                tail = "".join(f',"{k}":{json.dumps(v)}' for k, v in extra.items())
                lines.append(
                    '{"resource":'
                    + resource
                    + ',"scopeSpans":[\n'
                    + ",\n".join(scopes)
                    + "]"
                    + tail
                    + "}"
                )
        carrying += carried
    text = '{"resourceSpans":[\n' + ",\n".join(lines) + "]}\n"
    return trace_id, text, spans_total, carrying


# ---------------------------------------------------------------- tools


def lookup_customer_impl(customer_id: str) -> dict[str, Any]:
    time.sleep(0.01)
    return {"customer_id": customer_id, **CUSTOMERS[customer_id]}


def request_approval_impl(action: str, customer_id: str) -> dict[str, Any]:
    time.sleep(0.01)
    return {"approved": True, "approver": "lead-7"}


def update_account_impl(customer_id: str, email: str) -> dict[str, Any]:
    time.sleep(0.01)
    return {"updated": True}


IMPLS = {
    "lookup_customer": lookup_customer_impl,
    "request_approval": request_approval_impl,
    "update_account": update_account_impl,
}


# ---------------------------------------------------------------- families


def provider(exporter: Any, delay_ms: int | None = None) -> Any:
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    tp = TracerProvider(resource=Resource.create(RESOURCE))
    kwargs = {"schedule_delay_millis": delay_ms} if delay_ms else {}
    tp.add_span_processor(BatchSpanProcessor(exporter, **kwargs))
    return tp


def langchain_tools() -> list[Any]:
    from langchain_core.tools import tool

    @tool
    def lookup_customer(customer_id: str) -> str:
        """Look up a customer record by id."""
        return json.dumps(lookup_customer_impl(customer_id))

    @tool
    def request_approval(action: str, customer_id: str) -> str:
        """Ask a team lead to approve an account action for a customer."""
        return json.dumps(request_approval_impl(action, customer_id))

    @tool
    def update_account(customer_id: str, email: str) -> str:
        """Update a customer's account (e-mail address)."""
        return json.dumps(update_account_impl(customer_id, email))

    return [lookup_customer, request_approval, update_account]


def run_langgraph(model_url: str, user_input: str) -> None:
    from langchain_openai import ChatOpenAI
    from langgraph.prebuilt import create_react_agent

    llm = ChatOpenAI(model=MODEL, temperature=0, base_url=model_url, api_key="sk-scripted")
    agent = create_react_agent(
        llm, langchain_tools(), prompt=SYSTEM_LANGGRAPH, name="support-agent"
    )
    agent.invoke({"messages": [("user", user_input)]})


def run_openai_agents(model_url: str, user_input: str) -> None:
    from agents import Agent, ModelSettings, OpenAIResponsesModel, Runner, function_tool
    from openai import AsyncOpenAI

    @function_tool
    def lookup_customer(customer_id: str) -> str:
        """Look up a customer record by id."""
        return json.dumps(lookup_customer_impl(customer_id))

    @function_tool
    def request_approval(action: str, customer_id: str) -> str:
        """Ask a team lead to approve an account action for a customer."""
        return json.dumps(request_approval_impl(action, customer_id))

    @function_tool
    def update_account(customer_id: str, email: str) -> str:
        """Update a customer's account (e-mail address)."""
        return json.dumps(update_account_impl(customer_id, email))

    client = AsyncOpenAI(base_url=model_url, api_key="sk-scripted")
    agent = Agent(
        name="support-agent",
        instructions=SYSTEM_SDK,
        model=OpenAIResponsesModel(model=MODEL, openai_client=client),
        model_settings=ModelSettings(temperature=0),
        tools=[lookup_customer, request_approval, update_account],
    )
    asyncio.run(Runner.run(agent, user_input))


def run_node_sdk(node_dir: Path, endpoint: str, scenario: str) -> None:
    """The Node.js loop, told the run (turns, tool results) as JSON."""
    results = {}
    for turn in turns_of(scenario):
        for name, args in [] if isinstance(turn, str) else turn:
            key = f"{name} {json.dumps(args, separators=(',', ':'))}"
            results[key] = json.dumps(IMPLS[name](**args))
    spec = {
        "endpoint": endpoint,
        "input": USER_INPUTS[scenario],
        "turns": turns_of(scenario),
        "results": results,
        "descriptions": TOOL_DESCRIPTIONS,
    }
    script = node_dir / "support_loop.mjs"
    shutil.copyfile(Path(__file__).with_name("support_loop.mjs"), script)
    subprocess.run(["node", str(script), json.dumps(spec)], check=True, cwd=node_dir)


def parts_message(role: str, parts: list[dict[str, Any]], finish: str | None = None) -> dict:
    message: dict[str, Any] = {"role": role, "parts": parts}
    if finish:
        message["finish_reason"] = finish
    return message


def run_python_sdk(tracer: Any, model_url: str, user_input: str) -> None:
    """A hand-written agent loop, instrumented by hand with the GenAI semantic conventions;
    tool calls asked for in one model turn run one after the other."""
    from openai import OpenAI
    from opentelemetry.trace import SpanKind

    client = OpenAI(base_url=model_url, api_key="sk-scripted")
    conversation = str(uuid.uuid4())
    system = json.dumps([{"type": "text", "content": SYSTEM_SDK}])
    tools = [
        {
            "type": "function",
            "function": {
                "name": name,
                "description": TOOL_DESCRIPTIONS[name],
                "parameters": {
                    "type": "object",
                    "properties": {p: {"type": "string"} for p in params},
                    "required": list(params),
                },
            },
        }
        for name, params in (
            ("lookup_customer", ("customer_id",)),
            ("request_approval", ("action", "customer_id")),
            ("update_account", ("customer_id", "email")),
        )
    ]
    history: list[dict[str, Any]] = [
        parts_message("user", [{"type": "text", "content": user_input}])
    ]
    chat_messages: list[dict[str, Any]] = [
        {"role": "system", "content": SYSTEM_SDK},
        {"role": "user", "content": user_input},
    ]
    totals = [0, 0]
    with tracer.start_as_current_span("invoke_agent support-agent") as root:
        root.set_attributes(
            {
                "gen_ai.operation.name": "invoke_agent",
                "gen_ai.provider.name": "openai",
                "gen_ai.agent.name": "support-agent",
                "gen_ai.agent.id": "asst_support_agent",
                "gen_ai.agent.description": SYSTEM_SDK,
                "gen_ai.request.model": MODEL,
                "gen_ai.conversation.id": conversation,
                "gen_ai.system_instructions": system,
                "gen_ai.input.messages": json.dumps(history),
            }
        )
        while True:
            with tracer.start_as_current_span(f"chat {MODEL}", kind=SpanKind.CLIENT) as chat:
                chat.set_attributes(
                    {
                        "gen_ai.operation.name": "chat",
                        "gen_ai.provider.name": "openai",
                        "gen_ai.request.model": MODEL,
                        "gen_ai.request.temperature": 0.0,
                        "server.address": "api.openai.com",
                        "server.port": 443,
                        "gen_ai.conversation.id": conversation,
                        "gen_ai.system_instructions": system,
                        "gen_ai.input.messages": json.dumps(history),
                    }
                )
                reply = client.chat.completions.create(
                    model=MODEL, messages=chat_messages, tools=tools, temperature=0
                )
                choice = reply.choices[0]
                calls = choice.message.tool_calls or []
                finish = "tool_call" if calls else "stop"
                parts = (
                    [
                        {
                            "type": "tool_call",
                            "id": c.id,
                            "name": c.function.name,
                            "arguments": json.loads(c.function.arguments),
                        }
                        for c in calls
                    ]
                    if calls
                    else [{"type": "text", "content": choice.message.content}]
                )
                out = parts_message("assistant", parts, finish)
                chat.set_attributes(
                    {
                        "gen_ai.response.id": reply.id,
                        "gen_ai.response.model": reply.model,
                        "gen_ai.response.finish_reasons": [finish],
                        "gen_ai.usage.input_tokens": reply.usage.prompt_tokens,
                        "gen_ai.usage.output_tokens": reply.usage.completion_tokens,
                        "gen_ai.output.messages": json.dumps([out]),
                    }
                )
                totals[0] += reply.usage.prompt_tokens
                totals[1] += reply.usage.completion_tokens
            history.append(parts_message("assistant", parts))
            chat_messages.append(choice.message.model_dump(exclude_none=True))
            if not calls:
                root.set_attributes(
                    {
                        "gen_ai.response.model": reply.model,
                        "gen_ai.usage.input_tokens": totals[0],
                        "gen_ai.usage.output_tokens": totals[1],
                        "gen_ai.output.messages": json.dumps([out]),
                    }
                )
                return
            for c in calls:  # one after the other, in the order the model listed them
                name, args = c.function.name, json.loads(c.function.arguments)
                with tracer.start_as_current_span(f"execute_tool {name}") as span:
                    span.set_attributes(
                        {
                            "gen_ai.operation.name": "execute_tool",
                            "gen_ai.tool.name": name,
                            "gen_ai.tool.call.id": c.id,
                            "gen_ai.tool.type": "function",
                            "gen_ai.tool.description": TOOL_DESCRIPTIONS[name],
                            "gen_ai.tool.call.arguments": json.dumps(args),
                        }
                    )
                    result = json.dumps(IMPLS[name](**args))
                    span.set_attribute("gen_ai.tool.call.result", result)
                history.append(
                    parts_message(
                        "tool",
                        [{"type": "tool_call_response", "id": c.id, "response": result}],
                    )
                )
                chat_messages.append({"role": "tool", "tool_call_id": c.id, "content": result})


# ---------------------------------------------------------------- expected files


NOTES = {
    "node_sdk-genai_semconv": "Hand-written Node.js loop (model scripted in-process), GenAI"
    " semantic conventions by hand, official OTLP/gRPC exporter: gen_ai.tool.call.id on"
    " execute_tool spans, tool_call parts (with ids) in the chat spans' gen_ai.output.messages."
    " Start times are millisecond-rounded. Tool calls asked for in one model turn run one after"
    " the other.",
    "langgraph-openinference": "LangGraph create_react_agent + ToolNode under OpenInference"
    " (openinference-instrumentation-langchain). Tool arguments: tool span input.value and the"
    " parent `tools` span input.value -> tool_call; call id only on the parent `tools` span and"
    " in the LLM span's llm.output_messages.0.message.tool_calls.N.tool_call.id.",
    "langgraph-openllmetry": "LangGraph create_react_agent + ToolNode under OpenLLMetry"
    " (opentelemetry-instrumentation-langchain). Call id in gen_ai.tool.call.arguments ->"
    " kwargs.tool_call_id and in the ChatOpenAI.chat span's gen_ai.output.messages tool_call"
    " parts. The build-time create_agent trace was left out.",
    "openai_agents-openinference": "OpenAI Agents SDK Agent + Runner (Responses API) under"
    " OpenInference (openinference-instrumentation-openai-agents, exclusive processor). The"
    " tool span has no call id; the `response` span's llm.output_messages tool_calls have them.",
    "python_sdk-genai_semconv": "Hand-written loop with the real openai client, GenAI semantic"
    " conventions by hand: gen_ai.tool.call.id on execute_tool spans, tool_call parts (with"
    " ids) in the chat spans' gen_ai.output.messages. Tool calls asked for in one model turn"
    " run one after the other.",
}
TRANSPORT = {
    "node_sdk-genai_semconv": "grpc",
    "langgraph-openinference": "grpc",
    "langgraph-openllmetry": "http/protobuf",
    "openai_agents-openinference": "grpc",
    "python_sdk-genai_semconv": "http/protobuf",
}


def expected(
    family: str, scenario: str, trace_id: str, spans: int, requests: int
) -> dict[str, Any]:
    turns = turns_of(scenario)
    calls = []
    for turn in turns:
        if isinstance(turn, str):
            continue
        for name, args in turn:
            call: dict[str, Any] = {"name": name, "arguments": args, "status": "ok"}
            if len(turn) > 1:
                call["order_sensitive"] = False
            calls.append(call)
    tokens = [usage(n, t) for n, t in enumerate(turns)]
    return {
        "agent": "support-agent",
        "user_input": USER_INPUTS[scenario],
        "tool_calls": calls,
        "llm_calls": len(turns),
        "input_tokens": sum(i for i, _ in tokens),
        "output_tokens": sum(o for _, o in tokens),
        "final_answer": turns[-1],
        "trace_id": trace_id,
        "span_count": spans,
        "export_requests": requests,
        "transport": TRANSPORT[family],
        "notes": NOTES[family],
    }


# ---------------------------------------------------------------- main


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--family", required=True, choices=sorted(TRANSPORT))
    parser.add_argument("--scenario", required=True, choices=sorted(USER_INPUTS))
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--node-dir", type=Path, help="node_modules home for the Node.js loop")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)

    script = Script()
    model = model_server(script)
    model_url = f"http://127.0.0.1:{model.server_address[1]}/v1"
    receiver = Receiver()
    family = args.family
    if TRANSPORT[family] == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

        exporter: Any = OTLPSpanExporter(endpoint=f"127.0.0.1:{receiver.grpc_port}", insecure=True)
    else:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
            OTLPSpanExporter as HTTPExporter,
        )

        exporter = HTTPExporter(
            endpoint=f"http://127.0.0.1:{receiver.http.server_address[1]}/v1/traces"
        )
    tp = provider(exporter, 100 if family == "python_sdk-genai_semconv" else None)
    if family == "langgraph-openinference":
        from openinference.instrumentation.langchain import LangChainInstrumentor

        LangChainInstrumentor().instrument(tracer_provider=tp)
    elif family == "langgraph-openllmetry":
        from opentelemetry.instrumentation.langchain import LangchainInstrumentor

        LangchainInstrumentor().instrument(tracer_provider=tp)
    elif family == "openai_agents-openinference":
        from openinference.instrumentation.openai_agents import OpenAIAgentsInstrumentor

        OpenAIAgentsInstrumentor().instrument(tracer_provider=tp, exclusive_processor=True)
    tracer = tp.get_tracer(
        "support_desk.agent_loop", "3.1.0", schema_url="https://opentelemetry.io/schemas/1.37.0"
    )

    for run in range(1, args.runs + 1):
        script.reset(args.scenario)
        user_input = USER_INPUTS[args.scenario]
        if family == "node_sdk-genai_semconv":
            run_node_sdk(args.node_dir, f"127.0.0.1:{receiver.grpc_port}", args.scenario)
        elif family.startswith("langgraph"):
            run_langgraph(model_url, user_input)
        elif family == "openai_agents-openinference":
            run_openai_agents(model_url, user_input)
        else:
            run_python_sdk(tracer, model_url, user_input)
        tp.force_flush()
        trace_id, text, spans, requests = otlp_json(receiver.take())
        stem = f"{family}-{args.scenario}" + (f"-{run:02d}" if args.runs > 1 else "")
        (args.out / f"{stem}.otlp.json").write_text(text)
        facts = expected(family, args.scenario, trace_id, spans, requests)
        (args.out / f"{stem}.expected.json").write_text(json.dumps(facts, indent=1) + "\n")
        print(stem, trace_id, spans, "spans", requests, "requests", flush=True)
    tp.shutdown()


if __name__ == "__main__":
    main()
