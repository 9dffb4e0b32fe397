"""Record `langgraph-openinference-five_turns.otlp.json` (otlp-multi): one LangGraph thread of
five turns (five traces), traced by OpenInference, exported with the official OTLP/HTTP exporter
to a loopback receiver that keeps every body. The model is a scripted loopback Chat Completions
endpoint; the tools are real functions returning fixed data; `search_kb` is a real LangChain
retriever tool returning two documents. Turn 4 uses no tool.

Not run by the tests:

    python scripts/record-captures/five_turns.py tests/testdata/otlp-multi
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

THREAD = "thread-5e7c"
SYSTEM = "You are the support desk. Use the tools; get approval before refunds."
TURNS = [
    (
        "Where is my order? I am customer C-1042.",
        [("lookup_order", {"customer_id": "C-1042"})],
        "Your order O-7781 shipped on 2026-11-28 and should arrive by 2026-12-03.",
    ),
    (
        "What is the refund policy for gold customers?",
        [("search_kb", {"query": "refund policy gold"})],
        "Gold customers get a full refund within 30 days of purchase.",
    ),
    (
        "Please refund order O-7781.",
        [
            ("request_approval", {"action": "refund", "order_id": "O-7781"}),
            ("refund_order", {"order_id": "O-7781"}),
        ],
        "Done: order O-7781 is refunded (approved by lead-7), 189.00 EUR back to your card.",
    ),
    (
        "How long until I see the money?",
        [],
        "Card refunds usually appear within 5 to 7 business days.",
    ),
    (
        "Can you e-mail me the receipt?",
        [("send_receipt", {"order_id": "O-7781"})],
        "The refund receipt for O-7781 is on its way to your e-mail.",
    ),
]


def script() -> list[dict]:
    """The model's replies in order: per turn, one reply per tool call, then the answer."""
    from otlp_loopback import tool_call

    replies: list[dict] = []
    n = 0
    for _, calls, answer in TURNS:
        for name, arguments in calls:
            n += 1
            replies.append({"tool_calls": [tool_call(n, name, arguments)]})
        replies.append({"content": answer})
    return replies


def main(out: Path) -> None:
    from openinference.instrumentation.langchain import LangChainInstrumentor
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor
    from otlp_loopback import Receiver, ScriptedModel

    receiver, model = Receiver(), ScriptedModel(script())
    provider = TracerProvider(
        resource=Resource.create(
            {
                "service.name": "support-desk",
                "service.version": "3.1.0",
                "deployment.environment.name": "staging",
            }
        )
    )
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=receiver.endpoint)))
    LangChainInstrumentor().instrument(tracer_provider=provider)

    from langchain_core.callbacks import CallbackManagerForRetrieverRun
    from langchain_core.documents import Document
    from langchain_core.retrievers import BaseRetriever
    from langchain_core.tools import create_retriever_tool, tool
    from langchain_openai import ChatOpenAI
    from langgraph.checkpoint.memory import MemorySaver
    from langgraph.prebuilt import create_react_agent

    class KnowledgeBaseRetriever(BaseRetriever):
        """The support knowledge base: two refund documents."""

        def _get_relevant_documents(
            self, query: str, *, run_manager: CallbackManagerForRetrieverRun
        ) -> list[Document]:
            common = {"source": "kb", "access": "internal", "updated": "2026-10-01"}
            return [
                Document(
                    id="kb-101",
                    page_content="Gold customers get a full refund within 30 days of purchase.",
                    metadata={**common, "title": "Refund policy - gold tier", "score": 0.82},
                ),
                Document(
                    id="kb-207",
                    page_content="Refunds after 30 days are prorated by the account manager.",
                    metadata={**common, "title": "Late refunds", "score": 0.64},
                ),
            ]

    @tool
    def lookup_order(customer_id: str) -> str:
        """The latest order of a customer."""
        return json.dumps({"order_id": "O-7781", "status": "shipped", "shipped": "2026-11-28"})

    @tool
    def request_approval(action: str, order_id: str) -> str:
        """Ask a lead to approve an action on an order."""
        return json.dumps({"approved": True, "approver": "lead-7"})

    @tool
    def refund_order(order_id: str) -> str:
        """Refund an order to the card it was paid with."""
        return json.dumps({"refund_id": "RF-3301", "amount_eur": 189.0})

    @tool
    def send_receipt(order_id: str) -> str:
        """E-mail the customer the receipt of an order's refund."""
        return json.dumps({"sent": True})

    search_kb = create_retriever_tool(
        KnowledgeBaseRetriever(),
        "search_kb",
        "Search the internal support knowledge base for policies.",
    )
    llm = ChatOpenAI(model="gpt-4.1-mini", api_key="sk-loopback", base_url=model.base_url)
    agent = create_react_agent(
        llm,
        [lookup_order, search_kb, request_approval, refund_order, send_receipt],
        prompt=SYSTEM,
        name="support-agent",
        checkpointer=MemorySaver(),
    )
    for question, _, _ in TURNS:
        agent.invoke(
            {"messages": [("user", question)]},
            config={"configurable": {"thread_id": THREAD}},
        )
    provider.force_flush()
    provider.shutdown()
    path = out / "langgraph-openinference-five_turns.otlp.json"
    doc = receiver.write(path)
    traces = {
        s["traceId"] for rs in doc["resourceSpans"] for ss in rs["scopeSpans"] for s in ss["spans"]
    }
    requests = len(receiver.bodies)
    print(f"{path}: {requests} Export requests, {len(traces)} traces, {model.calls} model calls")


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).parent))
    main(Path(sys.argv[1]))
