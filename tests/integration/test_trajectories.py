"""Agent runs sent by the real OTel SDK become trajectories: steps, kinds, totals, revisions."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import requests
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

from collector.bench.served import assembled
from tests.support.admin import scraped, trajectory
from tests.support.agents import AgentScript, booking_run, provider_for, trace_id_of
from tests.support.server import FAST, RunningServer, start_server
from tests.support.wait import wait_for


@pytest.fixture
def fast(tmp_path: Path):
    server = start_server(tmp_path / "data", assembler=FAST)
    yield server
    server.stop()


def provider(server: RunningServer):
    return provider_for(OTLPSpanExporter(endpoint=server.grpc_endpoint, insecure=True))


def calls(t: dict) -> list[tuple]:
    return [
        (s["tool_name"], s["arguments"], s["status"], s["agent_name"])
        for s in t["steps_detail"]
        if s["span_kind"] == "tool"
    ]


def test_single_agent_run(fast: RunningServer) -> None:
    p = provider(fast)
    trace_id = booking_run(p)
    p.shutdown()
    t = trajectory(fast, trace_id)
    kinds = [(s["kind"], s["name"], s["depth"]) for s in t["steps_detail"]]
    assert kinds == [
        ("agent", "travel-agent", 0),
        ("llm", "gpt-4.1-mini", 1),
        ("tool", "search_flights", 1),
        ("llm", "gpt-4.1-mini", 1),
        ("tool", "hold_seat", 1),
        ("llm", "gpt-4.1-mini", 1),
    ]
    assert [s["seq"] for s in t["steps_detail"]] == list(range(6))
    assert calls(t) == [
        ("search_flights", {"origin": "LIS", "destination": "OSL"}, "ok", "travel-agent"),
        ("hold_seat", {"flight_id": "SK0836"}, "ok", "travel-agent"),
    ]
    assert t["steps_detail"][2]["tool_call_id"] == "call_0_0"  # joined from the model's request
    assert t["steps_detail"][2]["result"] == '["SK0836"]'
    assert (t["steps"], t["tool_calls"], t["llm_calls"]) == (6, 2, 3)
    assert (t["input_tokens"], t["output_tokens"]) == (400 + 500 + 600, 60)
    # gpt-4.1-mini: $0.40 / $1.60 per million tokens
    assert t["cost_usd"] == pytest.approx((1500 * 0.40 + 60 * 1.60) / 1e6)
    assert (t["status"], t["close_reason"], t["revision"], t["is_current"]) == (
        "ok",
        "complete",
        1,
        True,
    )
    assert (t["service_name"], t["agent_name"], t["service_version"]) == (
        "travel-desk",
        "travel-agent",
        "2.3.1",
    )
    assert (t["input"], t["final_output"]) == ("Book LIS-OSL", "Booked SK0836.")
    assert t["agent_run"] is True
    assert t["duration_ms"] > 0 and t["span_count"] == 6
    # counted just after the commit that made the trajectory visible
    wait_for(lambda: fast.metric("sextant_assembler_steps_total", {"kind": "tool"}) == 2)
    assert fast.metric("sextant_assembler_traces_closed_total", {"reason": "complete"}) == 1


def test_nested_agents_keep_their_own_steps(fast: RunningServer) -> None:
    p = provider(fast)
    script = AgentScript(p.get_tracer("agent_loop"))
    with script.agent("travel-agent", "Trip and a paper", "Done.") as root:
        script.chat([("search_flights", {"origin": "LIS"})])
        script.tool("search_flights", {"origin": "LIS"})
        with script.agent("paper-agent", "Find a paper", "P-1"):
            script.chat([("search_papers", {"query": "agents"})])
            script.tool("search_papers", {"query": "agents"})
            script.chat()
        script.chat()
    p.shutdown()
    t = trajectory(fast, trace_id_of(root))
    assert [(s["kind"], s["name"], s["agent_name"], s["depth"]) for s in t["steps_detail"]] == [
        ("agent", "travel-agent", "travel-agent", 0),
        ("llm", "gpt-4.1-mini", "travel-agent", 1),
        ("tool", "search_flights", "travel-agent", 1),
        ("agent", "paper-agent", "paper-agent", 1),
        ("llm", "gpt-4.1-mini", "paper-agent", 2),
        ("tool", "search_papers", "paper-agent", 2),
        ("llm", "gpt-4.1-mini", "paper-agent", 2),
        ("llm", "gpt-4.1-mini", "travel-agent", 1),
    ]
    assert t["agent_name"] == "travel-agent"


def test_parallel_tool_calls_and_an_error_then_retry(fast: RunningServer) -> None:
    p = provider(fast)
    script = AgentScript(p.get_tracer("agent_loop"))
    tracer = p.get_tracer("agent_loop")
    with script.agent("paper-agent", "Two abstracts", "Here.") as root:
        script.chat([("fetch_abstract", {"id": "A"}), ("fetch_abstract", {"id": "B"})])
        first = tracer.start_span(
            "execute_tool fetch_abstract",
            attributes={
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "fetch_abstract",
                "gen_ai.tool.call.arguments": '{"id": "A"}',
            },
        )
        second = tracer.start_span(
            "execute_tool fetch_abstract",
            attributes={
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "fetch_abstract",
                "gen_ai.tool.call.arguments": '{"id": "B"}',
            },
        )
        second.end()
        first.end()
        script.chat([("hold_seat", {"seat": "14C"})])
        script.tool("hold_seat", {"seat": "14C"}, error="SeatInventoryUnavailable")
        script.tool("hold_seat", {"seat": "14C"}, "HLD-2")
        script.chat()
    p.shutdown()
    t = trajectory(fast, trace_id_of(root))
    assert calls(t) == [
        ("fetch_abstract", {"id": "A"}, "ok", "paper-agent"),  # siblings by start time
        ("fetch_abstract", {"id": "B"}, "ok", "paper-agent"),
        ("hold_seat", {"seat": "14C"}, "error", "paper-agent"),
        ("hold_seat", {"seat": "14C"}, "ok", "paper-agent"),
    ]
    failed = [s for s in t["steps_detail"] if s["status"] == "error"]
    assert [s["error_type"] for s in failed] == ["SeatInventoryUnavailable"]
    assert (t["error_count"], t["status"]) == (1, "ok")  # recovered: the run itself is ok
    ids = [s["tool_call_id"] for s in t["steps_detail"] if s["span_kind"] == "tool"]
    assert ids == ["call_0_0", "call_0_1", "call_1_0", None]


def test_a_late_span_reopens_the_trajectory(fast: RunningServer) -> None:
    p = provider(fast)
    tracer = p.get_tracer("agent_loop")
    script = AgentScript(tracer)
    with script.agent("travel-agent", "Book", "Booked.") as root:
        script.chat()
        late = tracer.start_span(
            "execute_tool audit_log",
            attributes={"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "audit_log"},
        )
    trace_id = trace_id_of(root)
    first = trajectory(fast, trace_id)
    assert (first["revision"], first["steps"]) == (1, 2)
    late.end()  # exported now, after the trace closed
    second = trajectory(fast, trace_id, revision=2)
    p.shutdown()
    assert (second["revision"], second["steps"], second["late_spans"]) == (2, 3, 1)
    assert second["revisions"] == [1, 2]
    assert [s["name"] for s in second["steps_detail"]] == [
        "travel-agent",
        "gpt-4.1-mini",
        "audit_log",
    ]
    current = fast.query(
        "SELECT revision FROM trajectories WHERE trace_id = ? AND is_current", [trace_id]
    )
    assert current == [(2,)]
    old = requests.get(f"{fast.admin_url}/api/v1/trajectories/{trace_id}?revision=1").json()
    assert (old["steps"], old["is_current"]) == (2, False)
    wait_for(lambda: fast.metric("sextant_assembler_late_spans_total") == 1)  # after the commit
    assert fast.metric("sextant_assembler_reopened_trajectories_total") == 1


def test_a_trace_whose_root_never_arrives_closes_incomplete(fast: RunningServer) -> None:
    p = provider(fast)
    tracer = p.get_tracer("agent_loop")
    root = tracer.start_span(
        "invoke_agent travel-agent",
        attributes={"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "travel-agent"},
    )
    from opentelemetry import trace

    with trace.use_span(root):
        AgentScript(tracer).chat()
    started = time.monotonic()
    t = trajectory(fast, trace_id_of(root))
    assert time.monotonic() - started >= 2  # waited for max_trace_age, not the quiet period
    assert (t["status"], t["close_reason"]) == ("incomplete", "incomplete_timeout")
    assert "root_missing" in t["incomplete_reasons"]
    closed = {"reason": "incomplete_timeout"}
    wait_for(lambda: fast.metric("sextant_assembler_traces_closed_total", closed) == 1)
    p.shutdown()


def test_open_traces_over_the_bound_close_early(tmp_path: Path) -> None:
    server = start_server(
        tmp_path / "d",
        assembler={
            **FAST,
            "max_open_traces": 2,
            "quiet_period_seconds": 30,
            "max_trace_age_seconds": 60,
        },
    )
    try:
        p = provider(server)
        tracer = p.get_tracer("t")
        spans = [tracer.start_span(f"run {i}") for i in range(3)]  # three traces, roots only
        for span in spans:
            span.end()
        t = trajectory(server, trace_id_of(spans[0]))
        assert (t["status"], t["close_reason"]) == ("incomplete", "incomplete_bound")
        assert server.metric("sextant_assembler_open_traces") <= 2
        p.shutdown()
    finally:
        server.stop()


def test_its_own_counters_say_when_every_stored_run_is_assembled(tmp_path: Path) -> None:
    """What `scripts/benchmark` waits on, read from /metrics as a scraper would: no trace
    pending and every acknowledged span noted means every run is stored with its results."""
    server = start_server(tmp_path / "d", assembler={**FAST, "quiet_period_seconds": 2})
    try:
        p = provider(server)
        trace_id = booking_run(p)
        p.shutdown()  # flushed: every span acknowledged

        def scrape() -> str:
            return requests.get(f"{server.admin_url}/metrics", timeout=5).text

        wait_for(lambda: scraped(server, "sextant_assembler_spans_total") == 6)
        assert scraped(server, "sextant_assembler_pending_traces") == 1  # quiet for 2 s first
        assert not assembled(scrape())
        wait_for(lambda: assembled(scrape()))
        reply = requests.get(f"{server.admin_url}/api/v1/trajectories/{trace_id}", timeout=5)
        assert reply.status_code == 200  # no wait: stored when the counters said so
        assert reply.json()["steps"] == 6
        assert server.query("SELECT count(*) FROM results WHERE trace_id = ?", [trace_id])[0][0]
    finally:
        server.stop()


def test_create_agent_trace_is_not_an_agent_run(fast: RunningServer) -> None:
    p = provider(fast)
    with p.get_tracer("t").start_as_current_span(
        "create_agent travel-agent",
        attributes={"gen_ai.operation.name": "create_agent", "gen_ai.agent.name": "travel-agent"},
    ) as span:
        pass
    p.shutdown()
    t = trajectory(fast, trace_id_of(span))
    assert t["agent_run"] is False


def test_sextant_conventions_make_approval_policy_and_state_change_steps(fast: RunningServer):
    p = provider(fast)
    script = AgentScript(p.get_tracer("support"))
    with script.agent("support-agent", "Refund 77", "Refunded.", **{"sextant.case.id": "c-7"}) as r:
        script.tool(
            "request_approval", {"order": 77}, "approved", **{"sextant.approval.status": "approved"}
        )
        script.tool(
            "check_refund_policy",
            {"order": 77},
            **{"sextant.policy.name": "refund-limit", "sextant.policy.decision": "allow"},
        )
        script.tool(
            "update_order",
            {"order": 77, "status": "refunded"},
            **{"sextant.state.target": "orders/77"},
        )
        script.tool("get_approval_status", {"order": 77})
    p.shutdown()
    t = trajectory(fast, trace_id_of(r))
    steps = {s["name"]: s for s in t["steps_detail"]}
    assert (steps["request_approval"]["kind"], steps["request_approval"]["approval_status"]) == (
        "approval",
        "approved",
    )
    policy = steps["check_refund_policy"]
    assert (policy["kind"], policy["policy_name"], policy["policy_decision"]) == (
        "policy",
        "refund-limit",
        "allow",
    )
    write = steps["update_order"]
    assert (write["kind"], write["state_target"]) == ("state_change", "orders/77")
    assert steps["get_approval_status"]["kind"] == "approval"  # recognized by its name
    assert t["tool_calls"] == 4  # they are still tool calls
    assert t["case_id"] == "c-7"


def test_trajectory_api_errors(fast: RunningServer) -> None:
    reply = requests.get(f"{fast.admin_url}/api/v1/trajectories/nothex")
    assert reply.status_code == 400
    reply = requests.get(f"{fast.admin_url}/api/v1/trajectories/{'ab' * 16}")
    assert reply.status_code == 404
    assert "no trajectory" in reply.json()["error"]


def test_steps_table_answers_sql(fast: RunningServer) -> None:
    p = provider(fast)
    trace_id = booking_run(p)
    p.shutdown()
    trajectory(fast, trace_id)
    rows = fast.query(
        "SELECT tool_name, arguments->>'$.flight_id' FROM steps"
        " WHERE trace_id = ? AND kind = 'tool' ORDER BY seq",
        [trace_id],
    )
    assert rows == [("search_flights", None), ("hold_seat", "SK0836")]
    assert json.loads(fast.query("SELECT count(*) FROM trajectories")[0][0].__str__()) == 1
