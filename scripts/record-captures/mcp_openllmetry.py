"""Records `mcp-openllmetry-crm_server` (tests/testdata/otlp-multi/README.md): a LangGraph agent
using an MCP server's tools through langchain-mcp-adapters, OpenLLMetry's LangChain and MCP
instrumentations in the client and OpenLLMetry's MCP instrumentation in the server, which runs
as its own process over stdio with its own resource (service.name `crm-server`).

Run with a venv outside the repository holding the packages the README lists:
    python mcp_openllmetry.py OUT.otlp.json
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.instrumentation.mcp import McpInstrumentor
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor


def tracing(service: str, version: str, endpoint: str) -> TracerProvider:
    resource = Resource.create(
        {
            "service.name": service,
            "service.version": version,
            "deployment.environment.name": "staging",
        }
    )
    provider = TracerProvider(resource=resource)
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint)))
    trace.set_tracer_provider(provider)
    return provider


def serve() -> None:
    """The MCP server process: FastMCP over stdio, its tools from CRM_TOOLS."""
    provider = tracing(os.environ["CRM_SERVICE"], "1.4.0", os.environ["CRM_OTLP"])
    McpInstrumentor().instrument()
    from mcp.server.fastmcp import FastMCP

    server = FastMCP("crm-server")
    offered = os.environ["CRM_TOOLS"].split(",")

    def lookup_customer(customer_id: str) -> dict:
        """Look up a customer record by id."""
        return {"customer_id": customer_id, "email": "old@example.org", "tier": "gold"}

    def update_account(customer_id: str, email: str) -> dict:
        """Change the e-mail address of a customer account."""
        return {"ok": True}

    def export_contacts(segment: str) -> dict:
        """Export every contact of a customer segment."""
        return {"segment": segment, "contacts": 1840}

    for tool in (lookup_customer, update_account, export_contacts):
        if tool.__name__ in offered:
            server.tool()(tool)
    try:
        server.run("stdio")
    finally:
        provider.shutdown()


async def record(out: Path) -> None:
    from opentelemetry.instrumentation.langchain import LangchainInstrumentor
    from otlp_loopback import Receiver, ScriptedModel, tool_call

    receiver = Receiver()
    provider = tracing("support-desk", "3.1.0", receiver.endpoint)
    LangchainInstrumentor().instrument()
    McpInstrumentor().instrument()
    # Imported once instrumented: a name bound before would keep the unwrapped transport.
    from langchain_mcp_adapters.tools import load_mcp_tools
    from langchain_openai import ChatOpenAI
    from langgraph.prebuilt import create_react_agent
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    update = {"customer_id": "C-1042", "email": "mira@example.org"}
    model = ScriptedModel(
        [
            {"tool_calls": [tool_call(0, "lookup_customer", {"customer_id": "C-1042"})]},
            {"tool_calls": [tool_call(1, "update_account", update)]},
            {"content": "Done: the e-mail of customer C-1042 is now mira@example.org."},
            {"tool_calls": [tool_call(3, "export_contacts", {"segment": "gold"})]},
            {"content": "Exported 1840 contacts of the gold segment."},
        ]
    )
    llm = ChatOpenAI(model="gpt-4.1-mini", base_url=model.base_url, api_key="sk-loopback")

    def params(tools: str) -> StdioServerParameters:
        env = {
            **os.environ,
            "CRM_SERVICE": "crm-server",
            "CRM_OTLP": receiver.endpoint,
            "CRM_TOOLS": tools,
        }
        return StdioServerParameters(
            command=sys.executable,
            args=[__file__, "serve"],
            env=env,
            cwd=str(Path(__file__).parent),
        )

    first = params("lookup_customer,update_account,export_contacts")
    async with stdio_client(first) as (r, w), ClientSession(r, w) as session:
        await session.initialize()
        tools = await load_mcp_tools(session)
        agent = create_react_agent(
            llm,
            tools,
            name="support-agent",
            prompt="You handle customer account changes. Use the tools.",
        )
        for text in (
            "Change the e-mail of customer C-1042 to mira@example.org.",
            "Export the contacts of the gold segment.",
        ):
            await agent.ainvoke({"messages": [("user", text)]})
            await asyncio.sleep(1)
    # The server again, upgraded: export_contacts is gone from its listing.
    upgraded = params("lookup_customer,update_account")
    async with stdio_client(upgraded) as (r, w), ClientSession(r, w) as session:
        await session.initialize()
        await session.list_tools()
    await asyncio.sleep(1)
    provider.shutdown()
    doc = receiver.write(out)
    spans = sum(len(ss["spans"]) for rs in doc["resourceSpans"] for ss in rs["scopeSpans"])
    print(json.dumps({"requests": len(receiver.bodies), "spans": spans}))


if __name__ == "__main__":
    if sys.argv[1] == "serve":
        serve()
    else:
        asyncio.run(record(Path(sys.argv[1]).resolve()))
