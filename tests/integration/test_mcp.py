"""MCP calls as the Python MCP SDK and OpenLLMetry trace them, sent through the running server:
one tool step per call named by the server that answered it (a client's other claim fails),
the protocol's own traces kept out of the runs, and each service's MCP inventory counted in
metrics and kept in the store across a restart."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import requests

from tests.support.admin import scraped, trajectory
from tests.support.captures import send
from tests.support.paths import TESTDATA
from tests.support.server import FAST, RunningServer, serve
from tests.support.wait import wait_for

MULTI = TESTDATA / "otlp-multi"
EXAMPLES = Path(__file__).parents[2] / "rules" / "examples"
SERVER = MULTI / "mcp-openllmetry-crm_server.otlp.json"
RULE = ("support-mcp", "known-mcp-servers")


@pytest.fixture
def server(tmp_path: Path):
    running = serve(tmp_path, {"mcp": EXAMPLES / "mcp.yaml"}, assembler=FAST)
    yield running
    running.stop()


def agent_runs(server: RunningServer, count: int) -> list[dict[str, Any]]:
    """The agent's runs once `count` of them are evaluated, in the order they started."""

    def found() -> list[str] | None:
        rows = server.query_dicts(
            "SELECT trace_id FROM trajectories WHERE is_current AND agent_name = 'support-agent'"
            " AND agent_run AND verdict IS NOT NULL ORDER BY start_time"
        )
        return [r["trace_id"] for r in rows] if len(rows) >= count else None

    return [trajectory(server, t) for t in wait_for(found, timeout=15)]


def result(server: RunningServer, trace_id: str) -> dict[str, Any]:
    (row,) = server.query_dicts(
        "SELECT verdict, reason, message, evidence_span_ids FROM results"
        " WHERE trace_id = ? AND pack = ? AND rule_id = ?",
        [trace_id, *RULE],
    )
    return row


def inventory(server: RunningServer, change: str | None = None) -> float | None:
    labels = {"service": "support-desk", "mcp_server": "crm-server"}
    if change is None:
        return scraped(server, "sextant_mcp_server_tools", **labels)
    return scraped(server, "sextant_mcp_tool_changes_total", **labels, change=change)


def test_sdk_mcp_calls_under_the_agents_own_name_are_one_step_each_and_reviewed(
    server: RunningServer,
) -> None:
    """The recorded server exported under the agent's own service.name: one tool step per
    call, no server named (so the allow-list reviews, never passes), and the SDK's
    `initialize` and `notifications/initialized` traces are no runs."""
    send(server, MULTI / "mcp-mcp_sdk-crm_tools.otlp.json", "grpc")
    (t,) = agent_runs(server, 1)
    calls = [s for s in t["steps_detail"] if s["kind"] == "tool"]
    assert [s["tool_name"] for s in calls] == ["lookup_customer", "update_account"]
    assert [s["mcp"].get("server") for s in calls] == [None, None]
    assert t["tool_calls"] == 2  # the client's and the server's span are one call
    found = result(server, t["trace_id"])
    assert (found["verdict"], found["reason"]) == ("review", "mcp_server_unknown")
    chatter = wait_for(
        lambda: (
            [
                r["root_name"]
                for r in server.query_dicts(
                    "SELECT root_name FROM trajectories WHERE NOT agent_run ORDER BY root_name"
                )
            ]
            or None
        )
    )
    assert chatter == ["MCP send initialize", "notifications/initialized"]


def test_a_server_naming_itself_otherwise_than_the_client_fails_naming_both(
    server: RunningServer,
) -> None:
    """The agent's tool spans say crm-server (allowed); the process that answered is
    evil-mcp by its own resource."""
    send(server, MULTI / "mcp-mcp_sdk-impostor.otlp.json", "http/json")
    (t,) = agent_runs(server, 1)
    found = result(server, t["trace_id"])
    assert found["verdict"] == "fail"
    assert found["message"].startswith(
        "lookup_customer: the client named server crm-server, the server's own spans name it"
        " evil-mcp"
    )
    calls = {s["span_id"]: s["name"] for s in t["steps_detail"] if s["kind"] == "tool"}
    assert [calls[e] for e in found["evidence_span_ids"]] == ["lookup_customer", "update_account"]


def test_openllmetry_calls_are_judged_by_the_server_that_answered(server: RunningServer) -> None:
    """Both sides under OpenLLMetry (every span INTERNAL): the server's answer names it. The
    correct run passes the allow-list, the call off it fails; the protocol's traces are no
    runs of the target; the upgraded server's shorter listing is counted."""
    send(server, SERVER, "http/json")
    correct, export = agent_runs(server, 2)
    assert result(server, correct["trace_id"])["verdict"] == "pass"
    found = result(server, export["trace_id"])
    assert (found["verdict"], found["message"]) == (
        "fail",
        "tool export_contacts is not allowed on server crm-server",
    )
    chatter = wait_for(
        lambda: (
            [
                row
                for row in server.query_dicts(
                    "SELECT count(*) AS n, count(verdict) AS judged FROM trajectories"
                    " WHERE NOT agent_run"
                    " AND root_name IN ('initialize.mcp', 'tools/list.mcp', 'ResponseStreamWriter')"
                )
                if row["n"] == 6
            ]
            or None
        )
    )
    assert chatter == [{"n": 6, "judged": 0}]
    target = {"service": "support-desk", "agent": "support-agent", "version": "3.1.0"}

    def runs() -> float | None:
        verdicts = ("pass", "fail", "review", "none")
        counts = [
            scraped(server, "sextant_target_runs_total", **target, verdict=v) for v in verdicts
        ]
        return sum(c or 0 for c in counts) or None

    assert wait_for(lambda: inventory(server, "disappeared")) == 1  # the last trace is in
    assert inventory(server) == 2
    # not the build-time create_agent, nor the protocol's traces
    assert wait_for(lambda: runs() == 2 or None)
    assert (
        scraped(server, "sextant_target_runs_total", **{**target, "agent": ""}, verdict="none")
        is None
    )


def split(path: Path, last_trace: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The capture without the trace `last_trace`, and that trace alone."""
    doc = json.loads(path.read_text())
    parts: tuple[dict[str, Any], dict[str, Any]] = ({"resourceSpans": []}, {"resourceSpans": []})
    for keep, part in ((False, parts[0]), (True, parts[1])):
        for rs in doc["resourceSpans"]:
            scopes = [
                {**ss, "spans": [s for s in ss["spans"] if (s["traceId"] == last_trace) == keep]}
                for ss in rs["scopeSpans"]
            ]
            scopes = [ss for ss in scopes if ss["spans"]]
            if scopes:
                part["resourceSpans"].append({**rs, "scopeSpans": scopes})
    return parts


def post(server: RunningServer, body: dict[str, Any]) -> None:
    reply = requests.post(f"{server.http_url}/v1/traces", json=body, timeout=10)
    assert reply.status_code == 200, reply.text


def upgraded_listing(path: Path) -> str:
    """The trace of the last `tools/list.mcp` in the capture (the upgraded server's)."""
    doc = json.loads(path.read_text())
    spans = [s for rs in doc["resourceSpans"] for ss in rs["scopeSpans"] for s in ss["spans"]]
    listings = sorted(
        (s for s in spans if s["name"] == "tools/list.mcp"),
        key=lambda s: int(s["startTimeUnixNano"]),
    )
    return listings[-1]["traceId"]


def test_the_inventory_is_kept_across_a_restart(tmp_path: Path) -> None:
    before, after = split(SERVER, upgraded_listing(SERVER))
    running = serve(tmp_path, assembler=FAST)
    try:
        post(running, before)
        assert wait_for(lambda: inventory(running)) == 3
        rows = wait_for(lambda: running.query_dicts("SELECT * FROM mcp_servers") or None)
        assert [(r["service_name"], r["server"], r["tools"]) for r in rows] == [
            ("support-desk", "crm-server", ["export_contacts", "lookup_customer", "update_account"])
        ]
    finally:
        running.stop()
    again = serve(tmp_path, assembler=FAST)
    try:
        assert inventory(again) == 3  # known before any new span
        post(again, after)
        assert wait_for(lambda: inventory(again, "disappeared")) == 1
        assert inventory(again) == 2
    finally:
        again.stop()


def resource(service: str) -> dict[str, Any]:
    return {"attributes": [{"key": "service.name", "value": {"stringValue": service}}]}


def made_up_servers(count: int, caller: str | None) -> dict[str, Any]:
    """`count` MCP servers under made-up names, each answering one tool call in a trace of its
    own (the SDK's SERVER span, named by its resource's service.name), called by `caller`'s
    client span (the SDK's CLIENT span under that service.name), or by no traced client."""
    call = [
        {"key": "mcp.method.name", "value": {"stringValue": "tools/call"}},
        {"key": "gen_ai.tool.name", "value": {"stringValue": "lookup_customer"}},
    ]
    times = {"startTimeUnixNano": "1796206687000000000", "endTimeUnixNano": "1796206687001000000"}
    resource_spans = []
    for i in range(count):
        trace_id, client, served = f"{i + 1:032x}", f"{2 * i + 1:016x}", f"{2 * i + 2:016x}"
        answer = {"traceId": trace_id, "spanId": served, "name": "tools/call lookup_customer"}
        answer |= {"kind": 2, "attributes": call, **times}
        if caller is not None:
            answer |= {"parentSpanId": client, "flags": 768}
            request = {"traceId": trace_id, "spanId": client, "kind": 3, "attributes": call}
            request |= {"name": "MCP send tools/call lookup_customer", **times}
            scope = {"scope": {"name": "mcp-python-sdk"}, "spans": [request]}
            resource_spans.append({"resource": resource(caller), "scopeSpans": [scope]})
        scope = {"scope": {"name": "mcp-python-sdk"}, "spans": [answer]}
        resource_spans.append({"resource": resource(f"made-up-{i}"), "scopeSpans": [scope]})
    return {"resourceSpans": resource_spans}


@pytest.mark.parametrize("caller", [None, "support-desk"])
def test_made_up_servers_seen_first_hide_no_real_servers_change(
    server: RunningServer, caller: str | None
) -> None:
    """Two hundred made-up servers, each its own service or all called by the real agent's
    service, seen before the real server: its shorter listing is still counted."""
    post(server, made_up_servers(200, caller))
    service = caller or "made-up-199"
    labels = {"service": service, "mcp_server": "made-up-199"}
    wait_for(lambda: scraped(server, "sextant_mcp_server_tools", **labels))
    send(server, SERVER, "http/json")
    assert wait_for(lambda: inventory(server, "disappeared")) == 1
    if caller is not None:  # the real agent's service keeps 50 servers: the newest
        assert (
            scraped(server, "sextant_mcp_server_tools", **{**labels, "mcp_server": "made-up-0"})
            is None
        )
        forgotten = scraped(
            server, "sextant_mcp_inventory_dropped_total", reason="server_forgotten"
        )
        assert forgotten == 200 - 50 + 1  # and one more for the real server
