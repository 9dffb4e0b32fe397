"""MCP calls as the Python MCP SDK and OpenLLMetry trace them, through the server: one tool
step per call with its server, and the servers' tools as metrics, a tool gone from a later
`tools/list` answer counted as disappeared."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import requests

from tests.integration.test_captures import send
from tests.support.admin import scraped, trajectory
from tests.support.paths import TESTDATA
from tests.support.server import FAST, RunningServer, serve
from tests.support.wait import wait_for

MULTI = TESTDATA / "otlp-multi"


@pytest.fixture
def server(tmp_path: Path):
    running = serve(tmp_path, assembler=FAST)
    yield running
    running.stop()


def agent_run(server: RunningServer) -> dict:
    def found() -> str | None:
        rows = server.query_dicts(
            "SELECT trace_id FROM trajectories WHERE agent_name = 'support-agent' AND steps > 1"
        )
        return rows[0]["trace_id"] if rows else None

    return trajectory(server, wait_for(found, timeout=15))


def test_sdk_mcp_calls_are_tool_steps_with_their_server(server: RunningServer) -> None:
    send(server, MULTI / "mcp-mcp_sdk-crm_tools.otlp.json", "grpc")
    t = agent_run(server)
    calls = [s for s in t["steps_detail"] if s["kind"] == "tool"]
    assert [s["tool_name"] for s in calls] == ["lookup_customer", "update_account"]
    assert [s["mcp"]["server"] for s in calls] == ["support-desk", "support-desk"]
    assert t["tool_calls"] == 2  # the client's and the server's span are one call
    tools = wait_for(lambda: scraped(server, "sextant_mcp_server_tools", mcp_server="support-desk"))
    assert tools == 2


def listing(tools_left: list[str] | None = None, trace: str = "5" * 32) -> dict:
    """OpenLLMetry's captured `tools/list.mcp` span, as its own trace, naming its server (which
    the capture does not: over stdio nothing does), optionally listing fewer tools."""
    doc = json.loads((MULTI / "mcp-openllmetry-crm_tools.otlp.json").read_text())
    spans = [s for rs in doc["resourceSpans"] for ss in rs["scopeSpans"] for s in ss["spans"]]
    span = next(s for s in spans if s["name"] == "tools/list.mcp")
    for attr in span["attributes"]:
        if attr["key"] == "traceloop.entity.output" and tools_left is not None:
            answer = json.loads(attr["value"]["stringValue"])
            answer["tools"] = [t for t in answer["tools"] if t["name"] in tools_left]
            attr["value"]["stringValue"] = json.dumps(answer)
    span["attributes"].append({"key": "mcp.server.name", "value": {"stringValue": "crm-server"}})
    span["traceId"] = trace
    scope = {"name": "opentelemetry.instrumentation.mcp.instrumentation"}
    resource = doc["resourceSpans"][0]["resource"]
    spans = [{"scope": scope, "spans": [span]}]
    return {"resourceSpans": [{"resource": resource, "scopeSpans": spans}]}


def post(server: RunningServer, body: dict) -> None:
    reply = requests.post(f"{server.http_url}/v1/traces", json=body, timeout=10)
    assert reply.status_code == 200, reply.text


def test_a_tool_gone_from_a_listing_is_counted(server: RunningServer) -> None:
    # The captured run names no server: its calls are in no server's inventory.
    send(server, MULTI / "mcp-openllmetry-crm_tools.otlp.json", "http/json")
    agent_run(server)
    assert scraped(server, "sextant_mcp_server_tools", mcp_server="unnamed") is None
    post(server, listing(trace="4" * 32))
    tools = wait_for(lambda: scraped(server, "sextant_mcp_server_tools", mcp_server="crm-server"))
    assert tools == 3
    # The same listing a moment later without export_contacts.
    post(server, listing(["lookup_customer", "update_account"]))
    gone = wait_for(
        lambda: scraped(
            server, "sextant_mcp_tool_changes_total", mcp_server="crm-server", change="disappeared"
        )
    )
    assert gone == 1
    assert scraped(server, "sextant_mcp_server_tools", mcp_server="crm-server") == 2
