"""A support agent of a real framework whose tools ask Sextant's runtime guard first.

Run by tests/integration/test_guard_frameworks.py with the frameworks' own venv
(scripts/install-frameworks), never the project's: LangGraph or the OpenAI Agents SDK drive the
agent loop against a scripted loopback OpenAI-compatible model (only the hosted LLM is scripted),
OpenInference instruments them, the OTel SDK exports by OTLP/HTTP to the collector, and each
tool call is put to `POST /v1/guard` before it runs -- with no Sextant SDK: the integration is
the few functions under "the guard" below, as docs/guard.md shows them.

    python guarded_agent.py '{"framework": "langgraph", "scenario": "unapproved", ...}'

Prints one JSON line: the guard's answers (each with the run's trace id) and the tools that
really ran.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import requests
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

MODEL = "gpt-4.1-mini"
WRITE = {"customer_id": "C-2002", "email": "mira@example.org"}
SCENARIOS: dict[str, list[Any]] = {
    "unapproved": [
        [("lookup_customer", {"customer_id": "C-2002"})],
        [("update_account", WRITE)],
        "I could not change the e-mail.",
    ],
    "approved": [
        [("lookup_customer", {"customer_id": "C-2002"})],
        [("request_approval", {"action": "update_email", "customer_id": "C-2002"})],
        [("update_account", WRITE)],
        "Done: the e-mail of C-2002 is now mira@example.org.",
    ],
    "lookup": [
        [("lookup_customer", {"customer_id": "C-2002"})],
        "I could not look the customer up.",
    ],
}

# ---------------------------------------------------------------- the scripted model


class Script:
    def __init__(self, turns: list[Any]) -> None:
        self.turns, self.calls, self.lock = turns, 0, threading.Lock()

    def next_turn(self) -> Any:
        with self.lock:
            n, self.calls = self.calls, self.calls + 1
        return self.turns[min(n, len(self.turns) - 1)]


def chat_completion(turn: Any) -> dict[str, Any]:
    if isinstance(turn, str):
        message: dict[str, Any] = {"role": "assistant", "content": turn}
        finish = "stop"
    else:
        calls = [
            {
                "id": "call_" + secrets.token_hex(12),
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(args)},
            }
            for name, args in turn
        ]
        message, finish = {"role": "assistant", "content": None, "tool_calls": calls}, "tool_calls"
    return {
        "id": "chatcmpl-" + secrets.token_hex(8),
        "object": "chat.completion",
        "created": int(time.time()),
        "model": MODEL,
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": 400, "completion_tokens": 20, "total_tokens": 420},
    }


def response(turn: Any, request: dict[str, Any]) -> dict[str, Any]:
    if isinstance(turn, str):
        output: list[dict[str, Any]] = [
            {
                "type": "message",
                "id": "msg_" + secrets.token_hex(8),
                "status": "completed",
                "role": "assistant",
                "content": [{"type": "output_text", "text": turn, "annotations": []}],
            }
        ]
    else:
        output = [
            {
                "type": "function_call",
                "id": "fc_" + secrets.token_hex(8),
                "call_id": "call_" + secrets.token_hex(12),
                "name": name,
                "arguments": json.dumps(args),
                "status": "completed",
            }
            for name, args in turn
        ]
    return {
        "id": "resp_" + secrets.token_hex(8),
        "object": "response",
        "created_at": int(time.time()),
        "status": "completed",
        "model": MODEL,
        "output": output,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": request.get("tools", []),
        "top_p": 1.0,
        "metadata": {},
        "error": None,
        "incomplete_details": None,
        "text": {"format": {"type": "text"}},
        "truncation": "disabled",
        "usage": {
            "input_tokens": 400,
            "output_tokens": 20,
            "total_tokens": 420,
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
            turn = script.next_turn()
            body = response(turn, request) if self.path.endswith("/responses") else None
            data = json.dumps(body or chat_completion(turn)).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


# ---------------------------------------------------------------- the guard (docs/guard.md)


class SextantGuard:
    """Asks `POST /v1/guard` before a tool runs. No Sextant SDK: the OTel SDK's provider (to
    flush the spans ended so far, so the guard judges the whole run so far), the current span
    (whose trace is the run) and one HTTP call with a deadline."""

    def __init__(self, url: str, token: str, provider: TracerProvider, target: dict) -> None:
        self.url, self.provider, self.target = f"{url}/v1/guard", provider, target
        self.headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.answers: list[dict[str, Any]] = []

    def ask(self, tool: str, arguments: dict[str, Any], tool_call_id: str | None) -> dict:
        self.provider.force_flush(timeout_millis=2000)  # the model call that asked for it
        context = trace.get_current_span().get_span_context()
        body = {
            "trace_id": format(context.trace_id, "032x"),
            "parent_span_id": format(context.span_id, "016x"),
            **self.target,
            "tool": {"name": tool, "arguments": arguments, "tool_call_id": tool_call_id},
        }
        try:
            reply = requests.post(self.url, json=body, headers=self.headers, timeout=2.0)
            reply.raise_for_status()
            answer = reply.json()
        except requests.RequestException as exc:  # the agent's own fail-safe: not asked is no
            answer = {"answer": "deny", "reasons": ["guard_unreachable"], "messages": [str(exc)]}
        self.answers.append({"tool": tool, "trace_id": body["trace_id"], **answer})
        return answer

    @staticmethod
    def refusal(answer: dict[str, Any]) -> str:
        """What the model is told instead of the tool's result."""
        why = "; ".join(answer.get("messages") or answer.get("reasons") or [])
        return f"Refused by policy ({answer['answer']}): {why}"


# ---------------------------------------------------------------- the tools

RAN: list[str] = []


def lookup_customer_impl(customer_id: str) -> str:
    RAN.append("lookup_customer")
    return json.dumps({"customer_id": customer_id, "tier": "gold"})


def request_approval_impl(action: str, customer_id: str) -> str:
    RAN.append("request_approval")
    return json.dumps({"approved": True, "approver": "lead-7"})


def update_account_impl(customer_id: str, email: str) -> str:
    RAN.append("update_account")
    return json.dumps({"updated": True})


# ---------------------------------------------------------------- LangGraph: a ToolNode wrapper


def run_langgraph(spec: dict[str, Any], guard: SextantGuard, model_url: str) -> None:
    from langchain_core.messages import ToolMessage
    from langchain_core.tools import tool
    from langchain_openai import ChatOpenAI
    from langgraph.prebuilt import ToolNode, create_react_agent

    @tool
    def lookup_customer(customer_id: str) -> str:
        """Look up a customer record by id."""
        return lookup_customer_impl(customer_id)

    @tool
    def request_approval(action: str, customer_id: str) -> str:
        """Ask a team lead to approve an account action for a customer."""
        return request_approval_impl(action, customer_id)

    @tool
    def update_account(customer_id: str, email: str) -> str:
        """Update a customer's account (e-mail address)."""
        return update_account_impl(customer_id, email)

    def guarded(request: Any, execute: Any) -> Any:
        """Every tool call is asked first; a refusal is the tool's answer to the model, and
        the tool never starts."""
        call = request.tool_call
        answer = guard.ask(call["name"], call["args"], call["id"])
        if answer["answer"] == "allow":
            return execute(request)
        return ToolMessage(
            content=guard.refusal(answer),
            tool_call_id=call["id"],
            name=call["name"],
            status="error",
        )

    tools = ToolNode([lookup_customer, request_approval, update_account], wrap_tool_call=guarded)
    llm = ChatOpenAI(model=MODEL, temperature=0, base_url=model_url, api_key="sk-scripted")
    agent = create_react_agent(llm, tools, name="support-agent")
    tracer = trace.get_tracer("support-desk")
    # The run's own span: the trace the guard is asked about, and the agent it names.
    attributes = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "support-agent"}
    with tracer.start_as_current_span("invoke_agent support-agent", attributes=attributes):
        agent.invoke({"messages": [("user", "Change the e-mail of C-2002 to mira@example.org")]})


# ---------------------------------------------------------------- OpenAI Agents SDK: guardrail


def run_openai_agents(spec: dict[str, Any], guard: SextantGuard, model_url: str) -> None:
    from agents import (
        Agent,
        ModelSettings,
        OpenAIResponsesModel,
        Runner,
        ToolGuardrailFunctionOutput,
        ToolInputGuardrailData,
        function_tool,
        tool_input_guardrail,
    )
    from openai import AsyncOpenAI

    @tool_input_guardrail
    def sextant_guard(data: ToolInputGuardrailData) -> ToolGuardrailFunctionOutput:
        """Asked inside the tool's span, before the tool function runs."""
        ctx = data.context
        answer = guard.ask(ctx.tool_name, json.loads(ctx.tool_arguments or "{}"), ctx.tool_call_id)
        if answer["answer"] == "allow":
            return ToolGuardrailFunctionOutput.allow(answer)
        return ToolGuardrailFunctionOutput.reject_content(guard.refusal(answer), answer)

    guardrails = {"tool_input_guardrails": [sextant_guard]}

    @function_tool(**guardrails)
    def lookup_customer(customer_id: str) -> str:
        """Look up a customer record by id."""
        return lookup_customer_impl(customer_id)

    @function_tool(**guardrails)
    def request_approval(action: str, customer_id: str) -> str:
        """Ask a team lead to approve an account action for a customer."""
        return request_approval_impl(action, customer_id)

    @function_tool(**guardrails)
    def update_account(customer_id: str, email: str) -> str:
        """Update a customer's account (e-mail address)."""
        return update_account_impl(customer_id, email)

    client = AsyncOpenAI(base_url=model_url, api_key="sk-scripted")
    agent = Agent(
        name="support-agent",
        instructions="You handle customer account requests. Use the tools.",
        model=OpenAIResponsesModel(model=MODEL, openai_client=client),
        model_settings=ModelSettings(temperature=0),
        tools=[lookup_customer, request_approval, update_account],
    )
    asyncio.run(Runner.run(agent, "Change the e-mail of C-2002 to mira@example.org"))


def main() -> None:
    spec = json.loads(sys.argv[1])
    provider = TracerProvider(
        resource=Resource.create(
            {"service.name": spec["service"], "service.version": spec["version"]}
        )
    )
    headers = {"Authorization": f"Bearer {spec['token']}"} if spec.get("token") else {}
    exporter = OTLPSpanExporter(endpoint=f"{spec['otlp_url']}/v1/traces", headers=headers)
    provider.add_span_processor(BatchSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    target = {"service": spec["service"], "agent": "support-agent", "version": spec["version"]}
    guard = SextantGuard(spec["otlp_url"], spec.get("token", ""), provider, target)
    model = model_server(Script(SCENARIOS[spec["scenario"]]))
    model_url = f"http://127.0.0.1:{model.server_port}/v1"
    if spec["framework"] == "langgraph":
        from openinference.instrumentation.langchain import LangChainInstrumentor

        LangChainInstrumentor().instrument(tracer_provider=provider)
        run_langgraph(spec, guard, model_url)
    else:
        from openinference.instrumentation.openai_agents import OpenAIAgentsInstrumentor

        OpenAIAgentsInstrumentor().instrument(tracer_provider=provider)
        run_openai_agents(spec, guard, model_url)
    provider.shutdown()
    model.shutdown()
    print(json.dumps({"answers": guard.answers, "ran": RAN}))


if __name__ == "__main__":
    main()
