"""Record `langgraph-{openinference,openllmetry}-empty_retrieval.otlp.json` (otlp-multi):
a LangGraph agent whose knowledge-base retriever finds nothing, traced by OpenInference or by
OpenLLMetry, exported with the official OTLP/HTTP exporter to a loopback receiver that keeps
every body. The model is a scripted loopback Chat Completions endpoint; the retriever is real
LangChain code returning no documents.

Not run by the tests. Run once per instrumentation (they patch the same callbacks):

    python scripts/record-captures/empty_retrieval.py openinference tests/testdata/otlp-multi
    python scripts/record-captures/empty_retrieval.py openllmetry tests/testdata/otlp-multi
"""

from __future__ import annotations

import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from two_services import BODIES, Receiver, rendered

THREAD = "thread-e11d"
QUESTION = "What is the refund policy for platinum customers?"
ANSWER = "I found nothing on platinum refunds in the knowledge base; please ask billing."
REPLIES = [
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_kb_1",
                "type": "function",
                "function": {
                    "name": "search_kb",
                    "arguments": '{"query": "refund policy platinum"}',
                },
            }
        ],
    },
    {"role": "assistant", "content": ANSWER},
]


class Model(BaseHTTPRequestHandler):
    """Chat Completions, scripted: the n-th request gets the n-th reply."""

    calls = 0

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        message = REPLIES[min(Model.calls, len(REPLIES) - 1)]
        Model.calls += 1
        body = json.dumps(
            {
                "id": f"chatcmpl-empty-{Model.calls}",
                "object": "chat.completion",
                "created": 1796200000,
                "model": "gpt-4.1-mini-2025-04-14",
                "choices": [
                    {
                        "index": 0,
                        "message": message,
                        "finish_reason": "tool_calls" if message.get("tool_calls") else "stop",
                    }
                ],
                "usage": {"prompt_tokens": 310, "completion_tokens": 24, "total_tokens": 334},
            }
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def serve(handler: type[BaseHTTPRequestHandler]) -> ThreadingHTTPServer:
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def main(instrumentation: str, out: Path) -> None:
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    receiver, model = serve(Receiver), serve(Model)
    provider = TracerProvider(
        resource=Resource.create(
            {
                "service.name": "support-desk",
                "service.version": "3.1.0",
                "deployment.environment.name": "staging",
            }
        )
    )
    endpoint = f"http://127.0.0.1:{receiver.server_address[1]}/v1/traces"
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint)))
    if instrumentation == "openinference":
        from openinference.instrumentation.langchain import LangChainInstrumentor

        LangChainInstrumentor().instrument(tracer_provider=provider)
    else:
        from opentelemetry.instrumentation.langchain import LangchainInstrumentor

        LangchainInstrumentor().instrument(tracer_provider=provider)

    from langchain_core.callbacks import CallbackManagerForRetrieverRun
    from langchain_core.documents import Document
    from langchain_core.retrievers import BaseRetriever
    from langchain_core.tools import create_retriever_tool
    from langchain_openai import ChatOpenAI
    from langgraph.checkpoint.memory import MemorySaver
    from langgraph.prebuilt import create_react_agent

    class KnowledgeBaseRetriever(BaseRetriever):
        """The support knowledge base: it has nothing on platinum customers."""

        def _get_relevant_documents(
            self, query: str, *, run_manager: CallbackManagerForRetrieverRun
        ) -> list[Document]:
            return []

    search_kb = create_retriever_tool(
        KnowledgeBaseRetriever(),
        "search_kb",
        "Search the internal support knowledge base for policies.",
    )
    llm = ChatOpenAI(
        model="gpt-4.1-mini",
        api_key="sk-loopback",
        base_url=f"http://127.0.0.1:{model.server_address[1]}/v1",
    )
    agent = create_react_agent(
        llm,
        [search_kb],
        prompt="You answer support questions from the knowledge base only.",
        name="support-agent",
        checkpointer=MemorySaver(),
    )
    agent.invoke({"messages": [("user", QUESTION)]}, config={"configurable": {"thread_id": THREAD}})
    provider.force_flush()
    provider.shutdown()
    receiver.shutdown()
    model.shutdown()
    spans = [rs for body in BODIES for rs in rendered(body)["resourceSpans"]]
    path = out / f"langgraph-{instrumentation}-empty_retrieval.otlp.json"
    path.write_text(
        '{"resourceSpans":[\n'
        + ",\n".join(json.dumps(rs, separators=(",", ":")) for rs in spans)
        + "\n]}\n"
    )
    print(f"{path}: {len(BODIES)} Export requests, {Model.calls} model calls")


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).parent))
    main(sys.argv[1], Path(sys.argv[2]))
